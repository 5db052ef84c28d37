import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { pendingToolCalls } from "../engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult, ModelHandler, ModelRequest } from "../engine/types.ts";
import { canonicalJson } from "../extension-api/index.ts";
import type { Todo } from "../state/thread-state.ts";
import { sha256HexSync } from "../extension-api/sha256-sync.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { hiddenHumanMessage } from "./messages.ts";
import {
  DEFAULT_WRITE_TODOS_DESCRIPTION,
  WRITE_TODOS_TOOL_NAME,
  completionReminderText,
  createWriteTodosTool,
  todoReminderText,
} from "../tools/write-todos.ts";

/*
 * Plan mode's todo list: the write_todos tool, the prompt that explains it, and two guards. When
 * compaction has pushed the write_todos call out of history, a persisted hidden reminder restates
 * the list. When the model tries to finish with items still open, it is sent back (at most twice
 * per run) with a reminder that lives in that one request only, so it never reaches the transcript.
 */

export const TODO_LIST_NAME = "Todo";

export const TODO_REMINDER_NAME = "todo_reminder";
export const TODO_COMPLETION_REMINDER_NAME = "todo_completion_reminder";
/** Beyond this many completion reminders in one run the model may finish: it cannot make progress. */
export const MAX_COMPLETION_REMINDERS = 2;

const PARALLEL_WRITE_ERROR =
  "Error: write_todos was called more than once in one response. Each call replaces the whole list, so call it once per response with the complete list.";

// Per-run facts: how many completion reminders were sent, and the one waiting for the next request.
const REMINDER_COUNT_KEY = "todo.completion_reminder_count";
const PENDING_REMINDERS_KEY = "todo.pending_completion_reminders";

export const DEFAULT_TODO_SYSTEM_PROMPT = `<todo_list_system>
You can keep a todo list with the \`write_todos\` tool; the user sees it and follows your progress through it.

Use it for objectives with three or more distinct steps, when the user hands you several tasks, when the user asks for a plan or todo list, or when the plan may change as results come in. Do not use it for simple requests, single tool calls or conversation: just do those.

While working:
- mark an item in_progress before you start it and completed right after you finish it, one update at a time rather than in batches;
- keep exactly one item in_progress unless items truly run in parallel;
- add items you discover, remove ones that stop mattering, and revise the list when you learn more;
- do not give your final answer while items are still open.
</todo_list_system>`;

export const TodoListConfigSchema = v.strictObject({
  /** Appended to the system prompt of every model request. */
  system_prompt: v.optional(v.pipe(v.string(), v.minLength(1)), DEFAULT_TODO_SYSTEM_PROMPT),
  /** The write_todos tool's description. */
  tool_description: v.optional(v.pipe(v.string(), v.minLength(1)), DEFAULT_WRITE_TODOS_DESCRIPTION),
});
export interface TodoListConfig {
  system_prompt: string;
  tool_description: string;
}
type _TodoListConfigMatches = Assert<SameType<TodoListConfig, v.InferOutput<typeof TodoListConfigSchema>>>;
export type TodoListConfigInput = Partial<TodoListConfig>;
type _TodoListConfigInputMatches = Assert<SameType<TodoListConfigInput, v.InferInput<typeof TodoListConfigSchema>>>;

const TOOL_CALL_FINISH_REASONS = new Set(["tool_calls", "function_call"]);

/**
 * True unless the message is a clean final answer. Providers and LangChain versions park tool
 * intent in different places (structured calls, parse failures, raw provider calls, a legacy
 * function_call, or only a finish reason); a todo reminder must never mask any of them.
 */
export function hasToolCallIntentOrError(message: AIMessage): boolean {
  if ((message.tool_calls?.length ?? 0) > 0) return true;
  if ((message.invalid_tool_calls?.length ?? 0) > 0) return true;
  const kwargs = message.additional_kwargs ?? {};
  const raw = kwargs["tool_calls"];
  if ((Array.isArray(raw) ? raw.length > 0 : Boolean(raw)) || Boolean(kwargs["function_call"])) return true;
  const finishReason = message.response_metadata?.["finish_reason"];
  return typeof finishReason === "string" && TOOL_CALL_FINISH_REASONS.has(finishReason);
}

function writeTodosCallVisible(messages: readonly BaseMessage[]): boolean {
  return messages.some((message) => AIMessage.isInstance(message) && (message.tool_calls ?? []).some((call) => call.name === WRITE_TODOS_TOOL_NAME));
}

function reminderPresent(messages: readonly BaseMessage[]): boolean {
  return messages.some((message) => HumanMessage.isInstance(message) && message.name === TODO_REMINDER_NAME);
}

function lastAiMessage(messages: readonly BaseMessage[]): AIMessage | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!;
    if (AIMessage.isInstance(message)) return message;
  }
  return undefined;
}

/** The system prompt with `addition` appended, keeping its id, kwargs and content blocks. */
function withSystemAddition(systemMessage: SystemMessage | undefined, addition: string): SystemMessage {
  if (!systemMessage) return new SystemMessage({ content: addition });
  const content = systemMessage.content;
  return new SystemMessage({
    content: Array.isArray(content) ? [...content, { type: "text", text: `\n\n${addition}` }] : `${content}\n\n${addition}`,
    ...(systemMessage.id !== undefined ? { id: systemMessage.id } : {}),
    additional_kwargs: systemMessage.additional_kwargs,
  });
}

/** Refuses parallel write_todos calls: each gets an error result, and the model is asked again. */
function refuseParallelWrites(state: AgentState, last: AIMessage): HookResult {
  const writes = (last.tool_calls ?? []).filter((call) => call.name === WRITE_TODOS_TOOL_NAME);
  if (writes.length <= 1) return undefined;
  const answered = new Set(state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m)).map((m) => m.tool_call_id));
  const errors = writes
    .filter((call) => call.id && !answered.has(call.id))
    .map((call) => new ToolMessage({ content: PARALLEL_WRITE_ERROR, tool_call_id: call.id!, name: WRITE_TODOS_TOOL_NAME, status: "error" }));
  if (errors.length === 0) return undefined;
  const otherCallsPending = pendingToolCalls([...state.messages, ...errors]).length > 0;
  // With every call answered there is nothing for the tools step to run: back to the model, which
  // must see the error rather than end the run on it.
  return otherCallsPending ? { messages: errors } : { messages: errors, jumpTo: "model" };
}

/** The todo list of plan mode: write_todos, its prompt, the context-loss reminder and the completion guard. */
export function createTodoListMiddleware(config?: TodoListConfigInput): AgentMiddleware {
  const { system_prompt, tool_description } = parseMiddlewareConfig(TodoListConfigSchema, config, TODO_LIST_NAME);
  const writeTodos = createWriteTodosTool(tool_description);

  return {
    name: TODO_LIST_NAME,
    tools: [writeTodos],

    beforeModel(state: AgentState): HookResult {
      const todos: readonly Todo[] = state.todos ?? [];
      if (todos.length === 0) return undefined;
      const messages = state.messages ?? [];
      if (writeTodosCallVisible(messages) || reminderPresent(messages)) return undefined;
      return { messages: [hiddenHumanMessage(TODO_REMINDER_NAME, todoReminderText(todos))] };
    },

    afterModel: {
      canJumpTo: ["model"],
      hook(state: AgentState, runtime: AgentRuntime): HookResult {
        // The request that carried a pending reminder has been answered; retries of that same call
        // (inside outer wrappers) saw it too, so it is cleared only now.
        runtime.scope.delete(PENDING_REMINDERS_KEY);
        const last = lastAiMessage(state.messages ?? []);
        if (!last) return undefined;
        const refused = refuseParallelWrites(state, last);
        if (refused) return refused;
        if (hasToolCallIntentOrError(last)) return undefined;

        const todos: readonly Todo[] = state.todos ?? [];
        if (todos.length === 0 || todos.every((todo) => todo.status === "completed")) return undefined;
        const sent = runtime.scope.get<number>(REMINDER_COUNT_KEY) ?? 0;
        if (sent >= MAX_COMPLETION_REMINDERS) return undefined;
        runtime.scope.set(REMINDER_COUNT_KEY, sent + 1);
        runtime.scope.set(PENDING_REMINDERS_KEY, completionReminderText(todos));
        return { jumpTo: "model" };
      },
    },

    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      const pending = request.runtime.scope.get<string>(PENDING_REMINDERS_KEY);
      return handler({
        ...request,
        systemMessage: withSystemAddition(request.systemMessage, system_prompt),
        messages: pending ? [...request.messages, hiddenHumanMessage(TODO_COMPLETION_REMINDER_NAME, pending)] : request.messages,
      });
    },

    releasePolicyParameters() {
      // canonicalHash's digest, computed synchronously: crypto.subtle has no sync digest.
      return {
        system_prompt_hash: sha256HexSync(canonicalJson(system_prompt)),
        tool_description_hash: sha256HexSync(canonicalJson(tool_description)),
        state_channel: "todos",
      };
    },
  };
}

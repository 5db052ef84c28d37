import type { AIMessage } from "@langchain/core/messages";
import { isRecord } from "../../core/guards.ts";

/*
 * What one model step was spent on, derived from its tool calls: the UI labels each step's token
 * cost with it ("started task X", "searched for Y"). This is the single source of precise
 * write_todos attribution; a client falls back to a generic label when it is missing or malformed.
 */

export const ATTRIBUTION_VERSION = 1;

export type StepKind = "todo_update" | "subagent_dispatch" | "tool_batch" | "final_answer" | "thinking";
export type TodoActionKind = "todo_start" | "todo_complete" | "todo_update" | "todo_remove";

/** One thing the step did. Absent facts are null (never missing) so the shape stays stable. */
export type StepAction = { kind: string; tool_call_id: string | null } & Record<string, string | null>;

export interface TokenUsageAttribution {
  version: typeof ATTRIBUTION_VERSION;
  kind: StepKind;
  /** True when the step's tokens are shared by several actions (no single action owns them). */
  shared_attribution: boolean;
  tool_call_ids: string[];
  actions: StepAction[];
}

interface LooseTodo {
  content?: string;
  status?: "pending" | "in_progress" | "completed";
}

const TODO_STATUSES = new Set(["pending", "in_progress", "completed"]);
const TODO_ACTION_KINDS = new Set<string>(["todo_start", "todo_complete", "todo_update", "todo_remove"]);
const SEARCH_TOOLS = new Set(["web_search", "image_search"]);

function stringArg(value: unknown): string | null {
  if (typeof value !== "string") return null;
  const trimmed = value.trim();
  return trimmed === "" ? null : trimmed;
}

/** Todos as a tool call or state carries them, keeping only well-formed fields. */
export function normalizeTodos(value: unknown): LooseTodo[] {
  if (!Array.isArray(value)) return [];
  const todos: LooseTodo[] = [];
  for (const item of value) {
    if (!isRecord(item)) continue;
    const todo: LooseTodo = {};
    const content = stringArg(item["content"]);
    if (content !== null) todo.content = content;
    if (typeof item["status"] === "string" && TODO_STATUSES.has(item["status"])) todo.status = item["status"] as LooseTodo["status"];
    todos.push(todo);
  }
  return todos;
}

function todoActionKind(previous: LooseTodo | undefined, current: LooseTodo): TodoActionKind {
  if (previous !== undefined && previous.content !== current.content) return "todo_update";
  if (current.status === "completed") return "todo_complete";
  if (current.status === "in_progress") return "todo_start";
  return "todo_update";
}

/**
 * The difference between two todo lists as actions. Items match by content first (in order, each
 * previous item used once); an item whose content is new may take over the unmatched previous item
 * at its position (a rename); previous items left unmatched were removed.
 */
export function buildTodoActions(previous: readonly LooseTodo[], next: readonly LooseTodo[]): Array<{ kind: TodoActionKind; content: string }> {
  const byContent = new Map<string, number[]>();
  previous.forEach((todo, index) => {
    if (!todo.content) return;
    const queue = byContent.get(todo.content);
    if (queue) queue.push(index);
    else byContent.set(todo.content, [index]);
  });
  const matched = new Set<number>();
  const actions: Array<{ kind: TodoActionKind; content: string }> = [];

  next.forEach((todo, index) => {
    const content = todo.content;
    if (!content) return;
    let match: LooseTodo | undefined;
    const queue = byContent.get(content);
    if (queue) {
      while (queue.length > 0 && matched.has(queue[0]!)) queue.shift();
      const previousIndex = queue.shift();
      if (previousIndex !== undefined) {
        matched.add(previousIndex);
        match = previous[previousIndex];
      }
    }
    // Only a content never seen before may claim a positional match; duplicates of known content
    // must not swallow an unrelated item that was in fact removed.
    if (match === undefined && !byContent.has(content) && index < previous.length && !matched.has(index)) {
      match = previous[index];
      matched.add(index);
    }
    if (match !== undefined && match.content === content && match.status === todo.status) return;
    actions.push({ kind: todoActionKind(match, todo), content });
  });

  previous.forEach((todo, index) => {
    if (matched.has(index) || !todo.content) return;
    actions.push({ kind: "todo_remove", content: todo.content });
  });
  return actions;
}

function describeToolCall(call: { name?: unknown; args?: unknown; id?: unknown }, todos: readonly LooseTodo[]): StepAction[] {
  const name = stringArg(call.name) ?? "unknown";
  const args = isRecord(call.args) ? call.args : {};
  const tool_call_id = stringArg(call.id);

  switch (name) {
    case "write_todos": {
      const actions = buildTodoActions(todos, normalizeTodos(args["todos"]));
      if (actions.length === 0) return [{ kind: "tool", tool_name: name, tool_call_id }];
      return actions.map((action) => ({ ...action, tool_call_id }));
    }
    case "task":
      return [{ kind: "subagent", description: stringArg(args["description"]), subagent_type: stringArg(args["subagent_type"]), tool_call_id }];
    case "present_files":
      return [{ kind: "present_files", tool_call_id }];
    case "ask_clarification":
      return [{ kind: "clarification", tool_call_id }];
    default:
      if (SEARCH_TOOLS.has(name)) return [{ kind: "search", tool_name: name, query: stringArg(args["query"]), tool_call_id }];
      return [{ kind: "tool", tool_name: name, description: stringArg(args["description"]), tool_call_id }];
  }
}

function hasVisibleContent(content: unknown): boolean {
  if (typeof content === "string") return content.length > 0;
  return Array.isArray(content) && content.length > 0;
}

function stepKind(message: AIMessage, actions: readonly StepAction[]): StepKind {
  if (actions.length === 1 && TODO_ACTION_KINDS.has(actions[0]!.kind)) return "todo_update";
  if (actions.length === 1 && actions[0]!.kind === "subagent") return "subagent_dispatch";
  if (actions.length > 0) return "tool_batch";
  return hasVisibleContent(message.content) ? "final_answer" : "thinking";
}

/**
 * The attribution of one AI step. Successive write_todos calls in one step diff against each
 * other, so each call is attributed only the change it made.
 */
export function buildAttribution(message: AIMessage, todos: unknown): TokenUsageAttribution {
  const calls = (message.tool_calls ?? []).filter(isRecord);
  let current = normalizeTodos(todos);
  const actions: StepAction[] = [];
  for (const call of calls) {
    actions.push(...describeToolCall(call, current));
    if (call["name"] === "write_todos") current = normalizeTodos(isRecord(call["args"]) ? call["args"]["todos"] : undefined);
  }
  return {
    version: ATTRIBUTION_VERSION,
    kind: stepKind(message, actions),
    shared_attribution: actions.length > 1,
    tool_call_ids: calls.map((call) => stringArg(call["id"])).filter((id): id is string => id !== null),
    actions,
  };
}

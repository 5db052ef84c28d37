import { ToolMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph/web";
import type { AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";
import { isOneOf } from "../extension-api/one-of.ts";
import type { Todo, TodoStatus } from "../state/thread-state.ts";

/*
 * The write_todos tool and the texts built from a todo list. The tool replaces the whole list on
 * every call, which is why the middleware refuses two calls in one step: which one should win?
 */

export const WRITE_TODOS_TOOL_NAME = "write_todos";
export const TODO_STATUSES: readonly TodoStatus[] = Object.freeze(["pending", "in_progress", "completed"]);

export const DEFAULT_WRITE_TODOS_DESCRIPTION = `Create or replace the todo list for the current piece of work. Each call sends the whole list; items left out are removed.

Use it for work with three or more distinct steps, when the user gives several tasks at once, when the user asks for a todo list, or when the plan will likely change as results come in. Skip it for single steps, quick answers and conversation.

Each item has a \`content\` (what to do, stated so it can be checked off) and a \`status\`:
- \`pending\`: not started;
- \`in_progress\`: being worked on now (keep one at a time unless steps truly run in parallel);
- \`completed\`: fully done.

Mark an item \`in_progress\` before starting it and \`completed\` as soon as it is done; do not save completions up for later. Only mark an item completed when it is really finished: if it is blocked, partial or failing, leave it \`in_progress\` and add an item for what blocks it. Add items you discover along the way and remove ones that no longer matter. When you first write the list, mark the first item \`in_progress\`.`;

const ITEMS_HINT = `\`todos\` must be a list of {content, status} items, status one of ${TODO_STATUSES.join(", ")}`;

function describeValue(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  return typeof value === "object" ? "an object" : JSON.stringify(value);
}

/** The todos a write_todos call carries, or a sentence telling the model what to fix. */
export function parseTodosArgument(args: Record<string, unknown>): Todo[] | string {
  const todos = args["todos"];
  if (!Array.isArray(todos)) return `${ITEMS_HINT}; got ${describeValue(todos)}.`;
  const parsed: Todo[] = [];
  for (const [index, item] of todos.entries()) {
    const position = `item ${index + 1}`;
    if (typeof item !== "object" || item === null || Array.isArray(item)) return `${ITEMS_HINT}; ${position} is ${describeValue(item)}.`;
    const { content, status } = item as Record<string, unknown>;
    if (typeof content !== "string" || content.trim() === "") return `${ITEMS_HINT}; ${position} has no content.`;
    if (!isOneOf(TODO_STATUSES, status)) {
      return `${ITEMS_HINT}; ${position} has status ${describeValue(status)}.`;
    }
    parsed.push({ content, status: status as TodoStatus });
  }
  return parsed;
}

/** The write_todos tool: its result writes the `todos` channel and answers the call in one update. */
export function createWriteTodosTool(description: string = DEFAULT_WRITE_TODOS_DESCRIPTION): AgentTool {
  return {
    name: WRITE_TODOS_TOOL_NAME,
    description,
    schema: {
      type: "object",
      properties: {
        todos: {
          type: "array",
          description: "The complete todo list, replacing the previous one.",
          items: {
            type: "object",
            properties: {
              content: { type: "string", description: "What to do." },
              status: { type: "string", enum: [...TODO_STATUSES] },
            },
            required: ["content", "status"],
          },
        },
      },
      required: ["todos"],
    },
    async invoke(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput> {
      const toolCallId = context.toolCall.id ?? "";
      const todos = parseTodosArgument(args);
      if (typeof todos === "string") {
        return new ToolMessage({ content: `Error: ${todos}`, tool_call_id: toolCallId, name: WRITE_TODOS_TOOL_NAME, status: "error" });
      }
      return new Command({
        update: {
          todos,
          messages: [
            new ToolMessage({ content: `Updated todo list to ${JSON.stringify(todos)}`, tool_call_id: toolCallId, name: WRITE_TODOS_TOOL_NAME }),
          ],
        },
      });
    },
  };
}

/** One `- [status] content` line per item. */
export function formatTodoLines(todos: readonly Partial<Todo>[]): string {
  return todos.map((todo) => `- [${todo.status ?? "pending"}] ${todo.content ?? ""}`).join("\n");
}

/** Shown when the list is still active but the write_todos call that set it has left the context. */
export function todoReminderText(todos: readonly Partial<Todo>[]): string {
  return [
    "<system_reminder>",
    "Your todo list is still active, although the write_todos call that set it is no longer in view. Its current state:",
    "",
    formatTodoLines(todos),
    "",
    "Keep tracking your work with it: call `write_todos` whenever an item's status changes.",
    "</system_reminder>",
  ].join("\n");
}

/** Shown (in the next request only) when the model tries to finish with items still open. */
export function completionReminderText(todos: readonly Partial<Todo>[]): string {
  return [
    "<system_reminder>",
    "Some todo items are not completed yet; finish them before giving your final answer:",
    "",
    formatTodoLines(todos.filter((todo) => todo.status !== "completed")),
    "",
    "Keep working on them, mark each one completed with `write_todos` as you finish it, and answer only when every item is done.",
    "</system_reminder>",
  ].join("\n");
}

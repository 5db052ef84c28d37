import { ToolMessage } from "@langchain/core/messages";
import { Command, isCommand } from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import type { ToolResult } from "../engine/types.ts";

/*
 * The trail of rewrites a tool result went through between the tool's own return value and what
 * the model sees. Every middleware that changes a result's visible bytes appends one declared
 * entry, in the order it applied, so the last entry produced the final bytes: an observer
 * (receipts, the UI, an evaluation) classifies raw-to-visible transforms from these facts instead
 * of guessing from wording such as "[Full bash output saved to". Server-owned: the gateway strips
 * it from caller input.
 */

export const TOOL_TRANSFORMS_KEY = "deerflow_tool_transforms";

/** The transforms the built-in middlewares declare; an extension may declare its own names. */
export const ToolTransform = Object.freeze({
  /** Framework and injection tags escaped, boundary markers neutralised (ToolResultSanitization). */
  TAGS_NEUTRALIZED: "tags_neutralized",
  /** Full output moved to a file, a synopsis left in its place (ToolOutputBudget). */
  EXTERNALIZED: "externalized",
  /** Head and tail kept, the middle dropped, because no storage could take the full output (ToolOutputBudget). */
  FALLBACK_TRUNCATED: "fallback_truncated",
  /** A warning appended after the tool ran (SandboxAudit on a medium-risk command). */
  WARNING_APPENDED: "warning_appended",
} as const);
export type ToolTransform = (typeof ToolTransform)[keyof typeof ToolTransform];

type JsonScalar = string | number | boolean | null;

/** One rewrite. `middleware` is the stable middleware name; details are JSON-safe facts about it. */
export interface ToolTransformEntry {
  readonly middleware: string;
  readonly transform: ToolTransform | (string & {});
  readonly [detail: string]: JsonScalar | readonly JsonScalar[];
}

function isEntry(value: unknown): value is ToolTransformEntry {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const { middleware, transform } = value as { middleware?: unknown; transform?: unknown };
  return typeof middleware === "string" && middleware !== "" && typeof transform === "string" && transform !== "";
}

/** The trail a message carries, oldest first (malformed entries are not facts and are skipped). */
export function readToolTransforms(message: ToolMessage): ToolTransformEntry[] {
  const trail = message.additional_kwargs?.[TOOL_TRANSFORMS_KEY];
  return Array.isArray(trail) ? trail.filter(isEntry) : [];
}

function copyToolMessage(message: ToolMessage, content: ToolMessage["content"], additionalKwargs: Record<string, unknown>): ToolMessage {
  const hasMetadata = message.response_metadata && Object.keys(message.response_metadata).length > 0;
  return new ToolMessage({
    content,
    tool_call_id: message.tool_call_id,
    additional_kwargs: additionalKwargs,
    ...(message.id !== undefined ? { id: message.id } : {}),
    ...(message.name !== undefined ? { name: message.name } : {}),
    ...(message.status !== undefined ? { status: message.status } : {}),
    ...(message.artifact !== undefined ? { artifact: message.artifact } : {}),
    ...(message.metadata !== undefined ? { metadata: message.metadata } : {}),
    ...(hasMetadata ? { response_metadata: message.response_metadata } : {}),
  });
}

/** A copy of `message` with `entry` appended to its trail; the message itself is not changed. */
export function appendToolTransform(message: ToolMessage, entry: ToolTransformEntry): ToolMessage {
  return replaceToolContent(message, message.content, entry);
}

/** A copy of `message` showing `content`, with the transform that produced it appended to the trail. */
export function replaceToolContent(message: ToolMessage, content: ToolMessage["content"], entry: ToolTransformEntry): ToolMessage {
  if (!isEntry(entry)) {
    throw new DeerflowError(
      "invalid_tool_transform",
      `A tool transform entry needs a non-empty "middleware" (your middleware's name) and "transform" (what it did), got ${JSON.stringify(entry)}.`,
    );
  }
  return copyToolMessage(message, content, {
    ...message.additional_kwargs,
    [TOOL_TRANSFORMS_KEY]: [...readToolTransforms(message), { ...entry }],
  });
}

type MessageMapper = (message: ToolMessage) => ToolMessage | Promise<ToolMessage>;

async function mapMessagesValue(value: unknown, map: MessageMapper): Promise<{ value: unknown; changed: boolean }> {
  if (ToolMessage.isInstance(value)) {
    const next = await map(value);
    return { value: next, changed: next !== value };
  }
  if (!Array.isArray(value)) return { value, changed: false };
  let changed = false;
  const next: unknown[] = [];
  for (const item of value) {
    const mapped = ToolMessage.isInstance(item) ? await map(item) : item;
    if (mapped !== item) changed = true;
    next.push(mapped);
  }
  return { value: changed ? next : value, changed };
}

/**
 * Applies `map` to the ToolMessage a tool call returned, or to every ToolMessage a Command carries
 * in its `messages` update (object or tuple form). Returns the same result object when nothing
 * changed, so "untouched" stays checkable by identity; a changed Command keeps its goto, graph and
 * resume.
 */
export async function mapToolResultMessages(result: ToolResult, map: MessageMapper): Promise<ToolResult> {
  if (ToolMessage.isInstance(result)) return map(result);
  if (!isCommand(result)) return result;
  const command = result as Command;
  const update: unknown = command.update;
  let nextUpdate: unknown;
  if (Array.isArray(update)) {
    let changed = false;
    const tuples: unknown[] = [];
    for (const entry of update) {
      if (Array.isArray(entry) && entry[0] === "messages") {
        const mapped = await mapMessagesValue(entry[1], map);
        changed ||= mapped.changed;
        tuples.push(mapped.changed ? ["messages", mapped.value] : entry);
      } else {
        tuples.push(entry);
      }
    }
    if (!changed) return result;
    nextUpdate = tuples;
  } else if (typeof update === "object" && update !== null && "messages" in update) {
    const mapped = await mapMessagesValue((update as { messages: unknown }).messages, map);
    if (!mapped.changed) return result;
    nextUpdate = { ...(update as Record<string, unknown>), messages: mapped.value };
  } else {
    return result;
  }
  return withUpdate(command, nextUpdate);
}

/** A copy of `command` with another update, keeping where it goes and what it resumes. */
export function withUpdate(command: Command, update: unknown): Command {
  return new Command({
    update: update as Record<string, unknown>,
    goto: command.goto,
    ...(command.graph !== undefined ? { graph: command.graph } : {}),
    ...(command.resume !== undefined ? { resume: command.resume } : {}),
  });
}

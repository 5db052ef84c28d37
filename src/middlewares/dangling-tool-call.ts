import { ToolMessage } from "@langchain/core/messages";
import type { BaseMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import type { AgentMiddleware, ModelHandler, ModelRequest } from "../engine/types.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { isRecord } from "../core/guards.ts";

/*
 * Strict OpenAI-compatible providers reject a request whose assistant tool calls lack results, whose
 * tool results answer no call, or whose calls carry empty names/ids or non-object arguments. History
 * gets into those shapes through interruptions, summarisation and malformed provider output. This
 * middleware repairs the model-bound request only; the checkpoint keeps what really happened.
 */

export const DANGLING_TOOL_CALL_NAME = "DanglingToolCall";

export const UNKNOWN_TOOL_NAME = "unknown_tool";
export const SYNTHETIC_TOOL_CALL_ID_PREFIX = "deerflow_synthetic_tool_call_";
export const INTERRUPTED_TOOL_CALL_TEXT = "[Tool call was interrupted and did not return a result.]";
const EMPTY_TOOL_NAME_ERROR = "Tool call could not be executed because its name was missing or empty.";
// A malformed write_file call can carry a huge Markdown payload in its parser error; echoing it back
// would waste context and invite the same failure again.
const MAX_RECOVERY_ERROR_DETAIL_CHARS = 500;

export const DanglingToolCallConfigSchema = v.strictObject({});
export interface DanglingToolCallConfig {}
type _DanglingToolCallConfigMatches = Assert<SameType<DanglingToolCallConfig, v.InferOutput<typeof DanglingToolCallConfigSchema>>>;

type Dict = Record<string, unknown>;

/** One call as this middleware reasons about it, whichever view (structured, raw, invalid) it came from. */
interface NormalizedCall {
  id: unknown;
  name: string;
  invalidToolName: boolean;
  invalid: boolean;
  error?: unknown;
}

interface SyntheticClaim {
  original: unknown;
  synthetic: string;
  name: unknown;
}

function isAi(message: BaseMessage): boolean {
  return (message as { type?: unknown }).type === "ai";
}

function isTool(message: BaseMessage): message is ToolMessage {
  return (message as { type?: unknown }).type === "tool";
}

function listField(message: BaseMessage, field: "tool_calls" | "invalid_tool_calls"): unknown[] {
  const value = (message as unknown as Dict)[field];
  return Array.isArray(value) ? value : [];
}

function rawToolCalls(message: BaseMessage): unknown {
  return message.additional_kwargs?.["tool_calls"];
}

function validName(name: unknown): name is string {
  return typeof name === "string" && name.trim().length > 0;
}

function validId(id: unknown): id is string {
  return typeof id === "string" && id.trim().length > 0;
}

function normalizeToolName(name: unknown): string {
  return validName(name) ? name.trim() : UNKNOWN_TOOL_NAME;
}

function truncateCodePoints(text: string, max: number): string {
  const chars = Array.from(text);
  return chars.length > max ? chars.slice(0, max).join("") : text;
}

function parseJsonObject(value: unknown): Dict | null {
  if (typeof value !== "string") return null;
  try {
    const parsed: unknown = JSON.parse(value);
    return isRecord(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

/** A JSON-object string a strict provider accepts as `function.arguments`. */
export function normalizeToolArguments(args: unknown): string {
  if (isRecord(args)) {
    try {
      return JSON.stringify(args);
    } catch {
      return "{}";
    }
  }
  return typeof args === "string" && parseJsonObject(args) !== null ? args : "{}";
}

/**
 * Copies a message with some fields replaced, keeping its class and every other field as-is. The
 * serialisable kwargs are updated too, so a checkpoint or wire encoder sees the replacement.
 */
function withFields<T extends BaseMessage>(message: T, patch: Dict): T {
  const copy = Object.assign(Object.create(Object.getPrototypeOf(message) as object) as T, message, patch);
  const kwargs = (message as unknown as { lc_kwargs?: unknown }).lc_kwargs;
  if (isRecord(kwargs)) (copy as unknown as { lc_kwargs: Dict }).lc_kwargs = { ...kwargs, ...patch };
  return copy;
}

function callDeclaredName(call: Dict): unknown {
  const name = call["name"];
  if (validName(name)) return name;
  const fn = call["function"];
  return isRecord(fn) ? fn["name"] : name;
}

/** A missing name cannot contradict anything; only two usable names that differ rule a pairing out. */
function namesCanPair(callName: unknown, resultName: unknown): boolean {
  if (!validName(callName) || !validName(resultName)) return true;
  return callName.trim() === resultName.trim();
}

function relabelToolCallIds(
  calls: readonly unknown[],
  messageIndex: number,
  source: string,
): { relabeled: unknown[]; assigned: SyntheticClaim[]; changed: boolean } {
  const relabeled: unknown[] = [];
  const assigned: SyntheticClaim[] = [];
  let changed = false;
  calls.forEach((call, position) => {
    if (!isRecord(call) || validId(call["id"])) {
      relabeled.push(call);
      return;
    }
    // Derived from position so the pairing pass and the model-bound message agree without shared state.
    const synthetic = `${SYNTHETIC_TOOL_CALL_ID_PREFIX}${messageIndex}_${source}_${position}`;
    relabeled.push({ ...call, id: synthetic });
    changed = true;
    assigned.push({ original: call["id"], synthetic, name: callDeclaredName(call) });
  });
  return { relabeled, assigned, changed };
}

function turnMalformedResultCount(messages: readonly BaseMessage[], start: number): number {
  let count = 0;
  for (const message of messages.slice(start + 1)) {
    if (isAi(message)) break;
    if (isTool(message) && !validId(message.tool_call_id)) count += 1;
  }
  return count;
}

/**
 * Gives a malformed-id result to the open malformed call of its own turn that it must belong to:
 * the only name-compatible call, or, when every call of the turn has a result, the one at the same
 * position (tool nodes emit results in call order). Anything else is a guess, so the result stays
 * unattributed and is dropped as an orphan rather than served to the wrong call.
 */
function claimSyntheticId(openCalls: SyntheticClaim[], result: ToolMessage, positional: boolean): string | null {
  const candidates: number[] = [];
  openCalls.forEach((entry, position) => {
    if (entry.original === result.tool_call_id && namesCanPair(entry.name, result.name)) candidates.push(position);
  });
  if (candidates.length === 0 || (candidates.length > 1 && !positional)) return null;
  const [claimed] = openCalls.splice(candidates[0]!, 1);
  return claimed!.synthetic;
}

function normalizeToolCallIds(messages: readonly BaseMessage[]): readonly BaseMessage[] {
  const rewritten = new Map<number, BaseMessage>();
  // Reset at each AIMessage: a result only ever answers the turn that issued it.
  let openCalls: SyntheticClaim[] = [];
  let positional = false;

  messages.forEach((message, index) => {
    if (isAi(message)) {
      const patch: Dict = {};
      const assigned: SyntheticClaim[] = [];
      const structured = listField(message, "tool_calls");
      const invalid = listField(message, "invalid_tool_calls");
      const raw = rawToolCalls(message);
      const sources: Array<[string, readonly unknown[], "tool_calls" | "invalid_tool_calls" | "additional_kwargs"]> = [
        ["call", structured, "tool_calls"],
        ["invalid", invalid, "invalid_tool_calls"],
      ];
      // The raw payload is only what a serializer sends when both structured views are empty; minting
      // an id for a shadowed raw view would owe a placeholder to a call the provider never sees.
      if (structured.length === 0 && invalid.length === 0 && Array.isArray(raw)) {
        sources.push(["raw", raw, "additional_kwargs"]);
      }
      for (const [source, calls, field] of sources) {
        const { relabeled, assigned: claims, changed } = relabelToolCallIds(calls, index, source);
        assigned.push(...claims);
        if (!changed) continue;
        patch[field] = field === "additional_kwargs" ? { ...message.additional_kwargs, tool_calls: relabeled } : relabeled;
      }
      openCalls = assigned;
      positional = turnMalformedResultCount(messages, index) === assigned.length;
      if (Object.keys(patch).length > 0) rewritten.set(index, withFields(message, patch));
      return;
    }
    if (!isTool(message) || validId(message.tool_call_id)) return;
    const synthetic = claimSyntheticId(openCalls, message, positional);
    if (synthetic !== null) rewritten.set(index, withFields(message, { tool_call_id: synthetic }));
  });

  if (rewritten.size === 0) return messages;
  return messages.map((message, index) => rewritten.get(index) ?? message);
}

function messageToolCalls(message: BaseMessage): NormalizedCall[] {
  const normalized: NormalizedCall[] = [];
  const structured = listField(message, "tool_calls");
  const invalid = listField(message, "invalid_tool_calls");

  for (const call of structured) {
    if (!isRecord(call)) continue;
    normalized.push(normalizeCall(call["id"], call["name"]));
  }

  // The raw payload is a fallback view of the same calls; reading it beside a structured view would
  // count one call twice and emit two results for one id.
  const raw = rawToolCalls(message);
  if (structured.length === 0 && invalid.length === 0 && Array.isArray(raw)) {
    for (const rawCall of raw) {
      if (!isRecord(rawCall)) continue;
      const fn = rawCall["function"];
      let name = rawCall["name"];
      if (!name && isRecord(fn)) name = fn["name"];
      normalized.push(normalizeCall(rawCall["id"], name));
    }
  }

  for (const call of invalid) {
    if (!isRecord(call)) continue;
    normalized.push({ ...normalizeCall(call["id"], call["name"]), invalid: true, error: call["error"] });
  }
  return normalized;
}

/** A well-formed call's view; an invalid_tool_calls entry marks itself invalid and adds its error. */
function normalizeCall(id: unknown, name: unknown): NormalizedCall {
  return { id, name: normalizeToolName(name), invalidToolName: !validName(name), invalid: false };
}

function placeholderContent(call: NormalizedCall): string {
  if (call.invalidToolName) return `[${EMPTY_TOOL_NAME_ERROR} Use one of the available tool names when retrying.]`;
  if (call.invalid) {
    const errorText =
      typeof call.error === "string" && call.error ? truncateCodePoints(call.error, MAX_RECOVERY_ERROR_DETAIL_CHARS) : "";
    // Large single-shot writes are the usual cause; steer the model to text or smaller pieces
    // instead of repeating the same unparseable payload.
    if (call.name === "write_file") {
      const details = errorText ? ` Parser error: ${errorText}` : "";
      return (
        "[write_file failed before execution: the tool-call arguments were not valid JSON, " +
        "so no file was written. This often happens when the model tries to write a very " +
        "large Markdown file in a single tool call, especially when `content` contains " +
        "unescaped quotes, inline JSON, backslashes, or code fences. Do not retry the same " +
        "large `write_file` payload for this artifact; provide the report/content directly " +
        "as normal assistant text in your next response. If a file write is still needed " +
        `later, split the file into smaller sections instead of one large payload.${details}]`
      );
    }
    if (errorText) return `[Tool call could not be executed because its arguments were invalid: ${errorText}]`;
    return "[Tool call could not be executed because its arguments were invalid.]";
  }
  return INTERRUPTED_TOOL_CALL_TEXT;
}

function sanitizeAiMessage(message: BaseMessage): BaseMessage {
  if (!isAi(message)) return message;
  const patch: Dict = {};

  const structured = listField(message, "tool_calls");
  if (structured.length > 0) {
    let changed = false;
    const sanitized = structured.map((call) => {
      if (!isRecord(call)) return call;
      const name = normalizeToolName(call["name"]);
      if (call["name"] === name) return call;
      changed = true;
      return { ...call, name };
    });
    if (changed) patch["tool_calls"] = sanitized;
  }

  const invalid = listField(message, "invalid_tool_calls");
  if (invalid.length > 0) {
    let changed = false;
    const sanitized = invalid.map((call) => {
      if (!isRecord(call)) return call;
      const name = normalizeToolName(call["name"]);
      const args = normalizeToolArguments(call["args"]);
      if (call["name"] === name && call["args"] === args) return call;
      changed = true;
      return { ...call, name, args };
    });
    if (changed) patch["invalid_tool_calls"] = sanitized;
  }

  const raw = rawToolCalls(message);
  if (Array.isArray(raw)) {
    let changed = false;
    const sanitized = raw.map((rawCall: unknown) => {
      if (!isRecord(rawCall)) return rawCall;
      const fn = rawCall["function"];
      if (isRecord(fn)) {
        const name = normalizeToolName(fn["name"]);
        const args = normalizeToolArguments(fn["arguments"]);
        if (fn["name"] === name && fn["arguments"] === args) return rawCall;
        changed = true;
        return { ...rawCall, function: { ...fn, name, arguments: args } };
      }
      const name = normalizeToolName(rawCall["name"]);
      if (rawCall["name"] === name) return rawCall;
      changed = true;
      return { ...rawCall, name };
    });
    if (changed) patch["additional_kwargs"] = { ...message.additional_kwargs, tool_calls: sanitized };
  }

  return Object.keys(patch).length > 0 ? withFields(message, patch) : message;
}

/**
 * The model-bound transcript with every tool result right after the AIMessage that called it, a
 * placeholder for each unanswered call, orphan results dropped and malformed calls repaired; `null`
 * when the transcript is already valid (the request then goes out untouched).
 */
export function buildPatchedMessages(messages: readonly BaseMessage[]): BaseMessage[] | null {
  const normalized = normalizeToolCallIds(messages);

  const resultsById = new Map<unknown, ToolMessage[]>();
  for (const message of normalized) {
    if (!isTool(message)) continue;
    const queue = resultsById.get(message.tool_call_id);
    if (queue) queue.push(message);
    else resultsById.set(message.tool_call_id, [message]);
  }

  const callIds = new Set<unknown>();
  for (const message of normalized) {
    if (!isAi(message)) continue;
    for (const call of messageToolCalls(message)) if (call.id) callIds.add(call.id);
  }

  const patched: BaseMessage[] = [];
  for (const message of normalized) {
    if (isTool(message)) {
      // Paired results are re-emitted after their call; orphans leave the request (never the state).
      continue;
    }
    patched.push(sanitizeAiMessage(message));
    if (!isAi(message)) continue;

    // Read from the unsanitised message so an empty name is still recognisable as one.
    for (const call of messageToolCalls(message)) {
      if (!call.id) continue;
      let result = resultsById.get(call.id)?.shift();
      if (result !== undefined) {
        if (call.invalidToolName && !validName(result.name)) result = withFields(result, { name: call.name });
        patched.push(result);
      } else {
        patched.push(
          new ToolMessage({
            content: placeholderContent(call),
            tool_call_id: String(call.id),
            name: call.name,
            status: "error",
          }),
        );
      }
    }
  }

  const unchanged = patched.length === messages.length && patched.every((message, index) => message === messages[index]);
  return unchanged ? null : patched;
}

/**
 * Repairs tool-call pairing in the model request (placeholders for unanswered calls, orphan results
 * dropped, displaced results regrouped, malformed names/ids/arguments sanitised). State is never touched.
 */
export function createDanglingToolCallMiddleware(config?: Partial<DanglingToolCallConfig>): AgentMiddleware {
  parseMiddlewareConfig(DanglingToolCallConfigSchema, config, DANGLING_TOOL_CALL_NAME);
  return {
    name: DANGLING_TOOL_CALL_NAME,
    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      const patched = buildPatchedMessages(request.messages);
      return handler(patched === null ? request : { ...request, messages: patched });
    },
    releasePolicyParameters() {
      return {
        placeholder: "interrupted_tool_call",
        orphan_tool_results: "drop_from_request",
        malformed_tool_calls: "sanitize_in_request",
      };
    },
  };
}

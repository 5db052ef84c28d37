import { ToolMessage } from "@langchain/core/messages";
import { isCommand, isGraphBubbleUp } from "@langchain/langgraph/web";
import type { Command } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { resolveVirtualPath } from "../sandbox/virtual-path.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, ToolCallRequest, ToolHandler, ToolResult } from "../engine/types.ts";
import { sha256Hex } from "../extension-api/canonical.ts";
import { sha256HexSync } from "../extension-api/sha256-sync.ts";
import { SandboxError } from "../ports/sandbox.ts";
import { SandboxAuthorizationError, acquireRunSandbox, sandboxScopeOf, type SandboxAuthorizer } from "../sandbox/acquire.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { KeyedMutex } from "../core/keyed-mutex.ts";
import { TOOL_META_KEY, normalizeToolResult } from "./tool-result-meta.ts";

/*
 * ReadBeforeWrite: a version gate on file edits (DeerFlow issue #3857). Modifying an existing file
 * requires a read_file of its *current* version earlier in the conversation, which ends the failure
 * mode of appending the same section again and again without ever reading the file back.
 *
 * - The read mark (sha256 of the whole file) lives on the read_file ToolMessage, so the gate's state
 *   is the message history: summarization dropping the read drops the mark, and the gate closes.
 * - Writes never refresh marks: a write changes the hash, so consecutive edits need a re-read each.
 * - Gate check and tool execution are serialized per (thread, path): tool calls of one AI message
 *   run concurrently, and two writes must not both pass on one stale mark. The same lock covers a
 *   read and its mark, so a mark always hashes the version the model was shown.
 * - Fail-open: a target the gate cannot inspect lets the tool run and report its own error.
 */

export const READ_BEFORE_WRITE_NAME = "ReadBeforeWrite";
export const READ_MARK_KEY = "deerflow_read_mark";
export const READ_TOOL_NAMES: readonly string[] = Object.freeze(["read_file"]);
export const GATED_WRITE_TOOL_NAMES: readonly string[] = Object.freeze(["write_file", "str_replace"]);

// Sandboxes that report read failures in-band ("Error: ...") instead of raising make "missing" and
// "unreadable" indistinguishable, so such a read counts as uninspectable.
const UNINSPECTABLE_CONTENT_PREFIX = "Error:";

const BLOCK_MESSAGE_TEMPLATE =
  "Error: {tool_name} blocked — {path} already exists and you have not read its current version. " +
  "Any write invalidates earlier reads, so re-read before every modification. " +
  "Call read_file on it (a ranged read of the relevant section is enough, e.g. the last ~30 lines " +
  "before an append), check what is already there, then retry.";
const BLOCK_MESSAGE_HASH = sha256HexSync(BLOCK_MESSAGE_TEMPLATE);

/** The text a blocked write returns (recoverable: the model reads the file and retries). */
export function readBeforeWriteBlockMessage(toolName: string, path: string): string {
  return BLOCK_MESSAGE_TEMPLATE.replace("{tool_name}", toolName).replace("{path}", path);
}

export const ReadBeforeWriteConfigSchema = v.strictObject({
  /** Block edits of existing files that were not read at their current version. */
  enabled: v.optional(v.boolean()),
});
export interface ReadBeforeWriteConfig {
  enabled?: boolean;
}
type _ReadBeforeWriteConfigMatches = Assert<SameType<ReadBeforeWriteConfig, v.InferOutput<typeof ReadBeforeWriteConfigSchema>>>;
export const READ_BEFORE_WRITE_DEFAULTS: Readonly<Required<ReadBeforeWriteConfig>> = Object.freeze({ enabled: true });

/** The mark a successful read stamps: the normalized virtual path and the whole file's sha256. */
export interface ReadMark {
  readonly path: string;
  readonly sha256: string;
}

/**
 * Reads a file's full current content the way read_file sees it. Must throw SandboxError
 * `not_found` for a missing file (the gate lets creation through) and SandboxAuthorizationError
 * when the run may not use the sandbox. `decisionKey` shares one authorization decision per call.
 */
export type FileContentReader = (runtime: AgentRuntime, path: string, options: { decisionKey: string | undefined }) => Promise<string>;

export interface ReadBeforeWriteDeps {
  /** The `sandbox:execute` gate the sandbox tools use; the gate's inspection shares their decision. */
  readonly authorizer?: SandboxAuthorizer;
  /** Default: reads through the thread's sandbox. */
  readonly contentReader?: FileContentReader;
  /** Default: one table per process (see GATE_LOCKS). */
  readonly locks?: KeyedMutex;
}

// Keyed by (thread, path): the file is shared by every agent of this process working on the thread
// (the lead and its subagents each run their own chain), so the lock lives at the file's scope, not
// a run's or an instance's. Entries vanish once idle, so no run leaves anything behind.
const GATE_LOCKS = new KeyedMutex();

function requestedPath(request: ToolCallRequest): string | undefined {
  const args: unknown = request.toolCall.args;
  if (typeof args !== "object" || args === null) return undefined;
  const path = (args as Record<string, unknown>)["path"];
  return typeof path === "string" && path.length > 0 ? path : undefined;
}

/** The path a mark is keyed by, resolved the way the sandbox resolves it; undefined outside the sandbox. */
export function normalizeMarkPath(path: string): string | undefined {
  try {
    return resolveVirtualPath(path);
  } catch (error) {
    if (error instanceof SandboxError) return undefined;
    throw error;
  }
}

/** The hash of the newest read mark for `path` in the history, if any (a malformed newest mark counts as none). */
export function latestReadMarkHash(state: Pick<AgentState, "messages">, path: string): string | undefined {
  const messages = state.messages ?? [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!;
    if (!ToolMessage.isInstance(message)) continue;
    const mark: unknown = message.additional_kwargs?.[READ_MARK_KEY];
    if (typeof mark !== "object" || mark === null || (mark as Record<string, unknown>)["path"] !== path) continue;
    // DeerFlow's own checkpoints spell the digest `hash`.
    const digest = (mark as Record<string, unknown>)["sha256"] ?? (mark as Record<string, unknown>)["hash"];
    return typeof digest === "string" ? digest : undefined;
  }
  return undefined;
}

/** The ToolMessage answering this call inside a result, whether bare or carried by a Command. */
function resultMessage(result: ToolResult, toolCallId: string | undefined): ToolMessage | undefined {
  if (ToolMessage.isInstance(result)) return result;
  if (!isCommand(result)) return undefined;
  const update: unknown = (result as Command).update;
  const found: ToolMessage[] = [];
  const collect = (value: unknown) => {
    for (const item of Array.isArray(value) ? value : [value]) if (ToolMessage.isInstance(item)) found.push(item);
  };
  if (Array.isArray(update)) {
    for (const entry of update) if (Array.isArray(entry) && entry[0] === "messages") collect(entry[1]);
  } else if (typeof update === "object" && update !== null) {
    collect((update as Record<string, unknown>)["messages"]);
  }
  return found.filter((m) => m.tool_call_id === toolCallId).at(-1) ?? found.at(-1);
}

type Inspection =
  | { readonly kind: "content"; readonly content: string }
  | { readonly kind: "missing" }
  | { readonly kind: "uninspectable" }
  | { readonly kind: "denied"; readonly error: SandboxAuthorizationError };

/**
 * The ReadBeforeWrite middleware (lead chain position 11/12): read_file stamps marks,
 * write_file and str_replace on an existing file need a fresh one. Must sit outside ToolProgress
 * and ToolErrorHandling so a blocked write returns at once, self-stamped with deerflow_tool_meta.
 */
export function createReadBeforeWriteMiddleware(config?: Partial<ReadBeforeWriteConfig>, deps: ReadBeforeWriteDeps = {}): AgentMiddleware {
  const parsed = parseMiddlewareConfig(ReadBeforeWriteConfigSchema, config, READ_BEFORE_WRITE_NAME, "Fix this key (enabled takes true or false).");
  const enabled = parsed.enabled ?? READ_BEFORE_WRITE_DEFAULTS.enabled;
  const authorizer = deps.authorizer;
  const locks = deps.locks ?? GATE_LOCKS;
  const reader: FileContentReader =
    deps.contentReader ??
    (async (runtime, path, options) => (await acquireRunSandbox(runtime, { authorizer, decisionKey: options.decisionKey })).readFile(path));
  const readTools = new Set(READ_TOOL_NAMES);
  const gatedTools = new Set(GATED_WRITE_TOOL_NAMES);

  async function inspect(request: ToolCallRequest, path: string): Promise<Inspection> {
    let content: string;
    try {
      content = await reader(request.runtime, path, { decisionKey: request.toolCall.id });
    } catch (error) {
      if (isGraphBubbleUp(error)) throw error;
      if (request.runtime.signal?.aborted) throw error;
      // An authorization denial is a decision, not a hiccup: it never takes the fail-open path.
      if (error instanceof SandboxAuthorizationError) return { kind: "denied", error };
      if (error instanceof SandboxError && error.code === "not_found") return { kind: "missing" };
      return { kind: "uninspectable" };
    }
    if (typeof content !== "string" || content.startsWith(UNINSPECTABLE_CONTENT_PREFIX)) return { kind: "uninspectable" };
    return { kind: "content", content };
  }

  function errorResult(request: ToolCallRequest, text: string): ToolMessage {
    const toolName = request.toolCall.name;
    const message = new ToolMessage({ content: text, tool_call_id: request.toolCall.id ?? "", name: toolName, status: "error" });
    // Stamped here because this result skips ToolErrorHandling, and outer consumers (ToolProgress,
    // receipts) classify results by this meta.
    message.additional_kwargs = {
      ...message.additional_kwargs,
      [TOOL_META_KEY]: normalizeToolResult({ toolName, content: text, status: "error" }),
    };
    return message;
  }

  async function gateWrite(request: ToolCallRequest, rawPath: string, path: string, handler: ToolHandler): Promise<ToolResult> {
    const inspection = await inspect(request, path);
    if (inspection.kind === "denied") return errorResult(request, `Error: ${inspection.error.message}`);
    if (inspection.kind === "content") {
      const current = await sha256Hex(inspection.content);
      if (latestReadMarkHash(request.state, path) !== current) {
        return errorResult(request, readBeforeWriteBlockMessage(request.toolCall.name, rawPath));
      }
    }
    // "missing": write_file creates the file, str_replace reports its own error.
    return handler(request);
  }

  async function readAndMark(request: ToolCallRequest, path: string, handler: ToolHandler): Promise<ToolResult> {
    const result = await handler(request);
    const message = resultMessage(result, request.toolCall.id);
    if (!message || message.status === "error") return result;
    const inspection = await inspect(request, path);
    if (inspection.kind !== "content") return result;
    const mark: ReadMark = { path, sha256: await sha256Hex(inspection.content) };
    message.additional_kwargs = { ...message.additional_kwargs, [READ_MARK_KEY]: mark };
    return result;
  }

  return {
    name: READ_BEFORE_WRITE_NAME,

    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      if (!enabled) return handler(request);
      const name = request.toolCall.name;
      const gated = gatedTools.has(name);
      if (!gated && !readTools.has(name)) return handler(request);
      const rawPath = requestedPath(request);
      const path = rawPath === undefined ? undefined : normalizeMarkPath(rawPath);
      // No usable path: the tool itself answers with the argument or permission error.
      if (rawPath === undefined || path === undefined) return handler(request);
      const scope = sandboxScopeOf(request.runtime)?.threadId ?? request.state.sandbox?.sandbox_id ?? "global";
      return locks.run(`${scope}\u0000${path}`, () =>
        gated ? gateWrite(request, rawPath, path, handler) : readAndMark(request, path, handler),
      );
    },

    releasePolicyParameters() {
      return {
        enabled,
        read_tools: [...READ_TOOL_NAMES],
        gated_tools: [...GATED_WRITE_TOOL_NAMES],
        mark_key: READ_MARK_KEY,
        mark_digest: "sha256",
        block_message_hash: BLOCK_MESSAGE_HASH,
        serialization: "thread_path",
        authorization_gate: authorizer !== undefined,
      };
    },
  };
}

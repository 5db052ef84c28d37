import { isServerOwnedMessageMetadataKey } from "../extension-api/index.ts";
import { isRecord } from "../core/guards.ts";
import { ORIGINAL_USER_CONTENT_KEY } from "../middlewares/input-sanitization.ts";
import { RunOperationError } from "../runtime/runs/types.ts";
import type { GatewayUser } from "./types.ts";

/*
 * What a caller may never supply. The server writes identity (who is calling, with which
 * attributes), provenance (who produced a message) and delegation facts (a subagent's outcome,
 * its receipts' verdict, its usage); a caller that could set them could act as someone else,
 * forge a tool's result or plant a finished delegation. The gateway strips them from every run
 * request, then writes its own identity keys after the caller's.
 *
 * Two of them have a second writer: an internal caller (an IM channel) knows facts the gateway
 * cannot, namely which channel user sent the message and what they typed before the channel added
 * transport or file context. Such a caller may carry `channel_user_id` in the run's top-level
 * `context` and `original_user_content` in a message's `additional_kwargs`, both as strings.
 */

/**
 * Whom a run request comes from, as the auth layer decided it: "internal" only for a caller that
 * presented the gateway's internal token; an API key, a session, or no credentials is "external",
 * and no header a client can set changes that.
 */
export type CallerTrust = "internal" | "external";

export function callerTrustOf(user: Pick<GatewayUser, "authSource" | "isInternal">): CallerTrust {
  return user.authSource === "internal" && user.isInternal === true ? "internal" : "external";
}

/** Where a strip runs: whose input it is, and the input's path for an error naming a bad value. */
export interface StripOptions {
  readonly caller?: CallerTrust;
  readonly where?: string;
}

/** Server-owned context keys an internal caller may supply in the run's top-level `context` (never through config). */
export const INTERNAL_CALLER_CONTEXT_KEYS: readonly string[] = Object.freeze(["channel_user_id"]);
/** Server-owned message `additional_kwargs` keys an internal caller may supply. */
export const INTERNAL_CALLER_MESSAGE_KEYS: readonly string[] = Object.freeze([ORIGINAL_USER_CONTENT_KEY]);

const INTERNAL_CONTEXT_KEY_SET: ReadonlySet<string> = new Set(INTERNAL_CALLER_CONTEXT_KEYS);
const INTERNAL_MESSAGE_KEY_SET: ReadonlySet<string> = new Set(INTERNAL_CALLER_MESSAGE_KEYS);

/** An internal caller's value for a key it may supply: kept when a string, absent when null, a 422 otherwise. */
function keepsTrustedValue(value: unknown, path: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === "string") return true;
  throw new RunOperationError(
    "invalid_run_request",
    `${path}: expected a string, got ${Array.isArray(value) ? "a list" : typeof value}; send the text the channel captured, or leave the key out`,
  );
}

/** Context / configurable keys only the server writes. */
export const SERVER_OWNED_CONTEXT_KEYS: readonly string[] = Object.freeze([
  "user_id",
  "user_role",
  "oauth_provider",
  "oauth_id",
  "is_internal",
  "authz_attributes",
  "channel_user_id",
  "original_user_content",
  "non_interactive",
  "thread_id",
  "run_id",
]);

const CONTEXT_KEY_SET: ReadonlySet<string> = new Set(SERVER_OWNED_CONTEXT_KEYS);

export function isServerOwnedContextKey(key: string): boolean {
  return (
    key.startsWith("__") ||
    key.startsWith("langgraph_auth_user") ||
    CONTEXT_KEY_SET.has(key) ||
    isServerOwnedMessageMetadataKey(key)
  );
}

/**
 * A copy of a caller's context (or configurable) without the keys only the server writes. An
 * internal caller keeps the keys it may supply (INTERNAL_CALLER_CONTEXT_KEYS); pass its trust only
 * for the run's top-level `context`, never for `config.configurable`.
 */
export function stripServerOwnedContext(context: unknown, options: StripOptions = {}): Record<string, unknown> {
  if (!isRecord(context)) return {};
  const internal = options.caller === "internal";
  const where = options.where ?? "context";
  // fromEntries defines own properties, so a caller's "__proto__" key stays data (and is dropped anyway).
  return Object.fromEntries(
    Object.entries(context).filter(([key, value]) =>
      internal && INTERNAL_CONTEXT_KEY_SET.has(key) ? keepsTrustedValue(value, `${where}.${key}`) : !isServerOwnedContextKey(key),
    ),
  );
}

function stripMetadata(value: unknown, trusted: ReadonlySet<string>, where: string): unknown {
  if (!isRecord(value)) return value;
  return Object.fromEntries(
    Object.entries(value).filter(([key, item]) =>
      trusted.has(key) ? keepsTrustedValue(item, `${where}.${key}`) : !isServerOwnedMessageMetadataKey(key),
    ),
  );
}

const NOTHING_TRUSTED: ReadonlySet<string> = new Set();

/**
 * A caller's input message without server-owned metadata: in `additional_kwargs`,
 * `response_metadata`, and at the top level of a plain message dict (LangChain's coercion would
 * otherwise carry unknown top-level fields into the message). An internal caller keeps the
 * `additional_kwargs` keys it may supply (INTERNAL_CALLER_MESSAGE_KEYS), there only. Non-object
 * items pass unchanged; the run request's own validation reports them.
 */
export function stripServerOwnedMessage(message: unknown, options: StripOptions = {}): unknown {
  if (!isRecord(message)) return message;
  const where = options.where ?? "message";
  const trusted = options.caller === "internal" ? INTERNAL_MESSAGE_KEY_SET : NOTHING_TRUSTED;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(message)) {
    if (isServerOwnedMessageMetadataKey(key)) continue;
    if (key === "additional_kwargs") out[key] = stripMetadata(value, trusted, `${where}.${key}`);
    else if (key === "response_metadata") out[key] = stripMetadata(value, NOTHING_TRUSTED, `${where}.${key}`);
    else out[key] = value;
  }
  // LangChain's serialized form ({lc, type: "constructor", kwargs}) keeps the fields one level down.
  if (isRecord(out.kwargs) && out.type === "constructor") out.kwargs = stripServerOwnedMessage(out.kwargs, { ...options, where: `${where}.kwargs` });
  return out;
}

export function stripServerOwnedMessages(messages: readonly unknown[], options: StripOptions = {}): unknown[] {
  const where = options.where ?? "messages";
  return messages.map((message, index) => stripServerOwnedMessage(message, { ...options, where: `${where}[${index}]` }));
}

/**
 * Thread-state channels only the server's middlewares write: which sandbox the thread holds (its
 * release would act on whatever id a caller planted), per-thread paths, the delegation ledger,
 * skill activations, viewed images, promoted tools, files and summaries. A caller may write
 * messages, title, todos and goal.
 */
export const SERVER_OWNED_STATE_CHANNELS: readonly string[] = Object.freeze([
  "sandbox",
  "thread_data",
  "uploaded_files",
  "summary_text",
  "background_tasks",
  "artifacts",
  "viewed_images",
  "promoted",
  "delegations",
  "skill_context",
]);

const STATE_CHANNEL_SET: ReadonlySet<string> = new Set(SERVER_OWNED_STATE_CHANNELS);

/** The server-owned channels a caller's state write names, in order; empty when it names none. */
export function serverOwnedChannelsIn(write: unknown): string[] {
  if (Array.isArray(write)) {
    return write.flatMap((entry) => (Array.isArray(entry) && typeof entry[0] === "string" && STATE_CHANNEL_SET.has(entry[0]) ? [entry[0]] : []));
  }
  if (!isRecord(write)) return [];
  return Object.keys(write).filter((key) => STATE_CHANNEL_SET.has(key));
}

/** The error text for a write that names server-owned channels. */
export function serverOwnedChannelsMessage(where: string, channels: readonly string[]): string {
  return `${where} may not write ${channels.join(", ")}: the server's middlewares own ${channels.length === 1 ? "that channel" : "those channels"}; send messages (and title, todos or goal) instead.`;
}

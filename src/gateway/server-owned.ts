import { isServerOwnedMessageMetadataKey } from "../extension-api/index.ts";
import { isRecord } from "../core/guards.ts";

/*
 * What a caller may never supply. The server writes identity (who is calling, with which
 * attributes), provenance (who produced a message) and delegation facts (a subagent's outcome,
 * its receipts' verdict, its usage); a caller that could set them could act as someone else,
 * forge a tool's result or plant a finished delegation. The gateway strips them from every run
 * request, then writes its own identity keys after the caller's.
 */

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

/** A copy of a caller's context (or configurable) without the keys only the server writes. */
export function stripServerOwnedContext(context: unknown): Record<string, unknown> {
  if (!isRecord(context)) return {};
  // fromEntries defines own properties, so a caller's "__proto__" key stays data (and is dropped anyway).
  return Object.fromEntries(Object.entries(context).filter(([key]) => !isServerOwnedContextKey(key)));
}

function stripMetadata(value: unknown): unknown {
  if (!isRecord(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([key]) => !isServerOwnedMessageMetadataKey(key)));
}

/**
 * A caller's input message without server-owned metadata: in `additional_kwargs`,
 * `response_metadata`, and at the top level of a plain message dict (LangChain's coercion would
 * otherwise carry unknown top-level fields into the message). Non-object items pass unchanged;
 * the run request's own validation reports them.
 */
export function stripServerOwnedMessage(message: unknown): unknown {
  if (!isRecord(message)) return message;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(message)) {
    if (isServerOwnedMessageMetadataKey(key)) continue;
    out[key] = key === "additional_kwargs" || key === "response_metadata" ? stripMetadata(value) : value;
  }
  // LangChain's serialized form ({lc, type: "constructor", kwargs}) keeps the fields one level down.
  if (isRecord(out.kwargs) && out.type === "constructor") out.kwargs = stripServerOwnedMessage(out.kwargs);
  return out;
}

export function stripServerOwnedMessages(messages: readonly unknown[]): unknown[] {
  return messages.map(stripServerOwnedMessage);
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

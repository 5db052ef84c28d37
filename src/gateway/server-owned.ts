import { isServerOwnedMessageMetadataKey } from "../extension-api/index.ts";

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

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
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

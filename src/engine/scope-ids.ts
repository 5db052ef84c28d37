import { DeerflowError } from "../core/errors.ts";
import { SCOPE_ID_MAX, idFormatHint, isScopeId } from "../core/ids.ts";
import { runThreadId, runUserId } from "./run-identity.ts";
import type { AgentRuntime } from "./types.ts";

/*
 * A run's thread and user as the names of its folders (thread data, sandboxes, batches): checked
 * against the alphabet every sandbox provider accepts. ThreadData and the batch_task tool use them.
 */

export type ThreadDataErrorCode = "thread_id_required" | "invalid_thread_id" | "invalid_user_id";

export class ThreadDataError extends DeerflowError {
  declare readonly code: ThreadDataErrorCode;

  constructor(code: ThreadDataErrorCode, message: string) {
    super(code, message);
    this.name = "ThreadDataError";
  }
}

function requireSafeId(value: unknown, field: "thread_id" | "user_id"): string {
  // Scope ids, as the sandbox providers check them, so an id that passes here can always get a sandbox.
  if (isScopeId(value)) return value;
  throw new ThreadDataError(
    field === "thread_id" ? "invalid_thread_id" : "invalid_user_id",
    `Invalid ${field} ${JSON.stringify(value) ?? String(value)}: it names a folder, so use ${idFormatHint(SCOPE_ID_MAX)} ` +
      `(no "/", no "..", not empty). Gateway-assigned ids such as UUIDs already fit.`,
  );
}

/**
 * The thread id of a run, in runThreadId's order (the run's own thread, else the caller context's),
 * checked as a folder name. A context value runThreadId cannot use (empty, not a string) is
 * rejected rather than ignored when the run has no thread of its own.
 */
export function resolveThreadId(runtime: AgentRuntime): string {
  const threadId = runThreadId(runtime) ?? runtime.context["thread_id"];
  if (threadId === undefined || threadId === null) throw new ThreadDataError("thread_id_required", "Thread ID is required");
  return requireSafeId(threadId, "thread_id");
}

/**
 * The user whose isolation scope a run's files live in (runUserId: context user_id, else the
 * shared DEFAULT_USER_ID), checked as a folder name; a given user_id that is empty or not a string
 * is rejected, never silently turned into the shared scope.
 */
export function resolveUserId(runtime: AgentRuntime): string {
  const given = runtime.context["user_id"];
  return requireSafeId(given === undefined || given === null ? runUserId(runtime) : given, "user_id");
}

import { DeerflowError } from "../core/errors.ts";
import { DEFAULT_USER_ID } from "./run-identity.ts";
import type { AgentRuntime } from "./types.ts";

/*
 * A run's thread and user as the names of its folders (thread data, sandboxes, batches): checked
 * against the alphabet every sandbox provider accepts. ThreadData and the batch_task tool use them.
 */

// The sandbox providers accept the same alphabet, so an id that passes here can always get a sandbox.
const SAFE_ID = /^[A-Za-z0-9_-]{1,128}$/;

export type ThreadDataErrorCode = "thread_id_required" | "invalid_thread_id" | "invalid_user_id";

export class ThreadDataError extends DeerflowError {
  declare readonly code: ThreadDataErrorCode;

  constructor(code: ThreadDataErrorCode, message: string) {
    super(code, message);
    this.name = "ThreadDataError";
  }
}

function requireSafeId(value: unknown, field: "thread_id" | "user_id"): string {
  if (typeof value === "string" && SAFE_ID.test(value)) return value;
  throw new ThreadDataError(
    field === "thread_id" ? "invalid_thread_id" : "invalid_user_id",
    `Invalid ${field} ${JSON.stringify(value) ?? String(value)}: it names a folder, so use 1-128 letters, digits, "_" or "-" ` +
      `(no "/", no "..", not empty). Gateway-assigned ids such as UUIDs already fit.`,
  );
}

/** The thread id of a run: caller context first, then the run's own thread. */
export function resolveThreadId(runtime: AgentRuntime): string {
  const fromContext = runtime.context["thread_id"];
  const threadId = fromContext ?? runtime.threadId;
  if (threadId === undefined || threadId === null) throw new ThreadDataError("thread_id_required", "Thread ID is required");
  return requireSafeId(threadId, "thread_id");
}

/** The user whose isolation scope a run's files live in; anonymous runs share "default". */
export function resolveUserId(runtime: AgentRuntime): string {
  const userId = runtime.context["user_id"];
  return userId === undefined || userId === null ? DEFAULT_USER_ID : requireSafeId(userId, "user_id");
}

import type { AgentRuntime } from "./types.ts";

/**
 * Whose run this is: the one place a middleware or tool asks for the run's thread and user.
 *
 * The thread: the run's own thread (`runtime.threadId`, which the engine takes from the run's
 * `configurable.thread_id`, set by the gateway) first; the caller's `context.thread_id` only when
 * the run has no thread of its own (an embedded caller that passes one in context). An empty
 * string counts as absent. The user: `context.user_id` (the gateway puts the authenticated user
 * there), else DEFAULT_USER_ID, the scope anonymous runs share.
 */

/** The user scope of a run that names no user: anonymous runs share it. */
export const DEFAULT_USER_ID = "default";

/** The run's thread id, or undefined when neither the run nor its caller names one. */
export function runThreadId(runtime: Pick<AgentRuntime, "threadId" | "context">): string | undefined {
  if (typeof runtime.threadId === "string" && runtime.threadId !== "") return runtime.threadId;
  const fromContext = runtime.context["thread_id"];
  return typeof fromContext === "string" && fromContext !== "" ? fromContext : undefined;
}

/** The run's user id: the caller context's `user_id`, else DEFAULT_USER_ID. */
export function runUserId(runtime: Pick<AgentRuntime, "context">): string {
  const userId = runtime.context["user_id"];
  return typeof userId === "string" && userId !== "" ? userId : DEFAULT_USER_ID;
}

/**
 * The key under which a middleware keeps what a thread's runs learn: the thread, or the run itself
 * when it has no thread (such a run has no history to continue, so it must not meet another's).
 */
export function threadHistoryKey(runtime: Pick<AgentRuntime, "threadId" | "context" | "runId">): string {
  const threadId = runThreadId(runtime);
  return threadId !== undefined ? `thread:${threadId}` : `run:${runtime.runId}`;
}

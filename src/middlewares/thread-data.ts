import { HumanMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { DeerflowError } from "../core/errors.ts";
import { SCOPE_ID_MAX, idFormatHint, isScopeId } from "../core/ids.ts";
import { runThreadId, runUserId } from "../engine/run-identity.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../engine/types.ts";
import { VIRTUAL_DIRS } from "../ports/sandbox.ts";
import type { ThreadDataState } from "../state/thread-state.ts";
import { parseMiddlewareConfig } from "./config.ts";

export const THREAD_DATA_NAME = "ThreadData";
const USER_INPUT_NAME = "user-input";

export const ThreadDataConfigSchema = v.strictObject({
  /**
   * Compute the thread's paths without creating anything. Storage here is key-value, where folders
   * exist implicitly, so `false` only matters to ports that materialise folders eagerly.
   */
  lazy_init: v.optional(v.boolean(), true),
});
export interface ThreadDataConfig {
  lazy_init: boolean;
}
type _ThreadDataConfigMatches = Assert<SameType<ThreadDataConfig, v.InferOutput<typeof ThreadDataConfigSchema>>>;
export const THREAD_DATA_DEFAULTS: ThreadDataConfig = Object.freeze({ lazy_init: true });

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

/**
 * The thread's user-data folders as state records them: the virtual paths every sandbox serves
 * (`/mnt/user-data/...`). State is what GET /threads/{id}/state answers, so a host folder (the
 * storage base, a home directory) never enters it; each sandbox maps the virtual paths to its own
 * storage for the run's user and thread (the local one to `<root>/users/<user>/threads/<thread>`).
 */
export function threadDataPaths(): ThreadDataState {
  return { workspace_path: VIRTUAL_DIRS.workspace, uploads_path: VIRTUAL_DIRS.uploads, outputs_path: VIRTUAL_DIRS.outputs };
}

/**
 * Records the thread's data paths in state and stamps the turn's user message with the run that
 * answered it (run_id, timestamp), so history can be attributed to runs.
 */
export function createThreadDataMiddleware(config?: Partial<ThreadDataConfig>): AgentMiddleware {
  const { lazy_init } = parseMiddlewareConfig(
    ThreadDataConfigSchema,
    config,
    THREAD_DATA_NAME,
    "Fix this key (lazy_init takes true or false).",
  );
  return {
    name: THREAD_DATA_NAME,
    beforeAgent(state: AgentState, runtime: AgentRuntime): HookResult {
      // Both still checked: a run without a usable thread or user id fails here, before any tool.
      resolveThreadId(runtime);
      resolveUserId(runtime);
      const thread_data = threadDataPaths();

      const last = state.messages.at(-1);
      // Re-emitting under the same id replaces the message in place; without an id the reducer
      // would append a duplicate instead.
      if (last === undefined || last.type !== "human" || last.id === undefined) return { thread_data };
      const stamped = new HumanMessage({
        content: last.content,
        id: last.id,
        name: last.name || USER_INPUT_NAME,
        additional_kwargs: {
          ...last.additional_kwargs,
          run_id: runtime.runId,
          timestamp: new Date(runtime.services.clock.now()).toISOString(),
        },
        ...(last.response_metadata && Object.keys(last.response_metadata).length > 0
          ? { response_metadata: last.response_metadata }
          : {}),
      });
      return { thread_data, messages: [stamped] };
    },
    releasePolicyParameters() {
      return { lazy_init };
    },
  };
}

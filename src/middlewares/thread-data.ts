import { HumanMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { DeerflowError } from "../core/errors.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../engine/types.ts";
import { threadDataPaths } from "../state/thread-data.ts";

export { threadDataPaths } from "../state/thread-data.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { ThreadDataError, resolveThreadId, resolveUserId } from "../engine/scope-ids.ts";

export { ThreadDataError, resolveThreadId, resolveUserId, type ThreadDataErrorCode } from "../engine/scope-ids.ts";

export const THREAD_DATA_NAME = "ThreadData";
const USER_INPUT_NAME = "user-input";


/**
 * No keys. Upstream's `lazy_init` (create the thread's folders at run start, or on first use) is
 * not offered: storage here is key-value, where folders exist without being created, and a sandbox
 * that needs real folders makes them when it is acquired, so the key could change nothing. The
 * spec's "creates per-thread directories under the user's isolation scope" is met by that layout:
 * test/portable/middlewares/thread-data-folders.test.ts shows it for both sandboxes.
 */
export const ThreadDataConfigSchema = v.strictObject({});
export interface ThreadDataConfig {}
type _ThreadDataConfigMatches = Assert<SameType<ThreadDataConfig, v.InferOutput<typeof ThreadDataConfigSchema>>>;


/**
 * Records the thread's data paths in state and stamps the turn's user message with the run that
 * answered it (run_id, timestamp), so history can be attributed to runs.
 */
export function createThreadDataMiddleware(config?: Partial<ThreadDataConfig>): AgentMiddleware {
  parseMiddlewareConfig(
    ThreadDataConfigSchema,
    config,
    THREAD_DATA_NAME,
    "ThreadData takes no keys (lazy_init is not offered: the thread's folders exist without being created); remove it.",
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
  };
}

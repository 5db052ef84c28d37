import { AIMessage, RemoveMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult, ModelHandler, ModelRequest } from "../../engine/types.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { ERROR_FALLBACK_KEY, failRunOnModelError } from "../llm-error-handling/index.ts";
import { hiddenHumanMessage } from "../messages.ts";
import { hasToolCallIntent, hasVisibleContent, isAIMessage, toolResultInCurrentTurn } from "./messages.ts";

/*
 * Some providers answer a finished tool run with an empty message. Left alone, the run ends as a
 * silent "success" the user sees as nothing. The empty reply is dropped and the model asked once
 * more with a hidden nudge; if it is empty again, the reply becomes a visible error the run worker
 * ends the run on.
 */

export const TERMINAL_RESPONSE_NAME = "TerminalResponse";
export const TERMINAL_RESPONSE_RECOVERY_NAME = "terminal_response_recovery";

export const TERMINAL_RESPONSE_RECOVERY_PROMPT =
  "<system_reminder>\n" +
  "Your previous response after the tool execution was empty. Review the tool results " +
  "already present in the conversation and provide a concise, user-visible final response. " +
  "Do not call another tool unless it is strictly necessary.\n" +
  "</system_reminder>";

export const TERMINAL_RESPONSE_FALLBACK_CONTENT =
  "The model completed the tool run but returned no final response, including after one automatic retry. Please try again or use a different model.";

export const TERMINAL_RESPONSE_ERROR_REASON = "Model returned an empty terminal response after one retry";

// canonicalHash of the two texts above, precomputed because a declaration is synchronous and
// crypto.subtle is not; a test recomputes both so an edit to either text cannot go unnoticed.
export const TERMINAL_RESPONSE_RECOVERY_PROMPT_HASH = "7bf2cb1e1f3700f45f737749d269e055dd86cd5a484297eefbacb09b83b45ba9";
export const TERMINAL_RESPONSE_FALLBACK_CONTENT_HASH = "450e7b5af91a5a8e1604d9f0138709cd5dfd8502f4741a57720edaa265c5fa37";

/** The budget is one retry per run, even when the retried reply calls another tool. */
const POST_TOOL_EMPTY_RETRY_LIMIT = 1;

const RETRIES_KEY = "terminal_response.retries";
const PENDING_PROMPT_KEY = "terminal_response.pending_prompt";

export const TerminalResponseConfigSchema = v.strictObject({});
export interface TerminalResponseConfig {}
type _TerminalResponseConfigMatches = Assert<SameType<TerminalResponseConfig, v.InferOutput<typeof TerminalResponseConfigSchema>>>;

function clearRunState(runtime: AgentRuntime): void {
  runtime.scope.delete(RETRIES_KEY);
  runtime.scope.delete(PENDING_PROMPT_KEY);
}

/** The empty reply rewritten in place (same id) as a visible error, marked as LLMErrorHandling marks its fallbacks. */
function fallbackFor(message: AIMessage): AIMessage {
  return new AIMessage({
    content: TERMINAL_RESPONSE_FALLBACK_CONTENT,
    ...(message.id !== undefined ? { id: message.id } : {}),
    ...(message.name !== undefined ? { name: message.name } : {}),
    additional_kwargs: {
      ...message.additional_kwargs,
      [ERROR_FALLBACK_KEY]: true,
      error_reason: TERMINAL_RESPONSE_ERROR_REASON,
    },
    response_metadata: { ...message.response_metadata },
    ...(message.usage_metadata !== undefined ? { usage_metadata: message.usage_metadata } : {}),
  });
}

/** Retries one empty post-tool reply with a hidden recovery prompt, then persists a visible error fallback. */
export function createTerminalResponseMiddleware(config?: Partial<TerminalResponseConfig>): AgentMiddleware {
  parseMiddlewareConfig(TerminalResponseConfigSchema, config, TERMINAL_RESPONSE_NAME);
  return {
    name: TERMINAL_RESPONSE_NAME,
    beforeAgent(_state: AgentState, runtime: AgentRuntime): HookResult {
      // A resumed invocation starts with a fresh budget; the jump back to the model inside one
      // invocation does not pass through here, so it cannot refresh the budget.
      clearRunState(runtime);
    },
    afterModel: {
      canJumpTo: ["model"],
      hook(state: AgentState, runtime: AgentRuntime): HookResult {
        const last = state.messages.at(-1);
        if (!isAIMessage(last)) return;
        if (hasVisibleContent(last) || hasToolCallIntent(last, { includeFinishReason: true })) return;
        if (!toolResultInCurrentTurn(state.messages)) return;

        const retries = runtime.scope.get<number>(RETRIES_KEY) ?? 0;
        if (retries < POST_TOOL_EMPTY_RETRY_LIMIT) {
          runtime.scope.set(RETRIES_KEY, retries + 1);
          runtime.scope.set(PENDING_PROMPT_KEY, true);
          // Removed now, so a successful retry leaves no empty reply in the checkpoint or in later
          // requests (the retry's reply carries a new id).
          return { messages: last.id ? [new RemoveMessage({ id: last.id })] : [], jumpTo: "model" };
        }
        // The run failed as a provider failure does (same error name and generic message as before).
        failRunOnModelError(runtime);
        return { messages: [fallbackFor(last)] };
      },
    },
    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      const { scope } = request.runtime;
      if (scope.get<boolean>(PENDING_PROMPT_KEY) !== true) return handler(request);
      // Request-only: the nudge never enters state, so history shows only what the user said.
      const reminder = hiddenHumanMessage(TERMINAL_RESPONSE_RECOVERY_NAME, TERMINAL_RESPONSE_RECOVERY_PROMPT);
      const response = await handler({ ...request, messages: [...request.messages, reminder] });
      // Consumed only once answered: LLMErrorHandling sits outside and re-enters this wrapper on a
      // retry, and the retried attempt must carry the nudge too.
      scope.delete(PENDING_PROMPT_KEY);
      return response;
    },
    afterAgent(_state: AgentState, runtime: AgentRuntime): HookResult {
      clearRunState(runtime);
    },
    releasePolicyParameters() {
      return {
        post_tool_empty_retry_limit: POST_TOOL_EMPTY_RETRY_LIMIT,
        recovery_prompt_hash: TERMINAL_RESPONSE_RECOVERY_PROMPT_HASH,
        fallback_content_hash: TERMINAL_RESPONSE_FALLBACK_CONTENT_HASH,
      };
    },
  };
}

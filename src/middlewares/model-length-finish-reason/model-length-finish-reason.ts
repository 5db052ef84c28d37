import type { AIMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../../engine/types.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { defaultLengthDetectors, describeDetector, type FinishReasonDetector, type FinishReasonHit } from "./detectors.ts";
import { recordStopReason } from "../stop-reason.ts";
import { hasToolCallIntent, hasVisibleContent, isAIMessage } from "../terminal-response/messages.ts";

/*
 * A provider that stopped because the output budget ran out still returns text, and the run would
 * look like a clean finish. The truncation is recorded as the run's stop reason instead; the text
 * is kept exactly as it came (never reparsed, even when it looks like a cut-off tool call), and a
 * reply that still wants a tool, or has nothing visible, is left to the guards that own those cases.
 */

export const MODEL_LENGTH_FINISH_REASON_NAME = "ModelLengthFinishReason";
export const MODEL_LENGTH_CAPPED_STOP_REASON = "model_length_capped";

export const ModelLengthFinishReasonConfigSchema = v.strictObject({});
export interface ModelLengthFinishReasonConfig {}
type _ModelLengthFinishReasonConfigMatches = Assert<SameType<ModelLengthFinishReasonConfig, v.InferOutput<typeof ModelLengthFinishReasonConfigSchema>>>;

export interface ModelLengthFinishReasonDeps {
  /** Replaces the built-in OpenAI / Anthropic / Gemini detectors; tried in order, first hit wins. */
  readonly detectors?: readonly FinishReasonDetector[];
}

/** The first detector hit; a detector that throws counts as no match, so it can never break a run. */
export function detectFirst(detectors: readonly FinishReasonDetector[], message: AIMessage, runtime?: AgentRuntime): FinishReasonHit | null {
  for (const detector of detectors) {
    try {
      const hit = detector.detect(message);
      if (hit) return hit;
    } catch (error) {
      if (isGraphBubbleUp(error) || runtime?.signal?.aborted) throw error;
    }
  }
  return null;
}

/** Marks a run `model_length_capped` when the provider cut the final answer at its output limit. */
export function createModelLengthFinishReasonMiddleware(
  config?: Partial<ModelLengthFinishReasonConfig>,
  deps: ModelLengthFinishReasonDeps = {},
): AgentMiddleware {
  parseMiddlewareConfig(ModelLengthFinishReasonConfigSchema, config, MODEL_LENGTH_FINISH_REASON_NAME);
  const detectors = deps.detectors && deps.detectors.length > 0 ? [...deps.detectors] : defaultLengthDetectors();
  return {
    name: MODEL_LENGTH_FINISH_REASON_NAME,
    afterModel(state: AgentState, runtime: AgentRuntime): HookResult {
      const last = state.messages.at(-1);
      if (!isAIMessage(last)) return;
      if (hasToolCallIntent(last) || !hasVisibleContent(last)) return;
      if (!detectFirst(detectors, last, runtime)) return;
      // First stop wins: a loop or token cap recorded earlier in the run says more than this.
      recordStopReason(runtime, MODEL_LENGTH_CAPPED_STOP_REASON);
    },
    releasePolicyParameters() {
      return { stop_reason: MODEL_LENGTH_CAPPED_STOP_REASON, detectors: detectors.map(describeDetector) };
    },
  };
}

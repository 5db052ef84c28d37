import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { ContextCompactionObserver } from "../extension-api/index.ts";
import type { AgentMiddleware } from "../engine/types.ts";
import { createSummarizationMiddleware, type BeforeSummarizationHook } from "../middlewares/summarization/index.ts";
import type { SystemModelCallHook } from "../middlewares/system-model-call.ts";
import type { LeadConfig } from "./app-config.ts";

export interface SummarizationMemberDeps {
  readonly model: BaseChatModel;
  readonly summaryModel?: BaseChatModel;
  readonly contextWindow?: number;
  readonly compactionObservers?: readonly ContextCompactionObserver[];
  readonly observeSystemCall?: SystemModelCallHook;
}

/**
 * Summarization as both chains build it: the configured summary model, falling back to the run's
 * own model when they differ; the lead adds its memory flush before compaction, subagents do not.
 */
export function summarizationMember(
  config: NonNullable<LeadConfig["summarization"]>,
  deps: SummarizationMemberDeps,
  beforeSummarization: readonly BeforeSummarizationHook[] = [],
): AgentMiddleware {
  return createSummarizationMiddleware(config, {
    model: deps.summaryModel ?? deps.model,
    ...(deps.summaryModel && deps.summaryModel !== deps.model ? { fallbackModel: deps.model } : {}),
    ...(deps.contextWindow ? { contextWindow: deps.contextWindow } : {}),
    observers: deps.compactionObservers ?? [],
    ...(deps.observeSystemCall ? { observeSystemCall: deps.observeSystemCall } : {}),
    ...(beforeSummarization.length > 0 ? { beforeSummarization } : {}),
  });
}

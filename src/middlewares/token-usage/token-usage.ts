import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type { AgentMiddleware, AgentState, HookResult } from "../../engine/types.ts";
import { canonicalJson } from "../../extension-api/index.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { latestRealUserIndex } from "../messages.ts";
import { ATTRIBUTION_VERSION, buildAttribution } from "./attribution.ts";
import { SUBAGENT_TOKEN_USAGE_KEY } from "../../tools/subagent-result.ts";

// The key a delegation tool reports its subagent's usage under is part of the task result contract.
export { SUBAGENT_TOKEN_USAGE_KEY };

/*
 * Stamps each AI step with what its tokens were spent on, and folds a subagent's token usage (the
 * task tool reports it on its terminal ToolMessage) into the AI message that dispatched it, so a
 * step's cost includes the delegated work.
 */

export const TOKEN_USAGE_NAME = "TokenUsage";

export const TOKEN_USAGE_ATTRIBUTION_KEY = "token_usage_attribution";
export const SUBAGENT_TOKEN_USAGE_ATTRIBUTED_KEY = "subagent_token_usage_attributed";

export const TokenUsageConfigSchema = v.strictObject({
  enabled: v.optional(v.boolean(), true),
});
export interface TokenUsageConfig {
  enabled: boolean;
}
type _TokenUsageConfigMatches = Assert<SameType<TokenUsageConfig, v.InferOutput<typeof TokenUsageConfigSchema>>>;
export type TokenUsageConfigInput = Partial<TokenUsageConfig>;
type _TokenUsageConfigInputMatches = Assert<SameType<TokenUsageConfigInput, v.InferInput<typeof TokenUsageConfigSchema>>>;

export interface TokenUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

const USAGE_KEYS = ["input_tokens", "output_tokens", "total_tokens"] as const;

/**
 * A cumulative usage record in the contract shape, or null. All three counts must be
 * non-negative integers; anything else stays unattributed (and so retryable) rather than guessed.
 */
export function normalizeTokenUsage(value: unknown): TokenUsage | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const usage = {} as TokenUsage;
  for (const key of USAGE_KEYS) {
    const amount = (value as Record<string, unknown>)[key];
    if (typeof amount !== "number" || !Number.isInteger(amount) || amount < 0) return null;
    usage[key] = amount;
  }
  return usage;
}

function unattributedSubagentUsage(message: ToolMessage): TokenUsage | null {
  const kwargs = message.additional_kwargs ?? {};
  if (kwargs[SUBAGENT_TOKEN_USAGE_ATTRIBUTED_KEY] === true) return null;
  return normalizeTokenUsage(kwargs[SUBAGENT_TOKEN_USAGE_KEY]);
}

function copyAi(message: AIMessage, patch: { usage_metadata?: AIMessage["usage_metadata"]; additional_kwargs?: Record<string, unknown> }): AIMessage {
  return new AIMessage({
    content: message.content,
    id: message.id,
    name: message.name,
    tool_calls: message.tool_calls,
    invalid_tool_calls: message.invalid_tool_calls,
    additional_kwargs: patch.additional_kwargs ?? message.additional_kwargs,
    response_metadata: message.response_metadata,
    usage_metadata: patch.usage_metadata ?? message.usage_metadata,
  });
}

function markAttributed(message: ToolMessage): ToolMessage {
  return new ToolMessage({
    content: message.content,
    id: message.id,
    name: message.name,
    tool_call_id: message.tool_call_id,
    status: message.status,
    artifact: message.artifact,
    additional_kwargs: { ...message.additional_kwargs, [SUBAGENT_TOKEN_USAGE_ATTRIBUTED_KEY]: true },
    response_metadata: message.response_metadata,
  });
}

function dispatches(message: BaseMessage, toolCallId: string): message is AIMessage {
  return AIMessage.isInstance(message) && (message.tool_calls ?? []).some((call) => call.id === toolCallId);
}

function sameAttribution(existing: unknown, next: unknown): boolean {
  try {
    return existing !== undefined && canonicalJson(existing) === canonicalJson(next);
  } catch {
    return false;
  }
}

/**
 * The messages this step rewrites, keyed by position. Subagent usage is read only from tool results
 * of the current turn (after the latest real user message) and is credited to the nearest earlier
 * AI message that made that call: by position, not by id, so a provider reusing tool-call ids in
 * another run cannot steer it. The result is marked in the same update, which makes a replay of
 * this step a no-op.
 */
export function tokenUsageUpdates(state: AgentState): Map<number, BaseMessage> {
  const messages = state.messages ?? [];
  const updates = new Map<number, BaseMessage>();
  const turnStart = latestRealUserIndex(messages) + 1;

  for (let index = turnStart; index < messages.length; index++) {
    const result = messages[index]!;
    if (!ToolMessage.isInstance(result) || !result.tool_call_id) continue;
    const usage = unattributedSubagentUsage(result);
    if (usage === null) continue;
    for (let d = index - 1; d >= 0; d--) {
      const candidate = messages[d]!;
      if (!dispatches(candidate, result.tool_call_id)) continue;
      const current = (updates.get(d) as AIMessage | undefined) ?? candidate;
      const previous = current.usage_metadata;
      const merged = {
        ...previous,
        input_tokens: (previous?.input_tokens ?? 0) + usage.input_tokens,
        output_tokens: (previous?.output_tokens ?? 0) + usage.output_tokens,
        total_tokens: (previous?.total_tokens ?? 0) + usage.total_tokens,
      };
      updates.set(d, copyAi(current, { usage_metadata: merged }));
      updates.set(index, markAttributed(result));
      break;
    }
  }

  const lastIndex = messages.length - 1;
  const last = messages[lastIndex];
  if (last !== undefined && AIMessage.isInstance(last)) {
    const base = (updates.get(lastIndex) as AIMessage | undefined) ?? last;
    const attribution = buildAttribution(base, state.todos ?? []);
    if (!sameAttribution(base.additional_kwargs?.[TOKEN_USAGE_ATTRIBUTION_KEY], attribution)) {
      updates.set(lastIndex, copyAi(base, { additional_kwargs: { ...base.additional_kwargs, [TOKEN_USAGE_ATTRIBUTION_KEY]: attribution } }));
    }
  }
  return updates;
}

/** Records what each AI step's tokens were spent on and credits subagent usage to its dispatch. */
export function createTokenUsageMiddleware(config?: TokenUsageConfigInput): AgentMiddleware {
  const { enabled } = parseMiddlewareConfig(TokenUsageConfigSchema, config, TOKEN_USAGE_NAME);
  return {
    name: TOKEN_USAGE_NAME,
    afterModel(state: AgentState): HookResult {
      if (!enabled) return undefined;
      const updates = tokenUsageUpdates(state);
      if (updates.size === 0) return undefined;
      // Same ids as the stored messages, so the reducer replaces them in place.
      return { messages: [...updates.keys()].sort((a, b) => a - b).map((index) => updates.get(index)!) };
    },
    releasePolicyParameters() {
      return { enabled, attribution_version: ATTRIBUTION_VERSION };
    },
  };
}

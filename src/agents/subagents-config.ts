import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { DeerflowError } from "../core/errors.ts";
import {
  DEFAULT_MAX_CONCURRENT_SUBAGENTS,
  MAX_CONCURRENT_SUBAGENTS,
  MaxTotalPerRunSchema,
} from "../middlewares/subagent-limit.ts";
import type { TokenBudgetConfigInput } from "../middlewares/token-budget.ts";
import { BatchTaskConfigSchema, type BatchTaskConfig, type BatchTaskConfigInput } from "../tools/batch-task.ts";

// The `subagents` section of config.yaml: its schema, types and defaults. app-config.ts (the whole
// lead config) and subagent-chain.ts (which builds a subagent's chain from it) both read it here.

/** A subagent run's token ceiling without compaction: deep research legitimately accumulates past 1M input. */
export const SUBAGENT_TOKEN_BUDGET_MAX_TOKENS = 2_000_000;
/** The tighter ceiling once summarization keeps the running context from growing unbounded. */
export const SUBAGENT_TOKEN_BUDGET_MAX_TOKENS_WITH_SUMMARIZATION = 1_000_000;
export const SUBAGENT_TOKEN_BUDGET_WARN_THRESHOLD = 0.7;

const wholeNumber = v.pipe(v.number(), v.integer("expected a whole number"));
const positive = v.pipe(wholeNumber, v.minValue(1, "expected at least 1"));
const SUBAGENT_TYPE_NAME = /^[A-Za-z0-9_-]+$/;

export const SubagentTypeConfigSchema = v.strictObject({
  /** When the lead should delegate to this type (shown in the task tool's description). */
  description: v.pipe(v.string(), v.nonEmpty("expected a description")),
  system_prompt: v.pipe(v.string(), v.nonEmpty("expected a system prompt")),
  /** Tool allowlist; absent inherits the parent's tools. */
  tools: v.optional(v.array(v.string())),
  /** A model name from `models`, or "inherit" for the parent's model. */
  model: v.optional(v.pipe(v.string(), v.nonEmpty("expected a model name or \"inherit\"")), "inherit"),
  max_turns: v.optional(positive, 50),
  timeout_seconds: v.optional(positive, 900),
});
export interface SubagentTypeConfig {
  description: string;
  system_prompt: string;
  tools?: string[];
  model: string;
  max_turns: number;
  timeout_seconds: number;
}
type _SubagentTypeConfigMatches = Assert<SameType<SubagentTypeConfig, v.InferOutput<typeof SubagentTypeConfigSchema>>>;

/**
 * A subagent's token budget. Unset keys fall back to the subagent defaults (on, 2M or 1M with
 * summarization, warn at 0.7), not to the lead's token_budget defaults: writing only `max_tokens`
 * must not silently switch the backstop off.
 */
export const SubagentTokenBudgetConfigSchema = v.strictObject({
  enabled: v.optional(v.boolean()),
  max_tokens: v.optional(v.pipe(wholeNumber, v.minValue(1000, "expected at least 1000"))),
  warn_threshold: v.optional(v.pipe(v.number(), v.minValue(0, "expected a fraction from 0 to 1"), v.maxValue(1, "expected a fraction from 0 to 1"))),
});

/** The `subagents` section of config.yaml. */
export const SubagentsConfigSchema = v.strictObject({
  /** Ordinary task delegations one lead run may start (SubagentLimit). */
  max_total_per_run: MaxTotalPerRunSchema,
  /** Task calls kept from one lead response (SubagentLimit clamps it to 1-64 and the runtime's maximum). */
  max_concurrent: v.optional(positive, DEFAULT_MAX_CONCURRENT_SUBAGENTS),
  token_budget: v.optional(SubagentTokenBudgetConfigSchema, {}),
  /** Custom subagent types, by name. */
  types: v.optional(
    v.record(v.pipe(v.string(), v.regex(SUBAGENT_TYPE_NAME, "expected a name of letters, digits, _ or -")), SubagentTypeConfigSchema),
    {},
  ),
  /** The durable batch mode (`batch_task`), off unless enabled. */
  batch: v.optional(BatchTaskConfigSchema),
});
export interface SubagentTokenBudgetConfig {
  enabled?: boolean;
  max_tokens?: number;
  warn_threshold?: number;
}
type _SubagentTokenBudgetConfigMatches = Assert<SameType<SubagentTokenBudgetConfig, v.InferOutput<typeof SubagentTokenBudgetConfigSchema>>>;
export interface SubagentsConfig {
  max_total_per_run: number;
  max_concurrent: number;
  token_budget: SubagentTokenBudgetConfig;
  types: Record<string, SubagentTypeConfig>;
  batch?: BatchTaskConfig;
}
type _SubagentsConfigMatches = Assert<SameType<SubagentsConfig, v.InferOutput<typeof SubagentsConfigSchema>>>;
export interface SubagentsConfigInput {
  max_total_per_run?: number;
  max_concurrent?: number;
  token_budget?: SubagentTokenBudgetConfig;
  types?: Record<string, { description: string; system_prompt: string; tools?: string[]; model?: string; max_turns?: number; timeout_seconds?: number }>;
  batch?: BatchTaskConfigInput;
}
type _SubagentsConfigInputMatches = Assert<SameType<SubagentsConfigInput, v.InferInput<typeof SubagentsConfigSchema>>>;

/**
 * The `subagent_runtime` section of config.yaml: startup settings of the runtime that runs subagents.
 * `max_running` is the most subagents that run at once; SubagentLimit resolves every per-response
 * concurrency (configured or a run's override) against it and the 1-64 safety range.
 */
export const SubagentRuntimeConfigSchema = v.strictObject({
  max_running: v.optional(v.pipe(positive, v.maxValue(MAX_CONCURRENT_SUBAGENTS, `expected at most ${MAX_CONCURRENT_SUBAGENTS}`))),
});
export interface SubagentRuntimeConfig {
  max_running?: number;
}
type _SubagentRuntimeConfigMatches = Assert<SameType<SubagentRuntimeConfig, v.InferOutput<typeof SubagentRuntimeConfigSchema>>>;

/** The `subagents` section validated; the first issue fails with code `invalid_subagents_config` and its path. */
export function parseSubagentsConfig(input: unknown): SubagentsConfig {
  const result = v.safeParse(SubagentsConfigSchema, input ?? {});
  if (result.success) return result.output;
  const issue = result.issues[0];
  const path = v.getDotPath(issue);
  throw new DeerflowError("invalid_subagents_config", `subagents${path ? `.${path}` : ""}: ${issue.message}. Fix or remove this key in the subagents section of config.yaml.`);
}

/** The token budget a subagent run gets: on by default, its ceiling coupled to whether summarization is on. */
export function subagentTokenBudget(
  budget: SubagentTokenBudgetConfig | undefined,
  summarizationEnabled: boolean,
): TokenBudgetConfigInput {
  const defaultMax = summarizationEnabled ? SUBAGENT_TOKEN_BUDGET_MAX_TOKENS_WITH_SUMMARIZATION : SUBAGENT_TOKEN_BUDGET_MAX_TOKENS;
  const warn = budget?.warn_threshold ?? SUBAGENT_TOKEN_BUDGET_WARN_THRESHOLD;
  return {
    enabled: budget?.enabled ?? true,
    max_tokens: budget?.max_tokens ?? defaultMax,
    warn_threshold: warn,
  };
}

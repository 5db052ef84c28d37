import { BatchTaskConfigSchema, type BatchTaskConfig, type BatchTaskConfigInput } from "../tools/batch-task.ts";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import type { ContextCompactionObserver } from "../extension-api/index.ts";
import type { AuthorizationProvider, GuardrailProvider } from "../authz/index.ts";
import { summarizationMember } from "./summarization-member.ts";
import { DeerflowError } from "../core/errors.ts";
import type { AgentMiddleware } from "../engine/types.ts";
import { orderingViolations } from "../extensions/ordering.ts";
import { createAuthorizationMiddleware } from "../middlewares/authorization.ts";
import { createDanglingToolCallMiddleware } from "../middlewares/dangling-tool-call.ts";
import { createDeferredToolFilterMiddleware } from "../middlewares/deferred-tool-filter.ts";
import { createDurableContextMiddleware } from "../middlewares/durable-context/index.ts";
import { createGuardrailMiddleware } from "../middlewares/guardrail/index.ts";
import { createInputSanitizationMiddleware } from "../middlewares/input-sanitization.ts";
import { createLLMErrorHandlingMiddleware } from "../middlewares/llm-error-handling/index.ts";
import { createLoopDetectionMiddleware } from "../middlewares/loop-detection/index.ts";
import { createMcpRoutingMiddleware } from "../middlewares/mcp-routing.ts";
import { createReadBeforeWriteMiddleware } from "../middlewares/read-before-write.ts";
import { createSafetyFinishReasonMiddleware } from "../middlewares/safety-finish-reason/index.ts";
import { createSandboxAuditMiddleware } from "../middlewares/sandbox-audit/index.ts";
import { createSandboxMiddleware } from "../middlewares/sandbox.ts";
import type { SkillActivationConfig } from "../middlewares/skills/index.ts";
import { createSkillMiddlewares } from "../middlewares/skills/index.ts";
import { createSubagentDateContextMiddleware } from "../middlewares/subagent-date-context.ts";
import {
  DEFAULT_MAX_CONCURRENT_SUBAGENTS,
  MaxTotalPerRunSchema,
} from "../middlewares/subagent-limit.ts";
import type { SystemModelCallHook } from "../middlewares/system-model-call.ts";
import { createSystemMessageCoalescingMiddleware } from "../middlewares/system-message-coalescing.ts";
import { createThreadDataMiddleware } from "../middlewares/thread-data.ts";
import { createTokenBudgetMiddleware, type TokenBudgetConfigInput } from "../middlewares/token-budget.ts";
import { createToolErrorHandlingMiddleware } from "../middlewares/tool-error-handling/index.ts";
import { createToolOutputBudgetMiddleware } from "../middlewares/tool-output/index.ts";
import { createToolProgressMiddleware } from "../middlewares/tool-progress/index.ts";
import { createToolReceiptMiddleware } from "../middlewares/tool-receipt/index.ts";
import { createToolResultSanitizationMiddleware } from "../middlewares/tool-result-sanitization.ts";
import { createViewImageMiddleware } from "../middlewares/view-image.ts";
import type { SkillRegistry } from "../skills/registry.ts";
import type { SandboxAuthorizer } from "../tools/sandbox-tools.ts";
import type { DeferredToolSetup } from "../tools/tool-search.ts";
import type { LeadConfig } from "./app-config.ts";
import { SUBAGENT_EXTENSION_TAIL, placeExtensionMiddlewares } from "./configured-middlewares.ts";

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

export type SubagentChainConfig = LeadConfig & { readonly subagents?: SubagentsConfigInput | null };

/** What a subagent chain needs besides config; one set per task run (instances are fresh per run). */
export interface SubagentChainDeps {
  /** The subagent's model (the summary model's fallback). */
  readonly model: BaseChatModel;
  readonly supportsVision?: boolean;
  readonly contextWindow?: number;
  readonly summaryModel?: BaseChatModel;
  readonly skillRegistry: SkillRegistry;
  /** The subagent type's skill allowlist (`available_skills`); absent: every enabled skill. */
  readonly skills?: SkillActivationConfig["available_skills"];
  readonly compactionObservers?: readonly ContextCompactionObserver[];
  readonly customMiddlewares?: readonly AgentMiddleware[];
  readonly configuredMiddlewares?: readonly AgentMiddleware[];
  readonly authorizationProvider?: AuthorizationProvider | null;
  readonly guardrailProvider?: GuardrailProvider | null;
  readonly sandboxAuthorizer?: SandboxAuthorizer;
  readonly deferred?: DeferredToolSetup;
  readonly observeSystemCall?: SystemModelCallHook;
}

/**
 * The chain a delegated subagent runs, outer to inner: the lead's shared base without Uploads and
 * without the lead-only members (DynamicContext, Todo, TokenUsage, Title, Memory, SubagentLimit,
 * TerminalResponse, ModelLengthFinishReason, Clarification), then its own skill pair, the
 * optional image/deferred-tool/loop members, a token budget that is on by default, extension
 * middlewares, safety, durable context, summarization, the date reminder and the coalescer.
 */
export function buildSubagentRuntimeMiddlewares(config: SubagentChainConfig, deps: SubagentChainDeps): AgentMiddleware[] {
  const subagents = parseSubagentsConfig(config.subagents);
  const authorizer = deps.sandboxAuthorizer ? { authorizer: deps.sandboxAuthorizer } : {};
  const deferred = deps.deferred && deps.deferred.deferredNames.length > 0 && deps.deferred.catalogHash ? deps.deferred : undefined;
  const summarizationEnabled = config.summarization?.enabled === true;
  const skillFileReadTools = config.summarization?.skill_file_read_tool_names
    ? { skill_file_read_tool_names: config.summarization.skill_file_read_tool_names }
    : {};
  const chain: AgentMiddleware[] = [
    createInputSanitizationMiddleware(),
    createToolOutputBudgetMiddleware(config.tool_output ?? {}, authorizer),
    createToolResultSanitizationMiddleware(),
    createThreadDataMiddleware(),
    // The sandbox belongs to the lead's thread: a finishing subagent must leave it acquired.
    createSandboxMiddleware(
      { ...(config.sandbox.lazy_init === undefined ? {} : { lazy_init: config.sandbox.lazy_init }) },
      { ...authorizer, releaseOnExit: false },
    ),
    createDanglingToolCallMiddleware(),
    createLLMErrorHandlingMiddleware({
      ...(config.circuit_breaker ? { circuit_breaker: config.circuit_breaker } : {}),
      ...(config.llm_call ? { llm_call: config.llm_call } : {}),
    }),
  ];
  if (config.verification?.receipts_enabled !== false) chain.push(createToolReceiptMiddleware(config.verification ?? {}, { subagent: true }));
  if (deps.authorizationProvider) {
    chain.push(createAuthorizationMiddleware(config.authorization ?? {}, { provider: deps.authorizationProvider, deferredToolSearch: deferred !== undefined }));
  }
  if (deps.guardrailProvider) chain.push(createGuardrailMiddleware(config.guardrails ?? {}, { provider: deps.guardrailProvider }));
  chain.push(createSandboxAuditMiddleware());
  if (config.read_before_write?.enabled !== false) chain.push(createReadBeforeWriteMiddleware(config.read_before_write ?? {}, authorizer));
  if (config.tool_progress?.enabled) chain.push(createToolProgressMiddleware(config.tool_progress));
  chain.push(
    createToolErrorHandlingMiddleware({ skills_container_path: deps.skillRegistry.containerPath, ...skillFileReadTools }),
    // A pair of its own: the binding token is never shared with the lead's pair.
    ...createSkillMiddlewares({
      registry: deps.skillRegistry,
      ...(deps.skills === undefined ? {} : { config: { available_skills: deps.skills } }),
    }),
  );
  if (deps.supportsVision) chain.push(createViewImageMiddleware());
  if (deferred) {
    if (Object.keys(deferred.routingIndex).length > 0) {
      chain.push(createMcpRoutingMiddleware(config.tool_search ?? {}, { routingIndex: deferred.routingIndex, catalogHash: deferred.catalogHash! }));
    }
    chain.push(createDeferredToolFilterMiddleware(config.tool_search ?? {}, { deferredNames: deferred.deferredNames, catalogHash: deferred.catalogHash! }));
  }
  if (config.loop_detection?.enabled !== false) chain.push(createLoopDetectionMiddleware(config.loop_detection ?? {}));
  const budget = subagentTokenBudget(subagents.token_budget, summarizationEnabled);
  if (budget.enabled) chain.push(createTokenBudgetMiddleware(budget));
  if (config.safety_finish_reason?.enabled !== false) chain.push(createSafetyFinishReasonMiddleware(config.safety_finish_reason ?? {}));
  chain.push(createDurableContextMiddleware({ skills_container_path: deps.skillRegistry.containerPath, ...skillFileReadTools }));
  if (summarizationEnabled && config.summarization) {
    // No memory flush before compaction: subagents never write memory.
    chain.push(summarizationMember(config.summarization, deps));
  }
  chain.push(
    createSubagentDateContextMiddleware(
      config.dynamic_context?.current_date_timezone ? { current_date_timezone: config.dynamic_context.current_date_timezone } : {},
    ),
    createSystemMessageCoalescingMiddleware(),
  );
  const stack = placeExtensionMiddlewares(
    chain,
    { custom: deps.customMiddlewares ?? [], configured: deps.configuredMiddlewares ?? [] },
    SUBAGENT_EXTENSION_TAIL,
  );
  const violations = orderingViolations(stack.map((m) => m.name));
  if (violations.length > 0) {
    const first = violations[0]!.constraint;
    throw new DeerflowError(
      "ordering_violation",
      `Subagent middleware ${first.outer} must wrap ${first.inner} (${first.reason}); fix the order of the custom or configured middlewares.`,
    );
  }
  return stack;
}

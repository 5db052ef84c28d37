import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
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
import type { SystemModelCallHook } from "../middlewares/system-model-call.ts";
import { createSystemMessageCoalescingMiddleware } from "../middlewares/system-message-coalescing.ts";
import { createThreadDataMiddleware } from "../middlewares/thread-data.ts";
import { createTokenBudgetMiddleware } from "../middlewares/token-budget.ts";
import { createToolErrorHandlingMiddleware } from "../middlewares/tool-error-handling/index.ts";
import { createToolOutputBudgetMiddleware } from "../middlewares/tool-output/index.ts";
import { createToolProgressMiddleware } from "../middlewares/tool-progress/index.ts";
import { createToolReceiptMiddleware } from "../middlewares/tool-receipt/index.ts";
import { createToolResultSanitizationMiddleware } from "../middlewares/tool-result-sanitization.ts";
import { createViewImageMiddleware } from "../middlewares/view-image.ts";
import type { SkillRegistry } from "../skills/registry.ts";
import type { SandboxAuthorizer } from "../sandbox/acquire.ts";
import type { DeferredToolSetup } from "../tools/tool-search.ts";
import type { LeadConfig } from "./app-config.ts";
import { SUBAGENT_EXTENSION_TAIL, placeExtensionMiddlewares } from "./configured-middlewares.ts";
import { parseSubagentsConfig, subagentTokenBudget, type SubagentsConfigInput } from "./subagents-config.ts";

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
    // A non-owner of the lead thread's sandbox: always lazy, whatever the lead's lazy_init, so a
    // delegation never forces eager acquisition; the middleware leaves the release to the lead.
    createSandboxMiddleware({ lazy_init: true }, authorizer),
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

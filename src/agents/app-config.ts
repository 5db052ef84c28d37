import * as v from "valibot";
import {
  appConfigEntries,
  mapping,
  parseConfigText,
  validateConfig,
  type ConfigSchema,
} from "../config/index.ts";
import { DynamicContextConfigSchema } from "../middlewares/dynamic-context.ts";
import { LLMErrorHandlingConfigSchema } from "../middlewares/llm-error-handling.ts";
import { LoopDetectionConfigSchema } from "../middlewares/loop-detection.ts";
import { MemoryConfigSchema } from "../middlewares/memory-config.ts";
import { SafetyFinishReasonConfigSchema } from "../middlewares/safety-finish-reason.ts";
import { SummarizationConfigSchema } from "../middlewares/summarization.ts";
import { TitleConfigSchema } from "../middlewares/title.ts";
import { TokenBudgetConfigSchema } from "../middlewares/token-budget.ts";
import { TokenUsageConfigSchema } from "../middlewares/token-usage.ts";
import { SkillsConfigSchema } from "../skills/registry.ts";
import { AuthorizationConfigSchema, GuardrailsConfigSchema } from "../authz/config.ts";
import { ToolSearchConfigSchema } from "../middlewares/deferred-tool-filter.ts";
import { ReadBeforeWriteConfigSchema } from "../middlewares/read-before-write.ts";
import { SandboxConfigSchema as SandboxMiddlewareConfigSchema } from "../middlewares/sandbox.ts";
import { ToolOutputBudgetConfigSchema } from "../middlewares/tool-output-budget.ts";
import { ToolProgressConfigSchema } from "../middlewares/tool-progress.ts";
import { ToolReceiptConfigSchema } from "../middlewares/tool-receipt.ts";
import { UploadsConfigSchema } from "../middlewares/uploads.ts";
import { WebFetchConfigSchema, WebSearchConfigSchema } from "../tools/web.ts";
import { SandboxConfigSchema } from "../config/schema.ts";
import { pluginsConfigEntries } from "../extensions/config.ts";
import { SubagentsConfigSchema } from "./subagent-chain.ts";
import { GatewayConfigSchema } from "../config/gateway.ts";

/**
 * config.yaml as the lead agent reads it: the base sections plus one section per configurable
 * middleware, each validated by the schema that lives beside its middleware (config/ sits below
 * middlewares/, so the composition happens here). An unknown key anywhere fails with its path.
 */
export const leadConfigEntries = {
  ...appConfigEntries,
  // The base section picks the sandbox kind; the Sandbox middleware adds when it is acquired.
  sandbox: v.nullish(mapping({ ...SandboxConfigSchema.pipe[1].entries, ...SandboxMiddlewareConfigSchema.entries }), {}),
  // Startup-only: plugins run with the host's rights, so only the operator's config.yaml names them.
  plugins: v.nullish(pluginsConfigEntries.plugins, []),
  subagents: v.nullish(SubagentsConfigSchema),
  // Where `deerflow-edge serve` listens, who may call it, upload limits.
  gateway: v.nullish(GatewayConfigSchema),
  tool_output: v.nullish(ToolOutputBudgetConfigSchema),
  uploads: v.nullish(UploadsConfigSchema),
  authorization: v.nullish(AuthorizationConfigSchema),
  guardrails: v.nullish(GuardrailsConfigSchema),
  read_before_write: v.nullish(ReadBeforeWriteConfigSchema),
  tool_progress: v.nullish(ToolProgressConfigSchema),
  verification: v.nullish(ToolReceiptConfigSchema),
  tool_search: v.nullish(ToolSearchConfigSchema),
  web_fetch: v.nullish(WebFetchConfigSchema),
  web_search: v.nullish(WebSearchConfigSchema),
  circuit_breaker: v.nullish(LLMErrorHandlingConfigSchema.entries.circuit_breaker.wrapped),
  llm_call: v.nullish(LLMErrorHandlingConfigSchema.entries.llm_call.wrapped),
  dynamic_context: v.nullish(
    mapping({ current_date_timezone: DynamicContextConfigSchema.entries.current_date_timezone }),
  ),
  memory: v.nullish(MemoryConfigSchema),
  summarization: v.nullish(SummarizationConfigSchema),
  title: v.nullish(TitleConfigSchema),
  token_usage: v.nullish(TokenUsageConfigSchema),
  loop_detection: v.nullish(LoopDetectionConfigSchema),
  token_budget: v.nullish(TokenBudgetConfigSchema),
  safety_finish_reason: v.nullish(SafetyFinishReasonConfigSchema),
  skills: v.nullish(SkillsConfigSchema),
  extensions: v.nullish(
    mapping({
      /** `module:Export` of zero-argument middleware classes or factories; trusted operator code. */
      middlewares: v.nullish(v.array(v.pipe(v.string(), v.minLength(3, 'expected "module:Export"'))), []),
    }),
    {},
  ),
};

export const LeadConfigSchema = mapping(leadConfigEntries);
export type LeadConfig = v.InferOutput<typeof LeadConfigSchema>;

const schema = LeadConfigSchema as unknown as ConfigSchema<LeadConfig>;

/** Parses config.yaml text with every lead-chain section; one-line ConfigError on any problem. */
export function parseLeadConfigText(text: string, fileName: string): LeadConfig {
  return parseConfigText(text, fileName, schema);
}

export function validateLeadConfig(value: unknown, fileName: string): LeadConfig {
  return validateConfig(value, fileName, schema);
}

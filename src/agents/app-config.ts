import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import type { GatewayConfig } from "../config/gateway.ts";
import {
  ConfigError,
  appConfigEntries,
  describeIssue,
  mapping,
  parseConfigText,
  validateConfig,
  type ConfigSchema,
} from "../config/index.ts";
import { DynamicContextConfigSchema, type DynamicContextConfig } from "../middlewares/dynamic-context.ts";
import { LLMErrorHandlingConfigSchema, type LLMErrorHandlingConfigInput } from "../middlewares/llm-error-handling/index.ts";
import { LoopDetectionConfigSchema, type LoopDetectionConfig } from "../middlewares/loop-detection/index.ts";
import { MemoryConfigSchema, type MemoryConfig } from "../middlewares/memory/index.ts";
import { SafetyFinishReasonConfigSchema, type SafetyFinishReasonConfig } from "../middlewares/safety-finish-reason/index.ts";
import { SummarizationConfigSchema, type SummarizationConfig } from "../middlewares/summarization/index.ts";
import { TitleConfigSchema, type TitleConfig } from "../middlewares/title.ts";
import { TokenBudgetConfigSchema, type TokenBudgetConfig } from "../middlewares/token-budget.ts";
import { TokenUsageConfigSchema, type TokenUsageConfig } from "../middlewares/token-usage/index.ts";
import { SkillsConfigSchema, type SkillsConfig } from "../skills/registry.ts";
import { AuthorizationConfigSchema, GuardrailsConfigSchema, type AuthorizationConfig, type GuardrailsConfig } from "../authz/config.ts";
import { ToolSearchConfigSchema, type ToolSearchConfig } from "../middlewares/deferred-tool-filter.ts";
import { ReadBeforeWriteConfigSchema, type ReadBeforeWriteConfig } from "../middlewares/read-before-write.ts";
import { SandboxConfigSchema as SandboxMiddlewareConfigSchema, type SandboxConfig as SandboxMiddlewareConfig } from "../middlewares/sandbox.ts";
import { ToolOutputBudgetConfigSchema, type ToolOutputBudgetConfig } from "../middlewares/tool-output/index.ts";
import { ToolProgressConfigSchema, type ToolProgressConfig } from "../middlewares/tool-progress/index.ts";
import { ToolReceiptConfigSchema, type ToolReceiptConfig } from "../middlewares/tool-receipt/index.ts";
import { UploadsConfigSchema, type UploadsConfig } from "../middlewares/uploads/index.ts";
import { WebFetchConfigSchema, WebSearchConfigSchema, type WebFetchConfig, type WebSearchConfig } from "../tools/web.ts";
import { SandboxConfigSchema, type AppConfig, type SandboxConfig } from "../config/schema.ts";
import { pluginsConfigEntries, type PluginSpec } from "../extensions/config.ts";
import { SubagentRuntimeConfigSchema, SubagentsConfigSchema, type SubagentRuntimeConfig, type SubagentsConfig } from "./subagents-config.ts";
import { GatewayConfigSchema } from "../config/gateway.ts";
import { InputPolishConfigSchema, SuggestionsConfigSchema, type InputPolishConfig, type SuggestionsConfig } from "../config/assist.ts";

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
  // Startup settings of the subagent runtime (max_running caps SubagentLimit's concurrency).
  subagent_runtime: v.nullish(SubagentRuntimeConfigSchema),
  // Where `deerflow-edge serve` listens, who may call it, upload limits.
  gateway: v.nullish(GatewayConfigSchema),
  // The gateway's one-shot model calls for DeerFlow's UI (follow-up questions, draft polishing).
  suggestions: v.nullish(SuggestionsConfigSchema),
  input_polish: v.nullish(InputPolishConfigSchema),
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

const leadConfigSchema = mapping(leadConfigEntries);
/** The one section of extensions_config.json this module reads, with config.yaml's schema for it. */
const extensionsFileSchema = v.looseObject({ extensions: leadConfigEntries.extensions });

/**
 * extensions_config.json's `extensions.middlewares` ([] when the file has none). The file's other
 * sections (mcpServers, skills) belong to other readers and are not checked here; a wrong value in
 * this one is a ConfigError naming its path, as in config.yaml.
 */
export function extensionsFileMiddlewares(file: Readonly<Record<string, unknown>>, fileName: string): string[] {
  const result = v.safeParse(extensionsFileSchema, file);
  if (!result.success) throw new ConfigError("config_invalid", fileName, result.issues.map((issue) => describeIssue(issue, extensionsFileSchema, fileName)));
  return result.output.extensions.middlewares;
}
/** The `sandbox` section of the lead config: the kind (base section) and when it is acquired (middleware). */
export interface LeadSandboxConfig extends SandboxConfig, SandboxMiddlewareConfig {}

/** config.yaml as the lead agent reads it, after validation. */
export interface LeadConfig extends Omit<AppConfig, "sandbox"> {
  sandbox: LeadSandboxConfig;
  plugins: PluginSpec[];
  subagents?: SubagentsConfig | null;
  subagent_runtime?: SubagentRuntimeConfig | null;
  gateway?: GatewayConfig | null;
  suggestions?: SuggestionsConfig | null;
  input_polish?: InputPolishConfig | null;
  tool_output?: ToolOutputBudgetConfig | null;
  uploads?: UploadsConfig | null;
  authorization?: AuthorizationConfig | null;
  guardrails?: GuardrailsConfig | null;
  read_before_write?: ReadBeforeWriteConfig | null;
  tool_progress?: ToolProgressConfig | null;
  verification?: ToolReceiptConfig | null;
  tool_search?: ToolSearchConfig | null;
  web_fetch?: WebFetchConfig | null;
  web_search?: WebSearchConfig | null;
  circuit_breaker?: LLMErrorHandlingConfigInput["circuit_breaker"] | null;
  llm_call?: LLMErrorHandlingConfigInput["llm_call"] | null;
  dynamic_context?: Pick<DynamicContextConfig, "current_date_timezone"> | null;
  memory?: MemoryConfig | null;
  summarization?: SummarizationConfig | null;
  title?: TitleConfig | null;
  token_usage?: TokenUsageConfig | null;
  loop_detection?: LoopDetectionConfig | null;
  token_budget?: TokenBudgetConfig | null;
  safety_finish_reason?: SafetyFinishReasonConfig | null;
  skills?: SkillsConfig | null;
  extensions: { middlewares: string[] };
}
type _LeadConfigMatches = Assert<SameType<LeadConfig, v.InferOutput<typeof leadConfigSchema>>>;

/** The lead config's schema, for embedders that validate a config object themselves. */
export const LeadConfigSchema: ConfigSchema<LeadConfig> = leadConfigSchema as unknown as ConfigSchema<LeadConfig>;
const schema = LeadConfigSchema;

/** Parses config.yaml text with every lead-chain section; one-line ConfigError on any problem. */
export function parseLeadConfigText(text: string, fileName: string): LeadConfig {
  return parseConfigText(text, fileName, schema);
}

export function validateLeadConfig(value: unknown, fileName: string): LeadConfig {
  return validateConfig(value, fileName, schema);
}

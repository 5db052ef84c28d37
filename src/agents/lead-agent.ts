import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { AgentAssemblyDescriptor, ContextCompactionObserver } from "../extension-api/index.ts";
import { createAgent, type Agent } from "../engine/agent.ts";
import type { AgentServices } from "../engine/services.ts";
import type { AgentMiddleware } from "../engine/types.ts";
import { createChatModel, describeModel, type ModelDescription } from "../models/factory.ts";
import type { Env } from "../ports/runtime-ports.ts";
import { createClarificationMiddleware } from "../middlewares/clarification.ts";
import { createDanglingToolCallMiddleware } from "../middlewares/dangling-tool-call.ts";
import { createDurableContextMiddleware } from "../middlewares/durable-context.ts";
import { createDynamicContextMiddleware } from "../middlewares/dynamic-context.ts";
import { createInputSanitizationMiddleware } from "../middlewares/input-sanitization.ts";
import { createLLMErrorHandlingMiddleware } from "../middlewares/llm-error-handling.ts";
import { createLoopDetectionMiddleware } from "../middlewares/loop-detection.ts";
import { createMemoryMiddleware } from "../middlewares/memory.ts";
import { createMemoryStore, type MemoryStore } from "../middlewares/memory-store.ts";
import { createModelLengthFinishReasonMiddleware } from "../middlewares/model-length-finish-reason.ts";
import { createSafetyFinishReasonMiddleware } from "../middlewares/safety-finish-reason.ts";
import { createSkillMiddlewares } from "../middlewares/skill-middlewares.ts";
import { createSummarizationMiddleware } from "../middlewares/summarization.ts";
import { createSystemMessageCoalescingMiddleware } from "../middlewares/system-message-coalescing.ts";
import { createTerminalResponseMiddleware } from "../middlewares/terminal-response.ts";
import { createThreadDataMiddleware } from "../middlewares/thread-data.ts";
import { createTitleMiddleware } from "../middlewares/title.ts";
import { createTodoListMiddleware } from "../middlewares/todo-list.ts";
import { createTokenBudgetMiddleware } from "../middlewares/token-budget.ts";
import { createTokenUsageMiddleware } from "../middlewares/token-usage.ts";
import { createToolErrorHandlingMiddleware } from "../middlewares/tool-error-handling.ts";
import { createViewImageMiddleware } from "../middlewares/view-image.ts";
import { createSkillRegistry, type SkillRegistry } from "../skills/registry.ts";
import { createMemoryKeyValue } from "../storage/key-value.ts";
import { createSandboxTools } from "../tools/sandbox-tools.ts";
import type { LeadConfig } from "./app-config.ts";
import { describeAgent } from "./assembly-descriptor.ts";
import { LEAD_EXTENSION_TAIL, placeExtensionMiddlewares } from "./configured-middlewares.ts";
import { LEAD_AGENT_PROMPT, LEAD_AGENT_PROMPT_ID } from "./prompts.ts";

export const LEAD_AGENT_NAME = "lead-agent";

/** What the chain needs besides config: models, shared stores, and the optional contributions. */
export interface LeadChainDeps {
  /** The run's model (the summary model's fallback). */
  readonly model: BaseChatModel;
  readonly supportsVision?: boolean;
  readonly contextWindow?: number;
  readonly summaryModel?: BaseChatModel;
  readonly titleModel?: BaseChatModel;
  /** One per process: queued memory updates outlive a run. */
  readonly memoryStore?: MemoryStore;
  readonly skillRegistry: SkillRegistry;
  readonly compactionObservers?: readonly ContextCompactionObserver[];
  /** Programmatic middlewares (position 31), then the config's extension middlewares (32). */
  readonly customMiddlewares?: readonly AgentMiddleware[];
  readonly configuredMiddlewares?: readonly AgentMiddleware[];
  /** Plan mode adds the todo list (write_todos). */
  readonly planMode?: boolean;
}

/**
 * The lead chain in the spec's order, outer to inner, each optional member under its condition.
 * Numbers are the spec's positions; the ones missing here are built by the tool-side chain.
 */
export function buildLeadMiddlewares(config: LeadConfig, deps: LeadChainDeps): AgentMiddleware[] {
  const memory = config.memory;
  const memoryEnabled = memory?.enabled !== false;
  const chain: AgentMiddleware[] = [
    createInputSanitizationMiddleware(), // 1
    createThreadDataMiddleware(), // 4
    createDanglingToolCallMiddleware(), // 7
    createLLMErrorHandlingMiddleware({
      ...(config.circuit_breaker ? { circuit_breaker: config.circuit_breaker } : {}),
      ...(config.llm_call ? { llm_call: config.llm_call } : {}),
    }), // 8
    createToolErrorHandlingMiddleware(), // 14
    createDynamicContextMiddleware(
      {
        enabled: memoryEnabled,
        ...(memory?.injection_enabled === undefined ? {} : { injection_enabled: memory.injection_enabled }),
        ...(memory?.max_injection_tokens === undefined ? {} : { max_injection_tokens: memory.max_injection_tokens }),
        ...(config.dynamic_context?.current_date_timezone ? { current_date_timezone: config.dynamic_context.current_date_timezone } : {}),
      },
      deps.memoryStore ? { memory: deps.memoryStore } : {},
    ), // 15
    ...createSkillMiddlewares({ registry: deps.skillRegistry }), // 16, 17
    createDurableContextMiddleware({
      skills_container_path: deps.skillRegistry.containerPath,
      ...(config.summarization?.skill_file_read_tool_names ? { skill_file_read_tool_names: config.summarization.skill_file_read_tool_names } : {}),
    }), // 18
  ];
  if (config.summarization?.enabled) {
    chain.push(
      createSummarizationMiddleware(config.summarization, {
        model: deps.summaryModel ?? deps.model,
        ...(deps.summaryModel && deps.summaryModel !== deps.model ? { fallbackModel: deps.model } : {}),
        ...(deps.contextWindow ? { contextWindow: deps.contextWindow } : {}),
        observers: deps.compactionObservers ?? [],
        ...(deps.memoryStore ? { beforeSummarization: [() => deps.memoryStore!.flush()] } : {}),
      }),
    ); // 19
  }
  if (deps.planMode) chain.push(createTodoListMiddleware()); // 20
  if (config.token_usage?.enabled !== false) chain.push(createTokenUsageMiddleware(config.token_usage ?? {})); // 21
  chain.push(createTitleMiddleware(config.title ?? {}, deps.titleModel ? { model: deps.titleModel } : {})); // 22
  if (memoryEnabled) chain.push(createMemoryMiddleware(memory ?? {}, deps.memoryStore ? { store: deps.memoryStore } : {})); // 23
  if (deps.supportsVision) chain.push(createViewImageMiddleware()); // 24
  chain.push(createSystemMessageCoalescingMiddleware()); // 27
  if (config.loop_detection?.enabled !== false) chain.push(createLoopDetectionMiddleware(config.loop_detection ?? {})); // 29
  if (config.token_budget?.enabled) chain.push(createTokenBudgetMiddleware(config.token_budget)); // 30
  chain.push(createTerminalResponseMiddleware()); // 33
  chain.push(createModelLengthFinishReasonMiddleware()); // 34
  // Registered after the terminal tail so the reversed afterModel order runs it before the loop guard counts calls.
  if (config.safety_finish_reason?.enabled !== false) chain.push(createSafetyFinishReasonMiddleware(config.safety_finish_reason ?? {})); // 35
  chain.push(createClarificationMiddleware()); // 36, last
  return placeExtensionMiddlewares(
    chain,
    { custom: deps.customMiddlewares ?? [], configured: deps.configuredMiddlewares ?? [] },
    LEAD_EXTENSION_TAIL,
  ); // 31, 32
}

export interface LeadAgentOptions {
  readonly config: LeadConfig;
  readonly services: AgentServices;
  readonly env: Env;
  /** The model the request asked for; falls back to the config's default, then `demo`. */
  readonly model?: string;
  readonly checkpointer?: BaseCheckpointSaver;
  readonly planMode?: boolean;
  /** Share one store across assemblies of a process; created here (and owned by the caller through `memoryStore`) otherwise. */
  readonly memoryStore?: MemoryStore;
  readonly skillRegistry?: SkillRegistry;
  readonly compactionObservers?: readonly ContextCompactionObserver[];
  readonly customMiddlewares?: readonly AgentMiddleware[];
  readonly configuredMiddlewares?: readonly AgentMiddleware[];
}

export interface LeadAgentAssembly {
  readonly agent: Agent;
  readonly graph: Agent["graph"];
  /** Name, provider and model id of the model in use; `is_demo` marks the built-in demo model. */
  readonly model: ModelDescription;
  readonly descriptor: AgentAssemblyDescriptor;
  /** canonicalHash of the descriptor without build facts: "did this agent's assembly change?" */
  readonly fingerprint: string;
  /** The memory store the chain writes to; close it (flushing queued updates) when the process ends. */
  readonly memoryStore: MemoryStore | undefined;
}

export async function assembleLeadAgent(options: LeadAgentOptions): Promise<LeadAgentAssembly> {
  const { config, env } = options;
  const model = createChatModel(config, options.model, env);
  const modelInfo = describeModel(options.model, config);
  const entry = config.models.find((m) => m.name === modelInfo.name);
  const namedModel = (name: string | null | undefined) => (name ? createChatModel(config, name, env) : undefined);
  const storage = options.services.storage ?? createMemoryKeyValue();
  const memoryEnabled = config.memory?.enabled !== false;
  const memoryStore =
    options.memoryStore ??
    (memoryEnabled
      ? createMemoryStore(storage, options.services.clock, {
          config: config.memory ?? {},
          ...(config.memory?.model_name ? { model: namedModel(config.memory.model_name)! } : {}),
        })
      : undefined);
  const skillRegistry = options.skillRegistry ?? createSkillRegistry(storage, { config: config.skills ?? {} });
  const systemPrompt = config.agent.system_prompt ?? LEAD_AGENT_PROMPT;
  const middlewares = buildLeadMiddlewares(config, {
    model,
    supportsVision: entry?.supports_vision === true,
    ...(entry?.context_window ? { contextWindow: entry.context_window } : {}),
    ...(config.summarization?.model_name ? { summaryModel: namedModel(config.summarization.model_name)! } : {}),
    ...(config.title?.model_name ? { titleModel: namedModel(config.title.model_name)! } : {}),
    ...(memoryStore ? { memoryStore } : {}),
    skillRegistry,
    compactionObservers: options.compactionObservers ?? [],
    customMiddlewares: options.customMiddlewares ?? [],
    configuredMiddlewares: options.configuredMiddlewares ?? [],
    planMode: options.planMode ?? false,
  });
  const agent = createAgent({
    name: LEAD_AGENT_NAME,
    model,
    tools: createSandboxTools(),
    middlewares,
    systemPrompt,
    checkpointer: options.checkpointer,
    services: { ...options.services, storage },
    recursionLimit: config.agent.recursion_limit,
  });
  // Identity, not credentials or labels: what changes the model's behaviour.
  const modelParameters: Record<string, unknown> = {
    provider: modelInfo.provider,
    model: modelInfo.model,
    ...(entry?.base_url && !modelInfo.is_demo ? { base_url: entry.base_url } : {}),
    ...(entry?.temperature === undefined ? {} : { temperature: entry.temperature }),
    ...(entry?.max_tokens === undefined ? {} : { max_tokens: entry.max_tokens }),
  };
  const { descriptor, fingerprint } = await describeAgent({
    agentName: LEAD_AGENT_NAME,
    requestedModel: options.model ?? null,
    effectiveModel: modelInfo.name,
    modelParameters,
    systemPrompt,
    tools: agent.tools,
    middlewares,
    enabledSkills: await skillRegistry.enabledNames(),
    effectivePolicies: {
      prompt_template_id: config.agent.system_prompt ? "custom" : LEAD_AGENT_PROMPT_ID,
      recursion_limit: config.agent.recursion_limit,
      sandbox: options.services.sandbox?.kind ?? null,
      plan_mode: options.planMode ?? false,
      subagents: false,
      non_interactive: false,
    },
  });
  return { agent, graph: agent.graph, model: modelInfo, descriptor, fingerprint, memoryStore };
}

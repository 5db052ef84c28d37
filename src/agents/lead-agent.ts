// The lead agent: its middleware chain in order (buildLeadMiddlewares) and its assembly for one
// request in named steps (assembleLeadAgent), one cohesive thing read top to bottom.
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import {
  AgentScope,
  hostPolicySnapshot,
  type AgentAssemblyDescriptor,
  type CompactionEvent,
  type ContextCompactionObserver,
  type ExtensionData,
  type HostPolicySnapshot,
} from "../extension-api/index.ts";
import { collectMiddlewareContributions } from "../extensions/contributions.ts";
import type { DetachedObservations } from "../extensions/detached.ts";
import type { DiagnosticSink, ExtensionDiagnostic } from "../extensions/diagnostics.ts";
import { notifyAgentAssembled, notifyContextCompacted } from "../extensions/notify.ts";
import type { LoadedExtensions } from "../extensions/registry.ts";
import { composeWithExtensions } from "../extensions/stack.ts";
import { createSystemCallHook } from "../extensions/system-calls.ts";
import type { SystemModelCallHook } from "../middlewares/system-model-call.ts";
import { createAgent, type Agent } from "../engine/agent.ts";
import type { AgentServices } from "../engine/services.ts";
import type { AgentMiddleware } from "../engine/types.ts";
import { createChatModel, describeModel, type ModelDescription } from "../models/factory.ts";
import type { Env } from "../ports/runtime-ports.ts";
import { createClarificationMiddleware } from "../middlewares/clarification/index.ts";
import { createDanglingToolCallMiddleware } from "../middlewares/dangling-tool-call.ts";
import { createDurableContextMiddleware } from "../middlewares/durable-context/index.ts";
import { createDynamicContextMiddleware } from "../middlewares/dynamic-context.ts";
import { createInputSanitizationMiddleware } from "../middlewares/input-sanitization.ts";
import { createLLMErrorHandlingMiddleware } from "../middlewares/llm-error-handling/index.ts";
import { createLoopDetectionMiddleware } from "../middlewares/loop-detection/index.ts";
import { createMemoryMiddleware } from "../middlewares/memory/index.ts";
import { createMemoryStore, type MemoryStore } from "../middlewares/memory/index.ts";
import { createModelLengthFinishReasonMiddleware } from "../middlewares/model-length-finish-reason/index.ts";
import { createSafetyFinishReasonMiddleware } from "../middlewares/safety-finish-reason/index.ts";
import { createSkillMiddlewares } from "../middlewares/skills/index.ts";
import { createSystemMessageCoalescingMiddleware } from "../middlewares/system-message-coalescing.ts";
import { createTerminalResponseMiddleware } from "../middlewares/terminal-response/index.ts";
import { createThreadDataMiddleware } from "../middlewares/thread-data.ts";
import { createTitleMiddleware } from "../middlewares/title.ts";
import { createTodoListMiddleware } from "../middlewares/todo-list.ts";
import { createTokenBudgetMiddleware } from "../middlewares/token-budget.ts";
import { createTokenUsageMiddleware } from "../middlewares/token-usage/index.ts";
import { createToolErrorHandlingMiddleware } from "../middlewares/tool-error-handling/index.ts";
import { createViewImageMiddleware } from "../middlewares/view-image.ts";
import { createToolOutputBudgetMiddleware } from "../middlewares/tool-output/index.ts";
import { createToolResultSanitizationMiddleware } from "../middlewares/tool-result-sanitization.ts";
import { createUploadsMiddleware } from "../middlewares/uploads/index.ts";
import { createSandboxMiddleware } from "../middlewares/sandbox.ts";
import { createToolReceiptMiddleware } from "../middlewares/tool-receipt/index.ts";
import { createAuthorizationMiddleware } from "../middlewares/authorization.ts";
import { createGuardrailMiddleware } from "../middlewares/guardrail/index.ts";
import { createSandboxAuditMiddleware } from "../middlewares/sandbox-audit/index.ts";
import { createReadBeforeWriteMiddleware } from "../middlewares/read-before-write.ts";
import { createToolProgressMiddleware } from "../middlewares/tool-progress/index.ts";
import { createMcpRoutingMiddleware } from "../middlewares/mcp-routing.ts";
import { createDeferredToolFilterMiddleware } from "../middlewares/deferred-tool-filter.ts";
import {
  buildPrincipalFromContext,
  createSandboxAuthorizer,
  filterToolsForPrincipal,
  authorizeModelName,
  resolveAuthorizationProvider,
  resolveGuardrailProvider,
  AUTHORIZATION_DEFAULTS,
  GUARDRAILS_DEFAULTS,
  type AuthorizationProvider,
  type GuardrailProvider,
  type Principal,
} from "../authz/index.ts";
import { availableModelNames } from "../config/index.ts";
import { orderingViolations } from "../extensions/ordering.ts";
import { DeerflowError } from "../core/errors.ts";
import type { SandboxAuthorizer } from "../sandbox/acquire.ts";
import { createPresentFileTool } from "../tools/present-file.ts";
import { assembleDeferredTools, deferredToolsPromptSection, type DeferredToolSetup } from "../tools/tool-search.ts";
import { createWebTools } from "../tools/web.ts";
import type { AgentTool } from "../engine/types.ts";
import type { Skill, SkillRegistry } from "../skills/registry.ts";
import { deploymentSkillRegistry } from "../skills/states.ts";
import { createMemoryKeyValue } from "../storage/key-value.ts";
import { createSandboxTools } from "../tools/sandbox-tools.ts";
import { parseBatchTaskConfig } from "../tools/batch-task.ts";
import { createBatchTaskTool, createTaskTool } from "./delegation-tools.ts";
import { createSubagentLimitMiddleware } from "../middlewares/subagent-limit.ts";
import { buildSubagentRuntimeMiddlewares } from "./subagent-chain.ts";
import { BUILTIN_SUBAGENT_TYPES, SUBAGENT_DISALLOWED_TOOLS, filterSubagentTools, type SubagentType } from "./subagent-types.ts";
import type { SubagentBuilder } from "../tools/subagent-run.ts";
import type { LeadConfig } from "./app-config.ts";
import { describeAgent } from "./assembly-descriptor.ts";
import { summarizationMember } from "./summarization-member.ts";
import { LEAD_EXTENSION_TAIL, placeExtensionMiddlewares } from "./configured-middlewares.ts";
import { AGENT_BOOTSTRAP_PROMPT_SECTION, LEAD_AGENT_PROMPT, LEAD_AGENT_PROMPT_ID, skillsPromptSection } from "./prompts.ts";
import { customAgentPromptSection, restrictSkillRegistry, type CustomAgent } from "./custom-agent.ts";
import { filterToolsByGroups } from "../tools/tool-groups.ts";
import { createSetupAgentTool, type AgentSetupPort } from "../tools/setup-agent.ts";

export const LEAD_AGENT_NAME = "lead-agent";
/** The skills an agent-creation chat may use (upstream's bootstrap skill, when installed). */
export const BOOTSTRAP_SKILL_NAMES: readonly string[] = Object.freeze(["bootstrap"]);

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
  /** The provider Layer 1 used; the Authorization middleware reuses the same instance. */
  readonly authorizationProvider?: AuthorizationProvider | null;
  readonly guardrailProvider?: GuardrailProvider | null;
  /** The `sandbox:execute` gate shared by every sandbox user. */
  readonly sandboxAuthorizer?: SandboxAuthorizer;
  /** What tool_search defers; absent or empty when nothing is. */
  readonly deferred?: DeferredToolSetup;
  /** Reports the host's own title and summary model calls to extensions' observers. */
  readonly observeSystemCall?: SystemModelCallHook;
  /** Delegation is on: the task tool is bound and SubagentLimit caps it. */
  readonly subagentsEnabled?: boolean;
}

/**
 * The lead chain in upstream DeerFlow's order, outer to inner, each optional member under its condition.
 * The `// n` numbers are the positions in docs/chain.md, Lead chain.
 */
export function buildLeadMiddlewares(config: LeadConfig, deps: LeadChainDeps): AgentMiddleware[] {
  const memory = config.memory;
  const memoryEnabled = memory?.enabled !== false;
  const authorizer = deps.sandboxAuthorizer ? { authorizer: deps.sandboxAuthorizer } : {};
  const deferred = deps.deferred && deps.deferred.deferredNames.length > 0 && deps.deferred.catalogHash ? deps.deferred : undefined;
  const chain: AgentMiddleware[] = [
    createInputSanitizationMiddleware(), // 1
    createToolOutputBudgetMiddleware(config.tool_output ?? {}, authorizer), // 2
    createToolResultSanitizationMiddleware(), // 3
    createThreadDataMiddleware(), // 4
    createUploadsMiddleware(config.uploads ?? {}, authorizer), // 5
    createSandboxMiddleware({ ...(config.sandbox.lazy_init === undefined ? {} : { lazy_init: config.sandbox.lazy_init }) }, authorizer), // 6
    createDanglingToolCallMiddleware(), // 7
    createLLMErrorHandlingMiddleware({
      ...(config.circuit_breaker ? { circuit_breaker: config.circuit_breaker } : {}),
      ...(config.llm_call ? { llm_call: config.llm_call } : {}),
    }), // 8
  ];
  // The outermost gate-facing tool wrapper, so no short-circuit below it gaps the receipt ledger.
  if (config.verification?.receipts_enabled !== false) chain.push(createToolReceiptMiddleware(config.verification ?? {})); // 14, with ToolErrorHandling (registered ahead of 9-13)
  if (deps.authorizationProvider) {
    chain.push(createAuthorizationMiddleware(config.authorization ?? {}, { provider: deps.authorizationProvider, deferredToolSearch: deferred !== undefined })); // 9
  }
  if (deps.guardrailProvider) chain.push(createGuardrailMiddleware(config.guardrails ?? {}, { provider: deps.guardrailProvider })); // 10
  chain.push(createSandboxAuditMiddleware()); // 11
  if (config.read_before_write?.enabled !== false) chain.push(createReadBeforeWriteMiddleware(config.read_before_write ?? {}, authorizer)); // 12
  if (config.tool_progress?.enabled) chain.push(createToolProgressMiddleware(config.tool_progress)); // 13
  chain.push(
    createToolErrorHandlingMiddleware({
      skills_container_path: deps.skillRegistry.containerPath,
      ...(config.summarization?.skill_file_read_tool_names ? { skill_file_read_tool_names: config.summarization.skill_file_read_tool_names } : {}),
    }), // 14
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
  );
  if (config.summarization?.enabled) {
    chain.push(summarizationMember(config.summarization, deps, deps.memoryStore ? [() => deps.memoryStore!.flush()] : [])); // 19
  }
  if (deps.planMode) chain.push(createTodoListMiddleware()); // 20
  if (config.token_usage?.enabled !== false) chain.push(createTokenUsageMiddleware(config.token_usage ?? {})); // 21
  chain.push(
    createTitleMiddleware(config.title ?? {}, {
      ...(deps.titleModel ? { model: deps.titleModel } : {}),
      ...(deps.observeSystemCall ? { observeSystemCall: deps.observeSystemCall } : {}),
    }),
  ); // 22
  if (memoryEnabled) chain.push(createMemoryMiddleware(memory ?? {}, deps.memoryStore ? { store: deps.memoryStore } : {})); // 23
  if (deps.supportsVision) chain.push(createViewImageMiddleware()); // 24
  if (deferred) {
    if (Object.keys(deferred.routingIndex).length > 0) {
      chain.push(createMcpRoutingMiddleware(config.tool_search ?? {}, { routingIndex: deferred.routingIndex, catalogHash: deferred.catalogHash! })); // 25
    }
    chain.push(createDeferredToolFilterMiddleware(config.tool_search ?? {}, { deferredNames: deferred.deferredNames, catalogHash: deferred.catalogHash! })); // 26
  }
  chain.push(createSystemMessageCoalescingMiddleware()); // 27
  if (deps.subagentsEnabled) {
    chain.push(
      createSubagentLimitMiddleware({
        ...(config.subagents?.max_concurrent === undefined ? {} : { max_concurrent: config.subagents.max_concurrent }),
        ...(config.subagents?.max_total_per_run === undefined ? {} : { max_total_per_run: config.subagents.max_total_per_run }),
      }, config.subagent_runtime?.max_running === undefined ? {} : { maxRunning: config.subagent_runtime.max_running }),
    ); // 28
  }
  if (config.loop_detection?.enabled !== false) chain.push(createLoopDetectionMiddleware(config.loop_detection ?? {})); // 29
  if (config.token_budget?.enabled) chain.push(createTokenBudgetMiddleware(config.token_budget)); // 30
  chain.push(createTerminalResponseMiddleware()); // 33
  chain.push(createModelLengthFinishReasonMiddleware()); // 34
  // Registered after the terminal tail so the reversed afterModel order runs it before the loop guard counts calls.
  if (config.safety_finish_reason?.enabled !== false) chain.push(createSafetyFinishReasonMiddleware(config.safety_finish_reason ?? {})); // 35
  chain.push(createClarificationMiddleware()); // 36, last
  const stack = placeExtensionMiddlewares(
    chain,
    { custom: deps.customMiddlewares ?? [], configured: deps.configuredMiddlewares ?? [] },
    LEAD_EXTENSION_TAIL,
  ); // 31, 32
  const violations = orderingViolations(stack.map((m) => m.name));
  if (violations.length > 0) {
    const first = violations[0]!.constraint;
    throw new DeerflowError("ordering_violation", `Middleware ${first.outer} must wrap ${first.inner} (${first.reason}); fix the order of the custom or configured middlewares.`);
  }
  return stack;
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
  /** More tools (MCP servers' tools, an embedder's own); MCP tools are deferred when tool_search is on. */
  readonly extraTools?: readonly AgentTool[];
  /** The caller's identity (user_id, user_role, is_internal, authz_attributes) for assembly-time authorization. */
  readonly context?: Readonly<Record<string, unknown>>;
  /** Loaded plugins: their middlewares are composed into the chain, their observers told. */
  readonly extensions?: LoadedExtensions;
  /** Where extension problems found while building go (default: collected in the assembly). */
  readonly onExtensionDiagnostic?: DiagnosticSink;
  /** The host's background observations, which it stops accepting at shutdown (default: none tracked). */
  readonly detachedObservations?: DetachedObservations;
  /** Custom providers, used instead of the built-in ones the config names. */
  readonly authorizationProvider?: AuthorizationProvider;
  readonly guardrailProvider?: GuardrailProvider;
  /** Binds the task tool so the lead agent can delegate to subagents (built-in and configured types). */
  readonly subagentsEnabled?: boolean;
  /**
   * The custom agent the run asked for: its SOUL joins the prompt, its model is the default when
   * `model` is absent, its model_settings replace the entry's sampling, its tool groups and skill
   * list limit what it may use.
   */
  readonly customAgent?: CustomAgent;
  /**
   * The UI's agent-creation chat (a bootstrap run): binds setup_agent, writing through this port,
   * and adds the creation section to the prompt.
   */
  readonly agentSetup?: AgentSetupPort;
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
  /** Extension problems found while building: contributions skipped, anchors that fell back. */
  readonly diagnostics: readonly ExtensionDiagnostic[];
}

/** The built-in subagent types plus the config's own (`subagents.types`), which may replace a built-in by name. */
function subagentTypesFrom(config: LeadConfig): SubagentType[] {
  const configured = Object.entries(config.subagents?.types ?? {}).map(
    ([name, t]): SubagentType => ({
      name,
      description: t.description,
      systemPrompt: t.system_prompt,
      tools: t.tools ?? null,
      disallowedTools: SUBAGENT_DISALLOWED_TOOLS,
      ...(t.model ? { model: t.model } : {}),
      maxTurns: t.max_turns,
      timeoutMs: t.timeout_seconds * 1000,
    }),
  );
  const names = new Set(configured.map((t) => t.name));
  return [...BUILTIN_SUBAGENT_TYPES.filter((t) => !names.has(t.name)), ...configured];
}

/** What extensions may know of the host's policy: limits, never the config or the auth context. */
export function hostPolicy(config: LeadConfig): HostPolicySnapshot {
  const budget = config.token_budget;
  return hostPolicySnapshot({
    tokenBudgetEnabled: budget?.enabled === true,
    ...(budget?.enabled ? { maxTotalTokens: budget.max_tokens, budgetWarnFraction: budget.warn_threshold } : {}),
  });
}

/** What every assembly step reads: the caller's options, resolved once, in the order they resolve. */
interface AssemblyBasis {
  readonly options: LeadAgentOptions;
  readonly config: LeadConfig;
  readonly env: Env;
  readonly failClosed: boolean;
  readonly authorizationProvider: AuthorizationProvider | null;
  readonly guardrailProvider: GuardrailProvider | null;
  readonly principal: Principal;
  readonly model: BaseChatModel;
  readonly modelInfo: ModelDescription;
  readonly entry: LeadConfig["models"][number] | undefined;
  readonly namedModel: (name: string | null | undefined) => BaseChatModel | undefined;
  readonly storage: NonNullable<AgentServices["storage"]>;
  readonly extensions: LoadedExtensions | undefined;
  readonly diagnostics: ExtensionDiagnostic[];
  readonly report: DiagnosticSink;
  readonly observeSystemCall: SystemModelCallHook | undefined;
  readonly memoryStore: MemoryStore | undefined;
  readonly skillRegistry: SkillRegistry;
  readonly sandboxAuthorizer: SandboxAuthorizer | undefined;
}

/**
 * The providers, the principal and the model it may use: a denied model falls back to another
 * the principal may list and use. Then the stores and hooks every later step shares.
 */
async function resolveAssemblyBasis(options: LeadAgentOptions): Promise<AssemblyBasis> {
  const { config, env } = options;
  const authorization = config.authorization ?? AUTHORIZATION_DEFAULTS;
  const failClosed = authorization.fail_closed !== false;
  const authorizationProvider = resolveAuthorizationProvider(authorization, options.authorizationProvider);
  const guardrailProvider = resolveGuardrailProvider(config.guardrails ?? GUARDRAILS_DEFAULTS, options.guardrailProvider);
  const principal = buildPrincipalFromContext(options.context ?? {}, { default_role: authorization.default_role });
  // Model authorization: a denied model falls back to another the principal may list and use.
  const custom = options.customAgent;
  const requested = describeModel(options.model ?? custom?.model ?? undefined, config).name;
  const modelName = await authorizeModelName(requested, principal, authorizationProvider, availableModelNames(config), { failClosed });
  const sampling = custom?.model_settings ?? undefined;
  const model = createChatModel(config, modelName, env, sampling ? { sampling } : {});
  const modelInfo = describeModel(modelName, config);
  const listed = config.models.find((m) => m.name === modelInfo.name);
  const entry = listed && sampling ? { ...listed, ...sampling } : listed;
  const namedModel = (name: string | null | undefined) => (name ? createChatModel(config, name, env) : undefined);
  const storage = options.services.storage ?? createMemoryKeyValue();
  const extensions = options.extensions;
  const diagnostics: ExtensionDiagnostic[] = [];
  const report: DiagnosticSink = (d) => {
    diagnostics.push(d);
    options.onExtensionDiagnostic?.(d);
  };
  const observeSystemCall =
    extensions && extensions.systemModelObservers.length > 0
      ? createSystemCallHook(extensions, {
          onDiagnostic: report,
          clock: options.services.clock,
          ...(options.detachedObservations ? { detached: options.detachedObservations } : {}),
        })
      : undefined;
  const memoryEnabled = config.memory?.enabled !== false;
  const memoryStore =
    options.memoryStore ??
    (memoryEnabled
      ? createMemoryStore(storage, options.services.clock, {
          config: config.memory ?? {},
          ...(options.services.versioned ? { versioned: options.services.versioned } : {}),
          ...(config.memory?.model_name ? { model: namedModel(config.memory.model_name)! } : {}),
          ...(observeSystemCall ? { observeSystemCall } : {}),
        })
      : undefined);
  const skillRegistry = restrictSkillRegistry(
    options.skillRegistry ??
      deploymentSkillRegistry({ storage, ...(options.services.versioned ? { versioned: options.services.versioned } : {}), config: config.skills ?? {} }),
    // The agent-creation chat sees only the bootstrap skill, as upstream keeps it narrow.
    options.agentSetup ? BOOTSTRAP_SKILL_NAMES : (custom?.skills ?? null),
  );
  const sandboxAuthorizer = authorizationProvider
    ? createSandboxAuthorizer(authorizationProvider, { default_role: authorization.default_role, fail_closed: failClosed })
    : undefined;
  return {
    options, config, env, failClosed, authorizationProvider, guardrailProvider, principal, model, modelInfo, entry, namedModel,
    storage, extensions, diagnostics, report, observeSystemCall, memoryStore, skillRegistry, sandboxAuthorizer,
  };
}

/** Layer 1: the built-in and extra tools, filtered to the ones this principal may use. */
async function permittedTools(basis: AssemblyBasis): Promise<AgentTool[]> {
  const { config, env, options, principal, sandboxAuthorizer, authorizationProvider, failClosed } = basis;
  const gate = sandboxAuthorizer ? { authorizer: sandboxAuthorizer } : {};
  const candidateTools: AgentTool[] = [
    ...createSandboxTools(gate),
    createPresentFileTool({ ...gate, ...(config.tool_output?.storage_subdir ? { toolResultsDirname: config.tool_output.storage_subdir } : {}) }),
    ...createWebTools({ web_fetch: config.web_fetch ?? null, web_search: config.web_search ?? null }, { env }),
    ...(options.agentSetup ? [createSetupAgentTool(options.agentSetup)] : []),
    ...(options.extraTools ?? []),
  ];
  // Layer 1: the model only ever sees the tools this principal may use (and a custom agent's tool groups allow).
  const allowed = filterToolsByGroups(candidateTools, options.customAgent?.tool_groups ?? null);
  return filterToolsForPrincipal(allowed, principal, authorizationProvider, { failClosed });
}

/** The task tools (task, and batch_task when configured), or none when delegation is off. */
function delegationTools(basis: AssemblyBasis, permitted: readonly AgentTool[], subagentsEnabled: boolean): AgentTool[] {
  const { config, env, options, model, modelInfo, skillRegistry, authorizationProvider, guardrailProvider, sandboxAuthorizer } = basis;
  const { observeSystemCall, extensions, report, storage } = basis;
  const delegation: AgentTool[] = [];
  if (subagentsEnabled) {
    // Each delegation builds a fresh subagent on the subagent chain, with the tools its type allows
    // out of the ones this principal may use, and the host's extensions at subagent scope.
    const types = subagentTypesFrom(config);
    // Built with the snapshot the delegation runs with (the run's, else this assembly's), so its
    // middlewares, descriptor and observers all come from the one generation its hooks use.
    const buildAgent: SubagentBuilder = async (type, { extensions: taskExtensions }) => {
      const inherits = !type.model || type.model === "inherit";
      const subModel = inherits ? model : createChatModel(config, type.model!, env);
      const subModelInfo = inherits ? modelInfo : describeModel(type.model, config);
      const subChain = buildSubagentRuntimeMiddlewares(config, {
        model: subModel,
        skillRegistry,
        ...(authorizationProvider ? { authorizationProvider } : {}),
        ...(guardrailProvider ? { guardrailProvider } : {}),
        ...(sandboxAuthorizer ? { sandboxAuthorizer } : {}),
        ...(observeSystemCall ? { observeSystemCall } : {}),
        configuredMiddlewares: options.configuredMiddlewares ?? [],
      });
      const agentName = `subagent:${type.name}`;
      const subMiddlewares = taskExtensions && taskExtensions.middlewareContributors.length > 0
        ? composeWithExtensions(
            subChain,
            collectMiddlewareContributions(
              taskExtensions,
              { scope: AgentScope.SUBAGENT, agentName, modelName: subModelInfo.name, policy: hostPolicy(config) },
              report,
            ),
            { scope: "subagent", onDiagnostic: report },
          ).stack
        : subChain;
      const agent = createAgent({
        name: `subagent-${type.name}`,
        model: subModel,
        tools: filterSubagentTools(type, permitted),
        middlewares: subMiddlewares,
        systemPrompt: type.systemPrompt,
        services: { ...options.services, storage },
        recursionLimit: type.maxTurns,
      });
      const { descriptor, fingerprint } = await describeAgent({
        agentName,
        requestedModel: inherits ? null : type.model!,
        effectiveModel: subModelInfo.name,
        modelParameters: modelParametersOf(subModelInfo, config.models.find((m) => m.name === subModelInfo.name)),
        systemPrompt: type.systemPrompt,
        tools: agent.tools,
        middlewares: subMiddlewares,
        enabledSkills: await skillRegistry.enabledNames(),
        effectivePolicies: {
          prompt_template_id: agentName,
          recursion_limit: type.maxTurns,
          timeout_ms: type.timeoutMs,
          sandbox: options.services.sandbox?.kind ?? null,
          authorization: authorizationProvider ? { provider: authorizationProvider.name, fail_closed: basis.failClosed } : null,
          subagent: true,
          non_interactive: true,
        },
      });
      // As for the lead: observers are told at the end of construction, each failure contained.
      if (taskExtensions) notifyAgentAssembled(taskExtensions.agentAssemblyObservers, descriptor, { onDiagnostic: report });
      return { agent, descriptor, fingerprint };
    };
    // The fallback snapshot for runs that carry none: the extensions this lead was assembled with.
    delegation.push(createTaskTool({ types, buildAgent }, extensions));
    if (parseBatchTaskConfig(config.subagents?.batch).enabled) {
      delegation.push(createBatchTaskTool({ types, buildAgent, config: config.subagents?.batch }, extensions));
    }
  }
  return delegation;
}

/** The configured or built-in prompt, a custom agent's section (or the agent-creation one), the enabled skills, then the section naming what tool_search defers. */
function leadSystemPrompt(
  config: LeadConfig,
  deferred: DeferredToolSetup,
  options: Pick<LeadAgentOptions, "customAgent" | "agentSetup">,
  skills: readonly Skill[],
  skillsRoot: string,
): string {
  const sections = [config.agent.system_prompt ?? LEAD_AGENT_PROMPT];
  if (options.customAgent) sections.push(customAgentPromptSection(options.customAgent));
  if (options.agentSetup) sections.push(AGENT_BOOTSTRAP_PROMPT_SECTION);
  const skillsSection = skillsPromptSection(skills, skillsRoot);
  if (skillsSection) sections.push(skillsSection);
  if (deferred.deferredNames.length > 0) sections.push(deferredToolsPromptSection(deferred.deferredNames));
  return sections.join("\n\n");
}

/** The lead chain with its models and stores, then the extensions' middlewares at their anchors. */
function leadMiddlewareStack(basis: AssemblyBasis, deferred: DeferredToolSetup, subagentsEnabled: boolean): AgentMiddleware[] {
  const { config, options, model, modelInfo, entry, namedModel, memoryStore, skillRegistry, extensions, report } = basis;
  const { observeSystemCall, authorizationProvider, guardrailProvider, sandboxAuthorizer } = basis;
  const core = buildLeadMiddlewares(config, {
    ...(observeSystemCall ? { observeSystemCall } : {}),
    authorizationProvider,
    guardrailProvider,
    ...(sandboxAuthorizer ? { sandboxAuthorizer } : {}),
    deferred,
    model,
    supportsVision: entry?.supports_vision === true,
    ...(entry?.context_window ? { contextWindow: entry.context_window } : {}),
    ...(config.summarization?.model_name ? { summaryModel: namedModel(config.summarization.model_name)! } : {}),
    ...(config.title?.model_name ? { titleModel: namedModel(config.title.model_name)! } : {}),
    ...(memoryStore ? { memoryStore } : {}),
    skillRegistry,
    compactionObservers: [
      ...(options.compactionObservers ?? []),
      // One observer fans out to every extension's, each failure attributed to its extension.
      ...(extensions && extensions.contextCompactionObservers.length > 0
        ? [
            {
              onContextCompacted: (event: CompactionEvent, taskStore: ExtensionData) =>
                notifyContextCompacted(extensions.contextCompactionObservers, event, {
                  onDiagnostic: report,
                  taskStore,
                  ...(options.detachedObservations ? { detached: options.detachedObservations } : {}),
                }),
            },
          ]
        : []),
    ],
    customMiddlewares: options.customMiddlewares ?? [],
    configuredMiddlewares: options.configuredMiddlewares ?? [],
    planMode: options.planMode ?? false,
    subagentsEnabled,
  });
  // The single composition point: contributed middlewares go in last, at their anchors, isolated.
  return extensions && extensions.middlewareContributors.length > 0
    ? composeWithExtensions(
        core,
        collectMiddlewareContributions(
          extensions,
          { scope: AgentScope.LEAD, agentName: LEAD_AGENT_NAME, modelName: modelInfo.name, policy: hostPolicy(config) },
          report,
        ),
        { scope: "lead", onDiagnostic: report },
      ).stack
    : core;
}

/** A model's identity for a descriptor, not its credentials or labels: what changes its behaviour. */
function modelParametersOf(
  modelInfo: AssemblyBasis["modelInfo"],
  entry: Pick<NonNullable<AssemblyBasis["entry"]>, "base_url" | "temperature" | "max_tokens"> | undefined,
): Record<string, unknown> {
  return {
    provider: modelInfo.provider,
    model: modelInfo.model,
    ...(entry?.base_url && !modelInfo.is_demo ? { base_url: entry.base_url } : {}),
    ...(entry?.temperature === undefined ? {} : { temperature: entry.temperature }),
    ...(entry?.max_tokens === undefined ? {} : { max_tokens: entry.max_tokens }),
  };
}

/** The assembly descriptor and its fingerprint: what was built, without credentials or labels. */
async function describeLeadAgent(
  basis: AssemblyBasis,
  built: { agent: Agent; middlewares: AgentMiddleware[]; systemPrompt: string; deferred: DeferredToolSetup; subagentsEnabled: boolean },
): Promise<{ descriptor: AgentAssemblyDescriptor; fingerprint: string }> {
  const { config, options, modelInfo, entry, skillRegistry, authorizationProvider, failClosed } = basis;
  const { agent, middlewares, systemPrompt, deferred, subagentsEnabled } = built;
  const modelParameters = modelParametersOf(modelInfo, entry);
  const custom = options.customAgent;
  return describeAgent({
    agentName: custom?.name ?? LEAD_AGENT_NAME,
    requestedModel: options.model ?? null,
    effectiveModel: modelInfo.name,
    modelParameters,
    systemPrompt,
    tools: agent.tools,
    middlewares,
    enabledSkills: await skillRegistry.enabledNames(),
    deferredToolNames: deferred.deferredNames,
    effectivePolicies: {
      prompt_template_id: config.agent.system_prompt ? "custom" : LEAD_AGENT_PROMPT_ID,
      recursion_limit: config.agent.recursion_limit,
      sandbox: options.services.sandbox?.kind ?? null,
      deferred_tools: { enabled: deferred.deferredNames.length > 0, catalog_hash: deferred.catalogHash },
      authorization: authorizationProvider ? { provider: authorizationProvider.name, fail_closed: failClosed } : null,
      plan_mode: options.planMode ?? false,
      subagents: subagentsEnabled,
      non_interactive: false,
      // Only with a custom agent, so the default lead agent's fingerprint stays what it was.
      ...(custom
        ? { custom_agent: { name: custom.name, model: custom.model, tool_groups: custom.tool_groups, skills: custom.skills, model_settings: custom.model_settings } }
        : {}),
      // Likewise only in an agent-creation chat.
      ...(options.agentSetup ? { agent_bootstrap: true } : {}),
    },
  });
}

/**
 * The lead agent for one request, in named steps: access and model, permitted tools, delegation,
 * deferral and prompt, the middleware stack, the agent, its descriptor, then the observers told.
 */
export async function assembleLeadAgent(options: LeadAgentOptions): Promise<LeadAgentAssembly> {
  const basis = await resolveAssemblyBasis(options);
  const { config, modelInfo, memoryStore, diagnostics, extensions, report, storage, model } = basis;
  const permitted = await permittedTools(basis);
  const subagentsEnabled = options.subagentsEnabled === true;
  const delegation = delegationTools(basis, permitted, subagentsEnabled);
  const deferred = assembleDeferredTools([...permitted, ...delegation], { enabled: config.tool_search?.enabled === true });
  // Read once per assembly: the agent factory rebuilds when the enabled skills change.
  const enabledSkills = (await basis.skillRegistry.load()).skills.filter((skill) => skill.enabled);
  const systemPrompt = leadSystemPrompt(config, deferred, options, enabledSkills, basis.skillRegistry.containerPath);
  const middlewares = leadMiddlewareStack(basis, deferred, subagentsEnabled);
  const agent = createAgent({
    name: LEAD_AGENT_NAME,
    model,
    tools: deferred.tools,
    middlewares,
    systemPrompt,
    checkpointer: options.checkpointer,
    services: { ...options.services, storage },
    recursionLimit: config.agent.recursion_limit,
  });
  const { descriptor, fingerprint } = await describeLeadAgent(basis, { agent, middlewares, systemPrompt, deferred, subagentsEnabled });
  if (extensions) notifyAgentAssembled(extensions.agentAssemblyObservers, descriptor, { onDiagnostic: report });
  return { agent, graph: agent.graph, model: modelInfo, descriptor, fingerprint, memoryStore, diagnostics };
}

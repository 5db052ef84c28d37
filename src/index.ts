/**
 * deerflow-edge: the library entry. Web-API-only; a runtime adapter (deerflow-edge/node, /deno,
 * /bun) adds file storage, host processes and the AsyncLocalStorage LangGraph's interrupt() needs.
 */
export * from "./extension-api/index.ts";
export * from "./engine/index.ts";
export * from "./state/index.ts";
export * from "./ports/index.ts";
export { DeerflowError } from "./core/errors.ts";
// The error classes the library throws: each extends DeerflowError and carries a stable `code`.
export { ModelError } from "./models/errors.ts";
export { CheckpointerError } from "./runtime/kv-checkpointer.ts";
export { ThreadStateError } from "./runtime/thread-state.ts";
export { ThreadStoreError } from "./runtime/thread-store.ts";
export { CustomAgentStoreError } from "./runtime/custom-agents.ts";
export { RunOperationError } from "./runtime/runs/types.ts";
export { RunLeaseLostError } from "./runtime/runs/fence.ts";
export { SkillRegistryError } from "./skills/registry.ts";
export { ThreadDataError } from "./middlewares/thread-data.ts";
export { MemoryStoreError } from "./middlewares/memory/index.ts";
export { SummarizationError } from "./middlewares/summarization/index.ts";
export { ExtensionMiddlewareError } from "./agents/configured-middlewares.ts";
export { ExtensionIsolationError } from "./extensions/isolation.ts";
export { ExtensionLoadError } from "./extensions/loader.ts";
export { ExtensionRegistrationError } from "./extensions/registry.ts";
export { ExtensionOrderingError } from "./extensions/stack.ts";
export { ExtensionManagerError } from "./extensions/manager/errors.ts";
export { ManagerLockBusyError } from "./ports/extension-manager.ts";
export { StorageUnavailableError } from "./ports/key-value.ts";
export { DeploymentFilesError, type DeploymentFile, type DeploymentFiles } from "./ports/deployment-files.ts";
export { systemClock, ManualClock } from "./core/clock.ts";
export { mapEnv } from "./core/env.ts";
export { parseConfigText, validateConfig, loadReplayRecordings, ConfigError, type AppConfig } from "./config/index.ts";
export { ChatOpenAICompatible } from "./models/openai-compatible/index.ts";
export { DemoChatModel } from "./models/demo.ts";
export { ReplayChatModel } from "./models/replay.ts";
export { createChatModel, describeModel } from "./models/factory.ts";
export { normalizeToolResult, type ToolResultMeta } from "./middlewares/tool-result-meta.ts";
export { createToolErrorHandlingMiddleware } from "./middlewares/tool-error-handling/index.ts";
export { createDanglingToolCallMiddleware } from "./middlewares/dangling-tool-call.ts";
export { createSystemMessageCoalescingMiddleware } from "./middlewares/system-message-coalescing.ts";
export { createThreadDataMiddleware } from "./middlewares/thread-data.ts";
export { wrapUserInput, neutralizeUntrustedTags, createInputSanitizationMiddleware } from "./middlewares/input-sanitization.ts";
export { normalizeClarification, createClarificationMiddleware } from "./middlewares/clarification/index.ts";
export { createLLMErrorHandlingMiddleware } from "./middlewares/llm-error-handling/index.ts";
export { createDynamicContextMiddleware } from "./middlewares/dynamic-context.ts";
export { createMemoryMiddleware } from "./middlewares/memory/index.ts";
export { createMemoryStore, type MemoryStore } from "./middlewares/memory/index.ts";
export { createSkillMiddlewares } from "./middlewares/skills/index.ts";
export { createDurableContextMiddleware } from "./middlewares/durable-context/index.ts";
export { createSummarizationMiddleware } from "./middlewares/summarization/index.ts";
export { createTodoListMiddleware } from "./middlewares/todo-list.ts";
export { createTokenUsageMiddleware } from "./middlewares/token-usage/index.ts";
export { createTitleMiddleware } from "./middlewares/title.ts";
export { createViewImageMiddleware } from "./middlewares/view-image.ts";
export { createLoopDetectionMiddleware } from "./middlewares/loop-detection/index.ts";
export { createTokenBudgetMiddleware } from "./middlewares/token-budget.ts";
export { createTerminalResponseMiddleware } from "./middlewares/terminal-response/index.ts";
export { createModelLengthFinishReasonMiddleware } from "./middlewares/model-length-finish-reason/index.ts";
export { createSafetyFinishReasonMiddleware } from "./middlewares/safety-finish-reason/index.ts";
export { createSkillRegistry, type SkillRegistry } from "./skills/registry.ts";
export { classifyCommand, createSandboxAuditMiddleware } from "./middlewares/sandbox-audit/index.ts";
export { sanitizeRemoteToolContent, createToolResultSanitizationMiddleware } from "./middlewares/tool-result-sanitization.ts";
export { createToolOutputBudgetMiddleware, isToolResultArtifact } from "./middlewares/tool-output/index.ts";
export { createUploadsMiddleware } from "./middlewares/uploads/index.ts";
export { createSandboxMiddleware } from "./middlewares/sandbox.ts";
export { createReadBeforeWriteMiddleware } from "./middlewares/read-before-write.ts";
export { createToolProgressMiddleware } from "./middlewares/tool-progress/index.ts";
export { createToolReceiptMiddleware, renderReceiptLedger, parseCitations, verifyCitations } from "./middlewares/tool-receipt/index.ts";
export { createAuthorizationMiddleware } from "./middlewares/authorization.ts";
export { createGuardrailMiddleware } from "./middlewares/guardrail/index.ts";
export { createDeferredToolFilterMiddleware } from "./middlewares/deferred-tool-filter.ts";
export { createMcpRoutingMiddleware } from "./middlewares/mcp-routing.ts";
export * from "./authz/index.ts";
export { loadMcpTools, parseMcpServersConfig, LiveMcpConfig, type ExtensionsConfigFile } from "./mcp/index.ts";
export { assembleDeferredTools, createToolSearchTool } from "./tools/tool-search.ts";
export { createWebTools, type WebSearchProvider } from "./tools/web.ts";
export { createPresentFileTool } from "./tools/present-file.ts";
export { HOST_ORDERING_CONSTRAINTS, orderingViolations } from "./extensions/ordering.ts";
export { loadConfiguredMiddlewares } from "./agents/configured-middlewares.ts";
export { LeadConfigSchema, parseLeadConfigText, validateLeadConfig, type LeadConfig } from "./agents/app-config.ts";
export { createSandboxTools } from "./tools/sandbox-tools.ts";
export { SandboxAuthorizationError } from "./sandbox/acquire.ts";
export { createVirtualSandboxProvider } from "./sandbox/virtual.ts";
export { createMemoryKeyValue } from "./storage/key-value.ts";
export { KeyValueVersioned, versionedOver, updateVersioned, VersionedConflictError } from "./storage/versioned.ts";
export { KeyValueCheckpointSaver } from "./runtime/kv-checkpointer.ts";
export { assembleLeadAgent, buildLeadMiddlewares, LEAD_AGENT_NAME, type LeadAgentAssembly } from "./agents/lead-agent.ts";
export { describeAgent, describeMiddleware } from "./agents/assembly-descriptor.ts";
export { LEAD_AGENT_PROMPT } from "./agents/prompts.ts";
export { validateExtensionSource, type ExtensionSourceCheck, type ExtensionSourceKind, type ExtensionSourceRejection } from "./extensions/manager/source.ts";
export { createGateway, type Gateway, type GatewayOptions } from "./gateway/app.ts";
export { InvalidAgentError, type BareGraph, type ServedAgent } from "./runtime/served-agent.ts";
export {
  createDeerFlowClient,
  DeerFlowClient,
  ClientInputError,
  DEFAULT_CLIENT_USER,
  type ChatResult,
  type ClientFrame,
  type ClientGatewayParts,
  type ClientInput,
  type ClientUser,
  type ClientUserOverride,
  type DeerFlowClientOptions,
  type EmbeddedPrincipal,
  type JoinResult,
  type RunOptions,
} from "./runtime/client.ts";
export type { ConnectionInfo, FetchHandler, HttpServerHandle, ServeFetch, ServeOptions } from "./ports/http-server.ts";
export type { ClientRuns, ClientThreads } from "./runtime/client.ts";

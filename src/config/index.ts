export { ConfigError, formatIssueLine, type ConfigErrorCode, type ConfigIssue } from "./errors.ts";
export { describeIssue, formatKeyPath } from "./issues.ts";
export { availableModelNames, loadConfig, parseConfigText, readConfigText, validateConfig, type ConfigSchema, type LoadConfigOptions } from "./load.ts";
export {
  AgentConfigSchema,
  AppConfigSchema,
  DEFAULT_BASE_URL,
  DEFAULT_MODEL_TIMEOUT_MS,
  DEFAULT_RECURSION_LIMIT,
  DEFAULT_STORAGE_BASE,
  DEMO_MODEL_NAME,
  MODEL_NAME_PATTERN,
  MODEL_PROVIDERS,
  ModelConfigSchema,
  SandboxConfigSchema,
  StorageConfigSchema,
  appConfigEntries,
  describeValue,
  mapping,
  type AgentConfig,
  type AppConfig,
  type AppConfigInput,
  type ModelConfig,
  type ModelProvider,
  type SandboxConfig,
  type StorageConfig,
} from "./schema.ts";

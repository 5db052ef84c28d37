import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { isHttpUrl } from "../core/url.ts";
import { isRecord } from "../core/guards.ts";
import { ReplayRecordingSchema, type ReplayRecording, type ReplayRecordingInput } from "./replay-recording.ts";

/** The built-in offline model; always available, whether or not config.yaml lists it. */
export const DEMO_MODEL_NAME = "demo";
export const DEFAULT_BASE_URL = "https://api.openai.com/v1";
export const DEFAULT_MODEL_TIMEOUT_MS = 120_000;
export const DEFAULT_RECURSION_LIMIT = 100;
export const DEFAULT_STORAGE_BASE = ".deer-flow";
/** How long one sandbox command may run before it is stopped. */
export const DEFAULT_SANDBOX_COMMAND_TIMEOUT_MS = 30_000;
/** Virtual sandbox worker threads at once (src/sandbox/virtual-worker.ts WorkerSupply), and the most one may ask for. */
export const DEFAULT_SANDBOX_MAX_WORKERS = 8;
const MAX_SANDBOX_WORKERS = 256;
/** The longest delay a timer takes on every runtime (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

export const MODEL_NAME_PATTERN = /^[A-Za-z0-9_.-]+$/;
const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
const HEADER_NAME_PATTERN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers that carry credentials: a secret never lives in the config file. */
const SECRET_HEADER_NAMES = new Set(["authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"]);

export const MODEL_PROVIDERS = ["openai-compatible", "demo", "replay"] as const;
export type ModelProvider = (typeof MODEL_PROVIDERS)[number];

/** How a YAML value is named in messages ("a list", "a mapping", "42", "\"gpt\""). */
export function describeValue(input: unknown): string {
  if (input === null) return "null";
  if (input === undefined) return "nothing";
  if (Array.isArray(input)) return "a list";
  if (typeof input === "object") return "a mapping";
  if (typeof input === "string") return JSON.stringify(input);
  return String(input);
}

/**
 * A strict mapping: unknown keys fail. valibot's object schemas accept arrays, so a list where a
 * mapping belongs is rejected first, instead of surfacing as "unknown key 0".
 */
export function mapping<const TEntries extends v.ObjectEntries>(entries: TEntries) {
  return v.pipe(
    v.custom<v.InferInput<v.StrictObjectSchema<TEntries, undefined>>>(
      isRecord,
      (issue) => `expected a mapping, got ${describeValue(issue.input)}`,
    ),
    v.strictObject(entries),
  );
}

const nonEmptyString = v.pipe(
  v.string(),
  v.minLength(1, () => "expected a non-empty string, got \"\""),
);

const positiveInteger = v.pipe(
  v.number(),
  v.integer((issue) => `expected a whole number, got ${issue.received}`),
  v.minValue(1, (issue) => `expected a number >= 1, got ${issue.received}`),
);

const headerName = v.pipe(
  v.string(),
  v.regex(HEADER_NAME_PATTERN, (issue) => `expected an HTTP header name, got ${issue.received}`),
  v.check(
    (name) => !SECRET_HEADER_NAMES.has(name.toLowerCase()),
    (issue) =>
      `header ${issue.received} carries a secret and must not be written in the config file; put the key in an environment variable and name it with api_key_env`,
  ),
);

export const ModelConfigSchema = mapping({
  name: v.pipe(
    v.string(),
    v.regex(
      MODEL_NAME_PATTERN,
      (issue) => `expected a name made of letters, digits, "_", "." or "-", got ${issue.received}`,
    ),
  ),
  use: v.picklist(MODEL_PROVIDERS),
  /** The provider's model id (gpt-4o-mini, deepseek-chat ...); required for openai-compatible. */
  model: v.optional(nonEmptyString),
  base_url: v.optional(
    v.pipe(
      v.string(),
      v.check(isHttpUrl, (issue) => `expected an http(s) URL such as ${DEFAULT_BASE_URL}, got ${issue.received}`),
    ),
    DEFAULT_BASE_URL,
  ),
  /** Name of the environment variable that holds the API key; the key itself never goes in the file. */
  api_key_env: v.optional(
    v.pipe(
      v.string(),
      v.regex(
        ENV_NAME_PATTERN,
        (issue) => `expected an environment variable name such as OPENAI_API_KEY, got ${issue.received}`,
      ),
    ),
  ),
  display_name: v.optional(v.string()),
  description: v.optional(v.string()),
  max_tokens: v.optional(positiveInteger),
  temperature: v.optional(
    v.pipe(
      v.number(),
      v.minValue(0, (issue) => `expected a number from 0 to 2, got ${issue.received}`),
      v.maxValue(2, (issue) => `expected a number from 0 to 2, got ${issue.received}`),
    ),
  ),
  timeout_ms: v.optional(positiveInteger, DEFAULT_MODEL_TIMEOUT_MS),
  supports_vision: v.optional(v.boolean()),
  supports_thinking: v.optional(v.boolean()),
  extra_headers: v.optional(v.record(headerName, v.string())),
  context_window: v.optional(positiveInteger),
  /** use: replay only: the recorded session to play (upstream's fixture format), relative to the config file. */
  fixture: v.optional(nonEmptyString),
  /** use: replay only: the recording itself; filled from `fixture` when the config is loaded, or given inline. */
  recording: v.optional(ReplayRecordingSchema),
  /** use: replay only: several recorded sessions, each played for its own prompt (instead of `fixture`). */
  fixtures: v.optional(v.pipe(v.array(nonEmptyString), v.minLength(1, () => "expected at least one fixture file, got an empty list"))),
  /** use: replay only: the recordings themselves; filled from `fixtures` when the config is loaded, or given inline. */
  recordings: v.optional(v.pipe(v.array(ReplayRecordingSchema), v.minLength(1, () => "expected at least one recording, got an empty list"))),
});

export const SandboxConfigSchema = mapping({
  /** virtual: in-process, no host access (default). local: host processes, opt-in. */
  use: v.optional(v.picklist(["virtual", "local"]), "virtual"),
  /** Wall-clock limit of one command (bash tool); past it the command is stopped, exit code 124. */
  command_timeout_ms: v.optional(
    v.pipe(
      positiveInteger,
      v.maxValue(MAX_TIMER_MS, (issue) => `expected a number <= ${MAX_TIMER_MS} (about 24.8 days), got ${issue.received}`),
    ),
    DEFAULT_SANDBOX_COMMAND_TIMEOUT_MS,
  ),
  /**
   * virtual: how many worker threads run commands at once (each holds its own interpreter, about
   * 11 MB on Bun); past it a sandbox borrows an idle sandbox's worker or waits for one.
   */
  max_workers: v.optional(
    v.pipe(positiveInteger, v.maxValue(MAX_SANDBOX_WORKERS, (issue) => `expected a number <= ${MAX_SANDBOX_WORKERS}, got ${issue.received}`)),
    DEFAULT_SANDBOX_MAX_WORKERS,
  ),
});

/** How long a worker owns a run without renewing (postgres); past it plus the grace the run is swept `interrupted`. */
export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_LEASE_GRACE_MS = 10_000;
/** Connections one worker opens to PostgreSQL at most (its LISTEN connection comes on top). */
export const DEFAULT_POOL_MAX = 10;
const MAX_POOL_CONNECTIONS = 1000;

const postgresOnly = 'only read by driver "postgres"; remove it, or set driver: postgres';

export const StorageConfigSchema = v.pipe(
  mapping({
    /** fs: files under base (default). memory: gone at exit. deno-kv: Deno KV (Deno only). postgres: PostgreSQL 14+, shared by several workers. */
    driver: v.optional(v.picklist(["memory", "fs", "deno-kv", "postgres"]), "fs"),
    base: v.optional(nonEmptyString, DEFAULT_STORAGE_BASE),
    /** deno-kv only: a local Deno KV file, ":memory:" or a KV Connect URL (what the runtime's KV open call takes); the runtime's default database when absent. */
    path: v.optional(nonEmptyString),
    /** postgres only: the environment variable that holds the connection URL (it carries a password, so never the file). */
    url_env: v.optional(
      v.pipe(
        v.string(),
        v.regex(ENV_NAME_PATTERN, (issue) => `expected an environment variable name such as DATABASE_URL, got ${issue.received}`),
      ),
    ),
    lease_ms: v.optional(v.pipe(positiveInteger, v.maxValue(MAX_TIMER_MS, (issue) => `expected a number <= ${MAX_TIMER_MS}, got ${issue.received}`))),
    lease_grace_ms: v.optional(v.pipe(positiveInteger, v.maxValue(MAX_TIMER_MS, (issue) => `expected a number <= ${MAX_TIMER_MS}, got ${issue.received}`))),
    pool_max: v.optional(v.pipe(positiveInteger, v.maxValue(MAX_POOL_CONNECTIONS, (issue) => `expected a number <= ${MAX_POOL_CONNECTIONS}, got ${issue.received}`))),
  }),
  v.forward(
    v.check((storage) => storage.path === undefined || storage.driver === "deno-kv", 'only read by driver "deno-kv"; remove it, or set driver: deno-kv'),
    ["path"],
  ),
  v.forward(
    v.check((storage) => storage.url_env !== undefined || storage.driver !== "postgres", 'driver "postgres" needs url_env, the environment variable that holds the connection URL, for example url_env: DATABASE_URL'),
    ["url_env"],
  ),
  v.forward(v.check((storage) => storage.url_env === undefined || storage.driver === "postgres", postgresOnly), ["url_env"]),
  v.forward(v.check((storage) => storage.lease_ms === undefined || storage.driver === "postgres", postgresOnly), ["lease_ms"]),
  v.forward(v.check((storage) => storage.lease_grace_ms === undefined || storage.driver === "postgres", postgresOnly), ["lease_grace_ms"]),
  v.forward(v.check((storage) => storage.pool_max === undefined || storage.driver === "postgres", postgresOnly), ["pool_max"]),
);

export const AgentConfigSchema = mapping({
  system_prompt: v.optional(v.string()),
  recursion_limit: v.optional(positiveInteger, DEFAULT_RECURSION_LIMIT),
});

/**
 * The top-level sections. Exported so a later section can be added in one place; every section is
 * optional and an empty (null) section means "all defaults".
 */
export const appConfigEntries = {
  models: v.nullish(v.array(ModelConfigSchema), []),
  default_model: v.optional(nonEmptyString),
  sandbox: v.nullish(SandboxConfigSchema, {}),
  storage: v.nullish(StorageConfigSchema, {}),
  agent: v.nullish(AgentConfigSchema, {}),
};

export const AppConfigSchema = mapping(appConfigEntries);

/** config.yaml's base sections after validation, every default filled in. */
export interface AppConfig {
  models: ModelConfig[];
  default_model?: string;
  sandbox: SandboxConfig;
  storage: StorageConfig;
  agent: AgentConfig;
}
type _AppConfigMatches = Assert<SameType<AppConfig, v.InferOutput<typeof AppConfigSchema>>>;
/** config.yaml's base sections as written: every section optional, an empty (null) one all defaults. */
export interface AppConfigInput {
  models?: ModelConfigInput[] | null;
  default_model?: string;
  sandbox?: Partial<SandboxConfig> | null;
  storage?: Partial<StorageConfig> | null;
  agent?: Partial<AgentConfig> | null;
}
type _AppConfigInputMatches = Assert<SameType<AppConfigInput, v.InferInput<typeof AppConfigSchema>>>;
/** One `models:` entry as written (base_url and timeout_ms have defaults). */
export interface ModelConfigInput extends Omit<ModelConfig, "base_url" | "timeout_ms" | "recording" | "recordings"> {
  base_url?: string;
  timeout_ms?: number;
  recording?: ReplayRecordingInput;
  recordings?: ReplayRecordingInput[];
}
type _ModelConfigInputMatches = Assert<SameType<ModelConfigInput, v.InferInput<typeof ModelConfigSchema>>>;
export interface ModelConfig {
  name: string;
  use: "demo" | "openai-compatible" | "replay";
  model?: string;
  base_url: string;
  api_key_env?: string;
  display_name?: string;
  description?: string;
  max_tokens?: number;
  temperature?: number;
  timeout_ms: number;
  supports_vision?: boolean;
  supports_thinking?: boolean;
  extra_headers?: Record<string, string>;
  context_window?: number;
  fixture?: string;
  recording?: ReplayRecording;
  fixtures?: string[];
  recordings?: ReplayRecording[];
}
type _ModelConfigMatches = Assert<SameType<ModelConfig, v.InferOutput<typeof ModelConfigSchema>>>;
export interface SandboxConfig {
  use: "local" | "virtual";
  command_timeout_ms: number;
  max_workers: number;
}
type _SandboxConfigMatches = Assert<SameType<SandboxConfig, v.InferOutput<typeof SandboxConfigSchema>>>;
export interface StorageConfig {
  driver: "deno-kv" | "fs" | "memory" | "postgres";
  base: string;
  path?: string;
  url_env?: string;
  lease_ms?: number;
  lease_grace_ms?: number;
  pool_max?: number;
}
type _StorageConfigMatches = Assert<SameType<StorageConfig, v.InferOutput<typeof StorageConfigSchema>>>;
export interface AgentConfig {
  system_prompt?: string;
  recursion_limit: number;
}
type _AgentConfigMatches = Assert<SameType<AgentConfig, v.InferOutput<typeof AgentConfigSchema>>>;

import { validateLeadConfig, type LeadConfig } from "../agents/app-config.ts";
import { ConfigError } from "../config/index.ts";
import { readConfigText } from "../config/load.ts";
import { DeerflowError } from "../core/errors.ts";
import type { Env } from "../ports/runtime-ports.ts";

/*
 * A Deploy entry's configuration (deploy/deno-deploy.ts, deploy/cloudflare-worker.ts), read from
 * environment variables only (Deno Deploy and Workers have no config file to read and no disk to
 * keep one on): either DEERFLOW_CONFIG, config.yaml's whole text, or the DEERFLOW_* variables
 * below for the common case. Both become the same config object config.yaml becomes and go through
 * the same valibot schema; a value the schema refuses is reported under the variable that carried it.
 */

/** Every variable the Deploy entries read, with what it sets. Listed in the README. */
export const DEPLOY_ENV = {
  config: "DEERFLOW_CONFIG",
  authMode: "DEERFLOW_AUTH_MODE",
  apiKey: "DEERFLOW_API_KEY",
  apiKeyUser: "DEERFLOW_API_KEY_USER",
  apiKeyRole: "DEERFLOW_API_KEY_ROLE",
  adminPasswordHash: "DEERFLOW_ADMIN_PASSWORD_HASH",
  adminUser: "DEERFLOW_ADMIN_USER",
  corsOrigins: "DEERFLOW_CORS_ORIGINS",
  model: "DEERFLOW_MODEL",
  modelName: "DEERFLOW_MODEL_NAME",
  modelBaseUrl: "DEERFLOW_MODEL_BASE_URL",
  modelApiKey: "DEERFLOW_MODEL_API_KEY",
  modelApiKeyEnv: "DEERFLOW_MODEL_API_KEY_ENV",
  modelTimeoutMs: "DEERFLOW_MODEL_TIMEOUT_MS",
  systemPrompt: "DEERFLOW_SYSTEM_PROMPT",
  kvPath: "DEERFLOW_KV_PATH",
} as const;

const E = DEPLOY_ENV;
/** The user a DEERFLOW_API_KEY caller acts as, and the session user, when not named. */
const DEFAULT_API_KEY_USER = "deploy";
const DEFAULT_ADMIN_USER = "admin";
const DEFAULT_MODEL_NAME = "default";
/** Where the file the config would have come from is named in messages. */
const SOURCE = "environment";

export const NO_AUTH_MESSAGE =
  `No authentication configured, and a deployed server answers anyone who finds its URL: set ${E.apiKey} to a long random key ` +
  `(callers send it in the x-api-key header), or ${E.adminPasswordHash} to a hash from "deerflow-edge hash-password" ` +
  `(browsers log in as ${E.adminUser}, default "${DEFAULT_ADMIN_USER}"); ${E.authMode} (api_key or session) picks one when both are set.`;

/** A variable a Deploy entry cannot start with; the message names it and what to set. */
export class DeployEnvError extends DeerflowError {
  declare readonly code: "deploy_env_invalid";
  constructor(message: string) {
    super("deploy_env_invalid", message);
    this.name = "DeployEnvError";
  }
}

/** A set, non-blank variable's value (trimmed), else undefined. */
function read(env: Env, name: string): string | undefined {
  const value = env.get(name)?.trim();
  return value === undefined || value === "" ? undefined : value;
}

/** A whole number written as digits becomes a number; anything else stays text for the schema to name. */
function numberOrText(value: string): number | string {
  return /^\d+$/.test(value) ? Number(value) : value;
}

/** The storage driver a platform has: Deno KV on Deno Deploy, memory (one isolate's life) on Workers. */
export type DeployStorage = "deno-kv" | "memory";

/**
 * The lead config a Deploy entry serves, from `env`: the virtual sandbox, auth required, `storage`
 * unless DEERFLOW_CONFIG names a driver (deno-kv: DEERFLOW_KV_PATH, else the runtime's default
 * database). From DEERFLOW_CONFIG when it is set, else from the DEERFLOW_* variables: one model (or
 * the built-in demo model when DEERFLOW_MODEL and its siblings are unset). Throws
 * {@link DeployEnvError} naming the variable to set or fix, or the schema's ConfigError for
 * DEERFLOW_CONFIG.
 */
export function deployConfigFromEnv(env: Env, storage: DeployStorage = "deno-kv"): LeadConfig {
  const text = env.get(E.config);
  if (text !== undefined && text.trim() !== "") return configFromText(text, storage);
  /** Config key path → the variable whose value sits there, to name it when the schema refuses it. */
  const origins = new Map<string, string>();
  const at = (path: string, name: string, value: unknown) => {
    origins.set(path, name);
    return value;
  };

  const apiKey = read(env, E.apiKey);
  const passwordHash = read(env, E.adminPasswordHash);
  const mode = read(env, E.authMode) ?? (apiKey !== undefined ? "api_key" : passwordHash !== undefined ? "session" : undefined);
  if (mode === undefined) throw new DeployEnvError(NO_AUTH_MESSAGE);
  if (mode !== "api_key" && mode !== "session") {
    throw new DeployEnvError(`${E.authMode}: expected api_key or session, got ${JSON.stringify(mode)} (a deployed server never runs with auth disabled).`);
  }
  if (mode === "api_key" && apiKey === undefined) throw new DeployEnvError(`${E.authMode} is api_key but ${E.apiKey} is not set; set it to a long random key callers send in the x-api-key header.`);
  if (mode === "session" && passwordHash === undefined) {
    throw new DeployEnvError(`${E.authMode} is session but ${E.adminPasswordHash} is not set; set it to the output of: printf %s '<password>' | deerflow-edge hash-password`);
  }
  const role = read(env, E.apiKeyRole);
  const auth = {
    mode: at("gateway.auth.mode", E.authMode, mode),
    ...(apiKey === undefined
      ? {}
      : {
          api_keys: [
            {
              key_env: at("gateway.auth.api_keys[0].key_env", E.apiKey, E.apiKey),
              user_id: at("gateway.auth.api_keys[0].user_id", E.apiKeyUser, read(env, E.apiKeyUser) ?? DEFAULT_API_KEY_USER),
              ...(role === undefined ? {} : { role: at("gateway.auth.api_keys[0].role", E.apiKeyRole, role) }),
            },
          ],
        }),
    ...(passwordHash === undefined
      ? {}
      : {
          users: [
            {
              id: at("gateway.auth.users[0].id", E.adminUser, read(env, E.adminUser) ?? DEFAULT_ADMIN_USER),
              password_hash: at("gateway.auth.users[0].password_hash", E.adminPasswordHash, passwordHash),
              role: "admin",
            },
          ],
        }),
  };
  const cors = read(env, E.corsOrigins);
  const corsOrigins = cors === undefined ? [] : cors.split(",").map((origin) => origin.trim()).filter((origin) => origin !== "");
  corsOrigins.forEach((_, index) => origins.set(`gateway.cors_origins[${index}]`, E.corsOrigins));

  const model = modelFromEnv(env, at);
  const kvPath = read(env, E.kvPath);
  const systemPrompt = env.get(E.systemPrompt);
  const value = {
    models: model === undefined ? [] : [model],
    storage: { driver: storage, ...(kvPath === undefined || storage !== "deno-kv" ? {} : { path: at("storage.path", E.kvPath, kvPath) }) },
    sandbox: { use: "virtual" },
    ...(systemPrompt === undefined || systemPrompt.trim() === "" ? {} : { agent: { system_prompt: at("agent.system_prompt", E.systemPrompt, systemPrompt) } }),
    gateway: { auth, ...(corsOrigins.length === 0 ? {} : { cors_origins: corsOrigins }) },
  };
  try {
    return validateLeadConfig(value, SOURCE);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const issue = error.issues[0]!;
    const name = origins.get(issue.path) ?? [...origins].find(([path]) => issue.path.startsWith(`${path}.`) || issue.path.startsWith(`${path}[`))?.[1];
    throw new DeployEnvError(name === undefined ? error.message : `${name}: ${issue.message}`);
  }
}

/**
 * DEERFLOW_CONFIG: config.yaml's text (YAML or JSON), storage defaulting to the platform's, auth
 * required (a deployed server answers anyone who finds its URL).
 */
function configFromText(text: string, storage: DeployStorage): LeadConfig {
  const value = readConfigText(text, E.config);
  const mapping = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  const named = mapping?.storage;
  const withDefaults = mapping
    ? { ...mapping, storage: typeof named === "object" && named !== null && !Array.isArray(named) ? { driver: storage, ...named } : (named ?? { driver: storage }) }
    : value;
  const config = validateLeadConfig(withDefaults, E.config);
  const mode = config.gateway?.auth.mode;
  if (mode === undefined || mode === "disabled") {
    throw new DeployEnvError(
      `${E.config} ${mode === undefined ? "sets no gateway.auth" : "sets gateway.auth.mode disabled"}, and a deployed server answers anyone who finds its URL: ` +
        `set gateway.auth there (mode: api_key with api_keys: [{ key_env: ${E.apiKey}, user_id: me }], the key itself in ${E.apiKey}), or unset ${E.config} and set ${E.apiKey}.`,
    );
  }
  return config;
}

function modelFromEnv(env: Env, at: (path: string, name: string, value: unknown) => unknown): Record<string, unknown> | undefined {
  const id = read(env, E.model);
  const baseUrl = read(env, E.modelBaseUrl);
  const key = read(env, E.modelApiKey);
  const keyEnv = read(env, E.modelApiKeyEnv);
  const timeout = read(env, E.modelTimeoutMs);
  const name = read(env, E.modelName);
  if ([id, baseUrl, key, keyEnv, timeout, name].every((v) => v === undefined)) return undefined;
  if (id === undefined) {
    throw new DeployEnvError(`${E.model} is not set, but other ${E.model}_* variables are; set it to the provider's model id (for example gpt-4o-mini), or unset them all to serve the built-in demo model.`);
  }
  const apiKeyEnv = keyEnv ?? (key !== undefined ? E.modelApiKey : undefined);
  if (apiKeyEnv === undefined) {
    throw new DeployEnvError(`${E.model} is set but no key for it: set ${E.modelApiKey} to the provider's API key, or ${E.modelApiKeyEnv} to the name of the variable that holds it (for example OPENAI_API_KEY).`);
  }
  if (keyEnv !== undefined && /^[A-Za-z_][A-Za-z0-9_]*$/.test(keyEnv) && read(env, keyEnv) === undefined) {
    throw new DeployEnvError(`${E.modelApiKeyEnv} names ${keyEnv}, which is not set; set ${keyEnv} to the provider's API key.`);
  }
  return {
    name: at("models[0].name", E.modelName, name ?? DEFAULT_MODEL_NAME),
    use: "openai-compatible",
    model: at("models[0].model", E.model, id),
    ...(baseUrl === undefined ? {} : { base_url: at("models[0].base_url", E.modelBaseUrl, baseUrl) }),
    api_key_env: at("models[0].api_key_env", keyEnv === undefined ? E.modelApiKey : E.modelApiKeyEnv, apiKeyEnv),
    ...(timeout === undefined ? {} : { timeout_ms: at("models[0].timeout_ms", E.modelTimeoutMs, numberOrText(timeout)) }),
  };
}

import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { availableModelNames } from "../config/load.ts";
import { DEMO_MODEL_NAME, type AppConfig, type ModelConfig, type ModelProvider } from "../config/schema.ts";
import type { Env } from "../ports/runtime-ports.ts";
import { DemoChatModel } from "./demo.ts";
import { ReplayChatModel, type ReplaySource } from "./replay.ts";
import { ModelError } from "./errors.ts";
import { ChatOpenAICompatible, type FetchLike } from "./openai-compatible/index.ts";

export interface CreateChatModelOptions {
  /** Replaces the global fetch of OpenAI-compatible models (tests, proxies). */
  fetch?: FetchLike;
  /** Sampling that replaces the config entry's (a custom agent's model_settings). */
  sampling?: { readonly temperature?: number; readonly max_tokens?: number };
}

export interface ModelDescription {
  name: string;
  provider: ModelProvider;
  /** The provider's model id; "demo" for the demo model, "replay:<scenario>" for a replay model. */
  model: string;
  is_demo: boolean;
  display_name?: string;
}

/** The model a run uses: the requested name, else default_model, else the first listed, else demo. */
export function resolveModelName(config: AppConfig, name: string | undefined): string {
  return name ?? config.default_model ?? config.models[0]?.name ?? DEMO_MODEL_NAME;
}

function findModel(config: AppConfig, name: string): ModelConfig | undefined {
  const listed = config.models.find((model) => model.name === name);
  if (listed !== undefined) return listed;
  if (name === DEMO_MODEL_NAME) return { name: DEMO_MODEL_NAME, use: "demo", base_url: "", timeout_ms: 0 };
  throw new ModelError(
    `Unknown model "${name}"; available models: ${availableModelNames(config)
      .map((n) => `"${n}"`)
      .join(", ")}. Pick one of them or add "${name}" under models in config.yaml`,
    { code: "unknown_model" },
  );
}

export function createChatModel(
  config: AppConfig,
  name: string | undefined,
  env: Env,
  options: CreateChatModelOptions = {},
): BaseChatModel {
  const resolved = resolveModelName(config, name);
  const entry = findModel(config, resolved)!;
  if (entry.use === "demo") return new DemoChatModel();
  if (entry.use === "replay") return createReplayModel(entry);

  if (entry.model === undefined) {
    throw new ModelError(
      `Model "${entry.name}" has no provider model id; set models[].model for it in config.yaml (e.g. gpt-4o-mini)`,
      { code: "missing_model_id" },
    );
  }
  let apiKey: string | undefined;
  if (entry.api_key_env !== undefined) {
    apiKey = env.get(entry.api_key_env);
    if (!isSet(apiKey)) throw missingKey(entry.name, entry.api_key_env, "or choose another model");
  }
  const temperature = options.sampling?.temperature ?? entry.temperature;
  const maxTokens = options.sampling?.max_tokens ?? entry.max_tokens;
  return new ChatOpenAICompatible({
    model: entry.model,
    baseUrl: entry.base_url,
    ...(apiKey === undefined ? {} : { apiKey: apiKey.trim() }),
    ...(entry.api_key_env === undefined ? {} : { apiKeyEnv: entry.api_key_env }),
    ...(temperature === undefined ? {} : { temperature }),
    ...(maxTokens === undefined ? {} : { maxTokens }),
    timeoutMs: entry.timeout_ms,
    ...(entry.extra_headers === undefined ? {} : { extraHeaders: entry.extra_headers }),
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
}

/** A replay entry's recordings with where each came from: `recording` (from `fixture`) first, then `recordings` (from `fixtures`). */
function replaySources(entry: ModelConfig): ReplaySource[] {
  const inline = (what: string) => `the inline ${what} of model "${entry.name}"`;
  return [
    ...(entry.recording === undefined ? [] : [{ recording: entry.recording, source: entry.fixture ?? inline("recording") }]),
    ...(entry.recordings ?? []).map((recording, index) => ({ recording, source: entry.fixtures?.[index] ?? inline(`recordings[${index}]`) })),
  ];
}

function createReplayModel(entry: ModelConfig): ReplayChatModel {
  const unread = [...(entry.recording === undefined && entry.fixture !== undefined ? [entry.fixture] : []), ...(entry.recordings === undefined ? (entry.fixtures ?? []) : [])];
  const recordings = replaySources(entry);
  if (recordings.length === 0 || unread.length > 0) {
    throw new ModelError(
      `Replay model "${entry.name}" has no recording loaded${unread.length === 0 ? "" : ` from ${unread.join(", ")}`}; ` +
        "load the config with loadReplayRecordings (the CLI does at start) or give the recording inline",
      { code: "replay_not_loaded" },
    );
  }
  return new ReplayChatModel({ recordings, modelName: entry.name });
}

/** Refuses a config with a replay model whose fixture was not read, so a server stops at start. */
export function assertReplayRecordingsLoaded(config: AppConfig): void {
  for (const entry of config.models) if (entry.use === "replay") createReplayModel(entry);
}

function isSet(value: string | undefined): value is string {
  return value !== undefined && value.trim() !== "";
}

function missingKey(model: string, variable: string, otherwise: string): ModelError {
  return new ModelError(
    `Model "${model}" needs an API key in the environment variable ${variable}, which is not set; set ${variable} ${otherwise}`,
    { code: "missing_api_key" },
  );
}

/** The configured models whose `api_key_env` names a variable that is unset or blank, in config order. */
export function modelsMissingApiKeys(config: AppConfig, env: Env): Array<{ readonly model: string; readonly variable: string }> {
  return config.models.flatMap((entry) =>
    entry.use !== "demo" && entry.api_key_env !== undefined && !isSet(env.get(entry.api_key_env)) ? [{ model: entry.name, variable: entry.api_key_env }] : [],
  );
}

/**
 * Refuses a config with a model whose key variable is unset (ModelError `missing_api_key`, naming
 * the model and the variable; the first of them when several are missing), so a server stops at
 * start instead of failing the first request that builds that model.
 */
export function assertModelApiKeysSet(config: AppConfig, env: Env): void {
  const missing = modelsMissingApiKeys(config, env);
  if (missing.length === 0) return;
  const [first] = missing;
  const others = missing.slice(1).map((m) => `${m.variable} (model "${m.model}")`);
  throw missingKey(first!.model, first!.variable, `before starting, or remove the model from config.yaml${others.length > 0 ? `; also unset: ${others.join(", ")}` : ""}`);
}

function replayModelId(entry: ModelConfig): string {
  return `replay:${(entry.recording ?? entry.recordings?.[0])?.scenario ?? entry.model ?? entry.fixture ?? entry.fixtures?.[0] ?? entry.name}`;
}

/** What a UI or the CLI shows about a model: which provider, which model id, and whether it is the demo. */
export function describeModel(name: string | undefined, config: AppConfig): ModelDescription {
  const entry = findModel(config, resolveModelName(config, name))!;
  const isDemo = entry.use === "demo";
  const description: ModelDescription = {
    name: entry.name,
    provider: entry.use,
    model: isDemo ? DEMO_MODEL_NAME : entry.use === "replay" ? replayModelId(entry) : (entry.model ?? ""),
    is_demo: isDemo,
  };
  if (entry.display_name !== undefined) description.display_name = entry.display_name;
  return description;
}

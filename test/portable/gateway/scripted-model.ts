// What the gateway tests with a scripted OpenAI-compatible model share: the config that points the
// gateway at it, the env holding its key, and the one-completion answer it sends back.
import { validateLeadConfig, type LeadConfig } from "../../../src/agents/app-config.ts";
import { mapEnv, type Env } from "../../../src/core/env.ts";

/** The env the scripted model's key is read from. */
export function scriptedModelEnv(): Env {
  return mapEnv({ SCRIPTED_KEY: "test-key" });
}

/** A gateway config whose only (and default) model is the scripted one at `modelUrl`, plus `extra`. */
export function scriptedModelConfig(modelUrl: string, extra: Record<string, unknown>, source: string): LeadConfig {
  return validateLeadConfig(
    {
      models: [{ name: "scripted", use: "openai-compatible", model: "scripted", base_url: `${modelUrl}/v1`, api_key_env: "SCRIPTED_KEY" }],
      default_model: "scripted",
      ...extra,
    },
    source,
  );
}

/** One whole chat completion carrying `message`; one id per completion, as the messages reducer merges messages sharing one. */
export function scriptedCompletion(message: Record<string, unknown>): Record<string, unknown> {
  return {
    id: `chatcmpl-${crypto.randomUUID()}`,
    object: "chat.completion",
    created: 1,
    model: "scripted",
    choices: [{ index: 0, message, finish_reason: "tool_calls" in message ? "tool_calls" : "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

import { HumanMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { parseConfigText } from "../../../src/config/index.ts";
import {
  ChatOpenAICompatible,
  DemoChatModel,
  ModelError,
  createChatModel,
  describeModel,
  resolveModelName,
} from "../../../src/models/index.ts";
import type { Env } from "../../../src/ports/runtime-ports.ts";

const env = (vars: Record<string, string> = {}): Env => ({ get: (name) => vars[name] });

const config = parseConfigText(
  [
    "models:",
    "  - name: gpt",
    "    use: openai-compatible",
    "    model: gpt-4o-mini",
    "    display_name: GPT-4o mini",
    "    api_key_env: OPENAI_API_KEY",
    "    temperature: 0.3",
    "    max_tokens: 512",
    "    timeout_ms: 9000",
    "    extra_headers: { X-Title: deerflow-edge }",
    "  - name: local",
    "    use: openai-compatible",
    "    model: qwen2.5:7b",
    "    base_url: http://127.0.0.1:11434/v1/",
    "  - name: offline",
    "    use: demo",
    "",
  ].join("\n"),
  "config.yaml",
);

function thrown(fn: () => unknown): ModelError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ModelError);
    return error as ModelError;
  }
  throw new Error("expected an error");
}

describe("resolveModelName", () => {
  it("prefers the request, then default_model, then the first model, then demo", () => {
    expect(resolveModelName(config, "local")).toBe("local");
    expect(resolveModelName({ ...config, default_model: "offline" }, undefined)).toBe("offline");
    expect(resolveModelName(config, undefined)).toBe("gpt");
    expect(resolveModelName(parseConfigText("", "config.yaml"), undefined)).toBe("demo");
  });
});

describe("createChatModel", () => {
  it("builds an OpenAI-compatible model with the key from the named variable", () => {
    const model = createChatModel(config, "gpt", env({ OPENAI_API_KEY: "sk-test" }));
    expect(model).toBeInstanceOf(ChatOpenAICompatible);
    const gpt = model as ChatOpenAICompatible;
    expect(gpt.model).toBe("gpt-4o-mini");
    expect(gpt.baseUrl).toBe("https://api.openai.com/v1");
    expect(gpt.temperature).toBe(0.3);
    expect(gpt.maxTokens).toBe(512);
    expect(gpt.timeoutMs).toBe(9000);
    expect(JSON.stringify(gpt)).not.toContain("sk-test");
  });

  it("needs no key when api_key_env is not set, and trims a trailing slash from base_url", () => {
    const model = createChatModel(config, "local", env()) as ChatOpenAICompatible;
    expect(model.baseUrl).toBe("http://127.0.0.1:11434/v1");
  });

  it("sends the key and the extra headers on the request", async () => {
    let seen: Headers | undefined;
    const fetch = async (_url: string, init: RequestInit) => {
      seen = new Headers(init.headers);
      return Response.json({
        id: "chatcmpl-factory1",
        object: "chat.completion",
        created: 1764480000,
        model: "gpt-4o-mini-2024-07-18",
        choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop", logprobs: null }],
        usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
      });
    };
    const model = createChatModel(config, "gpt", env({ OPENAI_API_KEY: "sk-test" }), { fetch });
    await model.invoke([new HumanMessage("hello")]);
    expect(seen?.get("authorization")).toBe("Bearer sk-test");
    expect(seen?.get("x-title")).toBe("deerflow-edge");
  });

  it("fails with missing_api_key naming the variable", () => {
    const error = thrown(() => createChatModel(config, "gpt", env()));
    expect(error.code).toBe("missing_api_key");
    expect(error.message).toBe(
      'Model "gpt" needs an API key in the environment variable OPENAI_API_KEY, which is not set; set OPENAI_API_KEY or choose another model',
    );
    expect(thrown(() => createChatModel(config, "gpt", env({ OPENAI_API_KEY: "  " }))).code).toBe("missing_api_key");
  });

  it("fails with unknown_model listing the available names", () => {
    const error = thrown(() => createChatModel(config, "claude", env()));
    expect(error.code).toBe("unknown_model");
    expect(error.message).toBe(
      'Unknown model "claude"; available models: "gpt", "local", "offline", "demo". Pick one of them or add "claude" under models in config.yaml',
    );
  });

  it("gives the demo model for demo entries, for the name demo, and when nothing is configured", () => {
    expect(createChatModel(config, "offline", env())).toBeInstanceOf(DemoChatModel);
    expect(createChatModel(config, "demo", env())).toBeInstanceOf(DemoChatModel);
    expect(createChatModel(parseConfigText("", "config.yaml"), undefined, env())).toBeInstanceOf(DemoChatModel);
  });
});

describe("describeModel", () => {
  it("labels configured and demo models", () => {
    expect(describeModel("gpt", config)).toEqual({
      name: "gpt",
      provider: "openai-compatible",
      model: "gpt-4o-mini",
      is_demo: false,
      display_name: "GPT-4o mini",
    });
    expect(describeModel("offline", config)).toEqual({ name: "offline", provider: "demo", model: "demo", is_demo: true });
    expect(describeModel(undefined, parseConfigText("", "config.yaml"))).toEqual({
      name: "demo",
      provider: "demo",
      model: "demo",
      is_demo: true,
    });
    expect(() => describeModel("nope", config)).toThrow(/Unknown model "nope"/);
  });
});

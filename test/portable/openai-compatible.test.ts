// Runs under Node, Deno and Bun: a node:http server on 127.0.0.1 replays recorded chat-completions
// traffic from test/fixtures/openai/, and ChatOpenAICompatible talks to it over real fetch.
import { createServer } from "node:http";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import {
  AIMessage,
  AIMessageChunk,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  type BaseMessage,
} from "@langchain/core/messages";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ChatOpenAICompatible, ModelError, type ChatOpenAICompatibleFields } from "../../src/models/index.ts";
import { loadFixtures, startReplayServer, type Fixture, type ReplayServer } from "./openai-replay.ts";

/** A port that was just bound and released: nothing listens there. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return address.port;
}

// ---------------------------------------------------------------------------------------------

const fixtures = loadFixtures();
const fixture = (file: string): Fixture => fixtures.find((f) => f.file === file)!;
let server: ReplayServer;

beforeAll(async () => {
  server = await startReplayServer(fixtures);
});
afterAll(async () => {
  await server?.close();
});

const API_KEY = "sk-test-123";
function model(fields: Partial<ChatOpenAICompatibleFields> = {}): ChatOpenAICompatible {
  return new ChatOpenAICompatible({ model: "gpt-4o-mini", baseUrl: server.baseUrl, apiKey: API_KEY, ...fields });
}
const requestsTo = (file: string) => server.received.filter((r) => r.fixture === file);
const lastRequest = () => server.received.at(-1)!;

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ModelError);
  return error as ModelError;
}

const WEATHER_TOOL = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city"],
    },
  },
};
const WEATHER_TOOL_LC = {
  name: WEATHER_TOOL.function.name,
  description: WEATHER_TOOL.function.description,
  schema: WEATHER_TOOL.function.parameters,
};

describe("non-streaming", () => {
  it("returns the text, completion id, finish reason and usage", async () => {
    const recorded = fixture("chat-text.json").response.body as any;
    const reply = (await model().invoke([
      new SystemMessage("Answer in one sentence."),
      new HumanMessage("What is the capital of France?"),
    ])) as AIMessage;
    expect(reply.content).toBe("The capital of France is Paris.");
    expect(reply.id).toBe(recorded.id);
    expect(reply.tool_calls).toEqual([]);
    expect(reply.response_metadata).toMatchObject({
      finish_reason: "stop",
      model_name: "gpt-4o-mini-2024-07-18",
      system_fingerprint: "fp_560af6e559",
    });
    expect(reply.usage_metadata).toEqual({
      input_tokens: 24,
      output_tokens: 7,
      total_tokens: 31,
      input_token_details: { cache_read: 0 },
      output_token_details: { reasoning: 0 },
    });
  });

  it("sends the OpenAI request shape with the bearer key", async () => {
    await model({ temperature: 0.2, maxTokens: 64 }).invoke([
      new SystemMessage("Answer in one sentence."),
      new HumanMessage("What is the capital of France?"),
    ]);
    const request = lastRequest();
    expect(request.fixture).toBe("chat-text.json");
    expect(request.method).toBe("POST");
    expect(request.url).toBe("/v1/chat/completions");
    expect(request.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(request.headers["content-type"]).toBe("application/json");
    expect(request.body).toEqual({
      model: "gpt-4o-mini",
      temperature: 0.2,
      max_tokens: 64,
      messages: [
        { role: "system", content: "Answer in one sentence." },
        { role: "user", content: "What is the capital of France?" },
      ],
    });
  });

  it("returns tool calls with parsed arguments when invoked through bindTools", async () => {
    const reply = (await model()
      .bindTools([WEATHER_TOOL])
      .invoke([new HumanMessage("What's the weather in Paris?")])) as AIMessage;
    expect(reply.tool_calls).toEqual([
      { type: "tool_call", id: "call_Qm3vX8rT2kLp9wYs4nB6dFhJ", name: "get_weather", args: { city: "Paris", unit: "celsius" } },
    ]);
    expect(reply.content).toBe("");
    expect(reply.response_metadata.finish_reason).toBe("tool_calls");
    expect(reply.additional_kwargs.tool_calls).toEqual((fixture("chat-tool-call.json").response.body as any).choices[0].message.tool_calls);
    const request = lastRequest();
    expect(request.fixture).toBe("chat-tool-call.json");
    expect(request.body.tools).toEqual([WEATHER_TOOL]);
  });

  it("binds {name, description, schema} tools to the same wire shape", async () => {
    await model().bindTools([WEATHER_TOOL_LC]).invoke([new HumanMessage("What's the weather in Paris?")]);
    expect(lastRequest().body.tools).toEqual([WEATHER_TOOL]);
  });

  it("sends tool calls and tool results back in OpenAI roles", async () => {
    const call = { type: "tool_call" as const, id: "call_Qm3vX8rT2kLp9wYs4nB6dFhJ", name: "get_weather", args: { city: "Paris", unit: "celsius" } };
    const messages: BaseMessage[] = [
      new HumanMessage("What's the weather in Paris?"),
      new AIMessage({ content: "", tool_calls: [call] }),
      new ToolMessage({ tool_call_id: call.id, content: '{"temperature":18,"sky":"cloudy"}' }),
    ];
    const reply = (await model().bindTools([WEATHER_TOOL]).invoke(messages)) as AIMessage;
    expect(reply.content).toBe("It is 18°C and cloudy in Paris right now.");
    expect(reply.usage_metadata).toMatchObject({ input_tokens: 121, output_tokens: 13, input_token_details: { cache_read: 64 } });
    expect(lastRequest().body.messages).toEqual([
      { role: "user", content: "What's the weather in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: call.id, type: "function", function: { name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' } },
        ],
      },
      { role: "tool", tool_call_id: call.id, content: '{"temperature":18,"sky":"cloudy"}' },
    ]);
  });

  it("puts unparsable tool arguments into invalid_tool_calls", async () => {
    const reply = (await model().invoke([new HumanMessage("Give me broken arguments")])) as AIMessage;
    expect(reply.tool_calls).toEqual([]);
    expect(reply.invalid_tool_calls).toEqual([
      {
        type: "invalid_tool_call",
        id: "call_Zt7mW2qLx9Kp4vNs1bR8cJdF",
        name: "get_weather",
        args: '{"city": "Par',
        error: expect.stringMatching(/^arguments are not valid JSON/),
      },
    ]);
    expect(reply.response_metadata.finish_reason).toBe("length");
  });
});

describe("streaming", () => {
  const HAIKU = [new HumanMessage("Write a haiku about a server.")];
  const tokensOf = () =>
    (fixture("stream-text.json").response.sse as any[])
      .filter((e) => typeof e === "object" && e.choices[0]?.delta?.content)
      .map((e) => e.choices[0].delta.content as string);

  it("delivers tokens to handleLLMNewToken in order and ends with usage", async () => {
    const tokens: string[] = [];
    const handler = BaseCallbackHandler.fromMethods({
      handleLLMNewToken(token: string) {
        tokens.push(token);
      },
    });
    const chunks: AIMessageChunk[] = [];
    for await (const chunk of await model().stream(HAIKU, { callbacks: [handler] })) chunks.push(chunk);

    expect(tokens.filter((t) => t !== "")).toEqual(tokensOf());
    const full = chunks.reduce((acc, chunk) => acc.concat(chunk));
    expect(full.content).toBe(tokensOf().join(""));
    expect(full.id).toBe("chatcmpl-BZ7kQ2xVf3mT9pLcR8sN1aWd4yEo");
    expect(full.response_metadata).toMatchObject({ finish_reason: "stop", model_name: "gpt-4o-mini-2024-07-18" });
    expect(full.usage_metadata).toMatchObject({ input_tokens: 19, output_tokens: 17, total_tokens: 36 });
    expect(chunks.filter((c) => c.usage_metadata !== undefined)).toHaveLength(1);
  });

  it("asks for a stream with usage", async () => {
    for await (const _ of await model().stream(HAIKU)) void _;
    const request = lastRequest();
    expect(request.fixture).toBe("stream-text.json");
    expect(request.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(request.headers.accept).toBe("text/event-stream");
    expect(request.body).toEqual({
      model: "gpt-4o-mini",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "Write a haiku about a server." }],
    });
  });

  it("streams inside invoke when a handler prefers streaming, as LangGraph's messages mode does", async () => {
    const tokens: string[] = [];
    const handler = BaseCallbackHandler.fromMethods({
      handleLLMNewToken(token: string) {
        tokens.push(token);
      },
    });
    Object.defineProperty(handler, "lc_prefer_streaming", { value: true });
    const reply = await model().invoke(HAIKU, { callbacks: [handler] });
    expect(lastRequest().body.stream).toBe(true);
    expect(tokens.filter((t) => t !== "")).toEqual(tokensOf());
    expect(reply.content).toBe(tokensOf().join(""));
    expect(reply.usage_metadata).toMatchObject({ total_tokens: 36 });
  });

  it("assembles tool calls whose arguments are split over several deltas", async () => {
    const chunks: AIMessageChunk[] = [];
    const bound = model().bindTools([WEATHER_TOOL]);
    for await (const chunk of await bound.stream([new HumanMessage("What's the weather in Paris and Tokyo?")])) {
      chunks.push(chunk);
    }
    const pieces = chunks.flatMap((c) => c.tool_call_chunks ?? []);
    expect(pieces.filter((p) => p.index === 0).length).toBeGreaterThanOrEqual(9);
    expect(pieces[0]).toMatchObject({ index: 0, id: "call_Hx2nV7kQp9Lm4Wr8tZs1cBdY", name: "get_weather", args: "" });

    const full = chunks.reduce((acc, chunk) => acc.concat(chunk));
    expect(full.tool_calls).toEqual([
      { type: "tool_call", id: "call_Hx2nV7kQp9Lm4Wr8tZs1cBdY", name: "get_weather", args: { city: "Paris", unit: "celsius" } },
      { type: "tool_call", id: "call_Rk5mT1wXq8Nz3Lv6pYc2HsJe", name: "get_weather", args: { city: "Tokyo", unit: "celsius" } },
    ]);
    expect(full.response_metadata.finish_reason).toBe("tool_calls");
    expect(full.usage_metadata).toMatchObject({ input_tokens: 86, output_tokens: 52, total_tokens: 138 });
    expect(lastRequest().body.tools).toEqual([WEATHER_TOOL]);
    expect(lastRequest().body.stream_options).toEqual({ include_usage: true });
  });
});

describe("errors", () => {
  it("surfaces a 429 at once with status, code and Retry-After, after exactly one request", async () => {
    const error = await failure(model().invoke([new HumanMessage("Please rate limit me")]));
    expect(error.status).toBe(429);
    expect(error.code).toBe("rate_limit_exceeded");
    expect(error.providerType).toBe("requests");
    expect(error.headers?.["retry-after"]).toBe("2");
    expect(error.headers?.["retry-after-ms"]).toBe("1840");
    expect(error.retryAfterMs).toBe(1840);
    expect(error.message).toBe(
      `Model provider at ${server.baseUrl} returned HTTP 429 (rate_limit_exceeded): Rate limit reached for gpt-4o-mini in organization org-3Vf8kQ2mLx9TnR4pWs7cYb1D on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more; wait 2 s and retry, or check the provider's rate limits`,
    );
    expect(requestsTo("error-429-rate-limit.json")).toHaveLength(1);
  });

  it("does not retry a 429 while streaming either", async () => {
    const before = requestsTo("error-429-rate-limit.json").length;
    const run = async () => {
      for await (const _ of await model().stream([new HumanMessage("Please rate limit me")])) void _;
    };
    const error = await failure(run());
    expect(error.status).toBe(429);
    expect(requestsTo("error-429-rate-limit.json").length - before).toBe(1);
  });

  it("says that retrying will not help when the quota is used up", async () => {
    const error = await failure(model().invoke([new HumanMessage("I am over quota")]));
    expect(error.status).toBe(429);
    expect(error.code).toBe("insufficient_quota");
    expect(error.message).toMatch(/^Model provider at .* returned HTTP 429 \(insufficient_quota\): You exceeded your current quota/);
    expect(error.message).toMatch(/; add credit or raise the quota with the provider, or switch to another model$/);
  });

  it("surfaces a 503 with the provider's message", async () => {
    const error = await failure(model().invoke([new HumanMessage("Are you overloaded?")]));
    expect(error.status).toBe(503);
    expect(error.code).toBe("server_error");
    expect(error.message).toBe(
      `Model provider at ${server.baseUrl} returned HTTP 503 (server_error): The server is overloaded or not ready yet; the provider is having trouble; retry later or switch to another model`,
    );
    expect(requestsTo("error-503-overloaded.json")).toHaveLength(1);
  });

  it("names the key's variable on a 401", async () => {
    const error = await failure(
      model({ apiKey: "sk-wrong-0000", apiKeyEnv: "OPENAI_API_KEY" }).invoke([new HumanMessage("What is the capital of France?")]),
    );
    expect(error.status).toBe(401);
    expect(error.code).toBe("invalid_api_key");
    expect(error.message).toMatch(/returned HTTP 401 \(invalid_api_key\): Incorrect API key provided/);
    expect(error.message).toMatch(/; check the API key in OPENAI_API_KEY$/);
  });

  it("reports provider_unreachable with the base URL when nothing listens", async () => {
    const baseUrl = `http://127.0.0.1:${await closedPort()}/v1`;
    const error = await failure(model({ baseUrl }).invoke([new HumanMessage("hello?")]));
    expect(error.code).toBe("provider_unreachable");
    expect(error.status).toBeUndefined();
    expect(error.message).toMatch(new RegExp(`^Could not reach the model provider at ${baseUrl.replaceAll(".", "\\.")} \\(.+\\); check base_url`));
    expect(error.message).not.toContain("\n");

    const streamed = await failure(
      (async () => {
        for await (const _ of await model({ baseUrl }).stream([new HumanMessage("hello?")])) void _;
      })(),
    );
    expect(streamed.code).toBe("provider_unreachable");
  });

  it("passes the abort signal to fetch, so the connection closes when the caller aborts", async () => {
    const controller = new AbortController();
    const pending = model().invoke([new HumanMessage("Please take your time")], { signal: controller.signal });
    await vi.waitFor(() => expect(requestsTo("slow-text.json").length).toBeGreaterThan(0));
    controller.abort();
    const error = await pending.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeDefined();
    expect(error).not.toBeInstanceOf(ModelError);
    await vi.waitFor(() => expect(requestsTo("slow-text.json").at(-1)!.closedEarly).toBe(true));
  });

  it("gives up with provider_timeout after timeout_ms", async () => {
    const error = await failure(model({ timeoutMs: 150 }).invoke([new HumanMessage("Please take your time")]));
    expect(error.code).toBe("provider_timeout");
    expect(error.message).toBe(
      `Model provider at ${server.baseUrl} did not respond within 150 ms; retry, or raise timeout_ms for this model`,
    );
  });
});

// Edge cases of the OpenAI-compatible model over an injected fetch; the wire-level behaviour
// against a real server is in test/portable/openai-compatible.test.ts.
import { AIMessageChunk, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { ChatOpenAICompatible, ModelError, toOpenAIMessages, type FetchLike } from "../../../src/models/index.ts";

const BASE = "https://llm.example.test/v1";
const encoderForTests = new TextEncoder();

function sseResponse(body: string | ReadableStream<Uint8Array>): Response {
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
}

function chunk(delta: Record<string, unknown>, finish: string | null = null): string {
  return JSON.stringify({
    id: "chatcmpl-edge1",
    object: "chat.completion.chunk",
    created: 1764480200,
    model: "qwen2.5-7b-instruct",
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
}

function recordingFetch(respond: (body: Record<string, any>) => Response): { fetch: FetchLike; bodies: Record<string, any>[] } {
  const bodies: Record<string, any>[] = [];
  return {
    bodies,
    fetch: async (_url, init) => {
      const body = JSON.parse(init.body as string) as Record<string, any>;
      bodies.push(body);
      return respond(body);
    },
  };
}

async function collect(model: ChatOpenAICompatible, messages: BaseMessage[]): Promise<AIMessageChunk> {
  let full: AIMessageChunk | undefined;
  for await (const part of await model.stream(messages)) full = full === undefined ? part : full.concat(part);
  return full!;
}

describe("stream parsing", () => {
  it("accepts CRLF line endings, comments, event lines and multi-line data", async () => {
    const body =
      ": keep-alive\r\n\r\n" +
      `event: message\r\ndata: ${chunk({ role: "assistant", content: "Hel" })}\r\n\r\n` +
      `data: ${chunk({ content: "lo" })}\r\n\r\n` +
      `data: ${chunk({}, "stop")}\r\n\r\n` +
      "data: [DONE]\r\n\r\n";
    const { fetch } = recordingFetch(() => sseResponse(body));
    const full = await collect(new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch }), [new HumanMessage("hi")]);
    expect(full.content).toBe("Hello");
    expect(full.response_metadata).toMatchObject({ finish_reason: "stop", model_name: "qwen2.5-7b-instruct" });
  });

  it("reads the same reply when every byte of the stream arrives on its own", async () => {
    const wire = encoderForTests.encode(
      `data:${chunk({ role: "assistant", content: "Grü" })}\r\n\r\n` +
        `data: ${chunk({ content: "ße" })}\n\n` +
        `data: ${chunk({}, "stop")}\n\n` +
        "data: [DONE]\n\n",
    );
    let at = 0;
    const bytewise = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (at < wire.length) controller.enqueue(wire.slice(at, ++at));
        else controller.close();
      },
    });
    const { fetch } = recordingFetch(() => sseResponse(bytewise));
    const full = await collect(new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch }), [new HumanMessage("hi")]);
    expect(full.content).toBe("Grüße");
    expect(full.response_metadata).toMatchObject({ finish_reason: "stop" });
  });

  it("stops at [DONE] and ignores whatever follows it", async () => {
    const body = `data: ${chunk({ content: "done" })}\n\ndata: [DONE]\n\ndata: ${chunk({ content: " and more" })}\n\n`;
    const { fetch } = recordingFetch(() => sseResponse(body));
    const full = await collect(new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch }), [new HumanMessage("hi")]);
    expect(full.content).toBe("done");
  });

  it("reports a stream cut off inside an event as provider_bad_response", async () => {
    const body = `data: ${chunk({ content: "Par" })}\n\ndata: ${chunk({ content: "tial" }).slice(0, 30)}`;
    const { fetch } = recordingFetch(() => sseResponse(body));
    const error = await collect(new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch }), [new HumanMessage("hi")]).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({
      code: "provider_bad_response",
      message: `Model provider at ${BASE} sent a stream event that is not JSON; check that base_url points to an OpenAI-compatible API`,
    });
  });

  it("handles a server that ignores stream: true and answers with JSON", async () => {
    const { fetch } = recordingFetch(() =>
      Response.json({
        id: "chatcmpl-json1",
        object: "chat.completion",
        created: 1764480300,
        model: "llama-3.1-8b",
        choices: [
          {
            index: 0,
            finish_reason: "tool_calls",
            message: {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "call_j1", type: "function", function: { name: "ls", arguments: '{"path":"/"}' } }],
            },
          },
        ],
        usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 },
      }),
    );
    const full = await collect(new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch }), [new HumanMessage("hi")]);
    expect(full.tool_calls).toEqual([{ type: "tool_call", id: "call_j1", name: "ls", args: { path: "/" } }]);
    expect(full.usage_metadata).toMatchObject({ total_tokens: 13 });
  });

  it("turns an error event inside the stream into a ModelError", async () => {
    const body =
      `data: ${chunk({ role: "assistant", content: "Hi" })}\n\n` +
      `data: ${JSON.stringify({ error: { message: "upstream model crashed", type: "server_error", code: "model_error" } })}\n\n`;
    const { fetch } = recordingFetch(() => sseResponse(body));
    const error = await collect(new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch }), [new HumanMessage("hi")]).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: "model_error", providerMessage: "upstream model crashed" });
  });

  it("reports a connection that breaks off mid-stream as provider_unreachable", async () => {
    const encoder = new TextEncoder();
    let sent = false;
    const broken = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) controller.error(new TypeError("socket hang up"));
        else {
          sent = true;
          controller.enqueue(encoder.encode(`data: ${chunk({ role: "assistant", content: "Par" })}\n\n`));
        }
      },
    });
    const { fetch } = recordingFetch(() => sseResponse(broken));
    const error = await collect(new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch }), [new HumanMessage("hi")]).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).code).toBe("provider_unreachable");
    expect((error as ModelError).message).toBe(
      `The connection to the model provider at ${BASE} broke off mid-response (socket hang up); retry, and check the server if it keeps happening`,
    );
  });

  it("reports a success body that is not JSON as provider_bad_response", async () => {
    const { fetch } = recordingFetch(() => new Response("<html>login</html>", { status: 200, headers: { "content-type": "text/html" } }));
    const error = await new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch })
      .invoke([new HumanMessage("hi")])
      .catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: "provider_bad_response",
      message: `Model provider at ${BASE} sent a body that is not JSON; check that base_url points to an OpenAI-compatible API`,
    });
  });
});

describe("HTTP errors without an OpenAI error body", () => {
  it("falls back to a code from the status and the body text", async () => {
    const { fetch } = recordingFetch(
      () => new Response("Bad Gateway", { status: 502, headers: { "content-type": "text/plain", "set-cookie": "s=1" } }),
    );
    const error = (await new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch })
      .invoke([new HumanMessage("hi")])
      .catch((e: unknown) => e)) as ModelError;
    expect(error.code).toBe("provider_unavailable");
    expect(error.status).toBe(502);
    expect(error.headers).toEqual({ "content-type": "text/plain" });
    expect(error.message).toBe(
      `Model provider at ${BASE} returned HTTP 502 (provider_unavailable): Bad Gateway; the provider is having trouble; retry later or switch to another model`,
    );
  });

  it("reads a Retry-After given as an HTTP date", async () => {
    const at = new Date(Date.now() + 60_000).toUTCString();
    const { fetch } = recordingFetch(() => Response.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": at } }));
    const error = (await new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch })
      .invoke([new HumanMessage("hi")])
      .catch((e: unknown) => e)) as ModelError;
    expect(error.code).toBe("rate_limit_exceeded");
    expect(error.retryAfterMs).toBeGreaterThan(50_000);
    expect(error.retryAfterMs).toBeLessThanOrEqual(60_000);
  });
});

describe("request building", () => {
  it("maps tool_choice and rejects tools it cannot describe", async () => {
    const { fetch, bodies } = recordingFetch(() =>
      Response.json({ id: "c1", choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "ok" } }] }),
    );
    const model = new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch });
    const tool = { name: "ls", description: "List", schema: { type: "object", properties: { path: { type: "string" } } } };
    await model.bindTools([tool], { tool_choice: "any" }).invoke([new HumanMessage("hi")]);
    await model.bindTools([tool], { tool_choice: "ls" }).invoke([new HumanMessage("hi")]);
    expect(bodies.map((b) => b.tool_choice)).toEqual(["required", { type: "function", function: { name: "ls" } }]);
    expect(() => model.bindTools([{ description: "nameless" }])).toThrow(
      expect.objectContaining({ code: "invalid_tool_definition" }),
    );
  });

  it("sends no Authorization header without a key", async () => {
    let headers: Headers | undefined;
    const fetch: FetchLike = async (_url, init) => {
      headers = new Headers(init.headers);
      return Response.json({ id: "c2", choices: [{ index: 0, finish_reason: "stop", message: { content: "ok" } }] });
    };
    await new ChatOpenAICompatible({ model: "m", baseUrl: BASE, fetch }).invoke([new HumanMessage("hi")]);
    expect(headers?.has("authorization")).toBe(false);
  });

  it("converts image blocks in user messages to image_url parts", () => {
    const messages = toOpenAIMessages([
      new HumanMessage({
        content: [
          { type: "text", text: "What is this?" },
          { type: "image", url: "https://example.test/cat.png" },
          { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
        ],
      }),
    ]);
    expect(messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "https://example.test/cat.png" } },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
        ],
      },
    ]);
  });
});

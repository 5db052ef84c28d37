import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { Command, GraphInterrupt, MemorySaver, ParentCommand, interrupt } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import { createAgent, type RunRecord } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, ModelHandler, ModelRequest } from "../../../src/engine/types.ts";
import {
  LLM_ERROR_HANDLING_DEFAULTS,
  LLM_ERROR_HANDLING_NAME,
  createLLMErrorHandlingMiddleware,
  type LLMErrorHandlingConfigInput,
  type LLMErrorHandlingDeps,
} from "../../../src/middlewares/llm-error-handling/llm-error-handling.ts";
import { classifyLlmError, retryAfterMsOf } from "../../../src/middlewares/llm-error-handling/classify.ts";
import { LlmCallLimiter } from "../../../src/middlewares/llm-error-handling/limiter.ts";
import { ModelError } from "../../../src/models/errors.ts";
import { ChatOpenAICompatible } from "../../../src/models/openai-compatible/index.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

class FakeError extends Error {
  readonly status?: number;
  readonly code?: string;
  readonly response?: { status?: number; headers: Record<string, string> };
  constructor(message: string, fields: { status?: number; code?: string; headers?: Record<string, string> } = {}) {
    super(message);
    if (fields.status !== undefined) this.status = fields.status;
    if (fields.code !== undefined) this.code = fields.code;
    if (fields.status !== undefined || fields.headers) this.response = { headers: fields.headers ?? {}, ...(fields.status === undefined ? {} : { status: fields.status }) };
  }
}
// Named after the upstream classes the rules match by name.
class StreamChunkTimeoutError extends Error {
  override name = "StreamChunkTimeoutError";
}
class ReadError extends Error {
  override name = "ReadError";
}

function http(status: number, code: string, providerMessage: string, extra: Partial<ConstructorParameters<typeof ModelError>[1]> = {}) {
  return new ModelError(`Model provider at https://api.example/v1 returned HTTP ${status} (${code}): ${providerMessage}; retry later`, {
    code,
    status,
    providerMessage,
    ...extra,
  });
}

interface Harness {
  clock: ManualClock;
  events: Array<Record<string, unknown>>;
  runtime: AgentRuntime;
  middleware: AgentMiddleware;
  call(handler: ModelHandler): Promise<AIMessage>;
}

function harness(config?: LLMErrorHandlingConfigInput, deps?: LLMErrorHandlingDeps, signal?: AbortSignal): Harness {
  const clock = new ManualClock(1_000_000);
  const events: Array<Record<string, unknown>> = [];
  const runtime: AgentRuntime = {
    ...makeRuntime({ services: { clock }, ...(signal ? { signal } : {}) }),
    writer: (chunk) => void events.push(chunk as Record<string, unknown>),
  };
  const middleware = createLLMErrorHandlingMiddleware(config, deps);
  const call = (handler: ModelHandler) => middleware.wrapModelCall!(request(runtime), handler);
  return { clock, events, runtime, middleware, call };
}

function request(runtime: AgentRuntime): ModelRequest {
  return { model: fakeModel(), systemMessage: undefined, messages: [new HumanMessage("hi")], tools: [], state: emptyThreadState(), runtime };
}

/** Moves the manual clock until the promise settles: every backoff sleep falls due. */
async function drive<T>(clock: ManualClock, promise: Promise<T>): Promise<T> {
  let settled = false;
  const tracked = promise.finally(() => {
    settled = true;
  });
  tracked.catch(() => undefined);
  for (let i = 0; i < 1000 && !settled; i++) await clock.advance(1_000);
  return tracked;
}

/** A handler that replays a script: an Error entry is thrown, a string is answered. */
function scripted(...steps: Array<Error | string>) {
  const state = { calls: 0 };
  const handler: ModelHandler = async () => {
    const step = steps[Math.min(state.calls, steps.length - 1)]!;
    state.calls += 1;
    if (step instanceof Error) throw step;
    return new AIMessage(step);
  };
  return Object.defineProperty(handler, "count", { get: () => state.calls }) as ModelHandler & { readonly count: number };
}

function kwargs(message: AIMessage): Record<string, unknown> {
  return message.additional_kwargs;
}

describe("LLMErrorHandling: retries", () => {
  it("scenario M17: HTTP 503 twice then success returns the answer and emits llm_retry 1/3 and 2/3", async () => {
    const h = harness(undefined, { random: () => 0 });
    const handler = scripted(http(503, "server_error", "Service Unavailable"), http(503, "server_error", "Service Unavailable"), "ok");
    const result = await drive(h.clock, h.call(handler));
    expect(result.content).toBe("ok");
    expect(handler.count).toBe(3);
    expect(h.events).toEqual([
      { type: "llm_retry", attempt: 1, max_attempts: 3, wait_ms: 1000, reason: "transient", message: "LLM request retry 1/3: provider request failed temporarily. Retrying in 1s." },
      { type: "llm_retry", attempt: 2, max_attempts: 3, wait_ms: 1000, reason: "transient", message: "LLM request retry 2/3: provider request failed temporarily. Retrying in 1s." },
    ]);
  });

  it("scenario M17: through the engine, the real OpenAI-compatible model answers after 503, 503 and two llm_retry events stream as custom", async () => {
    const replies = [
      () => new Response(JSON.stringify({ error: { message: "upstream overloaded", type: "server_error" } }), { status: 503, headers: { "content-type": "application/json" } }),
      () => new Response("Service Unavailable", { status: 503 }),
      () =>
        new Response(
          JSON.stringify({ id: "cmpl-1", model: "m1", choices: [{ index: 0, message: { role: "assistant", content: "Hello after retries" }, finish_reason: "stop" }] }),
          { status: 200, headers: { "content-type": "application/json" } },
        ),
    ];
    let fetched = 0;
    const model = new ChatOpenAICompatible({ model: "m1", baseUrl: "https://llm.example/v1", fetch: async () => replies[fetched++]!() });
    const clock = new ManualClock(0);
    const agent = createAgent({ model, middlewares: [createLLMErrorHandlingMiddleware()], services: { clock } });

    const custom: Array<Record<string, unknown>> = [];
    let finalMessages: unknown[] = [];
    const run = (async () => {
      for await (const chunk of agent.stream({ messages: [new HumanMessage("hi")] }, { streamMode: ["custom", "values"] })) {
        const [mode, data] = chunk as [string, Record<string, unknown>];
        if (mode === "custom") custom.push(data);
        else finalMessages = data["messages"] as unknown[];
      }
    })();
    await drive(clock, run);

    expect(fetched).toBe(3);
    expect(custom.map((e) => [e["type"], e["attempt"], e["max_attempts"], e["reason"]])).toEqual([
      ["llm_retry", 1, 3, "transient"],
      ["llm_retry", 2, 3, "transient"],
    ]);
    for (const event of custom) {
      expect(event["wait_ms"]).toBeGreaterThanOrEqual(1000);
      expect(event["wait_ms"]).toBeLessThanOrEqual(8000);
    }
    expect((finalMessages.at(-1) as AIMessage).content).toBe("Hello after retries");
  });

  it("threads the previous delay into the next jitter window and never exceeds the cap", async () => {
    const draws = [1 - 1e-9, 1 - 1e-9, 1 - 1e-9];
    const h = harness({ llm_call: { retry_max_attempts: 4, retry_base_delay_ms: 100, retry_cap_delay_ms: 2000 } }, { random: () => draws.shift() ?? 0 });
    const handler = scripted(new FakeError("server busy", { status: 503 }), new FakeError("server busy", { status: 503 }), new FakeError("server busy", { status: 503 }), "ok");
    await drive(h.clock, h.call(handler));
    // 100 -> window [100, 300]; 300 -> [100, 900]; 900 -> [100, min(2000, 2700)].
    expect(h.events.map((e) => e["wait_ms"])).toEqual([300, 900, 2000]);
  });

  it("collapses the window to the cap when base equals cap, whatever the draw", async () => {
    for (const r of [0, 0.5, 1 - 1e-9]) {
      const h = harness({ llm_call: { retry_base_delay_ms: 25, retry_cap_delay_ms: 25 } }, { random: () => r });
      await drive(h.clock, h.call(scripted(new FakeError("overloaded", { status: 529 }), "ok")));
      expect(h.events.map((e) => e["wait_ms"])).toEqual([25]);
    }
  });

  it("returns a transient fallback once the attempts are exhausted, and never raises", async () => {
    const h = harness({ llm_call: { retry_max_attempts: 2, retry_base_delay_ms: 25, retry_cap_delay_ms: 25 } });
    const handler = scripted(new FakeError("Connection error.", { status: 503 }));
    const result = await drive(h.clock, h.call(handler));
    expect(handler.count).toBe(2);
    expect(result.content).toContain("temporarily unavailable");
    expect(kwargs(result)).toEqual({
      deerflow_error_fallback: true,
      error_type: "FakeError",
      error_reason: "transient",
      error_detail: "Connection error.",
    });
  });

  it("retries a busy provider worded in Chinese", async () => {
    const h = harness({ llm_call: { retry_base_delay_ms: 25, retry_cap_delay_ms: 25 } });
    const handler = scripted(new Error("当前服务集群负载较高，请稍后重试，感谢您的耐心等待。 (2064)"), "ok");
    const result = await drive(h.clock, h.call(handler));
    expect(result.content).toBe("ok");
    expect(h.events[0]).toMatchObject({ reason: "busy", message: "LLM request retry 1/3: provider is busy. Retrying in 1s." });
  });

  it("gives a stalled stream one reconnect and then advice to split the work; a plain read error keeps the full budget", async () => {
    const stalled = harness();
    const stalledHandler = scripted(new StreamChunkTimeoutError("No streaming chunk received for 120.0s"));
    const result = await drive(stalled.clock, stalled.call(stalledHandler));
    expect(stalledHandler.count).toBe(2);
    expect(result.content).toContain("streaming response was interrupted");

    const dropped = harness();
    const droppedHandler = scripted(new ReadError("Connection dropped mid-stream"));
    const generic = await drive(dropped.clock, dropped.call(droppedHandler));
    expect(droppedHandler.count).toBe(3);
    expect(generic.content).toContain("temporarily unavailable");
    expect(generic.content).not.toContain("streaming response was interrupted");
  });

  it("never gives more attempts than configured, even where a class budget is larger", async () => {
    const h = harness({ llm_call: { retry_max_attempts: 1 } });
    const handler = scripted(new StreamChunkTimeoutError("stalled"));
    await drive(h.clock, h.call(handler));
    expect(handler.count).toBe(1);
    expect(h.events).toEqual([]);
  });
});

describe("LLMErrorHandling: non-retriable failures", () => {
  it("marks the run failed through its scope with the fallback's detail, and a later answer withdraws it", async () => {
    const h = harness();
    const handler = scripted(http(429, "insufficient_quota", "You exceeded your current quota."), "fine now");
    const fallback = await drive(h.clock, h.call(handler));
    expect(h.runtime.scope.failure).toEqual({ name: "LLMError", message: kwargs(fallback)["error_detail"] });
    await drive(h.clock, h.call(handler));
    expect(h.runtime.scope.failure).toBeUndefined();
  });

  it("through the engine, the run's record carries the failure the middleware marked", async () => {
    const model = fakeModel().respond(new FakeError("insufficient_quota: account balance is empty", { status: 429, code: "insufficient_quota" }));
    const agent = createAgent({ model, middlewares: [createLLMErrorHandlingMiddleware()], services: { clock: new ManualClock(0) } });
    let record: RunRecord | undefined;
    for await (const _ of agent.stream({ messages: [new HumanMessage("hi")] }, {}, (r) => (record = r))) void _;
    expect(record?.outcome).toBe("completed");
    expect(record?.failure?.name).toBe("LLMError");
    expect(record?.failure?.message).toContain("insufficient_quota");

    const fine = createAgent({ model: fakeModel().respond(new AIMessage("hello")), middlewares: [createLLMErrorHandlingMiddleware()], services: { clock: new ManualClock(0) } });
    let fineRecord: RunRecord | undefined;
    for await (const _ of fine.stream({ messages: [new HumanMessage("hi")] }, {}, (r) => (fineRecord = r))) void _;
    expect(fineRecord?.outcome).toBe("completed");
    expect(fineRecord?.failure).toBeUndefined();
  });

  it("scenario M18: insufficient_quota is not retried and comes back as a quota fallback message", async () => {
    const h = harness();
    const handler = scripted(http(429, "insufficient_quota", "You exceeded your current quota, please check your plan and billing details."));
    const result = await drive(h.clock, h.call(handler));
    expect(handler.count).toBe(1);
    expect(h.events).toEqual([]);
    expect(result.content).toContain("out of quota");
    expect(kwargs(result)).toMatchObject({ deerflow_error_fallback: true, error_reason: "quota", error_type: "ModelError" });
    expect(kwargs(result)["error_detail"]).toContain("insufficient_quota");
  });

  it("scenario M18: through the engine the run receives the fallback AIMessage instead of an exception", async () => {
    const model = fakeModel().respond(new FakeError("insufficient_quota: account balance is empty", { status: 429, code: "insufficient_quota" }));
    const agent = createAgent({ model, middlewares: [createLLMErrorHandlingMiddleware()], services: { clock: new ManualClock(0) } });
    const state = await agent.invoke({ messages: [new HumanMessage("hi")] });
    const last = state.messages.at(-1) as AIMessage;
    expect(AIMessage.isInstance(last)).toBe(true);
    expect(last.additional_kwargs).toMatchObject({ deerflow_error_fallback: true, error_reason: "quota", error_type: "FakeError" });
    expect(model.callCount).toBe(1);
  });

  it("classifies quota from Chinese wording and from the error code alone", () => {
    expect(classifyLlmError(new Error("账户余额不足"))).toEqual({ retriable: false, reason: "quota" });
    expect(classifyLlmError(Object.assign(new Error("Quota exceeded"), { body: { error: { code: "insufficient_quota" } } }))).toEqual({ retriable: false, reason: "quota" });
  });

  it("turns an auth failure into an auth fallback without retrying", async () => {
    const h = harness();
    const handler = scripted(http(401, "invalid_api_key", "Incorrect API key provided"));
    const result = await drive(h.clock, h.call(handler));
    expect(handler.count).toBe(1);
    expect(result.content).toContain("authentication or access is invalid");
    expect(kwargs(result)["error_reason"]).toBe("auth");
  });

  it("returns a generic failure with the error's own words", async () => {
    const h = harness();
    const result = await drive(h.clock, h.call(scripted(new Error("boom"))));
    expect(result.content).toBe("LLM request failed: boom");
    expect(kwargs(result)).toEqual({ deerflow_error_fallback: true, error_type: "Error", error_reason: "generic", error_detail: "boom" });
  });

  it("classifies our ModelError codes and statuses, never the hint or base URL around the provider's words", () => {
    const unreachable = new ModelError("Could not reach the model provider at http://credit.example/v1 (ECONNREFUSED); check base_url", { code: "provider_unreachable" });
    expect(classifyLlmError(unreachable)).toEqual({ retriable: true, reason: "transient" });
    expect(classifyLlmError(new ModelError("did not respond within 5 ms; retry", { code: "provider_timeout" }))).toEqual({ retriable: true, reason: "transient" });
    expect(classifyLlmError(new ModelError("sent a completion without choices", { code: "provider_bad_response" }))).toEqual({ retriable: true, reason: "transient" });
    const limited = http(429, "rate_limit_exceeded", "Rate limit reached for requests", { headers: { "retry-after": "3" } });
    expect(classifyLlmError(limited)).toEqual({ retriable: true, reason: "transient" });
    expect(classifyLlmError(http(403, "provider_auth_failed", "no access to this model"))).toEqual({ retriable: false, reason: "auth" });
    expect(classifyLlmError(new FakeError("Too many requests", { status: 429 }))).toEqual({ retriable: true, reason: "transient" });
    expect(classifyLlmError(new FakeError("Bad request", { status: 400 }))).toEqual({ retriable: false, reason: "generic" });
  });
});

describe("LLMErrorHandling: Retry-After and burst-rate", () => {
  it("scenario M19: a 429 with Retry-After: 2 waits exactly 2000 ms before the next attempt", async () => {
    const h = harness(undefined, { random: () => 0.5 });
    const handler = scripted(new FakeError("rate limited", { status: 429, headers: { "Retry-After": "2" } }), "ok");
    const pending = h.call(handler);
    await h.clock.advance(0);
    expect(handler.count).toBe(1);
    await h.clock.advance(1999);
    expect(handler.count).toBe(1);
    await h.clock.advance(1);
    expect(handler.count).toBe(2);
    expect((await pending).content).toBe("ok");
    expect(h.events).toEqual([
      { type: "llm_retry", attempt: 1, max_attempts: 3, wait_ms: 2000, reason: "transient", message: "LLM request retry 1/3: provider request failed temporarily. Retrying in 2s." },
    ]);
  });

  it("scenario M19: honours retry-after-ms and HTTP-date Retry-After from our ModelError and plain headers", () => {
    expect(retryAfterMsOf(new FakeError("x", { status: 429, headers: { "retry-after-ms": "1500" } }), 0)).toBe(1500);
    expect(retryAfterMsOf(new FakeError("x", { status: 429, headers: { "Retry-After": "2.5" } }), 0)).toBe(2500);
    const now = Date.UTC(2026, 0, 1, 0, 0, 0);
    expect(retryAfterMsOf(new FakeError("x", { status: 503, headers: { "retry-after": new Date(now + 7000).toUTCString() } }), now)).toBe(7000);
    expect(retryAfterMsOf(http(429, "rate_limit_exceeded", "slow down", { retryAfterMs: 2000 }), 0)).toBe(2000);
    expect(retryAfterMsOf(new FakeError("x", { status: 503 }), 0)).toBeUndefined();
  });

  it("scenario M19: limit_burst_rate gets at most 2 attempts, reports the effective budget, and draws from the burst base", async () => {
    const h = harness(undefined, { random: () => 0 });
    const handler = scripted(new FakeError("Request rate increased too quickly", { status: 429, code: "limit_burst_rate" }));
    const result = await drive(h.clock, h.call(handler));
    expect(handler.count).toBe(2);
    expect(h.events).toEqual([
      { type: "llm_retry", attempt: 1, max_attempts: 2, wait_ms: 5000, reason: "burst_rate", message: "LLM request retry 1/2: provider is throttling request burst rate. Retrying in 5s." },
    ]);
    expect(kwargs(result)["error_reason"]).toBe("burst_rate");
    expect(result.content).toContain("burst-rate");
  });

  it("scenario M19: the first burst retry is jittered across [burst base, cap], not pinned to the base", async () => {
    const h = harness(undefined, { random: () => 1 - 1e-9 });
    await drive(h.clock, h.call(scripted(new FakeError("burst rate exceeded", { status: 429 }))));
    expect(h.events[0]!["wait_ms"]).toBe(8000);
  });

  it("scenario M19: burst-rate exhaustion never trips the circuit breaker", async () => {
    const h = harness({ circuit_breaker: { failure_threshold: 3 } });
    const burst = scripted(new FakeError("rate increased too quickly", { status: 429, code: "limit_burst_rate" }));
    for (let i = 0; i < 5; i++) expect(kwargs(await drive(h.clock, h.call(burst)))["error_reason"]).toBe("burst_rate");
    const ok = scripted("ok");
    expect((await h.call(ok)).content).toBe("ok");
    expect(ok.count).toBe(1);
  });
});

describe("LLMErrorHandling: circuit breaker", () => {
  const failing = () => scripted(new FakeError("Server Error", { status: 502 }));

  it("scenario M20: after 5 exhausted calls a 6th within 60 s gets the circuit_open fallback without calling the provider", async () => {
    const h = harness();
    for (let i = 0; i < 5; i++) {
      const result = await drive(h.clock, h.call(failing()));
      expect(kwargs(result)["error_reason"]).toBe("transient");
    }
    const untouched = scripted("should not be called");
    const result = await h.call(untouched);
    expect(untouched.count).toBe(0);
    expect(result.content).toContain("Circuit breaker is engaged");
    expect(kwargs(result)).toEqual({
      deerflow_error_fallback: true,
      error_type: "CircuitBreakerOpen",
      error_reason: "circuit_open",
      error_detail: "LLM circuit breaker is open",
    });
  });

  it("scenario M20: half-open admits one probe after the recovery timeout; a failed probe re-opens, a good one closes", async () => {
    const h = harness({ circuit_breaker: { failure_threshold: 2, recovery_timeout_sec: 10 }, llm_call: { retry_max_attempts: 1 } });
    await h.call(failing());
    await h.call(failing());
    expect(kwargs(await h.call(scripted("x")))["error_reason"]).toBe("circuit_open");

    await h.clock.advance(9_999);
    expect(kwargs(await h.call(scripted("x")))["error_reason"]).toBe("circuit_open");
    await h.clock.advance(1);

    // One probe at a time: a second call while the probe is out fails fast.
    let releaseProbe!: () => void;
    const probe: ModelHandler = () => new Promise<AIMessage>((_, reject) => (releaseProbe = () => reject(new FakeError("Server Error", { status: 502 }))));
    const probeCall = h.call(probe);
    expect(kwargs(await h.call(scripted("x")))["error_reason"]).toBe("circuit_open");
    releaseProbe();
    expect(kwargs(await probeCall)["error_reason"]).toBe("transient");
    expect(kwargs(await h.call(scripted("x")))["error_reason"]).toBe("circuit_open");

    await h.clock.advance(10_000);
    expect((await h.call(scripted("recovered"))).content).toBe("recovered");
    // Closed again: failures count from zero.
    await h.call(failing());
    expect((await h.call(scripted("still closed"))).content).toBe("still closed");
  });

  it("does not count quota or auth failures toward the breaker", async () => {
    const h = harness({ circuit_breaker: { failure_threshold: 1 } });
    for (let i = 0; i < 3; i++) await h.call(scripted(new FakeError("insufficient_quota", { status: 429, code: "insufficient_quota" })));
    await h.call(scripted(new FakeError("unauthorized", { status: 401 })));
    const ok = scripted("ok");
    expect((await h.call(ok)).content).toBe("ok");
  });

  it("a non-retriable failure of the half-open probe frees the probe instead of wedging the breaker", async () => {
    const h = harness({ circuit_breaker: { failure_threshold: 1, recovery_timeout_sec: 1 }, llm_call: { retry_max_attempts: 1 } });
    await h.call(failing());
    await h.clock.advance(1_000);
    expect(kwargs(await h.call(scripted(new FakeError("insufficient_quota", { code: "insufficient_quota" }))))["error_reason"]).toBe("quota");
    expect((await h.call(scripted("probe admitted"))).content).toBe("probe admitted");
  });
});

describe("LLMErrorHandling: control flow", () => {
  it("scenario M21: a graph interrupt inside the model call passes through unchanged, without retry or event", async () => {
    const h = harness();
    const raised = new GraphInterrupt([{ value: "ask", id: "i1" }]);
    const handler = scripted(raised);
    await expect(h.call(handler)).rejects.toBe(raised);
    expect(handler.count).toBe(1);
    expect(h.events).toEqual([]);

    const parent = new ParentCommand(new Command({ goto: "x", graph: Command.PARENT }));
    await expect(h.call(scripted(parent))).rejects.toBe(parent);
  });

  it("scenario M21: an interrupt during the half-open probe frees the probe", async () => {
    const h = harness({ circuit_breaker: { failure_threshold: 1, recovery_timeout_sec: 1 }, llm_call: { retry_max_attempts: 1 } });
    await h.call(scripted(new FakeError("Server Error", { status: 502 })));
    await h.clock.advance(1_000);
    const raised = new GraphInterrupt([{ value: "ask", id: "i1" }]);
    await expect(h.call(scripted(raised))).rejects.toBe(raised);
    expect((await h.call(scripted("probe admitted"))).content).toBe("probe admitted");
  });

  it("scenario M21: through the engine, an interrupt raised inside the wrapped model call pauses the run and resumes", async () => {
    const asker: AgentMiddleware = {
      name: "asker",
      async wrapModelCall(req, handler) {
        const answer = interrupt({ question: "proceed?" });
        return handler({ ...req, messages: [...req.messages, new HumanMessage(`answer: ${String(answer)}`)] });
      },
    };
    const model = fakeModel().respond((messages) => new AIMessage(`saw ${String(messages.at(-1)?.content)}`));
    const events: unknown[] = [];
    const agent = createAgent({
      model,
      middlewares: [createLLMErrorHandlingMiddleware(), asker],
      checkpointer: new MemorySaver(),
      services: { clock: new ManualClock(0) },
    });
    let record: RunRecord | undefined;
    for await (const chunk of agent.stream({ messages: [new HumanMessage("hi")] }, { threadId: "t21", streamMode: ["custom", "updates"] }, (r) => (record = r))) {
      events.push(chunk);
    }
    expect(record?.outcome).toBe("interrupted");
    expect(JSON.stringify(events)).toContain("proceed?");
    expect(JSON.stringify(events)).not.toContain("llm_retry");
    expect(model.callCount).toBe(0);

    const state = await agent.invoke(new Command({ resume: "yes" }), { threadId: "t21" });
    expect(state.messages.at(-1)?.content).toBe("saw answer: yes");
  });

  it("rethrows when the run is cancelled, and a cancel during backoff stops the wait", async () => {
    const controller = new AbortController();
    const h = harness(undefined, undefined, controller.signal);
    const handler = scripted(new FakeError("server busy", { status: 503 }), "ok");
    const pending = h.call(handler);
    pending.catch(() => undefined);
    await h.clock.advance(0);
    expect(h.clock.pendingSleeps).toBe(1);
    controller.abort(new DOMException("stop", "AbortError"));
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    expect(h.clock.pendingSleeps).toBe(0);
    expect(handler.count).toBe(1);

    const aborted = new AbortController();
    aborted.abort();
    const error = new DOMException("aborted", "AbortError");
    const h2 = harness(undefined, undefined, aborted.signal);
    await expect(h2.call(scripted(error))).rejects.toBe(error);
  });

  it("keeps retrying when a stream consumer throws, but lets a bubble-up from the writer through", async () => {
    const h = harness({ llm_call: { retry_base_delay_ms: 1, retry_cap_delay_ms: 1 } });
    const broken: AgentRuntime = { ...h.runtime, writer: () => { throw new Error("consumer gone"); } };
    const result = await drive(h.clock, h.middleware.wrapModelCall!(request(broken), scripted(new FakeError("busy", { status: 503 }), "ok")));
    expect(result.content).toBe("ok");

    const raised = new GraphInterrupt([]);
    const interrupting: AgentRuntime = { ...h.runtime, writer: () => { throw raised; } };
    await expect(h.middleware.wrapModelCall!(request(interrupting), scripted(new FakeError("busy", { status: 503 }), "ok"))).rejects.toBe(raised);
  });
});

describe("LLMErrorHandling: concurrency cap (llm_call.max_concurrent_calls)", () => {
  function gated() {
    const state = { inFlight: 0, max: 0, entered: 0 };
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const handler: ModelHandler = async () => {
      state.inFlight += 1;
      state.entered += 1;
      state.max = Math.max(state.max, state.inFlight);
      await gate;
      state.inFlight -= 1;
      return new AIMessage("ok");
    };
    return { state, handler, open };
  }
  const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

  it("caps calls in flight across every middleware built from one llm_call config object", async () => {
    const llm_call = { max_concurrent_calls: 2 };
    const a = harness({ llm_call });
    const b = harness({ llm_call });
    const { state, handler, open } = gated();
    const calls = [a.call(handler), b.call(handler), a.call(handler), b.call(handler), a.call(handler)];
    await tick();
    expect(state.max).toBe(2);
    expect(state.entered).toBe(2);
    open();
    await Promise.all(calls);
    expect(state.entered).toBe(5);
    expect(state.max).toBe(2);
  });

  it("does not share the cap between two configurations, and has no cap by default", async () => {
    const a = harness({ llm_call: { max_concurrent_calls: 1 } });
    const b = harness({ llm_call: { max_concurrent_calls: 1 } });
    const first = gated();
    const both = [a.call(first.handler), b.call(first.handler)];
    await tick();
    expect(first.state.max).toBe(2);
    first.open();
    await Promise.all(both);

    const free = harness();
    const second = gated();
    const five = Array.from({ length: 5 }, () => free.call(second.handler));
    await tick();
    expect(second.state.max).toBe(5);
    second.open();
    await Promise.all(five);
  });

  it("frees the slot while a call sleeps in backoff", async () => {
    const limiter = new LlmCallLimiter(1);
    const h = harness({ llm_call: { retry_max_attempts: 2, retry_base_delay_ms: 10_000, retry_cap_delay_ms: 10_000 } }, { limiter });
    const failingA = scripted(new FakeError("server busy", { status: 503 }));
    const a = h.call(failingA);
    await h.clock.advance(0);
    expect(failingA.count).toBe(1);
    const b = h.call(scripted("b-ok"));
    expect((await b).content).toBe("b-ok");
    expect(failingA.count).toBe(1);
    await h.clock.advance(10_000);
    expect(kwargs(await a)["deerflow_error_fallback"]).toBe(true);
    expect(limiter.inFlight).toBe(0);
  });

  it("a waiter cancelled while queued leaves the queue and leaks no permit", async () => {
    const limiter = new LlmCallLimiter(1);
    await limiter.acquire();
    const controller = new AbortController();
    const waiting = limiter.acquire(controller.signal);
    expect(limiter.queued).toBe(1);
    controller.abort();
    await expect(waiting).rejects.toBeDefined();
    expect(limiter.queued).toBe(0);
    limiter.release();
    expect(limiter.inFlight).toBe(0);
    await limiter.acquire();
    expect(limiter.inFlight).toBe(1);
  });
});

describe("LLMErrorHandling: config and declaration", () => {
  it("has a stable name and declares every behaviour-affecting setting", () => {
    const middleware = createLLMErrorHandlingMiddleware({ circuit_breaker: { failure_threshold: 3 }, llm_call: { retry_max_attempts: 7 } });
    expect(middleware.name).toBe(LLM_ERROR_HANDLING_NAME);
    expect(middleware.name).toBe("LLMErrorHandling");
    expect(middleware.releasePolicyParameters?.()).toEqual({
      circuit_breaker: { failure_threshold: 3, recovery_timeout_sec: 60 },
      llm_call: { retry_max_attempts: 7, retry_base_delay_ms: 1000, retry_cap_delay_ms: 8000, burst_retry_base_delay_ms: 5000, max_concurrent_calls: 0 },
      retriable_status_codes: [408, 409, 425, 429, 500, 502, 503, 504],
      retry_budget_by_error_name: { StreamChunkTimeoutError: 2 },
      retry_budget_by_reason: { burst_rate: 2 },
      backoff: "decorrelated_jitter",
      retry_after: "honoured_verbatim",
    });
    expect(LLM_ERROR_HANDLING_DEFAULTS).toEqual({
      circuit_breaker: { failure_threshold: 5, recovery_timeout_sec: 60 },
      llm_call: { retry_max_attempts: 3, retry_base_delay_ms: 1000, retry_cap_delay_ms: 8000, burst_retry_base_delay_ms: 5000, max_concurrent_calls: 0 },
    });
  });

  it("rejects a bad or unknown key with its full path", () => {
    expect(() => createLLMErrorHandlingMiddleware({ llm_call: { retry_max_attempts: 0 } })).toThrow(/^LLMErrorHandling\.llm_call\.retry_max_attempts: /);
    expect(() => createLLMErrorHandlingMiddleware({ circuit_breaker: { threshold: 2 } } as never)).toThrowError(
      expect.objectContaining({ code: "invalid_middleware_config", message: expect.stringContaining("LLMErrorHandling.circuit_breaker.threshold") }),
    );
  });

  it("uses the configured burst base", async () => {
    const h = harness({ llm_call: { burst_retry_base_delay_ms: 100, retry_cap_delay_ms: 200 } }, { random: () => 1 - 1e-9 });
    await drive(h.clock, h.call(scripted(new FakeError("limit_burst_rate", { status: 429 }))));
    expect(h.events[0]!["wait_ms"]).toBe(200);
  });
});

import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { GraphInterrupt } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent, type RunRecord } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, NodeHook, StateUpdate } from "../../../src/engine/types.ts";
import type { FinishReasonDetector } from "../../../src/middlewares/model-length-finish-reason/detectors.ts";
import {
  SAFETY_FINISH_REASON_NAME,
  createSafetyFinishReasonMiddleware,
  type SafetyFinishReasonConfigInput,
  type SafetyTerminationRecord,
} from "../../../src/middlewares/safety-finish-reason/safety-finish-reason.ts";
import { defaultSafetyDetectors } from "../../../src/middlewares/safety-finish-reason/detectors.ts";
import { readStopReason } from "../../../src/middlewares/stop-reason.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

function writeCall(index = 1, content = "半截"): ToolCall {
  return { id: `call_write_${index}`, name: "write_file", args: { path: "/mnt/user-data/outputs/x.md", content }, type: "tool_call" };
}

function ai(fields: Partial<{ content: AIMessage["content"]; tool_calls: ToolCall[]; response_metadata: Record<string, unknown>; additional_kwargs: Record<string, unknown>; id: string }> = {}) {
  return new AIMessage({ content: "", tool_calls: [], response_metadata: {}, additional_kwargs: {}, ...fields });
}

const filtered = (fields: Parameters<typeof ai>[0] = {}) => ai({ tool_calls: [writeCall()], response_metadata: { finish_reason: "content_filter" }, ...fields });

interface Applied {
  update: StateUpdate | undefined;
  patched: AIMessage | undefined;
  events: Array<Record<string, unknown>>;
  runtime: AgentRuntime;
}

function apply(messages: BaseMessage[], options: { config?: SafetyFinishReasonConfigInput; detectors?: FinishReasonDetector[]; runtime?: AgentRuntime } = {}): Applied {
  const events: Array<Record<string, unknown>> = [];
  const runtime = options.runtime ?? { ...makeRuntime({ threadId: "t-1" }), writer: (e: unknown) => void events.push(e as Record<string, unknown>) };
  const middleware = createSafetyFinishReasonMiddleware(options.config, options.detectors ? { detectors: options.detectors } : {});
  const update = (middleware.afterModel as NodeHook)({ ...emptyThreadState(), messages }, runtime) as StateUpdate | undefined;
  const patched = (update?.messages as BaseMessage[] | undefined)?.[0] as AIMessage | undefined;
  return { update, patched, events, runtime };
}

function record(message: AIMessage | undefined): SafetyTerminationRecord {
  return message!.additional_kwargs["safety_termination"] as SafetyTerminationRecord;
}

const always = (reasonValue = "content_filter"): FinishReasonDetector => ({
  name: "always_hit",
  detect: () => ({ detector: "always_hit", reasonField: "finish_reason", reasonValue, extras: {} }),
});
const never: FinishReasonDetector = { name: "never_hit", detect: () => null };

describe("SafetyFinishReason: the graph", () => {
  it("scenario M54: content_filter with a write_file call: the tool never runs, the call is stripped, explained, recorded, capped and announced", async () => {
    const writes: unknown[] = [];
    const writeFile: AgentTool = {
      name: "write_file",
      description: "write a file",
      schema: { type: "object", properties: { path: { type: "string" }, content: { type: "string" } } },
      invoke: async (args) => (writes.push(args), "written"),
    };
    const model = fakeModel()
      .respond(
        new AIMessage({
          content: "Here is the report:\n# Weekly Politics\n- Meeting time: 2026-05-12—",
          tool_calls: [{ id: "call_truncated_1", name: "write_file", args: { path: "/mnt/user-data/outputs/report.md", content: "# Weekly Politics\n- Meeting" }, type: "tool_call" }],
          response_metadata: { finish_reason: "content_filter", model_name: "fake-kimi" },
        }),
      )
      .respond(new AIMessage("never reached"));
    const agent = createAgent({ model, tools: [writeFile], middlewares: [createSafetyFinishReasonMiddleware()], services: { clock: systemClock } });

    const custom: Array<Record<string, unknown>> = [];
    let messages: BaseMessage[] = [];
    let run: RunRecord | undefined;
    for await (const chunk of agent.stream({ messages: [new HumanMessage("write me a report")] }, { threadId: "safety-thread", streamMode: ["custom", "values"] }, (r) => (run = r))) {
      const [mode, data] = chunk as [string, Record<string, unknown>];
      if (mode === "custom") custom.push(data);
      else messages = data["messages"] as BaseMessage[];
    }

    expect(writes).toEqual([]);
    expect(model.callCount).toBe(1);
    const final = messages.at(-1) as AIMessage;
    expect(final.tool_calls).toEqual([]);
    expect(final.content).toContain("Weekly Politics");
    expect(final.content).toContain(
      "The model provider stopped this response with a safety-related signal (finish_reason='content_filter', detector='openai_compatible_content_filter'). Any tool calls produced in this turn were suppressed",
    );
    expect(record(final)).toEqual({
      detector: "openai_compatible_content_filter",
      reason_field: "finish_reason",
      reason_value: "content_filter",
      suppressed_tool_call_count: 1,
      suppressed_tool_call_names: ["write_file"],
      extras: {},
    });
    expect(final.response_metadata["finish_reason"]).toBe("content_filter");
    expect(run?.scope.get("stop_reason")).toBe("safety_capped");
    expect(custom).toEqual([
      {
        type: "safety_termination",
        detector: "openai_compatible_content_filter",
        reason_field: "finish_reason",
        reason_value: "content_filter",
        suppressed_tool_call_count: 1,
        suppressed_tool_call_names: ["write_file"],
        thread_id: "safety-thread",
      },
    ]);
  });

  it("scenario M54: a response with visible text and no tool calls is delivered unchanged", async () => {
    const model = fakeModel().respond(new AIMessage({ content: "Partial answer truncated by safety filter", response_metadata: { finish_reason: "content_filter" } }));
    const agent = createAgent({ model, middlewares: [createSafetyFinishReasonMiddleware()], services: { clock: systemClock } });
    const state = await agent.invoke({ messages: [new HumanMessage("hi")] });
    const final = state.messages.at(-1) as AIMessage;
    expect(final.content).toBe("Partial answer truncated by safety filter");
    expect(final.additional_kwargs).not.toHaveProperty("safety_termination");
  });

  it("scenario M54: registered after a call-counting guard, it runs first in the reverse after-model order, so the guard sees no calls", async () => {
    const seen: number[] = [];
    const counter: AgentMiddleware = {
      name: "LoopCounter",
      afterModel: (state) => void seen.push((state.messages.at(-1) as AIMessage).tool_calls?.length ?? -1),
    };
    const model = fakeModel().respond(filtered());
    const agent = createAgent({ model, middlewares: [counter, createSafetyFinishReasonMiddleware()], services: { clock: systemClock } });
    await agent.invoke({ messages: [new HumanMessage("go")] });
    expect(seen).toEqual([0]);
  });
});

describe("SafetyFinishReason: when it acts", () => {
  it("scenario M54: strips structured and raw calls and the legacy function_call, keeping the provider's other kwargs and the id", () => {
    const raw = [{ id: "call_write_1", type: "function", function: { name: "write_file", arguments: '{"path": "/x"}' } }];
    const original = filtered({
      id: "ai-1",
      tool_calls: [writeCall(1), writeCall(2)],
      additional_kwargs: { tool_calls: raw, function_call: { name: "write_file", arguments: "{}" }, reasoning: "thinking text", custom_provider_field: { x: 1 } },
    });
    const { patched, runtime } = apply([original]);
    expect(patched!.id).toBe("ai-1");
    expect(patched!.tool_calls).toEqual([]);
    expect(patched!.additional_kwargs).not.toHaveProperty("tool_calls");
    expect(patched!.additional_kwargs).not.toHaveProperty("function_call");
    expect(patched!.additional_kwargs).toMatchObject({ reasoning: "thinking text", custom_provider_field: { x: 1 } });
    expect(record(patched)).toMatchObject({ suppressed_tool_call_count: 2, suppressed_tool_call_names: ["write_file", "write_file"] });
    expect(readStopReason(runtime)).toBe("safety_capped");
    // The original message object is not mutated.
    expect(original.tool_calls).toHaveLength(2);
  });

  it("appends to string content, replaces empty content, and keeps list content a list", () => {
    expect(apply([filtered({ content: "some partial text" })]).patched!.content).toMatch(/^some partial text\n\nThe model provider stopped/);
    expect(apply([filtered({ content: "" })]).patched!.content).toMatch(/^The model provider stopped this response/);
    const blocks = [{ type: "thinking", thinking: "let me consider..." }, { type: "text", text: "partial answer" }];
    const listed = apply([filtered({ content: blocks })]).patched!.content as Array<Record<string, string>>;
    expect(listed.slice(0, 2)).toEqual(blocks);
    expect(listed[2]!.type).toBe("text");
    expect(listed[2]!.text).toMatch(/^\n\nThe model provider stopped/);
  });

  it("backfills a blank safety-stopped reply without claiming suppressed calls", () => {
    for (const content of ["", "   \n  "]) {
      const { patched } = apply([ai({ content, response_metadata: { finish_reason: "content_filter" } })]);
      expect(patched!.content).toContain("returned no content");
      expect(patched!.content).not.toContain("were suppressed");
      expect(record(patched)).toMatchObject({ suppressed_tool_call_count: 0, suppressed_tool_call_names: [] });
    }
    expect(apply([ai({ content: "", response_metadata: { stop_reason: "refusal" } })]).patched!.content).toContain("stop_reason='refusal'");
  });

  it("covers Anthropic refusals and Gemini safety reasons, keeping their extras", () => {
    expect(apply([filtered({ response_metadata: { stop_reason: "refusal" } })]).patched!.tool_calls).toEqual([]);
    const ratings = [{ category: "HARM_CATEGORY_DANGEROUS", probability: "HIGH" }];
    const gemini = apply([filtered({ response_metadata: { finish_reason: "SAFETY", safety_ratings: ratings } })]).patched;
    expect(record(gemini)).toMatchObject({ detector: "gemini_safety", reason_value: "SAFETY", extras: { safety_ratings: ratings } });
    const azure = apply([filtered({ response_metadata: { finish_reason: "content_filter", content_filter_results: { hate: { filtered: true } } } })]).patched;
    expect(record(azure).extras).toEqual({ content_filter_results: { hate: { filtered: true } } });
  });

  it("leaves healthy responses alone, and is idempotent on a message it already cleared", () => {
    expect(apply([ai({ tool_calls: [writeCall()], response_metadata: { finish_reason: "tool_calls" } })]).update).toBeUndefined();
    expect(apply([ai({ tool_calls: [writeCall()], response_metadata: { finish_reason: "stop" } })]).update).toBeUndefined();
    expect(apply([ai({ content: "", response_metadata: { finish_reason: "stop" } })]).update).toBeUndefined();
    expect(apply([]).update).toBeUndefined();
    expect(apply([new HumanMessage("hi"), new SystemMessage("sys")]).update).toBeUndefined();
    const first = apply([filtered({ content: "partial" })]).patched!;
    expect(apply([first]).update).toBeUndefined();
  });

  it("never overrides a stop reason recorded earlier in the run", () => {
    const runtime = makeRuntime();
    runtime.scope.set("stop_reason", "loop_capped");
    apply([filtered()], { runtime });
    expect(readStopReason(runtime)).toBe("loop_capped");
  });

  it("keeps going when the event consumer fails, but lets a bubble-up through", () => {
    const broken = { ...makeRuntime(), writer: () => { throw new Error("consumer gone"); } };
    expect(apply([filtered()], { runtime: broken }).patched!.tool_calls).toEqual([]);
    const raised = new GraphInterrupt([]);
    const interrupting = { ...makeRuntime(), writer: () => { throw raised; } };
    expect(() => apply([filtered()], { runtime: interrupting })).toThrow(raised);
  });
});

describe("SafetyFinishReason: detectors and config", () => {
  it("tries detectors in order, skips one that throws, and copies the list it was given", () => {
    expect(record(apply([ai({ tool_calls: [writeCall()] })], { detectors: [always("first"), always("second")] }).patched).reason_value).toBe("first");
    expect(apply([filtered()], { detectors: [never, never] }).update).toBeUndefined();
    const raising: FinishReasonDetector = { name: "raising", detect: () => { throw new Error("boom"); } };
    expect(record(apply([ai({ tool_calls: [writeCall()] })], { detectors: [raising, always()] }).patched).detector).toBe("always_hit");

    const list = [always()];
    const middleware = createSafetyFinishReasonMiddleware({}, { detectors: list });
    list.length = 0;
    expect((middleware.afterModel as NodeHook)({ ...emptyThreadState(), messages: [ai({ tool_calls: [writeCall()] })] }, makeRuntime())).toBeDefined();
  });

  it("builds configured detectors with their own values, by class name or upstream module path", () => {
    const config: SafetyFinishReasonConfigInput = {
      detectors: [{ use: "deerflow.agents.middlewares.safety_termination_detectors:OpenAICompatibleContentFilterDetector", config: { finish_reasons: ["custom_filter"] } }],
    };
    expect(apply([filtered({ response_metadata: { finish_reason: "custom_filter" } })], { config }).patched).toBeDefined();
    expect(apply([filtered({ response_metadata: { finish_reason: "content_filter" } })], { config }).update).toBeUndefined();
    const byName = { detectors: [{ use: "AnthropicRefusalDetector", config: { stop_reasons: ["policy"] } }] };
    expect(apply([filtered({ response_metadata: { stop_reason: "POLICY" } })], { config: byName }).patched).toBeDefined();
  });

  it("rejects an empty detector list, an unknown detector, a bad detector option and a non-detector object", () => {
    expect(() => createSafetyFinishReasonMiddleware({ detectors: [] })).toThrow(/SafetyFinishReason\.detectors: .*enabled: false/);
    expect(() => createSafetyFinishReasonMiddleware({ detectors: [{ use: "builtins:dict" }] })).toThrowError(
      expect.objectContaining({ code: "invalid_middleware_config", message: expect.stringContaining("detectors[0].use") }),
    );
    expect(() => createSafetyFinishReasonMiddleware({ detectors: [{ use: "GeminiSafetyDetector", config: { stop_reasons: ["x"] } }] })).toThrow(
      /detectors\[0\]\.config\.stop_reasons: .*takes only finish_reasons/,
    );
    expect(() => createSafetyFinishReasonMiddleware({}, { detectors: [{} as FinishReasonDetector] })).toThrowError(expect.objectContaining({ code: "invalid_safety_detector" }));
    expect(() => createSafetyFinishReasonMiddleware({ enable: true } as never)).toThrow(/^SafetyFinishReason\.enable: /);
  });

  it("does nothing when disabled", () => {
    const middleware = createSafetyFinishReasonMiddleware({ enabled: false });
    expect(middleware.afterModel).toBeUndefined();
    expect(middleware.releasePolicyParameters?.()).toMatchObject({ enabled: false });
  });

  it("has a stable name and declares its detectors as {class, name, parameters}", () => {
    const middleware = createSafetyFinishReasonMiddleware();
    expect(middleware.name).toBe(SAFETY_FINISH_REASON_NAME);
    expect(middleware.name).toBe("SafetyFinishReason");
    expect(middleware.releasePolicyParameters?.()).toEqual({
      enabled: true,
      detectors: [
        { class: "OpenAICompatibleContentFilterDetector", name: "openai_compatible_content_filter", parameters: { finish_reasons: ["content_filter"] } },
        { class: "AnthropicRefusalDetector", name: "anthropic_refusal", parameters: { stop_reasons: ["refusal"] } },
        {
          class: "GeminiSafetyDetector",
          name: "gemini_safety",
          parameters: { finish_reasons: ["SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "RECITATION", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"] },
        },
      ],
    });
    expect(defaultSafetyDetectors().map((d) => d.name)).toEqual(["openai_compatible_content_filter", "anthropic_refusal", "gemini_safety"]);
  });
});

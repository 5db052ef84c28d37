import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent, type RunRecord } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, NodeHook } from "../../../src/engine/types.ts";
import {
  MODEL_LENGTH_CAPPED_STOP_REASON,
  MODEL_LENGTH_FINISH_REASON_NAME,
  createModelLengthFinishReasonMiddleware,
} from "../../../src/middlewares/model-length-finish-reason/model-length-finish-reason.ts";
import {
  AnthropicMaxTokensDetector,
  GeminiMaxTokensDetector,
  OpenAICompatibleLengthDetector,
  defaultLengthDetectors,
  type FinishReasonDetector,
} from "../../../src/middlewares/model-length-finish-reason/detectors.ts";
import { readStopReason } from "../../../src/middlewares/stop-reason.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

function run(middleware: AgentMiddleware, messages: BaseMessage[], runtime: AgentRuntime = makeRuntime()) {
  const result = (middleware.afterModel as NodeHook)({ ...emptyThreadState(), messages }, runtime);
  return { result, runtime, stop: readStopReason(runtime) };
}

const partial = (fields: ConstructorParameters<typeof AIMessage>[0] & object) => new AIMessage({ content: "partial", ...fields });

describe("ModelLengthFinishReason", () => {
  const middleware = createModelLengthFinishReasonMiddleware();

  it("scenario M55: finish_reason=length on a visible answer records model_length_capped and leaves the text alone", () => {
    const text = '<tool_call><invoke name="write_file"><path>/mnt/user-data/outputs/report.md</path><content># partial';
    const message = new AIMessage({ content: text, response_metadata: { finish_reason: "length" } });
    const { result, stop } = run(middleware, [new HumanMessage("write"), message]);
    expect(result).toBeUndefined();
    expect(stop).toBe(MODEL_LENGTH_CAPPED_STOP_REASON);
    expect(message.content).toBe(text);
    expect(message.tool_calls).toEqual([]);
  });

  it("scenario M55: reads the OpenAI, Anthropic and Gemini forms, in response_metadata or additional_kwargs", () => {
    const capped = [
      partial({ response_metadata: { finish_reason: "length" } }),
      partial({ additional_kwargs: { finish_reason: "length" } }),
      partial({ response_metadata: { stop_reason: "max_tokens" } }),
      partial({ response_metadata: { finish_reason: "MAX_TOKENS" } }),
      partial({ response_metadata: { finish_reason: "LENGTH" } }),
    ];
    for (const message of capped) expect(run(middleware, [message]).stop).toBe("model_length_capped");
  });

  it("scenario M55: never overrides a stop reason already recorded in the run", () => {
    const runtime = makeRuntime();
    runtime.scope.set("stop_reason", "token_capped");
    expect(run(middleware, [partial({ response_metadata: { finish_reason: "length" } })], runtime).stop).toBe("token_capped");
  });

  it("scenario M55: ignores replies with tool calls, empty replies, normal stops and non-AI messages", () => {
    const ignored: BaseMessage[] = [
      new AIMessage({
        content: "",
        tool_calls: [{ id: "w1", name: "write_file", args: { path: "/x", content: "# partial" }, type: "tool_call" }],
        response_metadata: { finish_reason: "length" },
      }),
      partial({ tool_calls: [{ id: "w2", name: "write_file", args: {}, type: "tool_call" }], response_metadata: { finish_reason: "length" } }),
      partial({ invalid_tool_calls: [{ id: "bad", name: "write_file", args: "{", type: "invalid_tool_call" }], response_metadata: { finish_reason: "length" } }),
      partial({ additional_kwargs: { finish_reason: "length", tool_calls: [{ id: "raw", type: "function", function: { name: "x", arguments: "{" } }] } }),
      new AIMessage({ content: "", response_metadata: { finish_reason: "length" } }),
      new AIMessage({ content: [{ type: "thinking", thinking: "..." }], response_metadata: { finish_reason: "length" } }),
      new AIMessage({ content: 'Example, not a call:\n```xml\n<tool_call><invoke name="write_file"></invoke></tool_call>\n```', response_metadata: { finish_reason: "stop" } }),
      new HumanMessage("hello"),
    ];
    for (const message of ignored) expect(run(middleware, [message]).stop).toBeUndefined();
    expect(run(middleware, []).stop).toBeUndefined();
  });

  it("scenario M55: through the engine the run's stop reason is model_length_capped and the answer is delivered as is", async () => {
    const model = fakeModel().respond(new AIMessage({ content: "a long answer cut", response_metadata: { finish_reason: "length" } }));
    const agent = createAgent({ model, middlewares: [middleware], services: { clock: systemClock } });
    let record: RunRecord | undefined;
    let last: BaseMessage | undefined;
    for await (const chunk of agent.stream({ messages: [new HumanMessage("write a lot")] }, { streamMode: "values" }, (r) => (record = r))) {
      last = (chunk as { messages: BaseMessage[] }).messages.at(-1);
    }
    expect(last?.content).toBe("a long answer cut");
    expect(record?.scope.get("stop_reason")).toBe("model_length_capped");
  });

  it("tries detectors in order and treats a throwing detector as no match", () => {
    const raising: FinishReasonDetector = {
      name: "raising",
      detect: () => {
        throw new Error("boom");
      },
    };
    const always: FinishReasonDetector = { name: "always", detect: () => ({ detector: "always", reasonField: "x", reasonValue: "y", extras: {} }) };
    const custom = createModelLengthFinishReasonMiddleware({}, { detectors: [raising, always] });
    expect(run(custom, [partial({})]).stop).toBe("model_length_capped");
    const onlyRaising = createModelLengthFinishReasonMiddleware({}, { detectors: [raising] });
    expect(run(onlyRaising, [partial({ response_metadata: { finish_reason: "length" } })]).stop).toBeUndefined();
  });

  it("detectors report which provider rule fired", () => {
    expect(new OpenAICompatibleLengthDetector().detect(partial({ response_metadata: { finish_reason: "length" } }))).toEqual({
      detector: "openai_compatible_length",
      reasonField: "finish_reason",
      reasonValue: "length",
      extras: {},
    });
    expect(new GeminiMaxTokensDetector().detect(partial({ response_metadata: { finish_reason: "MAX_TOKENS" } }))?.detector).toBe("gemini_max_tokens");
    expect(new AnthropicMaxTokensDetector().detect(partial({ response_metadata: { stop_reason: "max_tokens" } }))?.reasonField).toBe("stop_reason");
    expect(new OpenAICompatibleLengthDetector().detect(partial({ response_metadata: { finish_reason: 42 } }))).toBeNull();
    expect(defaultLengthDetectors().map((d) => d.name)).toEqual(["openai_compatible_length", "anthropic_max_tokens", "gemini_max_tokens"]);
  });

  it("has a stable name, rejects unknown config and declares its detectors", () => {
    expect(middleware.name).toBe(MODEL_LENGTH_FINISH_REASON_NAME);
    expect(middleware.name).toBe("ModelLengthFinishReason");
    expect(() => createModelLengthFinishReasonMiddleware({ enabled: true } as never)).toThrow(/^ModelLengthFinishReason\.enabled: /);
    expect(middleware.releasePolicyParameters?.()).toEqual({
      stop_reason: "model_length_capped",
      detectors: [
        { class: "OpenAICompatibleLengthDetector", name: "openai_compatible_length", parameters: { finish_reasons: ["length"] } },
        { class: "AnthropicMaxTokensDetector", name: "anthropic_max_tokens", parameters: { stop_reasons: ["max_tokens"] } },
        { class: "GeminiMaxTokensDetector", name: "gemini_max_tokens", parameters: { finish_reasons: ["MAX_TOKENS"] } },
      ],
    });
  });
});

import * as v from "valibot";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { MemorySaver } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent, type RunRecord } from "../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, HookResult, ModelRequest, NodeHook } from "../../src/engine/types.ts";
import { HIDE_FROM_UI } from "../../src/middlewares/messages.ts";
import { readStopReason } from "../../src/middlewares/stop-reason.ts";
import {
  TokenBudgetConfigSchema,
  BUDGET_WARNING_NAME,
  TOKEN_BUDGET_NAME,
  budgetExceededText,
  budgetWarningText,
  createTokenBudgetMiddleware,
  type TokenBudgetConfigInput,
} from "../../src/middlewares/token-budget.ts";
import { emptyThreadState, type ThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

// The section as its schema fills it in when nothing is configured.
const TOKEN_BUDGET_DEFAULTS = v.parse(TokenBudgetConfigSchema, {});

let counter = 0;
function ai(usage: { input?: number; output?: number } | undefined, options: { id?: string; calls?: boolean; content?: string } = {}): AIMessage {
  const input = usage?.input ?? 0;
  const output = usage?.output ?? 0;
  return new AIMessage({
    id: options.id ?? `ai-${++counter}`,
    content: options.content ?? "",
    tool_calls: options.calls ? [{ name: "bash", args: { command: "ls" }, id: `call-${counter}`, type: "tool_call" }] : [],
    ...(usage ? { usage_metadata: { input_tokens: input, output_tokens: output, total_tokens: input + output } } : {}),
  });
}

function state(messages: BaseMessage[]): ThreadState {
  return { ...emptyThreadState(), messages };
}

function hook(mw: AgentMiddleware, name: "beforeAgent" | "afterModel" | "afterAgent"): NodeHook {
  const h = mw[name];
  return (typeof h === "function" ? h : h!.hook) as NodeHook;
}

function startRun(mw: AgentMiddleware, messages: BaseMessage[] = [], run = "run-1"): AgentRuntime {
  const runtime = makeRuntime({ threadId: "t1", runId: run });
  hook(mw, "beforeAgent")(state(messages), runtime);
  return runtime;
}

function after(mw: AgentMiddleware, messages: BaseMessage[], runtime: AgentRuntime): HookResult {
  return hook(mw, "afterModel")(state(messages), runtime) as HookResult;
}

async function nextRequest(mw: AgentMiddleware, runtime: AgentRuntime, messages: BaseMessage[] = [new HumanMessage("go")]): Promise<BaseMessage[]> {
  let seen: readonly BaseMessage[] = [];
  const request = { messages, state: state(messages), runtime } as unknown as ModelRequest;
  await mw.wrapModelCall!(request, async (r) => {
    seen = r.messages;
    return new AIMessage("ok");
  });
  return [...seen];
}

function budgetWarnings(messages: readonly BaseMessage[]): HumanMessage[] {
  return messages.filter((m): m is HumanMessage => HumanMessage.isInstance(m) && m.name === BUDGET_WARNING_NAME);
}

function replaced(result: HookResult): AIMessage {
  expect(result).toBeTruthy();
  const messages = (result as { messages: BaseMessage[] }).messages;
  expect(messages).toHaveLength(1);
  return messages[0] as AIMessage;
}

const on = (config: TokenBudgetConfigInput = {}) => createTokenBudgetMiddleware({ enabled: true, max_tokens: 1000, ...config });

describe("TokenBudget config", () => {
  it("is off by default with upstream's limits, and declares its config", () => {
    const mw = createTokenBudgetMiddleware();
    expect(mw.name).toBe(TOKEN_BUDGET_NAME);
    expect(mw.name).toBe("TokenBudget");
    expect(TOKEN_BUDGET_DEFAULTS).toEqual({
      enabled: false,
      max_tokens: 200_000,
      max_input_tokens: null,
      max_output_tokens: null,
      warn_threshold: 0.8,
      hard_stop_threshold: 1,
    });
    expect(mw.releasePolicyParameters?.()).toEqual({ config: TOKEN_BUDGET_DEFAULTS });
    expect(on({ max_input_tokens: 500 }).releasePolicyParameters?.()).toEqual({
      config: { ...TOKEN_BUDGET_DEFAULTS, enabled: true, max_tokens: 1000, max_input_tokens: 500 },
    });
  });

  it.each<[TokenBudgetConfigInput, string]>([
    [{ max_tokens: 999 }, "TokenBudget.max_tokens: expected at least 1000"],
    [{ max_tokens: 1000.5 }, "TokenBudget.max_tokens"],
    [{ max_input_tokens: 0 }, "TokenBudget.max_input_tokens"],
    [{ warn_threshold: 1.2 }, "TokenBudget.warn_threshold"],
    [{ warn_threshold: 0.9, hard_stop_threshold: 0.5 }, "TokenBudget.hard_stop_threshold: hard_stop_threshold must be greater than or equal to warn_threshold"],
    [{ max_token: 5000 } as unknown as TokenBudgetConfigInput, "TokenBudget.max_token"],
  ])("rejects %j naming the key", (config, message) => {
    expect(() => createTokenBudgetMiddleware(config)).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
    expect(() => createTokenBudgetMiddleware(config)).toThrow(message);
  });

  it("does nothing when disabled", async () => {
    const mw = createTokenBudgetMiddleware({ max_tokens: 1000 });
    const runtime = startRun(mw);
    expect(after(mw, [ai({ input: 5000 }, { calls: true })], runtime)).toBeUndefined();
    expect(budgetWarnings(await nextRequest(mw, runtime))).toEqual([]);
    expect(readStopReason(runtime)).toBeUndefined();
  });
});

describe("TokenBudget", () => {
  it("ignores responses without usage and usage below the warning", async () => {
    const mw = on();
    const runtime = startRun(mw);
    expect(after(mw, [new AIMessage({ content: "hello", id: "x" })], runtime)).toBeUndefined();
    expect(after(mw, [ai({ input: 500 })], runtime)).toBeUndefined();
    expect(budgetWarnings(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("scenario M51: at 850 of 1000 one hidden [TOKEN BUDGET WARNING] goes into the next request, after the tool results", async () => {
    const mw = on();
    const runtime = startRun(mw);
    const first = ai({ input: 400, output: 50 }, { calls: true });
    const tool1 = new ToolMessage({ content: "ok", tool_call_id: "c1" });
    expect(after(mw, [first], runtime)).toBeUndefined();
    const second = ai({ input: 350, output: 50 }, { calls: true });
    expect(after(mw, [first, tool1, second], runtime)).toBeUndefined();

    const tool2 = new ToolMessage({ content: "ok", tool_call_id: "c2" });
    const sent = await nextRequest(mw, runtime, [first, tool1, second, tool2]);
    expect(sent.slice(0, 4)).toEqual([first, tool1, second, tool2]);
    const warnings = budgetWarnings(sent);
    expect(warnings).toHaveLength(1);
    expect(sent.at(-1)).toBe(warnings[0]);
    expect(warnings[0]!.content).toBe(budgetWarningText("total", 850, 1000, 0.85));
    expect(warnings[0]!.content).toBe(
      "[TOKEN BUDGET WARNING] You have used 850 of your 1,000 total token budget (85%). Wrap up your current work and produce a final answer. Avoid starting new tool calls unless absolutely necessary.",
    );
    expect(warnings[0]!.additional_kwargs[HIDE_FROM_UI]).toBe(true);

    // Still over the warning line, but a run is warned once.
    after(mw, [first, tool1, second, tool2, ai({ input: 50 }, { calls: true })], runtime);
    expect(budgetWarnings(await nextRequest(mw, runtime))).toEqual([]);
    expect(readStopReason(runtime)).toBeUndefined();
  });

  it("scenario M51: at >= 1000 tool calls are stripped, [TOKEN BUDGET EXCEEDED] is appended, stop_reason=token_capped", () => {
    const mw = on();
    const runtime = startRun(mw);
    const last = ai({ input: 900, output: 150 }, { calls: true, content: "Thinking" });
    const stopped = replaced(after(mw, [last], runtime));
    expect(stopped.id).toBe(last.id);
    expect(stopped.tool_calls).toEqual([]);
    expect(stopped.content).toBe(`Thinking\n\n${budgetExceededText("total", 1050, 1000)}`);
    expect(stopped.content).toContain("[TOKEN BUDGET EXCEEDED] The total token usage (1,050) has exceeded the safety limit (1,000).");
    expect(stopped.usage_metadata).toEqual(last.usage_metadata);
    expect(readStopReason(runtime)).toBe("token_capped");
  });

  it("scenario M51: usage from earlier runs does not count", () => {
    const mw = on();
    const earlier = [new HumanMessage("q1"), ai({ input: 900, output: 90 }), new HumanMessage("q2")];
    const runtime = startRun(mw, earlier, "run-2");
    expect(after(mw, [...earlier, ai({ input: 100 })], runtime)).toBeUndefined();
    expect(readStopReason(runtime)).toBeUndefined();
  });

  it("a run resumed past beforeAgent still counts only what it produced", () => {
    const mw = on();
    const runtime = makeRuntime({ threadId: "t1", runId: "resumed" });
    const earlier = [ai({ input: 990 })];
    expect(after(mw, [...earlier, ai({ input: 100 }, { calls: true })], runtime)).toBeUndefined();
    expect(readStopReason(runtime)).toBeUndefined();
  });

  it("counts usage merged into an earlier message later (a subagent's), once", async () => {
    const mw = on();
    const runtime = startRun(mw);
    const dispatch = ai({ input: 100 }, { id: "dispatch", calls: true });
    after(mw, [dispatch], runtime);
    const merged = ai({ input: 100, output: 700 }, { id: "dispatch", calls: true });
    after(mw, [merged, ai({ input: 50 })], runtime);
    expect(budgetWarnings(await nextRequest(mw, runtime))[0]!.content).toContain("used 850 of your 1,000");
    // Seen again unchanged, the merged growth is not added a second time: 900, not 1,600.
    expect(after(mw, [merged, ai({ input: 50 }, { id: "again" })], runtime)).toBeUndefined();
    expect(readStopReason(runtime)).toBeUndefined();
    const stopped = replaced(after(mw, [merged, ai({ input: 100 }, { id: "over", calls: true })], runtime));
    expect(stopped.content).toContain("The total token usage (1,000)");
  });

  it("the highest fraction of total, input and output decides", async () => {
    const input = on({ max_tokens: 100_000, max_input_tokens: 10_000 });
    const runA = startRun(input);
    after(input, [ai({ input: 9000, output: 1000 })], runA);
    expect(budgetWarnings(await nextRequest(input, runA))[0]!.content).toBe(budgetWarningText("input", 9000, 10_000, 0.9));

    const output = on({ max_tokens: 100_000, max_output_tokens: 5000 });
    const runB = startRun(output);
    expect(replaced(after(output, [ai({ input: 4000, output: 6000 }, { calls: true })], runB)).content).toContain("The output token usage (6,000)");
  });

  it("delivers the warning again when the model call failed, and afterAgent forgets the run", async () => {
    const mw = on();
    const runtime = startRun(mw);
    after(mw, [ai({ input: 850 })], runtime);
    const request = { messages: [new HumanMessage("go")], state: emptyThreadState(), runtime } as unknown as ModelRequest;
    await expect(mw.wrapModelCall!(request, () => Promise.reject(new Error("503")))).rejects.toThrow("503");
    expect(budgetWarnings(await nextRequest(mw, runtime))).toHaveLength(1);

    const other = startRun(mw, [], "run-x");
    after(mw, [ai({ input: 850 })], other);
    hook(mw, "afterAgent")(emptyThreadState(), other);
    expect(budgetWarnings(await nextRequest(mw, other))).toEqual([]);
  });
});

describe("TokenBudget in the real engine", () => {
  const bashTool: AgentTool = {
    name: "bash",
    description: "Run a fake shell command.",
    schema: { type: "object", properties: { command: { type: "string" } } },
    async invoke() {
      return "ran";
    },
  };

  function withUsage(input: number, calls: boolean, id: string): AIMessage {
    return new AIMessage({
      id,
      content: calls ? "" : "done",
      tool_calls: calls ? [{ name: "bash", args: { command: id }, id: `call-${id}`, type: "tool_call" }] : [],
      usage_metadata: { input_tokens: input, output_tokens: 0, total_tokens: input },
    });
  }

  it("scenario M51: an earlier run's 900 tokens do not count; 850 warns once, 1050 stops the run as token_capped", async () => {
    const model = fakeModel()
      .respond(withUsage(900, false, "earlier"))
      .respond(withUsage(850, true, "m1"))
      .respond(withUsage(200, true, "m2"));
    const agent = createAgent({
      model,
      tools: [bashTool],
      middlewares: [createTokenBudgetMiddleware({ enabled: true, max_tokens: 1000 })],
      checkpointer: new MemorySaver(),
      services: { clock: systemClock },
    });
    let first: RunRecord | undefined;
    for await (const _ of agent.stream({ messages: [new HumanMessage("first")] }, { threadId: "tb" }, (r) => (first = r))) void _;
    expect(first!.scope.get("stop_reason")).toBeUndefined();

    let record: RunRecord | undefined;
    let last: ThreadState | undefined;
    for await (const chunk of agent.stream({ messages: [new HumanMessage("second")] }, { threadId: "tb" }, (r) => (record = r))) {
      last = chunk as ThreadState;
    }
    expect(model.callCount).toBe(3);
    expect(model.calls.map((call) => budgetWarnings(call.messages).length)).toEqual([0, 0, 1]);
    expect(model.calls[2]!.messages.at(-1)!.content).toBe(budgetWarningText("total", 850, 1000, 0.85));
    expect(budgetWarnings(last!.messages)).toEqual([]);
    const final = last!.messages.at(-1) as AIMessage;
    expect(final.id).toBe("m2");
    expect(final.tool_calls).toEqual([]);
    expect(String(final.content)).toContain("[TOKEN BUDGET EXCEEDED] The total token usage (1,050)");
    expect(record!.scope.get("stop_reason")).toBe("token_capped");
  });
});

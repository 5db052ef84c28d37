import * as v from "valibot";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent, type RunRecord } from "../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, HookResult, NodeHook } from "../../src/engine/types.ts";
import { readStopReason, recordStopReason } from "../../src/middlewares/stop-reason.ts";
import {
  SubagentLimitConfigSchema,
  SUBAGENT_LIMIT_REACHED_TEXT,
  clampConcurrentSubagents,
  countRunDelegations,
  createSubagentLimitMiddleware,
} from "../../src/middlewares/subagent-limit.ts";
import { emptyThreadState, type ThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

// The section as its schema fills it in when nothing is configured.
const SUBAGENT_LIMIT_DEFAULTS = v.parse(SubagentLimitConfigSchema, {});

function task(id: string): ToolCall {
  return { id, name: "task", args: { description: id, prompt: `do ${id}`, subagent_type: "general-purpose" }, type: "tool_call" };
}
function call(id: string, name: string): ToolCall {
  return { id, name, args: {}, type: "tool_call" };
}

function stateWith(message: BaseMessage, delegations: Array<Record<string, unknown>> = []): ThreadState {
  return { ...emptyThreadState(), messages: [new HumanMessage("go"), message], delegations } as ThreadState;
}

function delegations(count: number, runId?: string): Array<Record<string, unknown>> {
  return Array.from({ length: count }, (_, i) => ({
    id: `d-${runId ?? "none"}-${i}`,
    description: "x",
    subagent_type: "general-purpose",
    status: "completed",
    ...(runId ? { run_id: runId } : {}),
  }));
}

async function runAfterModel(mw: AgentMiddleware, state: ThreadState, runtime: AgentRuntime = makeRuntime()): Promise<HookResult> {
  const spec = mw.afterModel!;
  const hook: NodeHook = typeof spec === "function" ? spec : spec.hook;
  return hook(state, runtime);
}

function updatedMessage(result: HookResult): AIMessage {
  expect(result).toBeTruthy();
  const message = (result as { messages: BaseMessage[] }).messages[0]!;
  expect(AIMessage.isInstance(message)).toBe(true);
  return message as AIMessage;
}

describe("SubagentLimit config", () => {
  it("defaults to 3 concurrent and 6 per run, and declares both", () => {
    expect(SUBAGENT_LIMIT_DEFAULTS).toEqual({ max_concurrent: 3, max_total_per_run: 6 });
    const mw = createSubagentLimitMiddleware();
    expect(mw.name).toBe("SubagentLimit");
    expect(mw.releasePolicyParameters!()).toEqual({ max_concurrent: 3, max_total: 6 });
  });

  it("clamps concurrency to the 1-64 safety range and to the startup maximum", () => {
    expect(clampConcurrentSubagents(0)).toBe(1);
    expect(clampConcurrentSubagents(-5)).toBe(1);
    expect(clampConcurrentSubagents(1)).toBe(1);
    expect(clampConcurrentSubagents(100)).toBe(64);
    expect(clampConcurrentSubagents(10, 4)).toBe(4);
    expect(createSubagentLimitMiddleware({ max_concurrent: 200 }).releasePolicyParameters!()).toMatchObject({ max_concurrent: 64 });
    expect(createSubagentLimitMiddleware({ max_concurrent: 8 }, { maxRunning: 5 }).releasePolicyParameters!()).toMatchObject({ max_concurrent: 5 });
  });

  it("rejects a per-run total outside 1-50 and unknown keys, naming the key", () => {
    expect(() => createSubagentLimitMiddleware({ max_total_per_run: 0 })).toThrow(/SubagentLimit\.max_total_per_run/);
    expect(() => createSubagentLimitMiddleware({ max_total_per_run: 51 })).toThrow(/at most 50/);
    expect(() => createSubagentLimitMiddleware({ max_concurrent: 2.5 })).toThrow(/whole number/);
    expect(() => createSubagentLimitMiddleware({ maxTotal: 3 } as never)).toThrow(/SubagentLimit/);
    try {
      createSubagentLimitMiddleware({ max_total_per_run: 0 });
    } catch (error) {
      expect((error as { code?: string }).code).toBe("invalid_middleware_config");
    }
  });
});

describe("SubagentLimit afterModel", () => {
  const mw = createSubagentLimitMiddleware();

  it("leaves non-AI tails, plain answers, in-limit batches and non-task calls alone", async () => {
    expect(await runAfterModel(mw, { ...emptyThreadState(), messages: [] } as ThreadState)).toBeUndefined();
    expect(await runAfterModel(mw, stateWith(new HumanMessage("hi")))).toBeUndefined();
    expect(await runAfterModel(mw, stateWith(new AIMessage("answer")))).toBeUndefined();
    expect(await runAfterModel(mw, stateWith(new AIMessage({ content: "", tool_calls: [task("a"), task("b"), task("c")] })))).toBeUndefined();
    const many = Array.from({ length: 6 }, (_, i) => call(`b${i}`, "bash"));
    expect(await runAfterModel(mw, stateWith(new AIMessage({ content: "", tool_calls: many })))).toBeUndefined();
  });

  it("scenario M48: keeps the first 3 of 5 task calls plus every non-task call, syncing raw provider calls", async () => {
    const calls = [task("t1"), call("w1", "web_search"), task("t2"), task("t3"), task("t4"), call("b1", "bash"), task("t5")];
    const raw = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: "{}" } }));
    const message = new AIMessage({
      id: "ai-1",
      content: "delegating",
      tool_calls: calls,
      additional_kwargs: { tool_calls: raw } as unknown as AIMessage["additional_kwargs"],
      response_metadata: { finish_reason: "tool_calls" },
    });
    const runtime = makeRuntime();
    const updated = updatedMessage(await runAfterModel(mw, stateWith(message), runtime));
    expect(updated.id).toBe("ai-1");
    expect(updated.tool_calls!.map((c) => c.id)).toEqual(["t1", "w1", "t2", "t3", "b1"]);
    expect((updated.additional_kwargs["tool_calls"] as Array<{ id: string }>).map((c) => c.id)).toEqual(["t1", "w1", "t2", "t3", "b1"]);
    expect(updated.content).toBe("delegating");
    expect(updated.response_metadata["finish_reason"]).toBe("tool_calls");
    expect(readStopReason(runtime)).toBeUndefined();
  });

  it("scenario M48: with 6 delegations already in this run, removes every task call, appends the note, stops and records subagent_limit_capped", async () => {
    const message = new AIMessage({
      id: "ai-2",
      content: "more work",
      tool_calls: [task("t1"), task("t2")],
      additional_kwargs: { tool_calls: [{ id: "t1" }, { id: "t2" }], function_call: { name: "task", arguments: "{}" } } as unknown as AIMessage["additional_kwargs"],
      response_metadata: { finish_reason: "tool_calls" },
    });
    const runtime = makeRuntime({ runId: "run-A" });
    const updated = updatedMessage(await runAfterModel(mw, stateWith(message, delegations(6, "run-A")), runtime));
    expect(updated.tool_calls).toEqual([]);
    expect(updated.additional_kwargs["tool_calls"]).toBeUndefined();
    expect(updated.additional_kwargs["function_call"]).toBeUndefined();
    expect(updated.response_metadata["finish_reason"]).toBe("stop");
    expect(updated.content).toBe(`more work\n\n${SUBAGENT_LIMIT_REACHED_TEXT}`);
    expect(SUBAGENT_LIMIT_REACHED_TEXT.startsWith("[SUBAGENT LIMIT REACHED]")).toBe(true);
    expect(readStopReason(runtime)).toBe("subagent_limit_capped");
  });

  it("keeps only the run's remaining allowance when prior delegations leave less than the concurrency", async () => {
    const message = new AIMessage({ content: "", tool_calls: [task("t1"), task("t2"), task("t3")] });
    const runtime = makeRuntime({ runId: "run-A" });
    const updated = updatedMessage(await runAfterModel(mw, stateWith(message, delegations(4, "run-A")), runtime));
    expect(updated.tool_calls!.map((c) => c.id)).toEqual(["t1", "t2"]);
    expect(updated.content).toBe("");
    expect(readStopReason(runtime)).toBeUndefined();
  });

  it("counts only this run's delegations: a later run in the same thread gets a fresh budget", async () => {
    const message = new AIMessage({ content: "", tool_calls: [task("t1"), task("t2")] });
    expect(await runAfterModel(mw, stateWith(message, delegations(10, "run-old")), makeRuntime({ runId: "run-new" }))).toBeUndefined();
    const mixed = [...delegations(10, "run-old"), ...delegations(5, "run-new")];
    const updated = updatedMessage(await runAfterModel(mw, stateWith(message, mixed), makeRuntime({ runId: "run-new" })));
    expect(updated.tool_calls!.map((c) => c.id)).toEqual(["t1"]);
  });

  it("without a run id, counts every delegation of the thread (the restrictive fallback)", () => {
    const all = [...delegations(3, "r1"), ...delegations(2)];
    expect(countRunDelegations(all, undefined)).toBe(5);
    expect(countRunDelegations(all, "r1")).toBe(3);
    expect(countRunDelegations([{ id: "x", run_id: "r1" }, { id: "x", run_id: "r1" }, "junk", null], "r1")).toBe(1);
  });

  it("adds the visible note even when non-task calls survive, leaving finish_reason alone", async () => {
    const message = new AIMessage({
      content: [{ type: "text", text: "thinking" }],
      tool_calls: [task("t1"), call("b1", "bash")],
      response_metadata: { finish_reason: "tool_calls" },
    });
    const runtime = makeRuntime({ runId: "r" });
    const updated = updatedMessage(await runAfterModel(mw, stateWith(message, delegations(6, "r")), runtime));
    expect(updated.tool_calls!.map((c) => c.id)).toEqual(["b1"]);
    expect(updated.response_metadata["finish_reason"]).toBe("tool_calls");
    expect(updated.content).toEqual([{ type: "text", text: "thinking" }, { type: "text", text: `\n\n${SUBAGENT_LIMIT_REACHED_TEXT}` }]);
    expect(readStopReason(runtime)).toBe("subagent_limit_capped");
  });

  // Spec (middleware-chain.md #27): "If the ordinary cap is exhausted, the middleware strips remaining task
  // calls, forces finish_reason="stop", and appends a visible limit note". Only a tool_calls finish reason
  // is rewritten: "stop" is already the target and any other provider reason (length, content_filter) is a
  // fact a later guard reads, so it stays as the provider sent it.
  it('"forces finish_reason="stop"": rewrites finish_reason only from tool_calls, leaving stop (and other reasons) alone', async () => {
    for (const [before, after] of [["tool_calls", "stop"], ["stop", "stop"], ["length", "length"], ["content_filter", "content_filter"]] as const) {
      const message = new AIMessage({ content: "x", tool_calls: [task("t1"), task("t2")], response_metadata: { finish_reason: before } });
      const updated = updatedMessage(await runAfterModel(mw, stateWith(message, delegations(6, "r")), makeRuntime({ runId: "r" })));
      expect(updated.tool_calls).toEqual([]);
      expect(updated.response_metadata["finish_reason"], `from ${before}`).toBe(after);
    }
    const unset = new AIMessage({ content: "x", tool_calls: [task("t1")] });
    const updated = updatedMessage(await runAfterModel(mw, stateWith(unset, delegations(6, "r")), makeRuntime({ runId: "r" })));
    expect(updated.response_metadata["finish_reason"]).toBeUndefined();
  });

  it("an earlier guard's stop reason wins", async () => {
    const runtime = makeRuntime({ runId: "r" });
    recordStopReason(runtime, "loop_capped");
    await runAfterModel(mw, stateWith(new AIMessage({ content: "", tool_calls: [task("t1")] }), delegations(6, "r")), runtime);
    expect(readStopReason(runtime)).toBe("loop_capped");
  });

  it("does not count or rewrite batch_task calls", async () => {
    const message = new AIMessage({ content: "", tool_calls: [call("bt1", "batch_task"), call("bt2", "batch_task"), task("t1")] });
    const runtime = makeRuntime({ runId: "r" });
    expect(await runAfterModel(mw, stateWith(message), runtime)).toBeUndefined();
    const updated = updatedMessage(await runAfterModel(mw, stateWith(message, delegations(6, "r")), runtime));
    expect(updated.tool_calls!.map((c) => c.id)).toEqual(["bt1", "bt2"]);
  });

  it("reads per-run overrides from the caller context, clamped", async () => {
    const message = new AIMessage({ content: "", tool_calls: [task("t1"), task("t2"), task("t3")] });
    const one = updatedMessage(await runAfterModel(mw, stateWith(message), makeRuntime({ context: { max_concurrent_subagents: 1 } })));
    expect(one.tool_calls!.map((c) => c.id)).toEqual(["t1"]);
    const zero = updatedMessage(await runAfterModel(mw, stateWith(message), makeRuntime({ context: { max_concurrent_subagents: 0 } })));
    expect(zero.tool_calls!.map((c) => c.id)).toEqual(["t1"]);
    const totalTwo = updatedMessage(await runAfterModel(mw, stateWith(message), makeRuntime({ context: { max_total_subagents: 2 } })));
    expect(totalTwo.tool_calls!.map((c) => c.id)).toEqual(["t1", "t2"]);
    const capped = createSubagentLimitMiddleware({ max_concurrent: 10 }, { maxRunning: 2 });
    const fromContext = updatedMessage(await runAfterModel(capped, stateWith(message), makeRuntime({ context: { max_concurrent_subagents: 9 } })));
    expect(fromContext.tool_calls!.map((c) => c.id)).toEqual(["t1", "t2"]);
  });
});

describe("SubagentLimit in the engine", () => {
  it("scenario M48: the graph runs only the kept task calls and ends the capped run with the note", async () => {
    const ran: string[] = [];
    const taskTool: AgentTool = {
      name: "task",
      description: "delegate",
      schema: { type: "object", properties: { description: { type: "string" } } },
      invoke: async (args) => {
        ran.push(String(args["description"]));
        return "done";
      },
    };
    // Delegations are normally captured by DurableContext; here each finished task records one for this run.
    const ledger: AgentMiddleware = {
      name: "TestLedger",
      beforeModel: (state, runtime) => {
        const finished = state.messages.filter((m) => ToolMessage.isInstance(m) && m.name === "task").map((m) => (m as ToolMessage).tool_call_id);
        const known = new Set(state.delegations.map((d) => d.id));
        const fresh = finished.filter((id) => !known.has(id));
        if (fresh.length === 0) return undefined;
        return { delegations: fresh.map((id) => ({ id, description: id, subagent_type: "general-purpose", status: "completed", run_id: runtime.runId })) } as never;
      },
    };
    const model = fakeModel()
      .respondWithTools([task("a1"), task("a2"), task("a3"), task("a4"), task("a5")])
      .respondWithTools([task("b1"), task("b2"), task("b3"), task("b4")])
      .respondWithTools([task("c1")])
      .respond(new AIMessage("unreached"));
    const agent = createAgent({ model, tools: [taskTool], middlewares: [ledger, createSubagentLimitMiddleware()], services: { clock: systemClock } });
    let record: RunRecord | undefined;
    let state: ThreadState | undefined;
    for await (const chunk of agent.stream({ messages: [new HumanMessage("research everything")] }, { threadId: "t-limit" }, (r) => (record = r))) {
      state = chunk as ThreadState;
    }
    expect(ran).toEqual(["a1", "a2", "a3", "b1", "b2", "b3"]);
    const last = state!.messages.at(-1) as AIMessage;
    expect(last.tool_calls ?? []).toEqual([]);
    expect(String(last.content)).toContain("[SUBAGENT LIMIT REACHED]");
    expect(model.callCount).toBe(3);
    expect(record!.scope.get("stop_reason")).toBe("subagent_limit_capped");
  });
});

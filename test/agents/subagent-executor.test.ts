import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import {
  SUBAGENT_PROGRESS_EVENT,
  buildSubagentContext,
  runSubagent,
  subagentThreadId,
  type SubagentParent,
} from "../../src/agents/subagent-executor.ts";
import { BASH_SUBAGENT, GENERAL_PURPOSE_SUBAGENT, filterSubagentTools, type SubagentType } from "../../src/agents/subagent-types.ts";
import { ManualClock, systemClock } from "../../src/core/clock.ts";
import { createAgent, type AgentMiddleware, type AgentRuntime, type AgentTool } from "../../src/engine/index.ts";
import { sha256HexSync } from "../../src/extension-api/sha256-sync.ts";
import { recordStopReason } from "../../src/middlewares/stop-reason.ts";
import type { AgentAssemblyDescriptor } from "../../src/extension-api/index.ts";
import { HostExtensionRegistry } from "../../src/extensions/registry.ts";
import type { SubagentBuilder } from "../../src/tools/subagent-run.ts";
import { LOOP_DETECTION_EVENT, createLoopDetectionMiddleware } from "../../src/middlewares/loop-detection/index.ts";
import { makeRuntime } from "../middlewares/runtime.ts";

type Model = ReturnType<typeof fakeModel>;

const TYPE: SubagentType = { ...GENERAL_PURPOSE_SUBAGENT, maxTurns: 25, timeoutMs: 60_000 };

function parentOf(runtime: AgentRuntime, toolCallId = "call-1"): SubagentParent {
  return { runtime, runId: runtime.runId, threadId: runtime.threadId, toolCallId };
}

function recordingRuntime(options: Parameters<typeof makeRuntime>[0] = {}): { runtime: AgentRuntime; events: Record<string, unknown>[] } {
  const events: Record<string, unknown>[] = [];
  const base = makeRuntime({ threadId: "thread-1", ...options });
  return { runtime: { ...base, writer: (chunk: unknown) => events.push(chunk as Record<string, unknown>) }, events };
}

const pokeTool: AgentTool = {
  name: "poke",
  description: "does nothing",
  schema: { type: "object", properties: {} },
  invoke: async () => "poked",
};

/** A tool that only returns when its run is aborted (a well-behaved hang), announcing that it started. */
function hangingTool(entered: () => void): AgentTool {
  return {
    name: "wait",
    description: "waits forever",
    schema: { type: "object", properties: {} },
    invoke: (_args, { runtime }) =>
      new Promise((_, reject) => {
        entered();
        runtime.signal?.addEventListener("abort", () => reject(runtime.signal!.reason), { once: true });
      }),
  };
}

function builder(model: () => Model, extra: { tools?: AgentTool[]; middlewares?: AgentMiddleware[]; clock?: ManualClock } = {}) {
  return () => createAgent({ model: model(), tools: extra.tools ?? [pokeTool], middlewares: extra.middlewares, services: { clock: extra.clock ?? systemClock } });
}

describe("subagent types", () => {
  it("follows upstream's built-in limits and tool filters", () => {
    expect(GENERAL_PURPOSE_SUBAGENT.maxTurns).toBe(150);
    expect(BASH_SUBAGENT.maxTurns).toBe(60);
    expect(GENERAL_PURPOSE_SUBAGENT.timeoutMs).toBe(900_000);
    const tools = ["bash", "ls", "read_file", "glob", "grep", "web_search", "task", "ask_clarification", "present_files"].map((name) => ({ name }));
    expect(filterSubagentTools(GENERAL_PURPOSE_SUBAGENT, tools).map((t) => t.name)).toEqual(["bash", "ls", "read_file", "glob", "grep", "web_search"]);
    expect(filterSubagentTools(BASH_SUBAGENT, tools).map((t) => t.name)).toEqual(["bash", "ls", "read_file", "glob", "grep"]);
  });
});

describe("runSubagent", () => {
  it("completes on its own graph and thread, sums usage, hashes the full text and streams progress to the parent", async () => {
    const { runtime, events } = recordingRuntime();
    let seenThread: string | undefined;
    const spy: AgentMiddleware = { name: "Spy", beforeAgent: (_s, rt) => void (seenThread = rt.threadId) };
    const model = () =>
      fakeModel()
        .respond(new AIMessage({ content: "", tool_calls: [{ name: "poke", args: {}, id: "p1" }], usage_metadata: { input_tokens: 10, output_tokens: 2, total_tokens: 12 } }))
        .respond(new AIMessage({ content: "All done.", usage_metadata: { input_tokens: 20, output_tokens: 5, total_tokens: 25 } }));
    const outcome = await runSubagent({ type: TYPE, prompt: "do it", description: "demo", parent: parentOf(runtime), buildAgent: builder(model, { middlewares: [spy] }) });
    expect(outcome.status).toBe("completed");
    expect(outcome.stop_reason).toBeNull();
    expect(outcome.result).toBe("All done.");
    expect(outcome.result_brief).toBe("All done.");
    expect(outcome.result_sha256).toBe(sha256HexSync("All done."));
    expect(outcome.usage).toEqual({ input_tokens: 30, output_tokens: 7, total_tokens: 37 });
    expect(seenThread).toBe(subagentThreadId("thread-1", "call-1"));
    expect(subagentThreadId("thread-1", "call-1")).toBe("thread-1-task-call-1");
    // Provider call ids may carry characters the sandbox refuses; the thread id never does.
    const odd = subagentThreadId("thread-1", "call:1/..");
    expect(odd).toMatch(/^[A-Za-z0-9_-]{1,128}$/);
    expect(odd).not.toBe(subagentThreadId("thread-1", "call_1_.."));
    expect(seenThread).not.toBe("thread-1");
    expect(outcome.messages.some((m) => ToolMessage.isInstance(m))).toBe(true);
    expect(events.every((e) => e["type"] === SUBAGENT_PROGRESS_EVENT && e["tool_call_id"] === "call-1")).toBe(true);
    expect(events.map((e) => e["phase"])).toEqual(["started", "running", "running", "completed"]);
    expect(events[1]!["tool_calls"]).toEqual(["poke"]);
  });

  it("hashes the full text while the brief is bounded", async () => {
    const { runtime } = recordingRuntime();
    const long = "x".repeat(5000);
    const outcome = await runSubagent({ type: TYPE, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent: builder(() => fakeModel().respond(new AIMessage(long))) });
    expect(outcome.result_sha256).toBe(sha256HexSync(long));
    expect(Array.from(outcome.result_brief!).length).toBeLessThanOrEqual(2000);
  });

  it("reports failed when the subagent's model throws", async () => {
    const { runtime, events } = recordingRuntime();
    const outcome = await runSubagent({
      type: TYPE, prompt: "p", description: "d", parent: parentOf(runtime),
      buildAgent: builder(() => fakeModel().respond(new Error("provider down"))),
    });
    expect(outcome.status).toBe("failed");
    expect(outcome.error).toContain("provider down");
    expect(outcome.result_brief).toBeNull();
    expect(events.at(-1)!["phase"]).toBe("failed");
  });

  it("stops a runaway subagent at its turn limit: turn_capped, failed without usable text", async () => {
    const { runtime } = recordingRuntime();
    let calls = 0;
    const model = () => {
      const m = fakeModel();
      for (let i = 0; i < 100; i += 1) m.respond(() => { calls += 1; return new AIMessage({ content: "", tool_calls: [{ name: "poke", args: {}, id: `p${i}` }] }); });
      return m;
    };
    const outcome = await runSubagent({ type: { ...TYPE, maxTurns: 6 }, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent: builder(model) });
    expect(outcome.status).toBe("failed");
    expect(outcome.stop_reason).toBe("turn_capped");
    expect(outcome.error).toBe("Reached max_turns=6");
    expect(calls).toBeLessThanOrEqual(6);
  });

  it("keeps usable partial text of a turn-capped run as completed", async () => {
    const { runtime } = recordingRuntime();
    const model = () => {
      const m = fakeModel();
      for (let i = 0; i < 100; i += 1) m.respond(new AIMessage({ content: `step ${i}`, tool_calls: [{ name: "poke", args: {}, id: `p${i}` }] }));
      return m;
    };
    const outcome = await runSubagent({ type: { ...TYPE, maxTurns: 4 }, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent: builder(model) });
    expect(outcome.status).toBe("completed");
    expect(outcome.stop_reason).toBe("turn_capped");
    expect(outcome.result).toMatch(/^step \d+$/);
  });

  it("reads a guard's stop reason from the subagent run's own scope", async () => {
    const { runtime } = recordingRuntime();
    const guard: AgentMiddleware = { name: "Guard", afterModel: (_s, rt) => void recordStopReason(rt, "loop_capped") };
    const outcome = await runSubagent({ type: TYPE, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent: builder(() => fakeModel().respond(new AIMessage("stopped early")), { middlewares: [guard] }) });
    expect(outcome).toMatchObject({ status: "completed", stop_reason: "loop_capped" });
    expect(runtime.scope.has("stop_reason")).toBe(false);
  });

  it("times out on the parent's clock and aborts the subagent run", async () => {
    const clock = new ManualClock(0);
    const { runtime, events } = recordingRuntime({ services: { clock } });
    let enter!: () => void;
    const entered = new Promise<void>((resolve) => (enter = resolve));
    let subSignal: AbortSignal | undefined;
    const spy: AgentMiddleware = { name: "Spy", beforeAgent: (_s, rt) => void (subSignal = rt.signal) };
    const model = () => fakeModel().respondWithTools([{ name: "wait", args: {}, id: "w1" }]).respond(new AIMessage("never"));
    const pending = runSubagent({
      type: { ...TYPE, timeoutMs: 5_000 }, prompt: "p", description: "d", parent: parentOf(runtime),
      buildAgent: builder(model, { tools: [hangingTool(() => enter())], middlewares: [spy], clock }),
    });
    await entered;
    await clock.advance(4_999);
    expect(subSignal?.aborted).toBe(false);
    await clock.advance(1);
    const outcome = await pending;
    expect(outcome.status).toBe("timed_out");
    expect(outcome.error).toContain("5000 ms");
    expect(subSignal?.aborted).toBe(true);
    expect(events.at(-1)!["phase"]).toBe("timed_out");
  });

  it("is cancelled when the parent's signal aborts", async () => {
    const parentAbort = new AbortController();
    const { runtime } = recordingRuntime({ signal: parentAbort.signal });
    let enter!: () => void;
    const entered = new Promise<void>((resolve) => (enter = resolve));
    const model = () => fakeModel().respondWithTools([{ name: "wait", args: {}, id: "w1" }]).respond(new AIMessage("never"));
    const pending = runSubagent({ type: TYPE, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent: builder(model, { tools: [hangingTool(() => enter())] }) });
    await entered;
    parentAbort.abort();
    const outcome = await pending;
    expect(outcome.status).toBe("cancelled");
    expect(outcome.stop_reason).toBeNull();
  });

  it("is cancelled at once when the parent was already aborted", async () => {
    const parentAbort = new AbortController();
    parentAbort.abort();
    const { runtime } = recordingRuntime({ signal: parentAbort.signal });
    let built = false;
    const outcome = await runSubagent({ type: TYPE, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent: () => { built = true; return builder(() => fakeModel().respond(new AIMessage("x")))(); } });
    expect(outcome.status).toBe("cancelled");
    expect(built).toBe(false);
  });

  it("carries is_internal, user_id and a copy of authz_attributes into the subagent, nothing else", async () => {
    const parentContext = { is_internal: true, user_id: "u-1", authz_attributes: { teams: ["red"], level: { n: 1 } }, secrets: { k: "v" } };
    const { runtime } = recordingRuntime({ context: parentContext });
    let seen: Readonly<Record<string, unknown>> | undefined;
    const spy: AgentMiddleware = { name: "Spy", beforeAgent: (_s, rt) => void (seen = rt.context) };
    await runSubagent({ type: TYPE, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent: builder(() => fakeModel().respond(new AIMessage("ok")), { middlewares: [spy] }) });
    expect(seen).toMatchObject({ is_internal: true, user_id: "u-1", is_subagent: true, authz_attributes: { teams: ["red"], level: { n: 1 } } });
    expect(seen!["secrets"]).toBeUndefined();
    expect(seen!["authz_attributes"]).not.toBe(parentContext.authz_attributes);

    const copy = buildSubagentContext(runtime.context, { threadId: "t", parentThreadId: "p", parentRunId: "r", toolCallId: "c", subagentType: "bash" });
    (copy["authz_attributes"] as { teams: string[] }).teams.push("blue");
    ((copy["authz_attributes"] as { level: { n: number } }).level).n = 99;
    expect(parentContext.authz_attributes).toEqual({ teams: ["red"], level: { n: 1 } });
  });

  // Spec (middleware-chain.md #28): "Ordinary task-tool subagents receive a loop-detection-only recorder proxy that
  // forwards the append to the parent run loop ... Durable batch subagents have no parent run journal and do not persist these transitions".
  it('"a loop-detection-only recorder proxy that forwards the append to the parent run": a task subagent\'s LoopDetection warning reaches the parent\'s writer, nothing else of its stream does', async () => {
    const poke = (id: string) => new AIMessage({ content: "", tool_calls: [{ name: "poke", args: {}, id }] });
    const model = () => fakeModel().respond(poke("p1")).respond(poke("p2")).respond(new AIMessage("done"));
    const chatter: AgentMiddleware = { name: "Chatter", beforeAgent: (_s, rt) => void rt.writer({ type: "middleware:chatter" }) };
    const middlewares = () => [chatter, createLoopDetectionMiddleware({ warn_threshold: 2, hard_limit: 5 })];
    const loopEvents = (events: Record<string, unknown>[]) => events.filter((e) => e["type"] === LOOP_DETECTION_EVENT);

    const task = recordingRuntime();
    const outcome = await runSubagent({
      type: TYPE, prompt: "p", description: "d", parent: parentOf(task.runtime), buildAgent: builder(model, { middlewares: middlewares() }), recordLoopDetection: true,
    });
    expect(outcome.status).toBe("completed");
    expect(loopEvents(task.events)).toEqual([expect.objectContaining({ action: "warn", is_subagent: true, run_id: outcome.run_id, tool_names: ["poke"] })]);
    expect(task.events.some((e) => e["type"] === "middleware:chatter")).toBe(false);

    // A durable batch item: no recorder, nothing forwarded.
    const batch = recordingRuntime();
    await runSubagent({ type: TYPE, prompt: "p", description: "d", parent: parentOf(batch.runtime), buildAgent: builder(model, { middlewares: middlewares() }) });
    expect(loopEvents(batch.events)).toEqual([]);
  });

  // Spec (extension-system.md): "SubagentExecutor publishes the same descriptor kind for each delegated agent on
  // self.assembly_descriptor" and "Absent the key ... the executor keeps its get_loaded_extensions() fallback".
  it('"publishes the same descriptor kind for each delegated agent": the verdict carries the descriptor the builder published; the builder gets the fallback snapshot', async () => {
    const { runtime } = recordingRuntime();
    const fallback = new HostExtensionRegistry().build();
    const descriptor = { agent_name: "subagent:general-purpose" } as AgentAssemblyDescriptor;
    const given: unknown[] = [];
    const buildAgent: SubagentBuilder = (_type, { extensions }) => {
      given.push(extensions);
      return { agent: builder(() => fakeModel().respond(new AIMessage("ok")))(), descriptor, fingerprint: "f" };
    };
    const outcome = await runSubagent({ type: TYPE, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent }, fallback);
    expect(outcome.status).toBe("completed");
    expect(outcome.assembly_descriptor).toBe(descriptor);
    expect(given).toEqual([fallback]);
    // A bare Agent from the builder: no descriptor to publish.
    const plain = await runSubagent({ type: TYPE, prompt: "p", description: "d", parent: parentOf(runtime), buildAgent: builder(() => fakeModel().respond(new AIMessage("ok"))) });
    expect(plain.assembly_descriptor).toBeUndefined();
  });

  it("never turns a truthy non-boolean is_internal into internal", () => {
    const context = buildSubagentContext({ is_internal: "true" }, { threadId: "t", parentThreadId: undefined, parentRunId: "r", toolCallId: "c", subagentType: "bash" });
    expect(context["is_internal"]).toBe(false);
    expect(context["authz_attributes"]).toEqual({});
  });

  it("starts the subagent from the prompt alone", async () => {
    const { runtime } = recordingRuntime();
    let first: unknown;
    const spy: AgentMiddleware = { name: "Spy", beforeAgent: (s) => void (first = s.messages) };
    await runSubagent({ type: TYPE, prompt: "only this", description: "d", parent: parentOf(runtime), buildAgent: builder(() => fakeModel().respond(new AIMessage("ok")), { middlewares: [spy] }) });
    expect((first as HumanMessage[]).map((m) => m.content)).toEqual(["only this"]);
  });
});

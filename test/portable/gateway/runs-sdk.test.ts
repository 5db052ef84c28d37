import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { createGateway, type Gateway } from "../../../src/gateway/app.ts";
import { registerRunsPart } from "../../../src/gateway/routes/runs.ts";
import { createLeadAgentFactory } from "../../../src/runtime/agent-factory.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import type { RunManager } from "../../../src/runtime/runs/manager.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import type { GatewayUser } from "../../../src/gateway/types.ts";
import type { HttpServerHandle } from "../../../src/ports/http-server.ts";
import { deferred, eventually, scriptedAgentFactory, type Deferred } from "../runtime/runs-fixtures.ts";
import { runtimeServe } from "./runtime-serve.ts";

/*
 * The official LangGraph SDK client against the gateway over a real socket on 127.0.0.1: the same
 * calls useStream and agent-chat-ui make (threads.create, runs.stream, joinStream, cancel, state
 * and history), with a scripted model so every frame is predictable.
 */

const { runtime, serve } = await runtimeServe();

interface Served {
  gateway: Gateway;
  server: HttpServerHandle;
  client: Client;
  runs: RunManager<GatewayUser>;
  gates: { block: Deferred<string> };
}

async function start(options: { demo?: boolean } = {}): Promise<Served> {
  const storage = createMemoryKeyValue();
  const checkpointer = new KeyValueCheckpointSaver({ storage });
  const config = validateLeadConfig({}, "test");
  const gates = { block: deferred<string>() };
  const agentFactory = options.demo
    ? createLeadAgentFactory({
        config,
        env: mapEnv({}),
        checkpointer,
        services: { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) },
      })
    : scriptedAgentFactory(checkpointer, { gates });
  let runs!: RunManager<GatewayUser>;
  const gateway = await createGateway({
    config,
    storage,
    checkpointer,
    agentFactory,
    registerExtraRoutes: async (api, deps) => {
      const part = await registerRunsPart(api, deps, { heartbeatMs: 1000 });
      runs = part.runs;
      return part;
    },
  });
  const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
  const client = new Client({ apiUrl: `${server.url}/api`, apiKey: null });
  return { gateway, server, client, runs, gates };
}

async function stop(served: Served): Promise<void> {
  await served.server.close();
  await served.gateway.shutdown();
}

const say = (text: string) => ({ messages: [{ type: "human", content: text }] });

describe(`the LangGraph SDK over ${runtime}'s socket (scripted model)`, () => {
  let s: Served;
  beforeAll(async () => {
    s = await start();
  });
  afterAll(async () => {
    await stop(s);
  });

  it("creates a thread and streams a run in every mode: metadata, values, updates, messages, custom, end", async () => {
    const thread = await s.client.threads.create();
    let created: { run_id: string; thread_id?: string } | undefined;
    const events: Array<{ event: string; data: unknown }> = [];
    for await (const part of s.client.runs.stream(thread.thread_id, "lead_agent", {
      input: say("tool:note"),
      streamMode: ["values", "updates", "messages-tuple", "custom"],
      onRunCreated: (meta) => (created = meta),
    })) {
      events.push({ event: part.event, data: part.data });
    }
    expect(created).toMatchObject({ thread_id: thread.thread_id });
    expect(events[0]).toEqual({ event: "metadata", data: { run_id: created!.run_id, thread_id: thread.thread_id, attempt: 1 } });
    expect(events.at(-1)).toEqual({ event: "end", data: null });
    expect(new Set(events.map((e) => e.event))).toEqual(new Set(["metadata", "values", "updates", "messages", "custom", "end"]));
    const last = events.filter((e) => e.event === "values").at(-1)!.data as { messages: Array<{ type: string }> };
    expect(last.messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai"]);
    // The model node writes ordered channel tuples; a client still sees one update per node with its messages.
    const modelUpdates = events
      .filter((e) => e.event === "updates" && "model" in (e.data as object))
      .map((e) => (e.data as { model: { messages?: Array<{ type: string }> } }).model.messages?.map((m) => m.type));
    expect(modelUpdates).toEqual([["ai"], ["ai"]]);
    const state = await s.client.threads.getState<{ messages: Array<{ type: string; content: string }> }>(thread.thread_id);
    expect(state.values.messages.at(-1)).toMatchObject({ type: "ai", content: "done: tool:note" });
    const history = await s.client.threads.getHistory(thread.thread_id);
    expect(history.length).toBeGreaterThan(1);
    const runs = await s.client.runs.list(thread.thread_id);
    expect(runs.map((r) => [r.run_id, r.status])).toEqual([[created!.run_id, "success"]]);
  });

  it("joins a stream after a disconnect with Last-Event-ID and gets exactly the frames it missed", async () => {
    const thread = await s.client.threads.create();
    s.gates.block = deferred<string>();
    const controller = new AbortController();
    const before: Array<{ event: string; id?: string }> = [];
    let runId = "";
    try {
      for await (const part of s.client.runs.stream(thread.thread_id, "lead_agent", {
        input: say("tool:block"),
        streamMode: ["values", "updates"],
        onDisconnect: "continue",
        signal: controller.signal,
        onRunCreated: (meta) => (runId = meta.run_id),
      })) {
        before.push({ event: part.event, ...(part.id ? { id: part.id } : {}) });
        if (part.event === "updates") controller.abort();
      }
    } catch (error) {
      expect(controller.signal.aborted).toBe(true);
      void error;
    }
    const lastEventId = before.at(-1)!.id!;
    expect(lastEventId).toMatch(/^\d+-\d+$/);
    expect((await s.client.runs.get(thread.thread_id, runId)).status).toBe("running");
    const after: Array<{ event: string; id?: string }> = [];
    const joining = (async () => {
      for await (const part of s.client.runs.joinStream(thread.thread_id, runId, { lastEventId, streamMode: ["values", "updates"] })) {
        after.push({ event: part.event, ...(part.id ? { id: part.id } : {}) });
      }
    })();
    s.gates.block.resolve("released");
    await joining;
    const seq = (id: string | undefined) => Number(id!.split("-")[1]);
    expect(seq(after[0]!.id)).toBe(seq(lastEventId) + 1);
    expect(after.at(-1)!.event).toBe("end");
    expect((await s.client.runs.get(thread.thread_id, runId)).status).toBe("success");
  });

  it("cancels a run, rejects a second run with 409, and interrupts the first for a second run", async () => {
    const thread = await s.client.threads.create();
    s.gates.block = deferred<string>();
    const first = await s.client.runs.create(thread.thread_id, "lead_agent", { input: say("tool:block") });
    await eventually(async () => (await s.client.runs.get(thread.thread_id, first.run_id)).status === "running");
    await expect(s.client.runs.create(thread.thread_id, "lead_agent", { input: say("again"), multitaskStrategy: "reject" })).rejects.toThrow(/409/);
    const second = await s.client.runs.create(thread.thread_id, "lead_agent", { input: say("again"), multitaskStrategy: "interrupt" });
    await s.client.runs.join(thread.thread_id, second.run_id);
    expect((await s.client.runs.get(thread.thread_id, first.run_id)).status).toBe("interrupted");
    expect((await s.client.runs.get(thread.thread_id, second.run_id)).status).toBe("success");

    s.gates.block = deferred<string>();
    const third = await s.client.runs.create(thread.thread_id, "lead_agent", { input: say("tool:block") });
    await eventually(async () => (await s.client.runs.get(thread.thread_id, third.run_id)).status === "running");
    await s.client.runs.cancel(thread.thread_id, third.run_id, true, "interrupt");
    expect((await s.client.runs.get(thread.thread_id, third.run_id)).status).toBe("interrupted");
  });

  it("scenario G46: rolls a running run back to the pre-run state; cancelling a successful run is a 409", async () => {
    const thread = await s.client.threads.create();
    const done = await s.client.runs.create(thread.thread_id, "lead_agent", { input: say("hello") });
    await s.client.runs.join(thread.thread_id, done.run_id);
    const before = await s.client.threads.getState(thread.thread_id);
    s.gates.block = deferred<string>();
    const run = await s.client.runs.create(thread.thread_id, "lead_agent", { input: say("tool:block") });
    await eventually(async () => ((await s.client.threads.getState<{ messages: unknown[] }>(thread.thread_id)).values.messages ?? []).length > 2);
    await s.client.runs.cancel(thread.thread_id, run.run_id, true, "rollback");
    const rolled = (await s.client.runs.get(thread.thread_id, run.run_id)) as unknown as { status: string; error: { message: string } };
    expect(rolled.status).toBe("error");
    expect(rolled.error.message).toBe("Rolled back by user");
    const after = await s.client.threads.getState(thread.thread_id);
    expect(after.values).toEqual(before.values);
    await expect(s.client.runs.cancel(thread.thread_id, done.run_id)).rejects.toThrow(/409/);
  });

  it("round-trips an interrupt: values.__interrupt__ out, command.resume in", async () => {
    const thread = await s.client.threads.create();
    let paused: Record<string, unknown> | undefined;
    for await (const part of s.client.runs.stream(thread.thread_id, "lead_agent", { input: say("tool:ask"), streamMode: "values" })) {
      if (part.event === "values") paused = part.data as Record<string, unknown>;
    }
    expect(paused!.__interrupt__).toEqual([{ id: expect.any(String), value: { question: "continue?" } }]);
    const result = (await s.client.runs.wait(thread.thread_id, "lead_agent", { command: { resume: "yes" } })) as { messages: Array<{ content: string }> };
    expect(result.messages.some((m) => m.content === "user said yes")).toBe(true);
  });
});

describe(`the LangGraph SDK over ${runtime}'s socket (the lead agent with the demo model)`, () => {
  it("streams the demo session end to end: token chunks as messages, then the final values", async () => {
    const served = await start({ demo: true });
    try {
      const thread = await served.client.threads.create();
      const events: Array<{ event: string; data: unknown }> = [];
      for await (const part of served.client.runs.stream(thread.thread_id, "lead_agent", {
        input: say("Write a note about portable runtimes and count its words."),
        streamMode: ["values", "messages-tuple", "updates"],
      })) {
        events.push({ event: part.event, data: part.data });
      }
      expect(events[0]!.event).toBe("metadata");
      expect(events.at(-1)!.event).toBe("end");
      expect(events.filter((e) => e.event === "messages").length).toBeGreaterThan(3);
      expect(events.some((e) => e.event === "error")).toBe(false);
      const last = events.filter((e) => e.event === "values").at(-1)!.data as { messages: Array<{ type: string }> };
      expect(last.messages.filter((m) => m.type !== "system").map((m) => m.type)).toEqual(["human", "ai", "tool", "ai", "tool", "ai"]);
      // The lead chain's model node writes a list of partial updates; each `updates` frame still
      // shows the node's messages, one AI message per model step.
      const modelSteps = events
        .filter((e) => e.event === "updates" && "model" in (e.data as object))
        .map((e) => (e.data as { model: { messages?: Array<{ type: string }> } }).model.messages?.map((m) => m.type));
      expect(modelSteps).toEqual([["ai"], ["ai"], ["ai"]]);
      const [run] = await served.client.runs.list(thread.thread_id);
      expect(run!.status).toBe("success");
    } finally {
      await stop(served);
    }
  });
});

import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Client } from "@langchain/langgraph-sdk";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph, interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph/web";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { createGateway, type Gateway } from "../../../src/gateway/app.ts";
import { registerRunsPart } from "../../../src/gateway/routes/runs.ts";
import type { AgentRequest } from "../../../src/gateway/types.ts";
import type { HttpServerHandle } from "../../../src/ports/http-server.ts";
import { createDeerFlowClient } from "../../../src/runtime/client.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { runtimeServe } from "./runtime-serve.ts";

/*
 * Spec (extension-system.md, Agent assembly observation): "Gateway resolve_agent_factory() now
 * returns assemble_lead_agent, so every consumer must unwrap .graph — a third-party factory
 * returning a bare graph stays supported." A real StateGraph compiled by a third party, served by
 * the gateway and driven through the official LangGraph SDK over a socket.
 */

const { runtime, serve } = await runtimeServe();

/** A third party's graph: echoes the last human message for the caller the run context names; "ask" pauses for an answer. */
function thirdPartyGraph(checkpointer?: MemorySaver) {
  const reply = (state: typeof MessagesAnnotation.State, config: LangGraphRunnableConfig) => {
    const human = state.messages.filter((m) => HumanMessage.isInstance(m)).at(-1);
    const text = String(human?.content ?? "");
    const who = (config.context as { user_id?: string } | undefined)?.user_id ?? "nobody";
    if (text === "ask") {
      const answer = interrupt({ question: "continue?" }) as string;
      return { messages: [new AIMessage({ content: `you said ${answer}` })] };
    }
    return { messages: [new AIMessage({ content: `echo: ${text} (for ${who})` })] };
  };
  const graph = new StateGraph(MessagesAnnotation).addNode("reply", reply).addEdge(START, "reply").addEdge("reply", END);
  return graph.compile(checkpointer ? { checkpointer, name: "echo_graph" } : { name: "echo_graph" });
}

interface Served {
  gateway: Gateway;
  server: HttpServerHandle;
  client: Client;
  requests: AgentRequest[];
}

async function start(factoryResult: (request: AgentRequest) => unknown): Promise<Served> {
  const storage = createMemoryKeyValue();
  const requests: AgentRequest[] = [];
  const gateway = await createGateway({
    config: validateLeadConfig({}, "test"),
    storage,
    checkpointer: new KeyValueCheckpointSaver({ storage }),
    agentFactory: async (request) => {
      requests.push(request);
      return factoryResult(request) as never;
    },
    registerExtraRoutes: async (api, deps) => registerRunsPart(api, deps, { heartbeatMs: 1000 }),
  });
  const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
  return { gateway, server, requests, client: new Client({ apiUrl: `${server.url}/api`, apiKey: null }) };
}

async function stop(served: Served): Promise<void> {
  await served.server.close();
  await served.gateway.shutdown();
}

const say = (text: string) => ({ messages: [{ type: "human", content: text }] });
type Messages = { messages: Array<{ type: string; content: string }> };

describe(`a factory returning a bare compiled graph, through the LangGraph SDK over ${runtime}'s socket`, () => {
  const graph = thirdPartyGraph();
  let s: Served;
  beforeAll(async () => {
    s = await start(() => graph);
  });
  afterAll(async () => {
    await stop(s);
  });

  it("a third-party factory returning a bare graph stays supported: a run streams values, updates and messages, then ends as success", async () => {
    const thread = await s.client.threads.create();
    const events: Array<{ event: string; data: unknown }> = [];
    let runId = "";
    for await (const part of s.client.runs.stream(thread.thread_id, "lead_agent", {
      input: say("hello"),
      streamMode: ["values", "updates", "messages-tuple"],
      onRunCreated: (meta) => (runId = meta.run_id),
    })) {
      events.push({ event: part.event, data: part.data });
    }
    expect(events[0]).toEqual({ event: "metadata", data: { run_id: runId, thread_id: thread.thread_id, attempt: 1 } });
    expect(events.at(-1)).toEqual({ event: "end", data: null });
    expect(new Set(events.map((e) => e.event))).toEqual(new Set(["metadata", "values", "updates", "messages", "end"]));
    const last = events.filter((e) => e.event === "values").at(-1)!.data as Messages;
    // The run's caller context reaches the graph as LangGraph's runtime context.
    expect(last.messages.map((m) => [m.type, m.content])).toEqual([["human", "hello"], ["ai", "echo: hello (for default)"]]);
    expect(events.find((e) => e.event === "updates")!.data).toMatchObject({ reply: { messages: [{ type: "ai" }] } });
    expect((await s.client.runs.get(thread.thread_id, runId)).status).toBe("success");
  });

  it("thread state and history are read and written through the bare graph on the gateway's own checkpointer", async () => {
    const thread = await s.client.threads.create();
    await s.client.runs.wait(thread.thread_id, "lead_agent", { input: say("one") });
    const state = await s.client.threads.getState<Messages>(thread.thread_id);
    expect(state.values.messages.at(-1)).toMatchObject({ type: "ai", content: "echo: one (for default)" });
    expect((await s.client.threads.getHistory(thread.thread_id)).length).toBeGreaterThan(1);
    await s.client.threads.updateState(thread.thread_id, { values: { messages: [{ type: "ai", content: "edited", id: "edit-1" }] }, asNode: "reply" });
    const edited = await s.client.threads.getState<Messages>(thread.thread_id);
    expect(edited.values.messages.map((m) => m.content)).toEqual(["one", "echo: one (for default)", "edited"]);
    // The caller's graph object is left as it was compiled: the gateway ran a copy bound to its own saver.
    expect(graph.checkpointer).toBeUndefined();
  });

  it("an interrupt in a bare graph ends the run as interrupted, and command.resume continues it", async () => {
    const thread = await s.client.threads.create();
    const paused = await s.client.runs.create(thread.thread_id, "lead_agent", { input: say("ask") });
    await s.client.runs.join(thread.thread_id, paused.run_id);
    expect((await s.client.runs.get(thread.thread_id, paused.run_id)).status).toBe("interrupted");
    const result = (await s.client.runs.wait(thread.thread_id, "lead_agent", { command: { resume: "yes" } })) as Messages;
    expect(result.messages.at(-1)).toMatchObject({ type: "ai", content: "you said yes" });
    expect((await s.client.threads.get(thread.thread_id)).status).toBe("idle");
  });

  it("compaction answers 409 for a bare graph: it has no summarization middleware", async () => {
    const thread = await s.client.threads.create();
    await s.client.runs.wait(thread.thread_id, "lead_agent", { input: say("one") });
    const response = await fetch(`${s.server.url}/api/threads/${thread.thread_id}/compact`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(response.status, await response.clone().text()).toBe(409);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/Context compaction is disabled/);
  });
});

describe(`a bare graph compiled with its own checkpointer, over ${runtime}'s socket`, () => {
  it("is run on the gateway's checkpointer, so the thread state the SDK reads is the run's", async () => {
    const own = new MemorySaver();
    const s = await start(() => thirdPartyGraph(own));
    try {
      const thread = await s.client.threads.create();
      await s.client.runs.wait(thread.thread_id, "lead_agent", { input: say("mine") });
      const state = await s.client.threads.getState<Messages>(thread.thread_id);
      expect(state.values.messages.map((m) => m.content)).toEqual(["mine", "echo: mine (for default)"]);
      // Nothing went to the graph's own saver: rollback, history and fencing all read the gateway's.
      expect(await own.getTuple({ configurable: { thread_id: thread.thread_id } })).toBeUndefined();
    } finally {
      await stop(s);
    }
  });
});

describe(`a factory returning something else, over ${runtime}'s socket`, () => {
  it("fails the run with an error naming what the factory returned and what to return instead", async () => {
    const s = await start(() => ({ invoke: () => "not a graph" }));
    try {
      const thread = await s.client.threads.create();
      const run = await s.client.runs.create(thread.thread_id, "lead_agent", { input: say("hello") });
      await s.client.runs.join(thread.thread_id, run.run_id);
      const failed = (await s.client.runs.get(thread.thread_id, run.run_id)) as unknown as { status: string; error?: { message: string } };
      expect(failed.status).toBe("error");
      expect(JSON.stringify(failed)).toMatch(/the agent factory returned a plain object; return the engine's Agent \(createAgent\) or a compiled LangGraph graph/);
    } finally {
      await stop(s);
    }
  });
});

describe("a factory returning a bare compiled graph, in the embedded client", () => {
  it("a third-party factory returning a bare graph stays supported: chat runs it and the thread state is the run's", async () => {
    const client = await createDeerFlowClient({ agentFactory: async () => thirdPartyGraph() });
    try {
      const result = await client.chat("hi", { threadId: "t1" });
      expect(result).toMatchObject({ status: "success", text: "echo: hi (for default)" });
      const paused = await client.chat("ask", { threadId: "t1" });
      expect(paused.status).toBe("interrupted");
      expect(((await client.threads.state("t1")).values as Messages).messages.map((m) => m.content)).toEqual(["hi", "echo: hi (for default)", "ask"]);
    } finally {
      await client.close();
    }
  });
});

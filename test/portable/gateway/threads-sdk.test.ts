import { describe, expect, it } from "vitest";
import { sdkClient, testGateway } from "./threads-fixtures.ts";

// The official @langchain/langgraph-sdk client against app.fetch: no socket, any runtime.
describe("the LangGraph SDK client drives the thread and assistant routes", () => {
  it("creates, finds, reads, updates and deletes a thread", async () => {
    const gateway = await testGateway();
    const client = sdkClient(gateway);

    const thread = await client.threads.create({ metadata: { topic: "sdk" } });
    expect(thread).toMatchObject({ status: "idle", metadata: { topic: "sdk" } });
    const named = await client.threads.create({ threadId: "sdk-thread", graphId: "agent" });
    expect(named).toMatchObject({ thread_id: "sdk-thread", metadata: { graph_id: "agent" } });

    const listed = await client.threads.search({ metadata: { topic: "sdk" } });
    expect(listed.map((t) => t.thread_id)).toEqual([thread.thread_id]);
    expect((await client.threads.get(thread.thread_id)).thread_id).toBe(thread.thread_id);

    const updated = await client.threads.update(thread.thread_id, { metadata: { pinned: "yes" } });
    expect(updated.metadata).toEqual({ topic: "sdk", pinned: "yes" });

    const first = await client.threads.updateState(thread.thread_id, {
      values: { messages: [{ type: "human", content: "hello", id: "m1" }], title: "Greeting" },
      asNode: "model",
    });
    expect(first.configurable?.checkpoint_id).toEqual(expect.any(String));
    await client.threads.updateState(thread.thread_id, { values: { title: "Greeting 2" }, asNode: "model" });

    const state = await client.threads.getState<{ title: string; messages: { content: string }[] }>(thread.thread_id);
    expect(state.values.title).toBe("Greeting 2");
    expect(state.values.messages.map((m) => m.content)).toEqual(["hello"]);
    const atFirst = await client.threads.getState<{ title: string }>(thread.thread_id, first.configurable!.checkpoint_id!);
    expect(atFirst.values.title).toBe("Greeting");
    const atFirstByObject = await client.threads.getState<{ title: string }>(thread.thread_id, {
      thread_id: thread.thread_id,
      checkpoint_ns: "",
      checkpoint_id: first.configurable!.checkpoint_id!,
      checkpoint_map: null,
    });
    expect(atFirstByObject.values.title).toBe("Greeting");

    const history = await client.threads.getHistory<{ title: string }>(thread.thread_id, { limit: 5 });
    expect(history.map((h) => h.values.title)).toEqual(["Greeting 2", "Greeting"]);
    const older = await client.threads.getHistory<{ title: string }>(thread.thread_id, { before: history[0]!.checkpoint as never });
    expect(older.map((h) => h.values.title)).toEqual(["Greeting"]);

    await client.threads.delete(thread.thread_id);
    await expect(client.threads.get(thread.thread_id)).rejects.toThrow(/404/);
    await gateway.shutdown();
  });

  it("keeps users apart: another user's thread is a 404 and missing from their listing", async () => {
    const gateway = await testGateway();
    const alice = sdkClient(gateway, "alice");
    const bob = sdkClient(gateway, "bob");
    const thread = await alice.threads.create();
    await expect(bob.threads.get(thread.thread_id)).rejects.toThrow(/HTTP 404/);
    await expect(bob.threads.getState(thread.thread_id)).rejects.toThrow(/HTTP 404/);
    expect(await bob.threads.search()).toEqual([]);
    expect((await alice.threads.search()).map((t) => t.thread_id)).toEqual([thread.thread_id]);
  });

  it("searches and reads assistants", async () => {
    const gateway = await testGateway();
    const client = sdkClient(gateway);
    const assistants = await client.assistants.search();
    expect(assistants.map((a) => a.assistant_id)).toEqual(["lead_agent"]);
    const paged = await client.assistants.search({ includePagination: true });
    expect(paged).toMatchObject({ assistants: [{ assistant_id: "lead_agent" }], next: null });
    expect((await client.assistants.get("agent")).graph_id).toBe("lead_agent");
    expect(await client.assistants.getGraph("lead_agent")).toEqual({ nodes: [], edges: [] });
  });
});

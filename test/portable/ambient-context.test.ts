// A run's config is only what its caller gave: a LangChain run context left current by someone
// else (Deno 2.9 carries one from a dynamic import() inside a run into later Deno.serve requests)
// must not turn the next run into its child, on any runtime.
import { describe, expect, it } from "vitest";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { fakeModel } from "@langchain/core/testing";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/index.ts";
import { withoutAmbientRun } from "../../src/engine/ambient.ts";
import { KeyValueCheckpointSaver } from "../../src/runtime/kv-checkpointer.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";

const echo = {
  name: "echo",
  description: "echo",
  schema: { type: "object", properties: {} },
  invoke: async () => "echoed",
};

describe("runs ignore an ambient run context", () => {
  it("a run started inside another run's tool call checkpoints in its own thread's root namespace", async () => {
    const checkpointer = new KeyValueCheckpointSaver({ storage: createMemoryKeyValue() });
    const inner = createAgent({
      model: fakeModel().respondWithTools([{ name: "echo", args: {}, id: "c1" }]).respond(new AIMessage("done")),
      tools: [echo],
      services: { clock: systemClock },
      checkpointer,
    });
    // The tool runs inside the outer run's tools task, with that task's whole context current:
    // exactly what Deno.serve handed the next request after a dynamic import inside a run.
    const spawn = {
      name: "spawn",
      description: "start another run",
      schema: { type: "object", properties: {} },
      invoke: async () => {
        await inner.invoke({ messages: [new HumanMessage("hi")] }, { threadId: "mine" });
        return "spawned";
      },
    };
    const outer = createAgent({
      model: fakeModel().respondWithTools([{ name: "spawn", args: {}, id: "s1" }]).respond(new AIMessage("ok")),
      tools: [spawn],
      services: { clock: systemClock },
      checkpointer,
    });
    await outer.invoke({ messages: [new HumanMessage("go")] }, { threadId: "outer" });
    const saved = await inner.graph.getState({ configurable: { thread_id: "mine" } });
    expect(((saved.values as { messages?: HumanMessage[] }).messages ?? []).map((m) => m.getType())).toEqual(["human", "ai", "tool", "ai"]);
    const namespaces = new Set<string>();
    for await (const tuple of checkpointer.list({ configurable: { thread_id: "mine" } })) namespaces.add(String(tuple.config.configurable?.checkpoint_ns ?? ""));
    expect([...namespaces]).toEqual([""]);
  });

  it("withoutAmbientRun hides the current context and restores it afterwards", async () => {
    const instance = AsyncLocalStorageProviderSingleton.getInstance();
    await AsyncLocalStorageProviderSingleton.runWithConfig({ configurable: { marker: 1 } }, async () => {
      expect(AsyncLocalStorageProviderSingleton.getRunnableConfig()?.configurable?.marker).toBe(1);
      await withoutAmbientRun(async () => {
        await Promise.resolve();
        expect(instance.getStore()).toBeUndefined();
      });
      expect(AsyncLocalStorageProviderSingleton.getRunnableConfig()?.configurable?.marker).toBe(1);
    });
  });
});

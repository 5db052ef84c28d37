import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { createStorage } from "unstorage";
import memoryDriver from "unstorage/drivers/memory";
import { describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, NodeHook } from "../../../src/engine/types.ts";
import { createDynamicContextMiddleware } from "../../../src/middlewares/dynamic-context.ts";
import { createInputSanitizationMiddleware } from "../../../src/middlewares/input-sanitization.ts";
import {
  MEMORY_NAME,
  MemoryConfigSchema,
  createMemoryMiddleware,
  filterMessagesForMemory,
} from "../../../src/middlewares/memory/memory.ts";
import { MEMORY_EXTRACTION_PROMPT_HASH } from "../../../src/middlewares/memory/extractors.ts";
import { createMemoryStore, memoryKey } from "../../../src/middlewares/memory/store.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";
import { recordingStore } from "./memory-fixtures.ts";

const FRIDAY = Date.UTC(2026, 4, 8, 12, 0, 0);


async function runAfterAgent(middleware: AgentMiddleware, messages: BaseMessage[], runtime: AgentRuntime) {
  const hook = middleware.afterAgent;
  const fn = (typeof hook === "function" ? hook : hook?.hook) as NodeHook;
  return fn({ ...emptyThreadState(), messages }, runtime);
}

describe("filterMessagesForMemory", () => {
  it("keeps the user's own turns and final answers only", () => {
    const kept = filterMessagesForMemory([
      new SystemMessage({ content: "<system-reminder>date</system-reminder>", id: "m1", additional_kwargs: { hide_from_ui: true, dynamic_context_reminder: true } }),
      new HumanMessage({ content: "<memory>old facts</memory>", id: "m1__memory", name: "dynamic_context_memory", additional_kwargs: { hide_from_ui: true, dynamic_context_reminder: true } }),
      new HumanMessage({ content: "Find the weather", id: "m1__user" }),
      new AIMessage({ content: "", id: "a1", tool_calls: [{ name: "web_search", args: {}, id: "c1" }] }),
      new ToolMessage({ content: "sunny", tool_call_id: "c1", id: "t1" }),
      new HumanMessage({ content: "[LOOP DETECTED]", id: "h1", name: "loop_warning", additional_kwargs: { hide_from_ui: true } }),
      new AIMessage({ content: "It is sunny.", id: "a2" }),
      new HumanMessage({ content: "summary of older turns", id: "s1", name: "summary" }),
      new HumanMessage({ content: "next", id: "m2" }),
      new AIMessage({ content: "Something went wrong.", id: "a3", additional_kwargs: { deerflow_error_fallback: true } }),
    ]);
    expect(kept).toEqual([
      { id: "m1__user", role: "user", text: "Find the weather" },
      { id: "a2", role: "assistant", text: "It is sunny." },
      { id: "m2", role: "user", text: "next" },
    ]);
  });

  it("uses the user's text from before server-added upload listings", () => {
    const kept = filterMessagesForMemory([
      new HumanMessage({ content: "<current_uploads>\n- a.pdf\n</current_uploads>\n\nsummarise it", id: "m1", additional_kwargs: { original_user_content: "summarise it" } }),
      new HumanMessage({ content: "<uploaded_files>\n- b.pdf\n</uploaded_files>\n\nand this", id: "m2" }),
    ]);
    expect(kept.map((m) => m.text)).toEqual(["summarise it", "and this"]);
  });

  it("an upload-only turn and its answer are skipped", () => {
    const kept = filterMessagesForMemory([
      new HumanMessage({ content: "<current_uploads>\n- a.pdf\n</current_uploads>\n\n", id: "m1", additional_kwargs: { original_user_content: "" } }),
      new AIMessage({ content: "I see a PDF.", id: "a1" }),
      new HumanMessage({ content: "thanks", id: "m2" }),
      new AIMessage({ content: "You're welcome.", id: "a2" }),
    ]);
    expect(kept.map((m) => m.id)).toEqual(["m2", "a2"]);
  });

  it("a hidden reply to a clarification card is the user's own words and is kept", () => {
    const kept = filterMessagesForMemory([
      new HumanMessage({ content: "Python please", id: "m1", additional_kwargs: { hide_from_ui: true, human_input_response: { version: 1, value: "Python" } } }),
    ]);
    expect(kept).toEqual([{ id: "m1", role: "user", text: "Python please" }]);
  });

  it("list content is read as text", () => {
    expect(filterMessagesForMemory([new HumanMessage({ content: [{ type: "text", text: "a" }, { type: "image_url", image_url: { url: "x" } }, { type: "text", text: "b" }], id: "m1" })])).toEqual([
      { id: "m1", role: "user", text: "a\nb" },
    ]);
  });
});

describe("Memory middleware", () => {
  it("has a stable name, the memory section's schema and declares its policy", () => {
    const middleware = createMemoryMiddleware();
    expect(middleware.name).toBe(MEMORY_NAME);
    expect(middleware.name).toBe("Memory");
    expect(middleware.releasePolicyParameters?.()).toEqual({
      enabled: true,
      mode: "middleware",
      debounce_seconds: 30,
      max_facts: 100,
      fact_confidence_threshold: 0.7,
      model_name: null,
      extractor: { kind: "remember_statements", version: 1 },
    });
    expect(
      createMemoryMiddleware({ model_name: "extractor", debounce_seconds: 5 }, { model: fakeModel() }).releasePolicyParameters?.(),
    ).toMatchObject({ debounce_seconds: 5, model_name: "extractor", extractor: { kind: "model", prompt_hash: MEMORY_EXTRACTION_PROMPT_HASH } });
    expect(MemoryConfigSchema.type).toBe("strict_object");
  });

  it("queues the conversation under the runtime user and thread, and returns no state update", async () => {
    const store = recordingStore();
    const middleware = createMemoryMiddleware({}, { store });
    const result = await runAfterAgent(
      middleware,
      [new HumanMessage({ content: "Remember this", id: "m1" }), new AIMessage({ content: "Understood", id: "a1" })],
      makeRuntime({ context: { thread_id: "thread-123", user_id: "runtime-user" } }),
    );
    expect(result).toBeUndefined();
    expect(store.updates).toEqual([
      {
        userId: "runtime-user",
        threadId: "thread-123",
        messages: [
          { id: "m1", role: "user", text: "Remember this" },
          { id: "a1", role: "assistant", text: "Understood" },
        ],
      },
    ]);
  });

  it("falls back to the run's thread and the default user", async () => {
    const store = recordingStore();
    await runAfterAgent(createMemoryMiddleware({}, { store }), [new HumanMessage({ content: "hi", id: "m1" })], makeRuntime({ threadId: "t9" }));
    expect(store.updates.map((u) => [u.userId, u.threadId])).toEqual([["default", "t9"]]);
  });

  it("queues nothing when disabled, without a thread, or with nothing to remember", async () => {
    const store = recordingStore();
    const messages = [new HumanMessage({ content: "hi", id: "m1" })];
    await runAfterAgent(createMemoryMiddleware({ enabled: false }, { store }), messages, makeRuntime({ threadId: "t1" }));
    await runAfterAgent(createMemoryMiddleware({}, { store }), messages, makeRuntime());
    await runAfterAgent(createMemoryMiddleware({}, { store }), [new AIMessage({ content: "", id: "a", tool_calls: [{ name: "x", args: {}, id: "c" }] })], makeRuntime({ threadId: "t1" }));
    expect(store.updates).toEqual([]);
  });

  it("without a store or storage port, the run is unaffected", async () => {
    const middleware = createMemoryMiddleware();
    await expect(runAfterAgent(middleware, [new HumanMessage({ content: "Remember that x y", id: "m1" })], makeRuntime({ threadId: "t1" }))).resolves.toBeUndefined();
    await expect(middleware.close()).resolves.toBe(true);
  });

  it("refuses a store together with a model/extractor, or a store built from other settings", () => {
    const store = recordingStore();
    expect(() => createMemoryMiddleware({}, { store, model: fakeModel() })).toThrow(expect.objectContaining({ code: "memory_store_conflict" }));
    expect(() => createMemoryMiddleware({ debounce_seconds: 5 }, { store })).toThrow(/disagree on debounce_seconds/);
    expect(() => createMemoryMiddleware({ model_name: "m" })).toThrow(expect.objectContaining({ code: "memory_model_missing" }));
    expect(() => createMemoryMiddleware({ mode: "tool" } as never)).toThrow(/Memory\.mode/);
  });

  it("through the real engine the run ends before any extraction, and the debounced update lands later", async () => {
    const storage = createStorage({ driver: memoryDriver() });
    const clock = new ManualClock(FRIDAY);
    const memory = createMemoryMiddleware();
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage({ content: "Noted.", id: "a1" })),
      middlewares: [memory],
      services: { clock, storage },
    });
    const state = await agent.invoke(
      { messages: [new HumanMessage({ content: "Remember that I prefer tabs over spaces.", id: "m1" })] },
      { threadId: "t1", context: { user_id: "u1" } },
    );
    expect(state.messages.map((m) => m.id)).toEqual(["m1", "a1"]);
    expect(await storage.getItem(memoryKey("u1"))).toBeNull();
    await clock.advance(30_000);
    await memory.flush();
    const record = (await storage.getItem(memoryKey("u1"))) as { facts: Array<{ content: string }> };
    expect(record.facts.map((f) => f.content)).toEqual(["I prefer tabs over spaces"]);
    expect(await memory.close()).toBe(true);
  });

  it("with the lead's neighbours: a remembered fact from one thread is recalled into the next conversation's first turn", async () => {
    const storage = createStorage({ driver: memoryDriver() });
    const store = createMemoryStore(storage, systemClock, { config: { debounce_seconds: 300 } });
    const model = fakeModel()
      .respond(new AIMessage({ content: "Got it.", id: "a1" }))
      .respond(new AIMessage({ content: "Tabs it is.", id: "a2" }));
    const agent = createAgent({
      model,
      middlewares: [
        createInputSanitizationMiddleware(),
        createDynamicContextMiddleware({}, { memory: store }),
        createMemoryMiddleware({ debounce_seconds: 300 }, { store }),
      ],
      services: { clock: systemClock, storage },
    });
    await agent.invoke({ messages: [new HumanMessage({ content: "Please remember: I prefer tabs over spaces", id: "m1" })] }, { threadId: "t1", context: { user_id: "u1" } });
    expect(store.pendingCount).toBe(1);
    await store.flush();

    const state = await agent.invoke({ messages: [new HumanMessage({ content: "How should I indent?", id: "n1" })] }, { threadId: "t2", context: { user_id: "u1" } });
    const memoryMessage = state.messages.find((m) => m.id === "n1__memory")!;
    expect(memoryMessage.content).toBe("<memory>\nFacts:\n- [preference | 0.95] I prefer tabs over spaces\n</memory>");
    const sent = model.calls[1]!.messages as BaseMessage[];
    expect(sent.map((m) => m.id)).toEqual(["n1", "n1__memory", "n1__user"]);
    // The recalled memory is hidden, so it is not framed as user input; the user's turn is.
    expect(sent[1]!.content).toBe(memoryMessage.content);
    expect(sent[2]!.content).toBe("--- BEGIN USER INPUT ---\nHow should I indent?\n--- END USER INPUT ---");

    // The second conversation is queued too, and recalling memory never fed it back into memory.
    await store.close();
    const record = (await storage.getItem(memoryKey("u1"))) as { facts: Array<{ content: string }> };
    expect(record.facts.map((f) => f.content)).toEqual(["I prefer tabs over spaces"]);
  });
});

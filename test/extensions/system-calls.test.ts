import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentState } from "../../src/engine/types.ts";
import {
  EXTENSION_TASK_STORE_KEY,
  ExtensionData,
  type SystemModelCallObserver,
  type SystemModelRequest,
  type SystemModelResult,
  type SystemOperationKind,
} from "../../src/extension-api/index.ts";
import { SYSTEM_OPERATION_KINDS } from "../../src/extension-api/system-model.ts";
import type { Assert, SameType } from "../../src/core/types.ts";
import { HostExtensionRegistry, type LoadedExtensions } from "../../src/extensions/registry.ts";
import { DetachedObservations } from "../../src/extensions/detached.ts";
import { createSystemCallHook, passThroughSystemCall } from "../../src/extensions/system-calls.ts";
import { MEMORY_EXTRACTION_PROMPT } from "../../src/middlewares/memory/extractors.ts";
import { createMemoryStore } from "../../src/middlewares/memory/store.ts";
import { createSummarizationMiddleware } from "../../src/middlewares/summarization/summarization.ts";
import { runSystemModelCall, type SystemModelCallHook, type SystemModelCallKind } from "../../src/middlewares/system-model-call.ts";
import { createTitleMiddleware } from "../../src/middlewares/title.ts";
import { emptyThreadState } from "../../src/state/thread-state.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { makeRuntime } from "../middlewares/runtime.ts";

interface Seen {
  readonly appStore: ExtensionData;
  readonly taskStore: ExtensionData;
  readonly kind: SystemOperationKind;
  readonly request: SystemModelRequest;
  readonly result: SystemModelResult;
}

function recordingObserver(onCall?: () => void | Promise<void>) {
  const seen: Seen[] = [];
  const observer: SystemModelCallObserver = {
    async onSystemModelCall(appStore, taskStore, kind, request, result) {
      seen.push({ appStore, taskStore, kind, request, result });
      await onCall?.();
    },
  };
  return { observer, seen };
}

function loaded(...observers: SystemModelCallObserver[]): LoadedExtensions {
  const registry = new HostExtensionRegistry();
  registry.attributedTo("test-ext:install", (view) => {
    for (const observer of observers) view.systemModelObserver(observer);
  });
  return registry.build();
}

function observedHook(onCall?: () => void | Promise<void>) {
  const { observer, seen } = recordingObserver(onCall);
  const extensions = loaded(observer);
  const diagnostics: unknown[] = [];
  const detached: Promise<void>[] = [];
  const hook: SystemModelCallHook = createSystemCallHook(extensions, {
    onDiagnostic: (diagnostic) => diagnostics.push(diagnostic),
    detach: (pending) => detached.push(pending),
  });
  return { hook, seen, extensions, diagnostics, detached };
}

function titleAgent(titleModel: ReturnType<typeof fakeModel>, observeSystemCall?: SystemModelCallHook) {
  return createAgent({
    model: fakeModel().respond(new AIMessage("Here is a three-day Kyoto plan.")),
    middlewares: [createTitleMiddleware({ model_name: "title-model" }, { model: titleModel, ...(observeSystemCall ? { observeSystemCall } : {}) })],
    services: { clock: systemClock },
  });
}

describe("scenario G27: a title generated through the real engine is observed", () => {
  it("the observer gets kind title, the whole prompt as a one-element frozen list, the response and a duration", async () => {
    const { hook, seen, extensions, diagnostics } = observedHook();
    const titleModel = fakeModel().respond(new AIMessage("Kyoto Trip"));
    const taskStore = new ExtensionData("run-27");
    const result = await titleAgent(titleModel, hook).invoke(
      { messages: [new HumanMessage("Plan a trip to Kyoto")] },
      { threadId: "t27", runId: "run-27", context: { [EXTENSION_TASK_STORE_KEY]: taskStore } },
    );

    expect(result.title).toBe("Kyoto Trip");
    expect(titleModel.callCount).toBe(1);
    expect(seen).toHaveLength(1);
    const [call] = seen;
    expect(call!.kind).toBe("title");
    expect(call!.appStore).toBe(extensions.appStore);
    expect(call!.taskStore).toBe(taskStore);
    expect(call!.request.modelName).toBe("title-model");
    // The prompt string whole, never walked into characters, and exactly what the title model got.
    expect(call!.request.messages).toHaveLength(1);
    expect(Object.isFrozen(call!.request.messages)).toBe(true);
    expect(Object.isFrozen(call!.request)).toBe(true);
    const prompt = call!.request.messages[0];
    expect(typeof prompt).toBe("string");
    expect(prompt).toContain("Plan a trip to Kyoto");
    expect(prompt).toContain("Here is a three-day Kyoto plan.");
    expect(String(titleModel.calls[0]!.messages[0]!.content)).toBe(prompt);
    expect(AIMessage.isInstance(call!.result.response)).toBe(true);
    expect((call!.result.response as AIMessage).content).toBe("Kyoto Trip");
    expect(call!.result.error).toBeUndefined();
    expect(call!.result.durationMs).toBeGreaterThanOrEqual(0);
    expect(Object.isFrozen(call!.result)).toBe(true);
    expect(diagnostics).toEqual([]);
  });

  it("when the title model fails with E the observer gets E, and Title still falls back to the local title", async () => {
    const failure = new Error("title provider down");
    const { hook, seen } = observedHook();
    const observed = await titleAgent(fakeModel().respond(failure), hook).invoke({ messages: [new HumanMessage("Plan a trip to Kyoto")] }, { threadId: "t27e" });
    const unobserved = await titleAgent(fakeModel().respond(new Error("title provider down"))).invoke(
      { messages: [new HumanMessage("Plan a trip to Kyoto")] },
      { threadId: "t27f" },
    );

    // Title's own behaviour is unchanged: a failing title model costs nothing but the model title.
    expect(observed.title).toBe("Plan a trip to Kyoto");
    expect(observed.title).toBe(unobserved.title);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.kind).toBe("title");
    expect(seen[0]!.result.error).toBe(failure);
    expect(seen[0]!.result.response).toBeUndefined();
    expect(seen[0]!.result.durationMs).toBeGreaterThanOrEqual(0);
    // No run task store in the context: the observer gets a detached one.
    expect(seen[0]!.taskStore.scopeId).toBe("detached");
  });

  it("the caller of the hook sees E itself, and a result unchanged", async () => {
    const failure = new Error("E");
    const { hook, seen } = observedHook(() => {
      throw new Error("a broken observer");
    });
    await expect(hook("title", { messages: "prompt" }, () => Promise.reject(failure))).rejects.toBe(failure);
    const response = { content: "T" };
    await expect(hook("title", { messages: "prompt" }, async () => response)).resolves.toBe(response);
    expect(seen.map((s) => s.result.error ?? s.result.response)).toEqual([failure, response]);
  });
});

// The middlewares' kinds are the extension API's kinds, both ways.
type _KindsInStep = Assert<SameType<SystemModelCallKind, SystemOperationKind>>;

describe("the system operation kinds", () => {
  it("are the host's own model calls: the middlewares' and the gateway's one-shot calls for the UI", () => {
    expect([...SYSTEM_OPERATION_KINDS].sort()).toEqual(["goal", "input_polish", "memory", "suggestions", "summarization", "title"]);
    expect(Object.isFrozen(SYSTEM_OPERATION_KINDS)).toBe(true);
  });
});

describe("scenario G28: cancellation and no observers", () => {
  it("with zero observers the hook is the pass-through: only the model call happens", async () => {
    const hook = createSystemCallHook(loaded(), { onDiagnostic: () => expect.unreachable("no diagnostics") });
    expect(hook).toBe(passThroughSystemCall);
    // Structurally the middlewares' hook, and as cheap as their default.
    const asMiddlewareHook: SystemModelCallHook = hook;
    let calls = 0;
    await expect(asMiddlewareHook("goal", { messages: [] }, async () => ++calls)).resolves.toBe(1);
    await expect(runSystemModelCall("goal", { messages: [] }, async () => ++calls)).resolves.toBe(2);
    expect(calls).toBe(2);

    const titleModel = fakeModel().respond(new AIMessage("Kyoto Trip"));
    const result = await titleAgent(titleModel, hook).invoke({ messages: [new HumanMessage("Plan a trip to Kyoto")] }, { threadId: "t28" });
    expect(result.title).toBe("Kyoto Trip");
    expect(titleModel.callCount).toBe(1);
  });

  it("a call cancelled mid-flight rejects at once, and the observer is told later without blocking it", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { hook, seen, detached } = observedHook(() => gate);
    const controller = new AbortController();
    const runtime = makeRuntime({ signal: controller.signal });
    const cancelled = new DOMException("cancelled", "AbortError");

    const call = hook(
      "summarization",
      { messages: "prompt" },
      () =>
        new Promise<never>((_resolve, reject) => {
          controller.signal.addEventListener("abort", () => reject(cancelled), { once: true });
        }),
      runtime,
    );
    controller.abort(cancelled);
    // Rejects although the observer is still blocked on the gate.
    await expect(call).rejects.toBe(cancelled);
    expect(detached).toHaveLength(1);

    release();
    await Promise.all(detached);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.kind).toBe("summarization");
    expect(seen[0]!.result.error).toBe(cancelled);
  });
});

describe("summarization and memory calls are observed", () => {
  const turns = (): BaseMessage[] => [
    new HumanMessage({ content: "user-1", id: "u1" }),
    new AIMessage({ content: "assistant-1", id: "a1" }),
    new HumanMessage({ content: "user-2", id: "u2" }),
    new AIMessage({ content: "assistant-2", id: "a2" }),
  ];

  it("each summary-model call is observed with kind summarization and the prompt, a fallback attempt as a call of its own", async () => {
    const { hook, seen } = observedHook();
    const failure = new Error("summary provider down");
    const primary = fakeModel().respond(failure);
    const fallback = fakeModel().respond(new AIMessage("compressed summary"));
    const mw = createSummarizationMiddleware(
      { enabled: true, model_name: "summary-model", trigger: { messages: 4 }, keep: { messages: 2 } },
      { model: primary, fallbackModel: fallback, tokenCounter: (messages) => messages.length, observeSystemCall: hook },
    );
    const taskStore = new ExtensionData("run-s");
    const runtime = makeRuntime({ threadId: "thread-1", context: { [EXTENSION_TASK_STORE_KEY]: taskStore } });
    const update = await (mw.beforeModel as (s: AgentState, r: typeof runtime) => Promise<Record<string, unknown> | undefined>)(
      { ...emptyThreadState(), messages: turns() },
      runtime,
    );

    expect(update?.["summary_text"]).toBe("compressed summary");
    expect(seen.map((s) => s.kind)).toEqual(["summarization", "summarization"]);
    expect(seen.map((s) => s.request.modelName)).toEqual(["summary-model", undefined]);
    expect(seen[0]!.result.error).toBe(failure);
    expect((seen[1]!.result.response as AIMessage).content).toBe("compressed summary");
    for (const call of seen) {
      expect(call.taskStore).toBe(taskStore);
      expect(call.request.messages).toHaveLength(1);
      expect(typeof call.request.messages[0]).toBe("string");
      expect(call.request.messages[0]).toContain("user-1");
    }
    expect(String(fallback.calls[0]!.messages[0]!.content)).toBe(seen[1]!.request.messages[0]);
  });

  it("the model-backed memory extractor's call is observed with kind memory, detached from any run", async () => {
    const { hook, seen } = observedHook();
    const model = fakeModel().respond(new AIMessage('{"facts": [{"content": "User prefers Python", "category": "preference", "confidence": 0.92}]}'));
    const clock = new ManualClock(Date.UTC(2026, 4, 8, 12, 0, 0));
    const storage = createMemoryKeyValue();
    const store = createMemoryStore(storage, clock, { config: { model_name: "memory-model" }, model, observeSystemCall: hook });
    store.enqueue({ userId: "u1", threadId: "t1", messages: [{ id: "m1", role: "user", text: "I love Python" }] });
    await store.flush();

    expect((await store.recall("u1")).map((fact) => fact.content)).toEqual(["User prefers Python"]);
    expect(model.callCount).toBe(1);
    expect(seen).toHaveLength(1);
    const [call] = seen;
    expect(call!.kind).toBe("memory");
    expect(call!.request.modelName).toBe("memory-model");
    expect(call!.taskStore.scopeId).toBe("detached");
    expect(Object.isFrozen(call!.request.messages)).toBe(true);
    const [system, data] = call!.request.messages as BaseMessage[];
    expect(SystemMessage.isInstance(system!)).toBe(true);
    expect(system!.content).toBe(MEMORY_EXTRACTION_PROMPT);
    expect(String(data!.content)).toContain("I love Python");
    expect(call!.result.durationMs).toBeGreaterThanOrEqual(0);
    expect(AIMessage.isInstance(call!.result.response)).toBe(true);
  });
});

describe('"Shutdown stops accepting detached observations before the memory shutdown flush"', () => {
  function gatedHook(detached: DetachedObservations) {
    const { observer, seen } = recordingObserver();
    const hook: SystemModelCallHook = createSystemCallHook(loaded(observer), { detached });
    return { hook, seen };
  }

  it("the memory flush after the gate closed runs unobserved; before it, the same flush is observed", async () => {
    for (const closed of [false, true]) {
      const detached = new DetachedObservations();
      const { hook, seen } = gatedHook(detached);
      const model = fakeModel().respond(new AIMessage('{"facts": [{"content": "User prefers Python", "category": "preference", "confidence": 0.92}]}'));
      const store = createMemoryStore(createMemoryKeyValue(), new ManualClock(0), { config: {}, model, observeSystemCall: hook });
      store.enqueue({ userId: "u1", threadId: "t1", messages: [{ id: "m1", role: "user", text: "I love Python" }] });
      if (closed) await detached.close();
      // What the gateway's shutdown does after the gate: the memory store's close flushes the queue.
      await store.close();
      // The extraction itself still happens: only its observation is gone.
      expect(model.callCount, `closed ${closed}`).toBe(1);
      expect(seen.map((s) => s.kind), `closed ${closed}`).toEqual(closed ? [] : ["memory"]);
    }
  });

  it("a call cancelled after the gate closed is not reported; one cancelled before is, and close() waits for it", async () => {
    const detached = new DetachedObservations();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { observer, seen } = recordingObserver(() => gate);
    const hook = createSystemCallHook(loaded(observer), { detached });
    const cancelledCall = async () => {
      const controller = new AbortController();
      const runtime = makeRuntime({ signal: controller.signal, context: { [EXTENSION_TASK_STORE_KEY]: new ExtensionData("run-x") } });
      const call = hook("title", { messages: "p" }, () => Promise.reject(new DOMException("cancelled", "AbortError")), runtime);
      controller.abort();
      await expect(call).rejects.toThrow("cancelled");
    };
    await cancelledCall();
    expect(detached.pending).toBe(1);
    let closed = false;
    const closing = detached.close().then(() => (closed = true));
    await cancelledCall();
    // The second report was never started; the first one is still owed and close() waits for it.
    expect(detached.pending).toBe(1);
    await Promise.resolve();
    expect(closed).toBe(false);
    release();
    await closing;
    expect(seen).toHaveLength(1);
    // A live run's own calls are still observed inline after the gate.
    const runtime = makeRuntime({ context: { [EXTENSION_TASK_STORE_KEY]: new ExtensionData("run-y") } });
    await hook("title", { messages: "p" }, async () => "ok", runtime);
    expect(seen.map((s) => s.taskStore.scopeId)).toEqual(["run-x", "run-y"]);
  });

  it("close() within a budget gives up on an observation that never settles", async () => {
    const detached = new DetachedObservations();
    expect(detached.submit(() => new Promise<void>(() => {}))).toBe(true);
    const clock = new ManualClock(0);
    const closing = detached.close({ timeoutMs: 5000, clock });
    expect(detached.submit(async () => {})).toBe(false);
    await clock.advance(5000);
    expect(await closing).toBe(false);
    expect(detached.pending).toBe(1);
  });
});

import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.ts";
import type { AgentAssemblyDescriptor } from "../../src/extension-api/assembly.ts";
import type { CompactionEvent, ContextCompactionObserver } from "../../src/extension-api/compaction.ts";
import { taskInfo, type TaskLifecycleContributor, type TaskOutcome } from "../../src/extension-api/lifecycle.ts";
import type { AgentAssemblyObserver } from "../../src/extension-api/registry.ts";
import type { SystemModelCallObserver, SystemModelRequest, SystemModelResult, SystemOperationKind } from "../../src/extension-api/system-model.ts";
import { EXTENSION_TASK_STORE_KEY, ExtensionData } from "../../src/extension-api/task-store.ts";
import {
  leadTaskOutcome,
  notifyAgentAssembled,
  notifyContextCompacted,
  notifyTaskStart,
  notifyTaskStop,
  observeSystemModelCall,
  subagentTaskOutcome,
  type NotifyDiagnostic,
} from "../../src/extensions/notify.ts";

const appStore = new ExtensionData("app");
const info = taskInfo({ taskId: "run-1", runId: "run-1", threadId: "thread-1", kind: "lead", agentName: "lead_agent" });

function diagnostics() {
  const seen: NotifyDiagnostic[] = [];
  return { seen, onDiagnostic: (d: NotifyDiagnostic) => seen.push(d) };
}

function abortError(message = "aborted by the contributor"): Error {
  const error = new Error(message);
  error.name = "AbortError";
  return error;
}

/** Lets pending promise continuations run. */
const flush = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

describe("notifyTaskStart / notifyTaskStop", () => {
  it("calls every contributor in registration order with the app store, the task store and the task", async () => {
    const taskStore = new ExtensionData("run-1");
    const calls: unknown[][] = [];
    const contributor = (label: string): TaskLifecycleContributor => ({
      onTaskStart: async (app, task, started) => {
        await Promise.resolve();
        calls.push([label, "start", app, task, started]);
      },
      onTaskStop: (app, task, stopped, outcome) => {
        calls.push([label, "stop", app, task, stopped, outcome]);
      },
    });
    const contributors = [
      { source: "ext.a:install", value: contributor("a") },
      { source: "ext.b:install", value: contributor("b") },
    ];
    await notifyTaskStart(contributors, appStore, taskStore, info);
    await notifyTaskStop(contributors, appStore, taskStore, info, "completed");
    expect(calls).toEqual([
      ["a", "start", appStore, taskStore, info],
      ["b", "start", appStore, taskStore, info],
      ["a", "stop", appStore, taskStore, info, "completed"],
      ["b", "stop", appStore, taskStore, info, "completed"],
    ]);
  });

  it("contains a throwing or rejecting contributor, reports it against its extension, and still runs the rest", async () => {
    const { seen, onDiagnostic } = diagnostics();
    const ran: string[] = [];
    await notifyTaskStop(
      [
        { source: "sync.throw:install", value: { onTaskStop: () => { throw new Error("boom"); } } },
        { source: "async.reject:install", value: { onTaskStop: async () => { throw new Error("later boom"); } } },
        { source: "only.start:install", value: { onTaskStart: () => { ran.push("never"); } } },
        { source: "ok:install", value: { onTaskStop: (_a, _t, _i, outcome: TaskOutcome) => { ran.push(outcome); } } },
      ],
      appStore,
      new ExtensionData("run-1"),
      info,
      "failed",
      { onDiagnostic },
    );
    expect(ran).toEqual(["failed"]);
    expect(seen).toEqual([
      { level: "error", source: "sync.throw:install", message: expect.stringContaining("onTaskStop failed for task run-1 and was skipped: boom") },
      { level: "error", source: "async.reject:install", message: expect.stringContaining("later boom") },
    ]);
  });

  it("scenario G24: a contributor sleeping 10 s ends the stop pass when the shared 3 s budget runs out; the others are skipped with warnings", async () => {
    const clock = new ManualClock();
    const { seen, onDiagnostic } = diagnostics();
    const ran: string[] = [];
    const contributors = [
      { source: "slow:install", value: { onTaskStop: () => clock.sleep(10_000).then(() => { ran.push("slow"); }) } },
      { source: "second:install", value: { onTaskStop: () => { ran.push("second"); } } },
      { source: "third:install", value: { onTaskStop: () => { ran.push("third"); } } },
    ];
    let done = false;
    const pass = notifyTaskStop(contributors, appStore, new ExtensionData("run-1"), info, "completed", { clock, onDiagnostic }).then(() => {
      done = true;
    });
    await clock.advance(2_999);
    expect(done).toBe(false);
    await clock.advance(1);
    await pass;
    expect(done).toBe(true);
    expect(clock.now()).toBe(3_000);
    expect(ran).toEqual([]);
    expect(seen.map((d) => [d.level, d.source])).toEqual([
      ["warning", "slow:install"],
      ["warning", "second:install"],
      ["warning", "third:install"],
    ]);
    expect(seen[0]!.message).toContain("timed out");
    expect(seen[1]!.message).toContain("skipped");
    expect(seen[1]!.message).toContain("3.0s notification budget was spent");
  });

  it("shares one budget across contributors instead of giving each its own", async () => {
    const clock = new ManualClock();
    const { seen, onDiagnostic } = diagnostics();
    const ran: string[] = [];
    const contributors = [
      { source: "two-seconds:install", value: { onTaskStart: () => clock.sleep(2_000).then(() => { ran.push("first"); }) } },
      { source: "two-more:install", value: { onTaskStart: () => clock.sleep(2_000).then(() => { ran.push("second"); }) } },
      { source: "late:install", value: { onTaskStart: () => { ran.push("third"); } } },
    ];
    const pass = notifyTaskStart(contributors, appStore, new ExtensionData("run-1"), info, { clock, onDiagnostic });
    await clock.advance(3_000);
    await pass;
    expect(ran).toEqual(["first"]);
    expect(seen.map((d) => d.source)).toEqual(["two-more:install", "late:install"]);
  });

  it("reports a contributor's own timeout before the deadline as a failure, not as the budget running out", async () => {
    const clock = new ManualClock();
    const { seen, onDiagnostic } = diagnostics();
    const timeout = new Error("upstream call timed out");
    timeout.name = "TimeoutError";
    await notifyTaskStart([{ source: "own-timeout:install", value: { onTaskStart: async () => { throw timeout; } } }], appStore, new ExtensionData("r"), info, {
      clock,
      onDiagnostic,
    });
    expect(seen).toEqual([{ level: "error", source: "own-timeout:install", message: expect.stringContaining("failed for task run-1") }]);
  });

  it("scenario G25: a contributor throwing its own abort error in onTaskStop does not skip later contributors or fail the pass", async () => {
    const { seen, onDiagnostic } = diagnostics();
    const host = new AbortController();
    const ran: string[] = [];
    await expect(
      notifyTaskStop(
        [
          { source: "aborts-itself:install", value: { onTaskStop: async () => { throw abortError(); } } },
          { source: "dom-abort:install", value: { onTaskStop: () => { throw new DOMException("gave up", "AbortError"); } } },
          { source: "later:install", value: { onTaskStop: (_a, _t, _i, outcome: TaskOutcome) => { ran.push(outcome); } } },
        ],
        appStore,
        new ExtensionData("run-1"),
        info,
        "completed",
        { signal: host.signal, onDiagnostic },
      ),
    ).resolves.toBeUndefined();
    expect(ran).toEqual(["completed"]);
    expect(seen.map((d) => [d.level, d.source])).toEqual([
      ["error", "aborts-itself:install"],
      ["error", "dom-abort:install"],
    ]);
    expect(seen[0]!.message).toContain("raised its own abort");
  });

  it("propagates a real abort of the host and skips the remaining contributors", async () => {
    const host = new AbortController();
    const ran: string[] = [];
    const reason = new Error("gateway shutting down");
    let release!: () => void;
    const pass = notifyTaskStop(
      [
        { source: "hangs:install", value: { onTaskStop: () => new Promise<void>((resolve) => { release = resolve; }) } },
        { source: "next:install", value: { onTaskStop: () => { ran.push("next"); } } },
      ],
      appStore,
      new ExtensionData("run-1"),
      info,
      "completed",
      { signal: host.signal, onDiagnostic: () => {} },
    );
    await flush();
    host.abort(reason);
    await expect(pass).rejects.toBe(reason);
    release();
    await flush();
    expect(ran).toEqual([]);
  });

  it("propagates the host abort even when the contributor turned it into its own rejection", async () => {
    const host = new AbortController();
    const pass = notifyTaskStart(
      [{ source: "forwards:install", value: { onTaskStart: () => new Promise<void>((_resolve, reject) => host.signal.addEventListener("abort", () => reject(abortError("mine")))) } }],
      appStore,
      new ExtensionData("run-1"),
      info,
      { signal: host.signal, onDiagnostic: () => {} },
    );
    await flush();
    host.abort(new Error("host"));
    await expect(pass).rejects.toThrow("host");
  });

  it("throws at once, calling nobody, when the host signal is already aborted", async () => {
    const ran: string[] = [];
    await expect(
      notifyTaskStart([{ source: "x:install", value: { onTaskStart: () => { ran.push("x"); } } }], appStore, new ExtensionData("r"), info, {
        signal: AbortSignal.abort(new Error("already gone")),
      }),
    ).rejects.toThrow("already gone");
    expect(ran).toEqual([]);
  });

  it("accepts bare contributors and attributes their failures to <unattributed>", async () => {
    const { seen, onDiagnostic } = diagnostics();
    await notifyTaskStart([{ onTaskStart: () => { throw new Error("bare"); } }], appStore, new ExtensionData("r"), info, { onDiagnostic });
    expect(seen).toEqual([{ level: "error", source: "<unattributed>", message: expect.stringContaining("bare") }]);
  });
});

describe("task outcomes", () => {
  it("classifies conservatively: abort beats success, anything else unsuccessful failed", () => {
    expect(leadTaskOutcome({ aborted: true, succeeded: true })).toBe("aborted");
    expect(leadTaskOutcome({ aborted: false, succeeded: true })).toBe("completed");
    expect(leadTaskOutcome({ aborted: false, succeeded: false })).toBe("failed");
    expect(subagentTaskOutcome({ cancelled: true, succeeded: false })).toBe("aborted");
    expect(subagentTaskOutcome({ cancelled: false, succeeded: true })).toBe("completed");
    expect(subagentTaskOutcome({ cancelled: false, succeeded: false })).toBe("failed");
  });
});

interface Observation {
  appStore: ExtensionData;
  taskStore: ExtensionData;
  kind: SystemOperationKind;
  request: SystemModelRequest;
  result: SystemModelResult;
}

function recordingObserver(): { observer: SystemModelCallObserver; seen: Observation[] } {
  const seen: Observation[] = [];
  return {
    seen,
    observer: {
      async onSystemModelCall(app, task, kind, request, result) {
        seen.push({ appStore: app, taskStore: task, kind, request, result });
      },
    },
  };
}

describe("observeSystemModelCall", () => {
  it("scenario G27: a title generated from a prompt string reports kind title, a one-element frozen messages array, the response and durationMs >= 0", async () => {
    const clock = new ManualClock(1_000);
    const { observer, seen } = recordingObserver();
    const prompt = "Write a short title for: how do rainbows form?";
    const response = { content: "Rainbows explained" };
    const result = await observeSystemModelCall([{ source: "obs:install", value: observer }], "title", { messages: prompt, modelName: "demo" }, async () => {
      await clock.advance(25);
      return response;
    }, { appStore, clock });
    expect(result).toBe(response);
    expect(seen).toHaveLength(1);
    const [observation] = seen;
    expect(observation!.kind).toBe("title");
    expect(observation!.request.messages).toEqual([prompt]);
    expect(Object.isFrozen(observation!.request.messages)).toBe(true);
    expect(observation!.request.modelName).toBe("demo");
    expect(observation!.result.response).toBe(response);
    expect(observation!.result.error).toBeUndefined();
    expect(observation!.result.durationMs).toBe(25);
    expect(observation!.appStore).toBe(appStore);
  });

  it("scenario G27: when the call fails with E, the observer gets error E (awaited) and the caller sees E itself", async () => {
    const { observer, seen } = recordingObserver();
    const failure = new Error("provider 500");
    await expect(
      observeSystemModelCall([observer], "title", { messages: "prompt" }, () => Promise.reject(failure), { appStore }),
    ).rejects.toBe(failure);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.result.error).toBe(failure);
    expect(seen[0]!.result.response).toBeUndefined();
    expect(seen[0]!.result.durationMs).toBeGreaterThanOrEqual(0);
  });

  it("scenario G28: a call cancelled mid-flight propagates at once while a hanging observer is told later, without blocking", async () => {
    const host = new AbortController();
    const observed: SystemModelResult[] = [];
    let releaseObserver!: () => void;
    const observerDone = new Promise<void>((resolve) => { releaseObserver = resolve; });
    const observer: SystemModelCallObserver = {
      async onSystemModelCall(_app, _task, _kind, _request, result) {
        observed.push(result);
        await observerDone;
      },
    };
    const detached: Promise<void>[] = [];
    const cancelled = new DOMException("run interrupted", "AbortError");
    const call = observeSystemModelCall([observer], "summarization", { messages: ["m1", "m2"] }, () =>
      new Promise<never>((_resolve, reject) => host.signal.addEventListener("abort", () => reject(cancelled))), {
      appStore,
      signal: host.signal,
      detach: (pending) => detached.push(pending),
    });
    host.abort(cancelled);
    await expect(call).rejects.toBe(cancelled);
    expect(detached).toHaveLength(1);
    await flush();
    expect(observed).toHaveLength(1);
    expect(observed[0]!.error).toBe(cancelled);
    let settled = false;
    void detached[0]!.then(() => { settled = true; });
    await flush();
    expect(settled).toBe(false);
    releaseObserver();
    await detached[0];
    expect(settled).toBe(true);
  });

  it("scenario G28: with zero observers only the model call happens", async () => {
    let calls = 0;
    const value = await observeSystemModelCall([], "goal", { messages: "x" }, async () => ++calls, { appStore });
    expect(value).toBe(1);
    expect(calls).toBe(1);
  });

  it("keeps the caller's result when an observer throws, and reports the observer", async () => {
    const { seen, onDiagnostic } = diagnostics();
    const after = recordingObserver();
    const value = await observeSystemModelCall(
      [{ source: "broken:install", value: { onSystemModelCall: () => { throw new Error("observer bug"); } } }, { source: "ok:install", value: after.observer }],
      "memory",
      { messages: [] },
      async () => "facts",
      { appStore, onDiagnostic },
    );
    expect(value).toBe("facts");
    expect(after.seen).toHaveLength(1);
    expect(seen).toEqual([{ level: "error", source: "broken:install", message: expect.stringContaining("observer bug") }]);
  });

  it("snapshots the message list: a later mutation of the caller's list does not reach observers", async () => {
    const { observer, seen } = recordingObserver();
    const messages = ["first"];
    await observeSystemModelCall([observer], "goal", { messages }, async () => {
      messages.push("pushed during the call");
      return "ok";
    }, { appStore });
    expect(seen[0]!.request.messages).toEqual(["first"]);
  });

  it("hands observers the explicit task store, else the one in invokeConfig.context, else a detached store", async () => {
    const { observer, seen } = recordingObserver();
    const explicit = new ExtensionData("run-explicit");
    const fromContext = new ExtensionData("run-context");
    const invokeConfig = { context: { [EXTENSION_TASK_STORE_KEY]: fromContext } };
    await observeSystemModelCall([observer], "goal", { messages: "a", invokeConfig }, async () => 1, { appStore, taskStore: explicit });
    await observeSystemModelCall([observer], "goal", { messages: "a", invokeConfig }, async () => 1, { appStore });
    await observeSystemModelCall([observer], "goal", { messages: "a", invokeConfig: { context: { [EXTENSION_TASK_STORE_KEY]: { scopeId: "forged" } } } }, async () => 1, { appStore });
    expect(seen.map((o) => o.taskStore.scopeId)).toEqual(["run-explicit", "run-context", "detached"]);
  });
});

const event: CompactionEvent = {
  transform_kind: "summarization",
  transform_version: 1,
  source_content_hashes: ["a".repeat(64), "b".repeat(64)],
  summary_content_hash: "c".repeat(64),
  compacted_message_count: 2,
  kept_message_count: 3,
};

describe("notifyContextCompacted", () => {
  it("returns before any observer runs, then tells each one in order with the same frozen event, containing failures", async () => {
    const { seen, onDiagnostic } = diagnostics();
    const received: Array<[string, CompactionEvent]> = [];
    const observers: Array<{ source: string; value: ContextCompactionObserver }> = [
      { source: "throws:install", value: { onContextCompacted: (e) => { received.push(["throws", e]); throw new Error("sync bug"); } } },
      { source: "rejects:install", value: { onContextCompacted: async () => { throw new Error("async bug"); } } },
      { source: "ok:install", value: { onContextCompacted: (e) => { received.push(["ok", e]); } } },
    ];
    const pending: Promise<void>[] = [];
    const returned = notifyContextCompacted(observers, event, { onDiagnostic, detach: (p) => pending.push(p) });
    expect(returned).toBeUndefined();
    expect(received).toEqual([]);
    await Promise.all(pending);
    expect(received.map(([who]) => who)).toEqual(["throws", "ok"]);
    expect(received[1]![1]).toEqual(event);
    expect(Object.isFrozen(received[1]![1])).toBe(true);
    expect(Object.isFrozen(received[1]![1].source_content_hashes)).toBe(true);
    expect(seen.map((d) => [d.level, d.source])).toEqual([
      ["error", "throws:install"],
      ["error", "rejects:install"],
    ]);
  });

  it('"observers receive a detached task store, the same fallback notify_system_model_call uses": one per event, or the one the compaction site handed out', async () => {
    const seen: Array<[string, ExtensionData]> = [];
    const observers: ContextCompactionObserver[] = ["a", "b"].map((who) => ({ onContextCompacted: (_e, store) => void seen.push([who, store]) }));
    const notified = async (options: { taskStore?: ExtensionData } = {}) => {
      const pending: Promise<void>[] = [];
      notifyContextCompacted(observers, event, { ...options, detach: (p) => pending.push(p) });
      await Promise.all(pending);
    };
    await notified();
    await notified();
    const handed = new ExtensionData("detached");
    await notified({ taskStore: handed });
    expect(seen.map(([who, store]) => [who, store.scopeId])).toEqual([
      ["a", "detached"], ["b", "detached"], ["a", "detached"], ["b", "detached"], ["a", "detached"], ["b", "detached"],
    ]);
    const stores = seen.map(([, store]) => store);
    expect(stores[1]).toBe(stores[0]);
    expect(stores[2]).not.toBe(stores[0]);
    expect(stores[4]).toBe(handed);
    expect(stores[5]).toBe(handed);
  });

  it("does not wait for an observer that never settles", async () => {
    const ran: string[] = [];
    const pending: Promise<void>[] = [];
    notifyContextCompacted([{ onContextCompacted: () => new Promise<void>(() => {}) }, { onContextCompacted: () => { ran.push("second"); } }], event, {
      detach: (p) => pending.push(p),
    });
    await flush();
    // The caller went on; the background pass waits on the first observer, in order.
    expect(pending).toHaveLength(1);
    expect(ran).toEqual([]);
  });
});

describe("notifyAgentAssembled", () => {
  const descriptor = { namespace: "deerflow", agent_name: "lead_agent" } as unknown as AgentAssemblyDescriptor;

  it("tells every observer synchronously, containing a throwing observer and a rejected promise", async () => {
    const { seen, onDiagnostic } = diagnostics();
    const received: string[] = [];
    const observers: Array<{ source: string; value: AgentAssemblyObserver }> = [
      { source: "throws:install", value: { onAgentAssembled: () => { throw new Error("bad observer"); } } },
      { source: "async:install", value: { onAgentAssembled: (() => Promise.reject(new Error("async observer"))) as unknown as (d: AgentAssemblyDescriptor) => void } },
      { source: "ok:install", value: { onAgentAssembled: (d) => { received.push(d.agent_name); } } },
    ];
    notifyAgentAssembled(observers, descriptor, { onDiagnostic });
    expect(received).toEqual(["lead_agent"]);
    expect(seen).toEqual([{ level: "error", source: "throws:install", message: expect.stringContaining("bad observer") }]);
    await flush();
    expect(seen.map((d) => d.source)).toEqual(["throws:install", "async:install"]);
  });
});

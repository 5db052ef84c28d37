import { describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../../src/core/clock.ts";
import type { TaskInfo, TaskLifecycleContributor, TaskOutcome } from "../../../src/extension-api/lifecycle.ts";
import { HostExtensionRegistry, type LoadedExtensions } from "../../../src/extensions/registry.ts";
import type { Clock } from "../../../src/ports/runtime-ports.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { RunManager } from "../../../src/runtime/runs/manager.ts";
import { RunStore } from "../../../src/runtime/runs/run-store.ts";
import type { StreamFrame } from "../../../src/runtime/runs/stream-bridge.ts";
import { statusOfRunOperation } from "../../../src/gateway/errors.ts";
import { RunOperationError, runRequest, type RunAgentFactory, type RunProbe, type RunRecord, type RunRequest } from "../../../src/runtime/runs/types.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { createAgent } from "../../../src/engine/index.ts";
import { ALICE, MemoryThreads, ScriptedModel, collect, deferred, eventually, scriptedAgentFactory, type Deferred } from "./runs-fixtures.ts";

function say(text: string, fields: Partial<RunRequest> = {}): RunRequest {
  return runRequest({ input: { messages: [{ type: "human", content: text }] }, ...fields });
}

function lifecycle(log: string[], hooks: { startGate?: Promise<void>; stopGate?: Promise<void> } = {}): LoadedExtensions {
  const contributor: TaskLifecycleContributor = {
    async onTaskStart(_app, _task, info: TaskInfo) {
      log.push(`start-begin:${info.taskId}`);
      await hooks.startGate;
      // Yield for real so a worker that published `metadata` without awaiting would be caught.
      await new Promise((resolve) => setTimeout(resolve, 5));
      log.push(`start-done:${info.taskId}:${info.kind}:${info.threadId}`);
    },
    async onTaskStop(_app, _task, info: TaskInfo, outcome: TaskOutcome) {
      log.push(`stop-begin:${info.taskId}`);
      await hooks.stopGate;
      await new Promise((resolve) => setTimeout(resolve, 5));
      log.push(`stop-done:${info.taskId}:${outcome}`);
    },
  };
  const registry = new HostExtensionRegistry();
  registry.attributedTo("test.lifecycle:install", (view) => view.taskLifecycle(contributor));
  return registry.build();
}

function setup(
  options: {
    extensions?: LoadedExtensions;
    clock?: Clock;
    storage?: KeyValue;
    checkpointer?: KeyValueCheckpointSaver;
    agentFactory?: RunAgentFactory;
    gate?: Deferred<string>;
    probe?: RunProbe;
  } = {},
) {
  const storage = options.storage ?? createMemoryKeyValue();
  const checkpointer = options.checkpointer ?? new KeyValueCheckpointSaver({ storage });
  const threads = new MemoryThreads();
  threads.add("t1");
  threads.add("t2");
  const gates = { block: options.gate ?? deferred<string>() };
  const diagnostics: string[] = [];
  const manager = new RunManager({
    storage,
    checkpointer,
    threads,
    agentFactory: options.agentFactory ?? scriptedAgentFactory(checkpointer, { gates }),
    ...(options.extensions ? { extensions: options.extensions } : {}),
    ...(options.probe ? { probe: options.probe } : {}),
    clock: options.clock ?? systemClock,
    notifyBudgetMs: Infinity,
    onDiagnostic: (d) => diagnostics.push(`${d.level}: ${d.message}`),
  });
  return { storage, checkpointer, threads, gates, manager, diagnostics };
}

async function running(manager: RunManager, row: RunRecord): Promise<void> {
  await eventually(async () => (await manager.get(row.thread_id, row.run_id))?.status === "running");
}

async function failure(promise: Promise<unknown>): Promise<RunOperationError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RunOperationError);
  return error as RunOperationError;
}

describe("RunManager: one run", () => {
  it("goes pending -> running -> success, streams metadata first and end last, and marks the thread busy then idle", async () => {
    const { manager, threads } = setup();
    const row = await manager.create("t1", say("tool:note", { streamMode: ["values", "updates", "messages-tuple", "custom"] }), ALICE);
    expect(row).toMatchObject({ status: "pending", thread_id: "t1", assistant_id: "lead_agent", owner_id: "alice", multitask_strategy: "reject" });
    const frames = await collect(manager.stream("t1", row.run_id));
    const events = frames.map((f) => f.event);
    expect(events[0]).toBe("metadata");
    expect(frames[0]!.data).toEqual({ run_id: row.run_id, thread_id: "t1", attempt: 1 });
    expect(events.at(-1)).toBe("end");
    expect(frames.at(-1)!.data).toBeNull();
    expect(new Set(events)).toEqual(new Set(["metadata", "values", "updates", "messages", "custom", "end"]));
    const seqs = frames.map((f) => Number(f.id!.split("-")[1]));
    expect(seqs).toEqual(seqs.map((_, i) => i));
    // Messages in the SDK's flat shape; token events as [chunk, metadata].
    const values = frames.filter((f) => f.event === "values").at(-1)!.data as { messages: Array<Record<string, unknown>> };
    expect(values.messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai"]);
    expect(values.messages[0]).toMatchObject({ type: "human", content: "tool:note" });
    const message = frames.find((f) => f.event === "messages")!.data as [Record<string, unknown>, Record<string, unknown>];
    expect(message[0]).toMatchObject({ type: "ai" });
    expect(message[1]).toMatchObject({ langgraph_node: "model" });
    expect(frames.find((f) => f.event === "custom")!.data).toEqual({ type: "task_running", message: "working" });
    const final = await manager.join("t1", row.run_id);
    expect(final.status).toBe("success");
    expect(threads.statusLog).toEqual([
      ["t1", "busy"],
      ["t1", "idle"],
    ]);
    expect(await manager.list("t1")).toEqual([final]);
  });

  it("names the thread from the state the engine read when its graph finished, without reading the head once more", async () => {
    const storage = createMemoryKeyValue();
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    const reads: string[] = [];
    const getTuple = checkpointer.getTuple.bind(checkpointer);
    checkpointer.getTuple = async (config) => {
      reads.push(String(config.configurable?.checkpoint_id ?? "head"));
      return getTuple(config);
    };
    const agentFactory: RunAgentFactory = async () =>
      createAgent({
        name: "lead-agent",
        model: new ScriptedModel({}),
        services: { clock: systemClock },
        checkpointer,
        middlewares: [{ name: "Titler", afterAgent: async () => ({ title: "Named by the run" }) }],
      });
    const { manager, threads } = setup({ storage, checkpointer, agentFactory });
    const row = await manager.create("t1", say("hello"), ALICE);
    await manager.join("t1", row.run_id);
    expect(threads.rows.get("t1")!.display_name).toBe("Named by the run");
    // The pre-run head (kept for a rollback), the graph's own start, the engine's outcome read
    // (whose values carry the title). A fourth read of the head for the title was dropped.
    expect(reads).toEqual(["head", "head", "head"]);
  });

  it("hands a run probe's finish the values the engine read at the end, so it reads no head of its own; after a cancel it gets none", async () => {
    const storage = createMemoryKeyValue();
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    let reads = 0;
    const getTuple = checkpointer.getTuple.bind(checkpointer);
    checkpointer.getTuple = async (config) => (reads++, getTuple(config));
    const ended: Array<{ readonly values?: Readonly<Record<string, unknown>> }> = [];
    const probe: RunProbe = async () => async (end) => (ended.push(end), { type: "probe" });
    const { manager } = setup({ storage, checkpointer, probe });
    const row = await manager.create("t1", say("hello"), ALICE);
    await manager.join("t1", row.run_id);
    expect(ended).toHaveLength(1);
    expect((ended[0]!.values?.["messages"] as unknown[] | undefined)?.length).toBeGreaterThan(0);
    expect(reads).toBe(3);
    const blocked = await manager.create("t2", say("tool:block"), ALICE);
    await running(manager, blocked);
    await manager.cancel("t2", blocked.run_id, { action: "interrupt", wait: true });
    await manager.join("t2", blocked.run_id);
    expect(ended[1]).toEqual({});
  });

  it("settled() resolves at once with no run in flight, else once every run active when asked has finished", async () => {
    const { manager, gates } = setup();
    await manager.settled();
    const row = await manager.create("t1", say("tool:block"), ALICE);
    await running(manager, row);
    let done = false;
    const settled = manager.settled().then(() => void (done = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(done).toBe(false);
    gates.block.resolve("released");
    await settled;
    expect((await manager.get("t1", row.run_id))?.status).toBe("success");
  });

  it("fails a run whose graph throws: status error, an error frame {name, message} before end, thread status error", async () => {
    const { manager, threads } = setup();
    const row = await manager.create("t1", say("tool:boom"), ALICE);
    const frames = await collect(manager.stream("t1", row.run_id));
    expect(frames.slice(-2).map((f) => f.event)).toEqual(["error", "end"]);
    expect(frames.at(-2)!.data).toMatchObject({ name: "TypeError", message: expect.stringContaining("the tool exploded") });
    const final = await manager.join("t1", row.run_id);
    expect(final).toMatchObject({ status: "error", error: { name: "TypeError" } });
    expect(threads.rows.get("t1")!.status).toBe("error");
  });

  it("writes the server's identity after the caller's context keys", async () => {
    const { manager } = setup();
    const row = await manager.create("t1", say("tool:whoami", { context: { user_id: "mallory", model_name: "demo" } }), ALICE);
    await manager.join("t1", row.run_id);
    const values = await manager.threadValues("t1");
    const tool = (values!.messages as Array<Record<string, unknown>>).find((m) => m.type === "tool")!;
    expect(JSON.parse(String(tool.content))).toEqual({
      user_id: "alice",
      user_role: "user",
      is_internal: false,
      thread_id: "t1",
      run_id: row.run_id,
      model_name: "demo",
      keys: ["__deerflow_extension_snapshot"],
    });
  });

  it("pauses on a graph interrupt (values.__interrupt__ with the state) and continues with command.resume", async () => {
    const { manager, threads } = setup();
    const first = await manager.create("t1", say("tool:ask"), ALICE);
    const frames = await collect(manager.stream("t1", first.run_id));
    const paused = frames.filter((f) => f.event === "values").at(-1)!.data as Record<string, unknown>;
    expect(paused.__interrupt__).toEqual([{ id: expect.any(String), value: { question: "continue?" } }]);
    expect((paused.messages as unknown[]).length).toBe(2);
    expect((await manager.join("t1", first.run_id)).status).toBe("interrupted");
    expect(threads.rows.get("t1")!.status).toBe("interrupted");
    const resumed = await manager.create("t1", runRequest({ command: { resume: "yes" } }), ALICE);
    expect((await manager.join("t1", resumed.run_id)).status).toBe("success");
    const values = await manager.threadValues("t1");
    expect((values!.messages as Array<Record<string, unknown>>).find((m) => m.type === "tool")!.content).toBe("user said yes");
    expect(values!.__interrupt__).toBeUndefined();
  });
});

describe("RunManager: multitask strategies (scenario G45)", () => {
  it("scenario G45: reject answers 409 while a run is in flight and creates no run", async () => {
    const { manager, gates } = setup();
    const first = await manager.create("t1", say("tool:block"), ALICE);
    await running(manager, first);
    const error = await failure(manager.create("t1", say("again"), ALICE));
    expect(statusOfRunOperation(error)).toBe(409);
    expect(error.message).toContain(first.run_id);
    expect((await manager.list("t1")).map((r) => r.run_id)).toEqual([first.run_id]);
    // Another thread is not affected.
    const other = await manager.create("t2", say("hi"), ALICE);
    expect((await manager.join("t2", other.run_id)).status).toBe("success");
    gates.block.resolve("released");
    expect((await manager.join("t1", first.run_id)).status).toBe("success");
  });

  it("scenario G45: interrupt ends the first run interrupted, and the second starts only after the first's cleanup (on_task_stop included)", async () => {
    const log: string[] = [];
    const stopGate = deferred();
    const { manager } = setup({ extensions: lifecycle(log, { stopGate: stopGate.promise }) });
    const first = await manager.create("t1", say("tool:block"), ALICE);
    await running(manager, first);
    const second = await manager.create("t1", say("next", { multitaskStrategy: "interrupt" }), ALICE);
    await eventually(() => log.includes(`stop-begin:${first.run_id}`));
    // The first is still finalizing (its on_task_stop is held open): the second must not have started.
    expect((await manager.get("t1", second.run_id))!.status).toBe("pending");
    expect(log.some((entry) => entry.includes(second.run_id))).toBe(false);
    expect(await manager.hasActiveRun("t1")).toBe(true);
    stopGate.resolve();
    expect((await manager.join("t1", second.run_id)).status).toBe("success");
    expect((await manager.get("t1", first.run_id))!.status).toBe("interrupted");
    const order = log.map((entry) => entry.split(":").slice(0, 2).join(":"));
    expect(order).toEqual([
      `start-begin:${first.run_id}`,
      `start-done:${first.run_id}`,
      `stop-begin:${first.run_id}`,
      `stop-done:${first.run_id}`,
      `start-begin:${second.run_id}`,
      `start-done:${second.run_id}`,
      `stop-begin:${second.run_id}`,
      `stop-done:${second.run_id}`,
    ]);
    expect(log).toContain(`stop-done:${first.run_id}:aborted`);
    expect(await manager.hasActiveRun("t1")).toBe(false);
  });

  it("rollback ends the first run as error 'Rolled back by user' and restores the pre-run state before the second starts", async () => {
    const { manager } = setup();
    const before = await manager.create("t1", say("first turn"), ALICE);
    await manager.join("t1", before.run_id);
    const preRun = await manager.threadValues("t1");
    const first = await manager.create("t1", say("tool:block"), ALICE);
    await running(manager, first);
    await eventually(async () => ((await manager.threadValues("t1"))!.messages as unknown[]).length > 2);
    const second = await manager.create("t1", runRequest({ multitaskStrategy: "rollback", input: null }), ALICE);
    expect((await manager.join("t1", first.run_id))).toMatchObject({ status: "error", error: { message: "Rolled back by user" } });
    await manager.join("t1", second.run_id);
    expect((await manager.threadValues("t1"))!.messages).toEqual(preRun!.messages);
  });

  it("enqueue queues runs and starts them one after another in order (not offered upstream)", async () => {
    const { manager, gates } = setup();
    const first = await manager.create("t1", say("tool:block"), ALICE);
    const second = await manager.create("t1", say("second", { multitaskStrategy: "enqueue" }), ALICE);
    const third = await manager.create("t1", say("third", { multitaskStrategy: "enqueue" }), ALICE);
    await running(manager, first);
    expect((await manager.get("t1", second.run_id))!.status).toBe("pending");
    expect((await manager.get("t1", third.run_id))!.status).toBe("pending");
    gates.block.resolve("released");
    expect((await manager.join("t1", third.run_id)).status).toBe("success");
    expect((await manager.join("t1", second.run_id)).status).toBe("success");
    const humans = ((await manager.threadValues("t1"))!.messages as Array<Record<string, unknown>>).filter((m) => m.type === "human").map((m) => m.content);
    expect(humans).toEqual(["tool:block", "second", "third"]);
    expect((await manager.list("t1")).map((r) => r.run_id)).toEqual([third.run_id, second.run_id, first.run_id]);
  });
});

describe("RunManager: a thread held for its deletion", () => {
  it("is refused while a run holds the thread, and while held no run of any strategy can start on it", async () => {
    const { manager, gates } = setup();
    const first = await manager.create("t1", say("tool:block"), ALICE);
    await running(manager, first);
    expect(statusOfRunOperation(await failure(manager.reserveThread("t1")))).toBe(409);
    gates.block.resolve("released");
    await manager.join("t1", first.run_id);

    const release = await manager.reserveThread("t1");
    for (const multitaskStrategy of ["reject", "interrupt", "rollback", "enqueue"] as const) {
      const refused = await failure(manager.create("t1", say("late", { multitaskStrategy }), ALICE));
      expect([statusOfRunOperation(refused), refused.code]).toEqual([409, "thread_busy"]);
    }
    expect(statusOfRunOperation(await failure(manager.reserveThread("t1")))).toBe(409);
    // Other threads go on meanwhile.
    const other = await manager.create("t2", say("hi"), ALICE);
    expect((await manager.join("t2", other.run_id)).status).toBe("success");
    release();
    const after = await manager.create("t1", say("hi again"), ALICE);
    expect((await manager.join("t1", after.run_id)).status).toBe("success");
  });
});

describe("RunManager: cancel", () => {
  it("scenario G46: rollback with wait restores the pre-run state; cancelling a successful run is a 409", async () => {
    const { manager, threads } = setup();
    const done = await manager.create("t1", say("hello"), ALICE);
    await manager.join("t1", done.run_id);
    const preRun = await manager.threadValues("t1");
    const row = await manager.create("t1", say("tool:block"), ALICE);
    await running(manager, row);
    await eventually(async () => ((await manager.threadValues("t1"))!.messages as unknown[]).length > 2);
    const cancelled = await manager.cancel("t1", row.run_id, { action: "rollback", wait: true });
    expect(cancelled).toMatchObject({ status: "error", error: { message: "Rolled back by user" } });
    expect(await manager.threadValues("t1")).toEqual(preRun);
    expect(threads.rows.get("t1")!.status).toBe("error");
    const refused = await failure(manager.cancel("t1", done.run_id));
    expect(statusOfRunOperation(refused)).toBe(409);
    expect(refused.message).toContain("success");
  });

  it("interrupt keeps the checkpoints; re-cancelling an interrupted run is idempotent; an unknown run is 404", async () => {
    const { manager } = setup();
    const row = await manager.create("t1", say("tool:block"), ALICE);
    await running(manager, row);
    expect((await manager.cancel("t1", row.run_id, { wait: true })).status).toBe("interrupted");
    expect((await manager.cancel("t1", row.run_id)).status).toBe("interrupted");
    expect(statusOfRunOperation(await failure(manager.cancel("t1", "nope")))).toBe(404);
    expect(statusOfRunOperation(await failure(manager.cancel("t2", row.run_id)))).toBe(404);
  });

  it("writes the fallback title of an interrupted first turn from the first user message", async () => {
    const { manager, threads } = setup();
    const long = "tool:block " + "please summarise the quarterly numbers for the board meeting";
    const row = await manager.create("t1", say(long), ALICE);
    await running(manager, row);
    await manager.cancel("t1", row.run_id, { wait: true });
    const title = (await manager.threadValues("t1"))!.title as string;
    expect(title).toBe(long.slice(0, 50).trimEnd() + "...");
    expect(threads.rows.get("t1")!.display_name).toBe(title);
  });

  it("scenario G23: a run cancelled while still pending fires no hooks and still ends its stream", async () => {
    const log: string[] = [];
    const { manager, gates } = setup({ extensions: lifecycle(log) });
    const first = await manager.create("t1", say("tool:block"), ALICE);
    const queued = await manager.create("t1", say("later", { multitaskStrategy: "enqueue" }), ALICE);
    await running(manager, first);
    expect((await manager.cancel("t1", queued.run_id, { wait: true })).status).toBe("interrupted");
    expect(await collect(manager.stream("t1", queued.run_id))).toEqual([{ id: expect.any(String), event: "end", data: null }]);
    gates.block.resolve("ok");
    await manager.join("t1", first.run_id);
    expect(log.filter((entry) => entry.includes(queued.run_id))).toEqual([]);
  });
});

describe("RunManager: lifecycle hooks (scenarios G22, G23)", () => {
  it("scenario G22: on_task_start (kind lead, task_id = run_id) finishes before metadata; on_task_stop(completed) before end", async () => {
    const log: string[] = [];
    const { manager } = setup({ extensions: lifecycle(log) });
    const row = await manager.create("t1", say("hello"), ALICE);
    for await (const frame of manager.stream("t1", row.run_id)) log.push(`frame:${frame.event}`);
    expect(log[0]).toBe(`start-begin:${row.run_id}`);
    expect(log[1]).toBe(`start-done:${row.run_id}:lead:t1`);
    expect(log[2]).toBe("frame:metadata");
    expect(log.slice(-3)).toEqual([`stop-begin:${row.run_id}`, `stop-done:${row.run_id}:completed`, "frame:end"]);
  });

  it("scenario G23: an interrupt ends aborted, an exception failed", async () => {
    const log: string[] = [];
    const { manager } = setup({ extensions: lifecycle(log) });
    const blocked = await manager.create("t1", say("tool:block"), ALICE);
    await running(manager, blocked);
    await manager.cancel("t1", blocked.run_id, { wait: true });
    const failed = await manager.create("t1", say("tool:boom"), ALICE);
    await manager.join("t1", failed.run_id);
    expect(log).toContain(`stop-done:${blocked.run_id}:aborted`);
    expect(log).toContain(`stop-done:${failed.run_id}:failed`);
  });
});

describe("RunManager: restart and shutdown", () => {
  it("keeps finished runs across a restart and marks runs a crashed process left in flight as interrupted", async () => {
    const storage = createMemoryKeyValue();
    const first = setup({ storage });
    const done = await first.manager.create("t1", say("hello"), ALICE);
    await first.manager.join("t1", done.run_id);
    const store = new RunStore(storage);
    const orphan = { ...done, run_id: "orphan-run", status: "running" as const, created_at: "2000-01-01T00:00:00.000Z" };
    await store.put(orphan);

    const second = setup({ storage });
    const recovered = await second.manager.recover();
    expect(recovered.map((r) => r.run_id)).toEqual(["orphan-run"]);
    expect(await second.manager.get("t1", "orphan-run")).toMatchObject({ status: "interrupted", error: { name: "GatewayRestarted" } });
    expect(second.threads.rows.get("t1")!.status).toBe("interrupted");
    expect(await second.manager.get("t1", done.run_id)).toMatchObject({ status: "success" });
    // Its frames are gone with the old process: a late reader gets just `end`.
    expect((await collect(second.manager.stream("t1", done.run_id))).map((f) => f.event)).toEqual(["end"]);
    expect((await second.manager.threadValues("t1"))!.messages).toHaveLength(2);
  });

  it("shutdown interrupts active runs, persists the unsettled ones within the budget, and refuses new runs", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const storage = createMemoryKeyValue();
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    const normal = scriptedAgentFactory(checkpointer);
    // Builds that ignore the abort: the run can only be given up on.
    const hanging: RunAgentFactory = async (request) => (request.modelName === "hang" ? new Promise(() => {}) : normal(request));
    const { manager } = setup({ clock, storage, agentFactory: hanging });
    const stuck = await manager.create("t1", say("x", { context: { model_name: "hang" } }), ALICE);
    const blocked = await manager.create("t2", say("tool:block"), ALICE);
    await running(manager, stuck);
    await running(manager, blocked);
    const shutdown = manager.shutdown(5000);
    await eventually(async () => (await manager.get("t2", blocked.run_id))!.status === "interrupted");
    await clock.advance(5000);
    expect(await shutdown).toEqual({ drained: 1, abandoned: 1 });
    expect(await manager.get("t1", stuck.run_id)).toMatchObject({ status: "interrupted", error: { name: "GatewayShutdown" } });
    expect(statusOfRunOperation(await failure(manager.create("t1", say("late"), ALICE)))).toBe(503);
  });
});

describe("RunManager: admission checks", () => {
  it("refuses an unknown context.model_name with 400 before any run exists", async () => {
    const storage = createMemoryKeyValue();
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    const manager = new RunManager({
      storage,
      checkpointer,
      threads: new MemoryThreads(),
      agentFactory: scriptedAgentFactory(checkpointer),
      modelNames: () => ["demo"],
    });
    const error = await failure(manager.create("t1", say("x", { context: { model_name: "gpt-9" } }), ALICE));
    expect(statusOfRunOperation(error)).toBe(400);
    expect(error.message).toContain('"demo"');
    expect(await manager.list("t1")).toEqual([]);
  });

  it("replays exactly the frames after a Last-Event-ID", async () => {
    const { manager } = setup();
    const row = await manager.create("t1", say("hello", { streamMode: ["values", "updates"] }), ALICE);
    const all: StreamFrame[] = await collect(manager.stream("t1", row.run_id));
    const tail = await collect(manager.stream("t1", row.run_id, { lastEventId: all[1]!.id! }));
    expect(tail).toEqual(all.slice(2));
  });
});

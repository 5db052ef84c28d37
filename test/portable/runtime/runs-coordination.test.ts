import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../../src/core/clock.ts";
import type { Clock } from "../../../src/ports/runtime-ports.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import type { RenewResult, RunCoordinator } from "../../../src/runtime/runs/coordinator.ts";
import { LeaseFence, fenceCheckpointer } from "../../../src/runtime/runs/fence.ts";
import { RunManager } from "../../../src/runtime/runs/manager.ts";
import { MemoryRunCoordinator } from "../../../src/runtime/runs/memory-coordinator.ts";
import { MemoryStreamBridge } from "../../../src/runtime/runs/stream-bridge.ts";
import { runRequest, type RunRequest } from "../../../src/runtime/runs/types.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { ALICE, MemoryThreads, collect, deferred, eventually, scriptedAgentFactory } from "./runs-fixtures.ts";

function say(text: string, fields: Partial<RunRequest> = {}): RunRequest {
  return runRequest({ input: { messages: [{ type: "human", content: text }] }, ...fields });
}

const LEASE_MS = 30_000;

/** The memory coordinator with a finite lease, so the manager renews; `renewed` lets a test answer renewals. */
class LeasedCoordinator extends MemoryRunCoordinator {
  override readonly leaseMs = LEASE_MS;
  renewed: ((asked: ReadonlyMap<string, RenewResult>) => ReadonlyMap<string, RenewResult>) | undefined;

  override async renew(workerId: string, runIds: readonly string[]): Promise<ReadonlyMap<string, RenewResult>> {
    const real = await super.renew(workerId, runIds);
    return this.renewed ? this.renewed(real) : real;
  }
}

/** Counts the writes that reached the saver under the fence. */
function countingSaver(storage: ReturnType<typeof createMemoryKeyValue>): { saver: BaseCheckpointSaver; writes: () => number } {
  const saver = new KeyValueCheckpointSaver({ storage });
  let writes = 0;
  const put = saver.put.bind(saver);
  const putWrites = saver.putWrites.bind(saver);
  saver.put = async (...args) => {
    writes += 1;
    return put(...args);
  };
  saver.putWrites = async (...args) => {
    writes += 1;
    return putWrites(...args);
  };
  return { saver, writes: () => writes };
}

const managers: RunManager[] = [];
afterEach(async () => {
  for (const manager of managers.splice(0)) await manager.shutdown(100);
});

function world(options: { coordinator?: RunCoordinator; clock?: Clock } = {}) {
  const storage = createMemoryKeyValue();
  const clock = options.clock ?? systemClock;
  const coordinator = options.coordinator ?? new MemoryRunCoordinator({ storage, clock });
  const bus = new MemoryStreamBridge({ clock });
  const counted = countingSaver(storage);
  const threads = new MemoryThreads();
  threads.add("t1");
  threads.add("t2");
  const gates = { block: deferred<string>() };
  /** One "process": its own fence, worker id and manager; coordinator, bus, storage and saver shared. */
  const worker = (workerId: string, extra: { reclaimMemory?: () => void } = {}) => {
    const fence = new LeaseFence(clock);
    const checkpointer = fenceCheckpointer(counted.saver, fence);
    const diagnostics: string[] = [];
    const manager = new RunManager({
      storage,
      checkpointer,
      threads,
      agentFactory: scriptedAgentFactory(checkpointer, { gates }),
      clock,
      coordinator,
      bus,
      workerId,
      fence,
      notifyBudgetMs: Infinity,
      onDiagnostic: (d) => diagnostics.push(`${d.level}: ${d.message}`),
      ...extra,
    });
    managers.push(manager);
    return { manager, fence, diagnostics };
  };
  return { storage, coordinator, bus, threads, gates, worker, writes: counted.writes };
}

describe("RunManager over a shared coordinator (two processes in one test)", () => {
  it("a second worker streams, joins and cancels a run of the first through the bus", async () => {
    const w = world();
    const a = w.worker("worker-a");
    const b = w.worker("worker-b");
    const row = await a.manager.create("t1", say("tool:block", { streamMode: ["values"] }), ALICE);
    await eventually(async () => (await b.manager.get("t1", row.run_id))?.status === "running");
    // B executes nothing itself: the run is A's.
    expect(await b.manager.hasActiveRun("t1")).toBe(true);
    const streamed = collect(b.manager.stream("t1", row.run_id));
    const joined = b.manager.join("t1", row.run_id);
    let joinedEarly = false;
    void joined.then(() => (joinedEarly = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(joinedEarly).toBe(false);
    const cancelled = await b.manager.cancel("t1", row.run_id, { action: "interrupt" });
    expect(cancelled.run_id).toBe(row.run_id);
    const final = await joined;
    expect(final.status).toBe("interrupted");
    const frames = await streamed;
    expect(frames[0]!.event).toBe("metadata");
    expect(frames.at(-1)!.event).toBe("end");
    await a.manager.settled();
    expect(await b.manager.hasActiveRun("t1")).toBe(false);
    // The thread takes a new run from either worker.
    w.gates.block.resolve("ok");
    const next = await b.manager.create("t1", say("hello"), ALICE);
    expect((await b.manager.join("t1", next.run_id)).status).toBe("success");
  });

  it("a cancel with wait through the other worker returns the run's terminal row", async () => {
    const w = world();
    const a = w.worker("worker-a");
    const b = w.worker("worker-b");
    const row = await a.manager.create("t1", say("tool:block"), ALICE);
    await eventually(async () => (await b.manager.get("t1", row.run_id))?.status === "running");
    const done = await b.manager.cancel("t1", row.run_id, { action: "interrupt", wait: true });
    expect(done.status).toBe("interrupted");
  });

  it("a worker starting (its recovery sweep) leaves the live runs of another worker alone", async () => {
    const w = world();
    const a = w.worker("worker-a");
    const row = await a.manager.create("t1", say("tool:block"), ALICE);
    await eventually(async () => (await a.manager.get("t1", row.run_id))?.status === "running");
    const b = w.worker("worker-b");
    expect(await b.manager.recover()).toEqual([]);
    expect((await w.coordinator.get("t1", row.run_id))?.status).toBe("running");
    w.gates.block.resolve("ok");
    expect((await a.manager.join("t1", row.run_id)).status).toBe("success");
  });

  it("enqueue across two workers runs one at a time, in admission order", async () => {
    const w = world();
    const a = w.worker("worker-a");
    const b = w.worker("worker-b");
    const first = await a.manager.create("t1", say("tool:block", { multitaskStrategy: "enqueue" }), ALICE);
    const second = await b.manager.create("t1", say("hello", { multitaskStrategy: "enqueue" }), ALICE);
    await eventually(async () => (await a.manager.get("t1", first.run_id))?.status === "running");
    expect((await b.manager.get("t1", second.run_id))?.status).toBe("pending");
    w.gates.block.resolve("ok");
    expect((await b.manager.join("t1", second.run_id)).status).toBe("success");
    const firstRow = await a.manager.get("t1", first.run_id);
    const secondRow = await b.manager.get("t1", second.run_id);
    expect(firstRow!.status).toBe("success");
    expect(firstRow!.updated_at <= secondRow!.updated_at).toBe(true);
  });
});

describe("a worker relaying another worker's run does not reclaim memory under its readers", () => {
  it("no reclaim while a stream or a join of a remote run is open on it, one once the last of them ended", async () => {
    const clock = new ManualClock(1_767_225_600_000);
    const w = world({ clock });
    let reclaims = 0;
    const a = w.worker("worker-a");
    const b = w.worker("worker-b", { reclaimMemory: () => void reclaims++ });
    // B ran a run of its own, so it is due to reclaim the quiet time after it.
    const own = await b.manager.create("t2", say("hello"), ALICE);
    expect((await b.manager.join("t2", own.run_id)).status).toBe("success");
    const row = await a.manager.create("t1", say("tool:block", { streamMode: ["values"] }), ALICE);
    await eventually(async () => (await b.manager.get("t1", row.run_id))?.status === "running");
    const reader = b.manager.stream("t1", row.run_id)[Symbol.asyncIterator]();
    expect((await reader.next()).value?.event).toBe("metadata");
    const joined = b.manager.join("t1", row.run_id);
    await clock.advance(60_000);
    expect(reclaims).toBe(0);
    // The join alone holds it too once the stream is closed.
    await reader.return(undefined);
    await clock.advance(60_000);
    expect(reclaims).toBe(0);
    w.gates.block.resolve("ok");
    expect((await joined).status).toBe("success");
    await clock.advance(1999);
    expect(reclaims).toBe(0);
    await clock.advance(1);
    expect(reclaims).toBe(1);
  });
});

/** One worker over a coordinator with a finite lease, on a manual clock, its run blocked in a tool. */
async function leasedRun() {
  const clock = new ManualClock(1_767_225_600_000);
  const coordinator = new LeasedCoordinator({ storage: createMemoryKeyValue(), clock });
  const w = world({ coordinator, clock });
  const a = w.worker("worker-a");
  const row = await a.manager.create("t1", say("tool:block"), ALICE);
  await eventually(async () => (await a.manager.get("t1", row.run_id))?.status === "running");
  return { clock, coordinator, w, a, row };
}

describe("RunManager with leases", () => {
  it("a run whose lease renewal says it is no longer owned ends as error and writes no checkpoint after", async () => {
    const { clock, coordinator, w, a, row } = await leasedRun();
    // Joined while it runs here: once it lost its lease this worker no longer writes its row (the
    // sweep of a live worker does), so only the local join sees how it ended.
    const joined = a.manager.join("t1", row.run_id);
    let writesAtLoss = -1;
    coordinator.renewed = (real) => {
      writesAtLoss = w.writes();
      return new Map([...real.keys()].map((id) => [id, { owned: false, cancel: null }]));
    };
    await clock.advance(LEASE_MS / 3);
    const final = await joined;
    expect(final.status).toBe("error");
    expect(final.error?.message).toContain("lost its lease");
    expect(writesAtLoss).toBeGreaterThan(0);
    expect(w.writes()).toBe(writesAtLoss);
    expect(a.diagnostics.some((d) => d.includes("lost its lease"))).toBe(true);
  });

  it("once renewals fail past the local lease deadline, the run ends as error with the cause (not before)", async () => {
    const { clock, coordinator, w, a, row } = await leasedRun();
    const joined = a.manager.join("t1", row.run_id);
    coordinator.renewed = () => {
      throw new Error("connection refused by db.example:5432");
    };
    await clock.advance(LEASE_MS / 3);
    await clock.advance(LEASE_MS / 3);
    // Not past the deadline yet: still running, writes allowed.
    expect((await a.manager.get("t1", row.run_id))?.status).toBe("running");
    expect(a.fence.refusal("t1")).toBeUndefined();
    await clock.advance(LEASE_MS / 3 + 1);
    await clock.advance(LEASE_MS / 3);
    const final = await joined;
    expect(final.status).toBe("error");
    expect(final.error?.message).toBe(`Run ${row.run_id} lost its lease: connection refused by db.example:5432`);
  });

  it("a renewal carries a cancel whose signal was missed", async () => {
    const { clock, coordinator, w, a, row } = await leasedRun();
    // Stored, but no signal sent (as if it was lost on the way).
    expect((await coordinator.requestCancel("t1", row.run_id, "interrupt"))?.state).toBe("requested");
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect((await a.manager.get("t1", row.run_id))?.status).toBe("running");
    await clock.advance(LEASE_MS / 3);
    const final = await a.manager.join("t1", row.run_id);
    expect(final.status).toBe("interrupted");
  });
});

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createDenoKvKeyValue, createDenoKvRecords, openDenoKv, type DenoKvWatchable } from "../../adapters/deno/kv-key-value.ts";
import { DenoKvRunCoordinator } from "../../adapters/deno/kv-run-coordinator.ts";
import { DenoKvStreamBus } from "../../adapters/deno/kv-stream-bus.ts";
import { openDenoKvCoordination } from "../../adapters/deno/kv-coordination.ts";
import type { BusSignal } from "../../src/runtime/runs/stream-bus.ts";
import type { StreamFrame } from "../../src/runtime/runs/stream-bridge.ts";
import type { RunRecord } from "../../src/runtime/runs/types.ts";
import { describeVersionedContract } from "../storage/versioned-contract.ts";
import { contractRow, describeCoordinatorContract } from "../runtime/runs/coordinator-contract.ts";
import { describeStreamBusContract } from "../runtime/runs/stream-bus-contract.ts";

// Runs only under Deno with --unstable-kv (CHECKPOINT_STORE=deno-kv selects the deno-kv files, see
// vitest.checkpoint.config.ts): Deno KV coordination over a local file and over ":memory:". Two
// coordinator (or bus) instances on one Kv handle stand in for two isolates of one Deploy database;
// two processes over one local file would not see each other's watches.

const root = mkdtempSync(join(tmpdir(), "deerflow-deno-kv-coordination-"));
const handles: DenoKvWatchable[] = [];
afterAll(() => {
  for (const kv of handles) kv.close();
  rmSync(root, { recursive: true, force: true });
});
let files = 0;
const backends: Record<string, () => Promise<DenoKvWatchable>> = {
  file: async () => track((await openDenoKv(join(root, `${++files}.kv`))) as DenoKvWatchable),
  ":memory:": async () => track((await openDenoKv(":memory:")) as DenoKvWatchable),
};
function track(kv: DenoKvWatchable): DenoKvWatchable {
  handles.push(kv);
  return kv;
}

/** A pending row of `threadId` with the given run id (contractRow's created_at strictly increases). */
const row = (threadId: string, runId: string, fields: Partial<RunRecord> = {}): RunRecord => contractRow(threadId, { run_id: runId, ...fields });

async function collect(frames: AsyncIterable<StreamFrame>): Promise<StreamFrame[]> {
  const out: StreamFrame[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

const LOST = { name: "WorkerLost", message: "its worker stopped renewing its lease" };

for (const [backend, open] of Object.entries(backends)) {
  describe(`Deno KV run coordinator (${backend})`, () => {
    /** Two isolates over one database, on a clock the test moves. */
    async function pair(leaseMs = 1000) {
      const kv = await open();
      const clock = { t: Date.UTC(2026, 0, 1) };
      const now = () => clock.t;
      return { kv, clock, a: new DenoKvRunCoordinator({ kv, leaseMs, now }), b: new DenoKvRunCoordinator({ kv, leaseMs, now }) };
    }

    it("admits one of 20 concurrent reject creates over two isolates, naming the run in progress", async () => {
      const { a, b } = await pair();
      const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => (i % 2 ? b : a).admit(row("t1", `r${i}`), "reject", i % 2 ? "wb" : "wa")));
      const admitted = results.filter((r) => r.status === "fulfilled") as PromiseFulfilledResult<{ row: RunRecord }>[];
      expect(admitted).toHaveLength(1);
      const winner = admitted[0]!.value.row.run_id;
      for (const r of results) {
        if (r.status === "rejected") {
          expect((r.reason as { code: string }).code).toBe("run_conflict");
          expect(String((r.reason as Error).message)).toContain(winner);
        }
      }
      expect(await a.hasActiveRun("t1")).toBe(true);
    });

    it("keeps admission order across isolates under enqueue and claims one run at a time", async () => {
      const { a, b } = await pair();
      const order: string[] = [];
      for (let i = 0; i < 6; i++) {
        const c = i % 2 ? b : a;
        await c.admit(row("t2", `q${i}`), "enqueue", i % 2 ? "wb" : "wa");
        order.push(`q${i}`);
      }
      // Every run tries to claim at once: only the oldest wins, the others wait.
      const claims = await Promise.all(order.map((id, i) => (i % 2 ? b : a).claim("t2", id, i % 2 ? "wb" : "wa")));
      expect(claims).toEqual(["claimed", "waiting", "waiting", "waiting", "waiting", "waiting"]);
      const ran: string[] = [];
      for (const [i, id] of order.entries()) {
        const c = i % 2 ? b : a;
        const worker = i % 2 ? "wb" : "wa";
        expect(await c.claim("t2", id, worker)).toBe("claimed");
        ran.push(id);
        const current = (await c.get("t2", id))!;
        expect(await c.update({ ...current, status: "success" }, worker)).toBe(true);
        // Finished but not released (finalizing): the next still waits.
        if (i + 1 < order.length) expect(await (i % 2 ? a : b).claim("t2", order[i + 1]!, i % 2 ? "wa" : "wb")).toBe("waiting");
        expect(await c.release("t2", id, worker)).toBe(true);
      }
      expect(ran).toEqual(order);
      expect(await a.hasActiveRun("t2")).toBe(false);
    });

    it("lets exactly one of two isolates' concurrent claims of one thread win", async () => {
      const { a, b } = await pair();
      await a.admit(row("t3", "c1"), "enqueue", "wa");
      await b.admit(row("t3", "c2"), "enqueue", "wb");
      const results = await Promise.all([a.claim("t3", "c1", "wa"), b.claim("t3", "c2", "wb"), a.claim("t3", "c1", "wa")]);
      expect(results.filter((r) => r === "claimed").length).toBeGreaterThanOrEqual(1);
      expect(results[1]).toBe("waiting");
      expect((await a.list("t3", { status: "running" })).map((r) => r.run_id)).toEqual(["c1"]);
    });

    it("stores a cancel request with the action under interrupt and rollback, returns it on renew, and a pending cancelled run never claims", async () => {
      const { a, b } = await pair();
      await a.admit(row("t4", "old"), "reject", "wa");
      expect(await a.claim("t4", "old", "wa")).toBe("claimed");
      const admission = await b.admit(row("t4", "new"), "interrupt", "wb");
      expect(admission.cancelled).toEqual([{ runId: "old", ownerWorker: "wa", action: "interrupt" }]);
      expect((await a.renew("wa", ["old"])).get("old")).toEqual({ owned: true, cancel: "interrupt" });
      const second = await a.admit(row("t4", "newest"), "rollback", "wa");
      expect(second.cancelled.map((c) => [c.runId, c.action])).toEqual([
        ["old", "rollback"],
        ["new", "rollback"],
      ]);
      expect(await b.claim("t4", "new", "wb")).toBe("cancelled");
    });

    it("owner-checks update and release, and requestCancel on a finished run answers finished", async () => {
      const { a, b } = await pair();
      await a.admit(row("t5", "o1"), "reject", "wa");
      expect(await a.claim("t5", "o1", "wa")).toBe("claimed");
      const current = (await a.get("t5", "o1"))!;
      expect(current.status).toBe("running");
      expect(await b.update({ ...current, status: "error" }, "wb")).toBe(false);
      expect(await b.release("t5", "o1", "wb")).toBe(false);
      expect((await b.renew("wb", ["o1", "nope"])).get("o1")).toEqual({ owned: false, cancel: null });
      expect((await a.get("t5", "o1"))!.status).toBe("running");
      expect(await a.update({ ...current, status: "success" }, "wa")).toBe(true);
      expect(await b.requestCancel("t5", "o1", "interrupt")).toMatchObject({ state: "finished", row: { status: "success" } });
      await expect(a.delete("t5", "o1")).rejects.toMatchObject({ code: "run_active" });
      expect(await a.release("t5", "o1", "wa")).toBe(true);
      expect(await a.delete("t5", "o1")).toBe(true);
      expect(await a.get("t5", "o1")).toBeUndefined();
    });

    it("holds a thread for its delete: thread_busy both ways, then admits again once released", async () => {
      const { a, b } = await pair();
      await a.admit(row("t6", "h1"), "reject", "wa");
      await expect(b.holdThread("t6")).rejects.toMatchObject({ code: "thread_busy" });
      await a.release("t6", "h1", "wa");
      const release = await b.holdThread("t6");
      await expect(a.admit(row("t6", "h2"), "enqueue", "wa")).rejects.toMatchObject({ code: "thread_busy" });
      await expect(a.holdThread("t6")).rejects.toMatchObject({ code: "thread_busy" });
      await release();
      await a.admit(row("t6", "h3"), "reject", "wa");
      await a.deleteThread("t6");
      expect(await a.list("t6")).toEqual([]);
      expect(await a.hasActiveRun("t6")).toBe(false);
    });

    it("sweeps only leases that lapsed past the grace, marking them interrupted and freeing the thread", async () => {
      const { a, b, clock } = await pair(1000);
      await a.admit(row("t7", "dead"), "reject", "wa");
      expect(await a.claim("t7", "dead", "wa")).toBe("claimed");
      await b.admit(row("t8", "live"), "reject", "wb");
      clock.t += 900;
      expect((await b.renew("wb", ["live"])).get("live")!.owned).toBe(true);
      clock.t += 1200;
      // dead: lease ended 1100 ms ago; live: renewed 1200 ms ago, its lease ended 200 ms ago.
      const swept = await b.sweep(LOST, 500);
      expect(swept.map((s) => [s.row.run_id, s.previous, s.row.status, s.row.error])).toEqual([["dead", "running", "interrupted", LOST]]);
      expect(await a.hasActiveRun("t7")).toBe(false);
      expect(await a.hasActiveRun("t8")).toBe(true);
      // The swept owner can write nothing more.
      const dead = (await a.get("t7", "dead"))!;
      expect(await a.update({ ...dead, status: "success" }, "wa")).toBe(false);
      expect(await a.release("t7", "dead", "wa")).toBe(false);
      expect((await a.renew("wa", ["dead"])).get("dead")!.owned).toBe(false);
      await b.admit(row("t7", "next"), "reject", "wb");
    });

    it("refuses a run past the 1000 one thread may hold, with a sentence saying so", async () => {
      const { a } = await pair();
      for (let i = 0; i < 1000; i++) await a.admit(row("t10", `m${i}`), "enqueue", "wa");
      await expect(a.admit(row("t10", "m1000"), "enqueue", "wa")).rejects.toMatchObject({ code: "run_conflict", message: expect.stringContaining("1000 runs queued or running") });
    });

    it("lists newest first with status, limit and offset, and keeps a run body past one value", async () => {
      const { a } = await pair();
      const big = "x".repeat(200_000);
      for (let i = 0; i < 5; i++) await a.admit(row("t9", `l${i}`, { kwargs: { input: { text: i === 2 ? big : "small" } } }), "enqueue", "wa");
      expect((await a.list("t9")).map((r) => r.run_id)).toEqual(["l4", "l3", "l2", "l1", "l0"]);
      expect((await a.list("t9", { limit: 2, offset: 1 })).map((r) => r.run_id)).toEqual(["l3", "l2"]);
      await a.claim("t9", "l0", "wa");
      expect((await a.list("t9", { status: "running" })).map((r) => r.run_id)).toEqual(["l0"]);
      expect(((await a.get("t9", "l2"))!.kwargs as { input: { text: string } }).input.text).toBe(big);
    });
  });

  describe(`Deno KV stream bus (${backend})`, () => {
    it("replays frames after an id to a reader on another isolate, follows live ones and ends after end", async () => {
      const kv = await open();
      const a = new DenoKvStreamBus({ kv });
      const b = new DenoKvStreamBus({ kv });
      await a.open("run-1");
      expect(await b.has("run-1")).toBe(true);
      // Subscribed before the first frame: it waits for it.
      const early = collect(b.subscribe("run-1"));
      await a.publish("run-1", "values", { n: 0 });
      await a.publish("run-1", "values", { n: 1 });
      await a.publish("run-1", "values", { n: 2 });
      await a.end("run-1");
      await a.publish("run-1", "values", { n: "after end" });
      const all = await early;
      expect(all.map((f) => [f.event, f.data])).toEqual([
        ["values", { n: 0 }],
        ["values", { n: 1 }],
        ["values", { n: 2 }],
        ["end", null],
      ]);
      const resumed = await collect(b.subscribe("run-1", { lastEventId: all[0]!.id! }));
      expect(resumed.map((f) => f.id)).toEqual(all.slice(1).map((f) => f.id));
      await a.close();
      await b.close();
    });

    it("keeps the newest 256 frames and answers an older cursor with one gap frame", async () => {
      const kv = await open();
      const bus = new DenoKvStreamBus({ kv });
      await bus.open("run-2");
      for (let i = 0; i < 300; i++) await bus.publish("run-2", "custom", i);
      await bus.end("run-2");
      const frames = await collect(bus.subscribe("run-2"));
      expect(frames).toHaveLength(256);
      expect(frames[0]!.data).toBe(45);
      const gap = await collect(bus.subscribe("run-2", { lastEventId: "0-3" }));
      expect(gap).toEqual([
        {
          event: "gap",
          data: {
            code: "stream_replay_gap",
            run_id: "run-2",
            requested_event_id: "0-3",
            earliest_available_event_id: frames[0]!.id,
            latest_available_event_id: frames[255]!.id,
            recovery: "reload_durable_state",
          },
        },
      ]);
      // Just below the window: the reader missed nothing.
      expect((await collect(bus.subscribe("run-2", { lastEventId: "0-44" })))[0]!.data).toBe(45);
      bus.release("run-2", 0);
      await bus.close();
    });

    it("gives frames published from two isolates at once consecutive ids, and ends a waiting reader on abort or release", async () => {
      const kv = await open();
      const a = new DenoKvStreamBus({ kv });
      const b = new DenoKvStreamBus({ kv });
      await a.open("run-4");
      await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? b : a).publish("run-4", "custom", i)));
      const reader = new AbortController();
      const seen: StreamFrame[] = [];
      const aborted = (async () => {
        for await (const frame of b.subscribe("run-4", { signal: reader.signal })) {
          seen.push(frame);
          if (seen.length === 20) reader.abort();
        }
      })();
      await aborted;
      expect(seen.map((f) => Number(f.id!.split("-")[1]))).toEqual(Array.from({ length: 20 }, (_, i) => i));
      expect(new Set(seen.map((f) => f.data))).toEqual(new Set(Array.from({ length: 20 }, (_, i) => i)));
      // A reader waiting for live frames when the log goes ends instead of waiting for ever.
      const waiting = collect(b.subscribe("run-4", { lastEventId: seen[19]!.id! }));
      a.release("run-4", 0);
      expect(await waiting).toEqual([]);
      await a.close();
      await b.close();
    });

    it("drops a released log", async () => {
      const kv = await open();
      const bus = new DenoKvStreamBus({ kv });
      await bus.open("run-3");
      await bus.end("run-3");
      bus.release("run-3", 0);
      await expect.poll(() => bus.has("run-3")).toBe(false);
      expect(await collect(bus.subscribe("run-3"))).toEqual([]);
      await bus.close();
    });

    it("delivers every signal to every listener of every isolate, its own included, past a throwing listener", async () => {
      const kv = await open();
      const a = new DenoKvStreamBus({ kv });
      const b = new DenoKvStreamBus({ kv });
      const seenA: BusSignal[] = [];
      const seenB: BusSignal[] = [];
      a.listen((s) => seenA.push(s));
      b.listen(() => {
        throw new Error("a broken listener");
      });
      b.listen((s) => seenB.push(s));
      // Let both watches start before the first signal.
      await expect.poll(async () => {
        await a.signal({ kind: "wake", thread_id: "probe" });
        return seenB.length > 0;
      }).toBe(true);
      // Probes sent while the watches started may still arrive: only the signals below count.
      const real = (seen: BusSignal[]) => seen.filter((s) => s.thread_id !== "probe");
      const sent: BusSignal[] = [
        { kind: "cancel", run_id: "r1", thread_id: "t1", action: "interrupt" },
        { kind: "wake", thread_id: "t1" },
        { kind: "cancel", run_id: "r2", thread_id: "t1", action: "rollback" },
      ];
      await Promise.all(sent.map((s) => a.signal(s)));
      await expect.poll(() => real(seenB).length).toBe(3);
      expect(new Set(real(seenB).map((s) => JSON.stringify(s)))).toEqual(new Set(sent.map((s) => JSON.stringify(s))));
      expect(real(seenA)).toHaveLength(3);
      await a.close();
      await b.close();
    });
  });

  // A second coordinator or bus on the same handle is another isolate of the same database.
  describeCoordinatorContract(`Deno KV (${backend})`, async (options) => {
    const kv = await open();
    const make = () => new DenoKvRunCoordinator({ kv, ...(options?.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}) });
    const opened = [make()];
    return {
      coordinator: opened[0]!,
      another: async () => opened[opened.push(make()) - 1]!,
      close: async () => {
        for (const c of opened) await c.close();
      },
    };
  });

  describeStreamBusContract(`Deno KV (${backend})`, async () => {
    const kv = await open();
    const opened = [new DenoKvStreamBus({ kv })];
    return {
      bus: opened[0]!,
      another: async () => opened[opened.push(new DenoKvStreamBus({ kv })) - 1]!,
      close: async () => {
        for (const bus of opened) await bus.close();
      },
    };
  });

  describeVersionedContract(
    `Deno KV (${backend})`,
    async () => createDenoKvRecords({ kv: await sharedKv(backend) }).versioned,
    { peer: async () => createDenoKvRecords({ kv: await sharedKv(backend) }).versioned },
  );
}

const shared = new Map<string, Promise<DenoKvWatchable>>();
function sharedKv(backend: string): Promise<DenoKvWatchable> {
  let kv = shared.get(backend);
  if (!kv) shared.set(backend, (kv = backends[backend]!()));
  return kv;
}

describe("Deno KV versioned store over the KeyValue's keys", () => {
  it("reads what the KeyValue wrote and the KeyValue reads a compare-and-set, chunked values included", async () => {
    const kv = await sharedKv(":memory:");
    const storage = createDenoKvKeyValue({ kv });
    const { versioned } = createDenoKvRecords({ kv });
    await storage.setItem("threads:t1", { title: "a" });
    const first = await versioned.read("threads:t1");
    expect(JSON.parse(first.value!)).toEqual({ title: "a" });
    const big = JSON.stringify({ title: "y".repeat(300_000) });
    expect(await versioned.write("threads:t1", big, first.version)).toBe(true);
    expect(await storage.getItem("threads:t1")).toEqual(JSON.parse(big));
    expect(await versioned.write("threads:t1", "{}", first.version)).toBe(false);
    const second = await versioned.read("threads:t1");
    expect(second.value).toBe(big);
    expect(await versioned.write("threads:t1", null, second.version)).toBe(true);
    expect(await storage.hasItem("threads:t1")).toBe(false);
  });

  it("opens the whole set on one handle for a gateway", async () => {
    const set = await openDenoKvCoordination({ path: ":memory:", workerId: "w1", leaseMs: 5000 });
    expect(set.coordination.workerId).toBe("w1");
    expect(set.coordination.coordinator.leaseMs).toBe(5000);
    await set.storage.setItem("x", "1");
    expect((await set.versioned.read("x")).value).toBe("1");
    await set.close();
  });
});

import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresRunCoordinator } from "../../adapters/shared/postgres/run-coordinator.ts";
import { RunOperationError, type RunRecord } from "../../src/runtime/runs/types.ts";
import { startRunsDatabase, type RunsDatabase } from "./runs-database.ts";

let db: RunsDatabase;
let poolA: pg.Pool;
let poolB: pg.Pool;
let a: PostgresRunCoordinator;
let b: PostgresRunCoordinator;

beforeAll(async () => {
  db = await startRunsDatabase();
  poolA = db.pool();
  poolB = db.pool();
  a = new PostgresRunCoordinator({ pool: poolA });
  b = new PostgresRunCoordinator({ pool: poolB });
}, 60_000);

afterAll(async () => {
  await db?.close();
});

let stamp = Date.parse("2026-01-01T00:00:00.000Z");
let counter = 0;
function runRow(threadId: string, fields: Partial<RunRecord> = {}): RunRecord {
  const at = new Date(stamp++).toISOString();
  return {
    run_id: `run-${++counter}-${Math.random().toString(36).slice(2, 8)}`,
    thread_id: threadId,
    assistant_id: "lead_agent",
    status: "pending",
    metadata: {},
    multitask_strategy: "enqueue",
    created_at: at,
    updated_at: at,
    owner_id: "user-1",
    error: null,
    kwargs: { input: null },
    ...fields,
  };
}

const thread = () => `thread-${++counter}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "ok";
  } catch (error) {
    return error instanceof RunOperationError ? error.code : `unexpected: ${String(error)}`;
  }
}

describe("the runs schema", () => {
  it("refuses a second claimed-and-holding run on a thread with 23505, even from two concurrent raw UPDATEs", async () => {
    const t = thread();
    const first = runRow(t);
    const second = runRow(t);
    await a.admit(first, "enqueue", "w1");
    await b.admit(second, "enqueue", "w2");
    const c1 = await poolA.connect();
    const c2 = await poolB.connect();
    try {
      await c1.query("BEGIN");
      await c2.query("BEGIN");
      await c1.query(`UPDATE deerflow_runs SET claimed = true WHERE run_id = $1`, [first.run_id]);
      // The second waits on the first's uncommitted index entry, then fails once it commits.
      const racing = c2.query(`UPDATE deerflow_runs SET claimed = true WHERE run_id = $1`, [second.run_id]).then(
        () => "updated",
        (error: { code?: string }) => error.code,
      );
      await c1.query("COMMIT");
      expect(await racing).toBe("23505");
      await c2.query("ROLLBACK");
    } finally {
      c1.release();
      c2.release();
    }
  });
});

describe("PostgresRunCoordinator", () => {
  it("admits, claims, updates and releases owner-checked, and lists newest first", async () => {
    const t = thread();
    const row = runRow(t, { multitask_strategy: "reject" });
    const admission = await a.admit(row, "reject", "w1");
    expect(admission.row).toEqual(row);
    expect(admission.cancelled).toEqual([]);
    expect(await b.get(t, row.run_id)).toEqual(row);
    expect(await b.hasActiveRun(t)).toBe(true);
    expect(await b.claim(t, row.run_id, "w2")).toBe("lost");
    expect(await a.claim(t, row.run_id, "w1")).toBe("claimed");
    expect((await b.get(t, row.run_id))?.status).toBe("running");
    const done = { ...row, status: "success" as const, updated_at: new Date(stamp++).toISOString() };
    expect(await b.update(done, "w2")).toBe(false);
    expect((await a.get(t, row.run_id))?.status).toBe("running");
    expect(await a.update(done, "w1")).toBe(true);
    expect(await a.get(t, row.run_id)).toEqual(done);
    expect(await b.release(t, row.run_id, "w2")).toBe(false);
    expect(await b.hasActiveRun(t)).toBe(true);
    expect(await a.release(t, row.run_id, "w1")).toBe(true);
    expect(await b.hasActiveRun(t)).toBe(false);
    const later = runRow(t);
    await b.admit(later, "reject", "w2");
    expect((await a.list(t)).map((r) => r.run_id)).toEqual([later.run_id, row.run_id]);
    expect((await a.list(t, { status: "success" })).map((r) => r.run_id)).toEqual([row.run_id]);
    expect((await a.list(t, { offset: 1, limit: 5 })).map((r) => r.run_id)).toEqual([row.run_id]);
  });

  it("refuses reject while a run holds the thread, with today's code and message", async () => {
    const t = thread();
    const first = runRow(t);
    await a.admit(first, "reject", "w1");
    const refused = b.admit(runRow(t), "reject", "w2");
    await expect(refused).rejects.toThrow(RunOperationError);
    await expect(refused).rejects.toThrow(`Thread ${t} already has a run in progress (${first.run_id})`);
    expect(await codeOf(b.admit(runRow(t), "reject", "w2"))).toBe("run_conflict");
  });

  it("admits exactly one of 20 concurrent reject creates on one thread across two workers", async () => {
    const t = thread();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => codeOf((i % 2 ? a : b).admit(runRow(t, { multitask_strategy: "reject" }), "reject", `w${i % 2}`))),
    );
    expect(results.filter((r) => r === "ok")).toHaveLength(1);
    expect(results.filter((r) => r === "run_conflict")).toHaveLength(19);
    expect(await a.list(t, { limit: 100 })).toHaveLength(1);
  });

  it("stores a cancel request on every holding run under interrupt and rollback; the claim of a cancelled run says so", async () => {
    const t = thread();
    const first = runRow(t);
    await a.admit(first, "enqueue", "w1");
    expect(await a.claim(t, first.run_id, "w1")).toBe("claimed");
    const second = runRow(t);
    const admitted = await b.admit(second, "interrupt", "w2");
    expect(admitted.cancelled).toEqual([{ runId: first.run_id, ownerWorker: "w1", action: "interrupt" }]);
    const third = runRow(t);
    const rolled = await a.admit(third, "rollback", "w1");
    // The first request stands: the run already stopping keeps "interrupt".
    expect(rolled.cancelled).toEqual([
      { runId: first.run_id, ownerWorker: "w1", action: "interrupt" },
      { runId: second.run_id, ownerWorker: "w2", action: "rollback" },
    ]);
    const renewed = await a.renew("w1", [first.run_id, second.run_id]);
    expect(renewed.get(first.run_id)).toEqual({ owned: true, cancel: "interrupt" });
    expect(renewed.get(second.run_id)).toEqual({ owned: false, cancel: null });
    expect(await b.claim(t, second.run_id, "w2")).toBe("cancelled");
    expect(await a.claim(t, third.run_id, "w1")).toBe("waiting");
  });

  it("keeps the enqueue order across workers: a later run waits for every earlier one to release", async () => {
    const t = thread();
    const rows = [runRow(t), runRow(t), runRow(t)];
    await a.admit(rows[0]!, "enqueue", "w1");
    await b.admit(rows[1]!, "enqueue", "w2");
    await a.admit(rows[2]!, "enqueue", "w1");
    expect(await a.claim(t, rows[2]!.run_id, "w1")).toBe("waiting");
    expect(await b.claim(t, rows[1]!.run_id, "w2")).toBe("waiting");
    expect(await a.claim(t, rows[0]!.run_id, "w1")).toBe("claimed");
    expect(await a.claim(t, rows[0]!.run_id, "w1")).toBe("claimed");
    await a.release(t, rows[0]!.run_id, "w1");
    expect(await a.claim(t, rows[2]!.run_id, "w1")).toBe("waiting");
    expect(await b.claim(t, rows[1]!.run_id, "w2")).toBe("claimed");
  });

  it("answers a cancel request: requested with the owner while pending or running, finished after, undefined for an unknown run", async () => {
    const t = thread();
    const row = runRow(t);
    await a.admit(row, "enqueue", "w1");
    const requested = await b.requestCancel(t, row.run_id, "rollback");
    expect(requested).toEqual({ state: "requested", row, ownerWorker: "w1" });
    expect((await a.renew("w1", [row.run_id])).get(row.run_id)).toEqual({ owned: true, cancel: "rollback" });
    expect(await a.claim(t, row.run_id, "w1")).toBe("cancelled");
    const finished = { ...row, status: "interrupted" as const };
    await a.update(finished, "w1");
    await a.release(t, row.run_id, "w1");
    expect(await b.requestCancel(t, row.run_id, "interrupt")).toEqual({ state: "finished", row: finished });
    expect(await b.requestCancel(t, "no-such-run", "interrupt")).toBeUndefined();
  });

  it("holds a thread for its delete: busy while a run holds it or another hold exists; no admission until released", async () => {
    const t = thread();
    const row = runRow(t);
    await a.admit(row, "enqueue", "w1");
    expect(await codeOf(b.holdThread(t))).toBe("thread_busy");
    await a.release(t, row.run_id, "w1");
    const release = await b.holdThread(t);
    expect(await codeOf(a.holdThread(t))).toBe("thread_busy");
    const refused = a.admit(runRow(t), "enqueue", "w1");
    await expect(refused).rejects.toThrow(`Thread ${t} is being deleted; create a new thread for this run.`);
    await release();
    expect(await codeOf(a.admit(runRow(t), "enqueue", "w1"))).toBe("ok");
  });

  it("deletes a finished run, refuses one that holds its thread (run_active), and removes a whole thread", async () => {
    const t = thread();
    const done = runRow(t);
    await a.admit(done, "enqueue", "w1");
    await a.release(t, done.run_id, "w1");
    const live = runRow(t);
    await a.admit(live, "enqueue", "w1");
    expect(await codeOf(b.delete(t, live.run_id))).toBe("run_active");
    expect(await b.delete(t, done.run_id)).toBe(true);
    expect(await b.delete(t, done.run_id)).toBe(false);
    await b.deleteThread(t);
    expect(await a.get(t, live.run_id)).toBeUndefined();
  });

  it("sweeps only runs whose lease ran out past the grace, and a late owner writes nothing after", async () => {
    const short = new PostgresRunCoordinator({ pool: poolA, leaseMs: 150 });
    const t = thread();
    const dead = runRow(t);
    await short.admit(dead, "enqueue", "dead-worker");
    expect(await short.claim(t, dead.run_id, "dead-worker")).toBe("claimed");
    const other = thread();
    const alive = runRow(other);
    await b.admit(alive, "enqueue", "w2");
    const error = { name: "WorkerLost", message: "The worker running this run stopped renewing its lease." };
    expect(await b.sweep(error, 50)).toEqual([]);
    await sleep(400);
    const swept = await b.sweep(error, 50);
    expect(swept.map((s) => [s.row.run_id, s.previous, s.row.status, s.row.error])).toEqual([[dead.run_id, "running", "interrupted", error]]);
    expect(await b.hasActiveRun(t)).toBe(false);
    expect(await b.hasActiveRun(other)).toBe(true);
    expect(await short.update({ ...dead, status: "success" }, "dead-worker")).toBe(false);
    expect(await short.release(t, dead.run_id, "dead-worker")).toBe(false);
    expect((await short.renew("dead-worker", [dead.run_id])).get(dead.run_id)).toEqual({ owned: false, cancel: null });
    expect((await a.get(t, dead.run_id))?.status).toBe("interrupted");
    expect(await b.sweep(error, 50)).toEqual([]);
  });

  it("never lets a renewal and a sweep both win: each run is either renewed or swept, and the row agrees", async () => {
    const short = new PostgresRunCoordinator({ pool: poolA, leaseMs: 100 });
    const error = { name: "WorkerLost", message: "lease ran out" };
    const runs = Array.from({ length: 40 }, () => runRow(thread()));
    for (const row of runs) await short.admit(row, "enqueue", "racer");
    await sleep(150);
    const ids = runs.map((r) => r.run_id);
    // Renewals one run at a time on one pool, sweeps on the other, all at once.
    const [renewals, sweeps] = await Promise.all([
      Promise.all(ids.map((id) => short.renew("racer", [id]).then((m) => [id, m.get(id)!.owned] as const))),
      Promise.all([b.sweep(error, 0), b.sweep(error, 0), b.sweep(error, 0)]),
    ]);
    const swept = new Set(sweeps.flat().map((s) => s.row.run_id));
    expect(sweeps.flat()).toHaveLength(swept.size);
    for (const [id, owned] of renewals) {
      expect(owned).toBe(!swept.has(id));
      const row = await a.get(runs.find((r) => r.run_id === id)!.thread_id, id);
      expect(row?.status).toBe(owned ? "pending" : "interrupted");
    }
  });

  it("runs 50 runs over 10 threads with 8 concurrent claimers one at a time per thread, in admission order", async () => {
    const workers = Array.from({ length: 8 }, (_, i) => ({ id: `claimer-${i}`, coordinator: i % 2 ? a : b }));
    const threads = Array.from({ length: 10 }, () => thread());
    const admitted: Array<{ row: RunRecord; worker: (typeof workers)[number] }> = [];
    await Promise.all(
      threads.map(async (t, ti) => {
        for (let n = 0; n < 5; n++) {
          const worker = workers[(ti + n) % workers.length]!;
          const row = runRow(t);
          await worker.coordinator.admit(row, "enqueue", worker.id);
          admitted.push({ row, worker });
        }
      }),
    );
    const events: Array<{ thread: string; run: string; kind: "start" | "end" }> = [];
    await Promise.all(
      workers.map(async (worker) => {
        const mine = admitted.filter((x) => x.worker === worker).map((x) => x.row);
        while (mine.length > 0) {
          for (const row of [...mine]) {
            const result = await worker.coordinator.claim(row.thread_id, row.run_id, worker.id);
            if (result === "waiting") continue;
            expect(result).toBe("claimed");
            events.push({ thread: row.thread_id, run: row.run_id, kind: "start" });
            await sleep(2);
            events.push({ thread: row.thread_id, run: row.run_id, kind: "end" });
            await worker.coordinator.update({ ...row, status: "success" }, worker.id);
            expect(await worker.coordinator.release(row.thread_id, row.run_id, worker.id)).toBe(true);
            mine.splice(mine.indexOf(row), 1);
          }
          await sleep(1);
        }
      }),
    );
    for (const t of threads) {
      const mine = events.filter((e) => e.thread === t);
      // Strictly start, end, start, end ... : no two runs of the thread overlapped.
      expect(mine.map((e) => e.kind)).toEqual(Array.from({ length: 10 }, (_, i) => (i % 2 ? "end" : "start")));
      const order = mine.filter((e) => e.kind === "start").map((e) => e.run);
      expect(order).toEqual(admitted.filter((x) => x.row.thread_id === t).map((x) => x.row.run_id));
    }
  });
});

// The behaviour every RunCoordinator promises (src/runtime/runs/coordinator.ts), as one suite each
// implementation runs: memory (test/runtime/runs/memory-coordinator.test.ts), PostgreSQL, Deno KV.
// Only vitest and the port types: Deno and Bun run it too.
import { afterEach, describe, expect, it } from "vitest";
import type { RunCoordinator } from "../../../src/runtime/runs/coordinator.ts";
import type { MultitaskStrategy, RunErrorInfo, RunRecord, RunStatus } from "../../../src/runtime/runs/types.ts";

export interface CoordinatorHarness {
  readonly coordinator: RunCoordinator;
  /**
   * A coordinator of another process over the same backend (what a second worker, or a process
   * started after a crash, would open). The harness closes it in `close`.
   */
  another(): Promise<RunCoordinator>;
  close(): Promise<void>;
}

export interface CoordinatorFactoryOptions {
  /** A short lease for the sweep tests (milliseconds); implementations without leases (memory) ignore it. */
  readonly leaseMs?: number;
}

export type CoordinatorFactory = (options?: CoordinatorFactoryOptions) => Promise<CoordinatorHarness>;

/** The lease the sweep tests ask for: long enough for a few round trips to a database, short enough to wait out. */
export const CONTRACT_LEASE_MS = 400;

const SWEPT: RunErrorInfo = { name: "WorkerLost", message: "The worker running this run stopped renewing its lease." };

let sequence = 0;

function uid(prefix: string): string {
  return `${prefix}-${globalThis.crypto.randomUUID()}`;
}

/** A fresh pending row; created_at strictly increases over the suite. */
export function contractRow(threadId: string, fields: Partial<RunRecord> = {}): RunRecord {
  sequence += 1;
  const at = new Date(Date.UTC(2026, 0, 1) + sequence * 1000).toISOString();
  return {
    run_id: uid("run"),
    thread_id: threadId,
    assistant_id: "lead_agent",
    status: "pending",
    metadata: {},
    multitask_strategy: "reject",
    created_at: at,
    updated_at: at,
    owner_id: "user-1",
    error: null,
    kwargs: { input: { n: sequence } },
    ...fields,
  };
}

async function refusal(promise: Promise<unknown>): Promise<{ code?: unknown; message: string }> {
  try {
    await promise;
  } catch (error) {
    return { code: (error as { code?: unknown }).code, message: error instanceof Error ? error.message : String(error) };
  }
  throw new Error("expected a refusal, but the call succeeded");
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function describeCoordinatorContract(name: string, make: CoordinatorFactory): void {
  describe(`RunCoordinator contract: ${name}`, () => {
    const open: CoordinatorHarness[] = [];
    async function harness(options?: CoordinatorFactoryOptions): Promise<CoordinatorHarness> {
      const made = await make(options);
      open.push(made);
      return made;
    }
    afterEach(async () => {
      while (open.length > 0) await open.pop()!.close();
    });

    async function admitAs(c: RunCoordinator, threadId: string, strategy: MultitaskStrategy, workerId: string): Promise<RunRecord> {
      const row = contractRow(threadId, { multitask_strategy: strategy });
      const admission = await c.admit(row, strategy, workerId);
      return admission.row;
    }

    async function finish(c: RunCoordinator, row: RunRecord, workerId: string, status: RunStatus = "success"): Promise<void> {
      expect(await c.update({ ...row, status, updated_at: new Date().toISOString() }, workerId)).toBe(true);
      expect(await c.release(row.thread_id, row.run_id, workerId)).toBe(true);
    }

    it("admits a pending row, stores it as given and holds the thread until release", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      expect(await c.hasActiveRun(thread)).toBe(false);
      const row = contractRow(thread);
      const admission = await c.admit(row, "reject", "w1");
      expect(admission.row).toEqual(row);
      expect(admission.cancelled).toEqual([]);
      expect(await c.get(thread, row.run_id)).toEqual(row);
      expect(await c.hasActiveRun(thread)).toBe(true);
      expect(await c.claim(thread, row.run_id, "w1")).toBe("claimed");
      // Finalizing (a terminal status written, not released yet) still holds the thread.
      expect(await c.update({ ...row, status: "success" }, "w1")).toBe(true);
      expect(await c.hasActiveRun(thread)).toBe(true);
      expect(await c.release(thread, row.run_id, "w1")).toBe(true);
      expect(await c.hasActiveRun(thread)).toBe(false);
      expect((await c.get(thread, row.run_id))?.status).toBe("success");
    });

    it("reject: refuses a second run with run_conflict naming the run in flight, from any worker, until it is released", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const first = await admitAs(c, thread, "reject", "w1");
      for (const worker of ["w1", "w2"]) {
        const refused = await refusal(c.admit(contractRow(thread), "reject", worker));
        expect(refused.code).toBe("run_conflict");
        expect(refused.message).toContain(first.run_id);
      }
      expect(await c.list(thread)).toHaveLength(1);
      expect(await c.claim(thread, first.run_id, "w1")).toBe("claimed");
      // A finished run that has not released its thread still counts.
      expect(await c.update({ ...first, status: "success" }, "w1")).toBe(true);
      expect((await refusal(c.admit(contractRow(thread), "reject", "w2"))).code).toBe("run_conflict");
      expect(await c.release(thread, first.run_id, "w1")).toBe(true);
      const second = await admitAs(c, thread, "reject", "w2");
      expect(await c.claim(thread, second.run_id, "w2")).toBe("claimed");
    });

    it("reject: of 20 concurrent admissions on one free thread over two workers exactly one is admitted", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => c.admit(contractRow(thread), "reject", i % 2 === 0 ? "w1" : "w2")),
      );
      expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
      for (const o of outcomes) if (o.status === "rejected") expect((o.reason as { code?: unknown }).code).toBe("run_conflict");
      expect(await c.list(thread, { limit: 50 })).toHaveLength(1);
    });

    for (const action of ["interrupt", "rollback"] as const) {
      it(`${action}: stores a cancel request with the action on every run holding the thread and returns them`, async () => {
        const { coordinator: c } = await harness();
        const thread = uid("t");
        const running = await admitAs(c, thread, "reject", "w1");
        expect(await c.claim(thread, running.run_id, "w1")).toBe("claimed");
        const queued = await admitAs(c, thread, "enqueue", "w2");
        const row = contractRow(thread, { multitask_strategy: action });
        const admission = await c.admit(row, action, "w2");
        expect(admission.row).toEqual(row);
        expect([...admission.cancelled].sort((a, b) => (a.runId < b.runId ? -1 : 1))).toEqual(
          [
            { runId: running.run_id, ownerWorker: "w1", action },
            { runId: queued.run_id, ownerWorker: "w2", action },
          ].sort((a, b) => (a.runId < b.runId ? -1 : 1)),
        );
        // The owner that missed the signal finds the request at its next renewal.
        expect((await c.renew("w1", [running.run_id])).get(running.run_id)).toEqual({ owned: true, cancel: action });
        // A queued run cancelled before it started never runs, even while the thread is still held.
        expect(await c.claim(thread, queued.run_id, "w2")).toBe("cancelled");
        // The new run waits for the cancelled ones to release the thread.
        expect(await c.claim(thread, row.run_id, "w2")).toBe("waiting");
        await finish(c, queued, "w2", "interrupted");
        expect(await c.claim(thread, row.run_id, "w2")).toBe("waiting");
        await finish(c, running, "w1", action === "rollback" ? "error" : "interrupted");
        expect(await c.claim(thread, row.run_id, "w2")).toBe("claimed");
      });
    }

    it("enqueue: runs are claimed one at a time in admission order across two workers", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const rows: Array<{ row: RunRecord; worker: string }> = [];
      for (let i = 0; i < 4; i++) {
        const worker = i % 2 === 0 ? "w1" : "w2";
        rows.push({ row: await admitAs(c, thread, "enqueue", worker), worker });
      }
      const claimedOrder: string[] = [];
      for (let turn = 0; turn < rows.length; turn++) {
        // Every run still queued asks, latest first: only the earliest unreleased one may claim.
        for (const { row, worker } of [...rows.slice(turn)].reverse()) {
          const result = await c.claim(thread, row.run_id, worker);
          if (row === rows[turn]!.row) {
            expect(result).toBe("claimed");
            claimedOrder.push(row.run_id);
          } else {
            expect(result).toBe("waiting");
          }
        }
        await finish(c, rows[turn]!.row, rows[turn]!.worker);
      }
      expect(claimedOrder).toEqual(rows.map((r) => r.row.run_id));
    });

    it("claim: at most one run of a thread is claimed; a concurrent claim of the same run by another worker is lost", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const first = await admitAs(c, thread, "enqueue", "w1");
      const second = await admitAs(c, thread, "enqueue", "w2");
      const results = await Promise.all([
        c.claim(thread, second.run_id, "w2"),
        c.claim(thread, first.run_id, "w1"),
        c.claim(thread, first.run_id, "w2"),
      ]);
      expect(results).toEqual(["waiting", "claimed", "lost"]);
      expect((await c.get(thread, first.run_id))?.status).toBe("running");
      expect((await c.get(thread, second.run_id))?.status).toBe("pending");
    });

    it("claim: a run whose cancel came before it started is cancelled; its owner still finishes and releases it", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const row = await admitAs(c, thread, "reject", "w1");
      const request = await c.requestCancel(thread, row.run_id, "interrupt");
      expect(request?.state).toBe("requested");
      if (request?.state !== "requested") throw new Error("unreachable");
      expect(request.ownerWorker).toBe("w1");
      expect(request.row.run_id).toBe(row.run_id);
      expect(await c.claim(thread, row.run_id, "w1")).toBe("cancelled");
      await finish(c, row, "w1", "interrupted");
      expect(await c.hasActiveRun(thread)).toBe(false);
      expect((await c.get(thread, row.run_id))?.status).toBe("interrupted");
    });

    it("update and release are owner-checked: another worker writes nothing", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const row = await admitAs(c, thread, "reject", "w1");
      expect(await c.claim(thread, row.run_id, "w1")).toBe("claimed");
      const error = { name: "Boom", message: "it broke" };
      expect(await c.update({ ...row, status: "error", error }, "w2")).toBe(false);
      expect((await c.get(thread, row.run_id))?.status).toBe("running");
      expect(await c.release(thread, row.run_id, "w2")).toBe(false);
      expect(await c.hasActiveRun(thread)).toBe(true);
      const updated = { ...row, status: "error" as const, error, updated_at: new Date(Date.UTC(2026, 5, 1)).toISOString() };
      expect(await c.update(updated, "w1")).toBe(true);
      const stored = await c.get(thread, row.run_id);
      expect(stored?.status).toBe("error");
      expect(stored?.error).toEqual(error);
      expect(stored?.updated_at).toBe(updated.updated_at);
      expect(await c.release(thread, row.run_id, "w1")).toBe(true);
      expect(await c.hasActiveRun(thread)).toBe(false);
    });

    it("renew: extends the caller's own runs, returns the pending cancel action, and is not owned for another worker", async () => {
      const { coordinator: c } = await harness();
      const a = await admitAs(c, uid("t"), "reject", "w1");
      const b = await admitAs(c, uid("t"), "reject", "w1");
      expect(await c.claim(a.thread_id, a.run_id, "w1")).toBe("claimed");
      expect(await c.claim(b.thread_id, b.run_id, "w1")).toBe("claimed");
      const first = await c.renew("w1", [a.run_id, b.run_id]);
      expect(first.get(a.run_id)).toEqual({ owned: true, cancel: null });
      expect(first.get(b.run_id)).toEqual({ owned: true, cancel: null });
      expect((await c.requestCancel(b.thread_id, b.run_id, "rollback"))?.state).toBe("requested");
      const second = await c.renew("w1", [a.run_id, b.run_id]);
      expect(second.get(a.run_id)).toEqual({ owned: true, cancel: null });
      expect(second.get(b.run_id)).toEqual({ owned: true, cancel: "rollback" });
      const stranger = await c.renew("w2", [a.run_id]);
      expect(stranger.get(a.run_id)?.owned).toBe(false);
      const unknown = uid("run");
      expect((await c.renew("w1", [unknown])).get(unknown)?.owned).toBe(false);
    });

    it("requestCancel: finished for a run with a terminal status, undefined for an unknown run", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const row = await admitAs(c, thread, "reject", "w1");
      expect(await c.claim(thread, row.run_id, "w1")).toBe("claimed");
      expect(await c.update({ ...row, status: "success" }, "w1")).toBe(true);
      const finalizing = await c.requestCancel(thread, row.run_id, "interrupt");
      expect(finalizing?.state).toBe("finished");
      expect(await c.release(thread, row.run_id, "w1")).toBe(true);
      const finished = await c.requestCancel(thread, row.run_id, "rollback");
      expect(finished?.state).toBe("finished");
      expect(finished?.row.status).toBe("success");
      expect(await c.requestCancel(thread, uid("run"), "interrupt")).toBeUndefined();
    });

    it("holdThread: thread_busy while a run holds the thread or another hold exists; no admission until released", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const row = await admitAs(c, thread, "reject", "w1");
      expect((await refusal(c.holdThread(thread))).code).toBe("thread_busy");
      expect(await c.claim(thread, row.run_id, "w1")).toBe("claimed");
      await finish(c, row, "w1");
      const release = await c.holdThread(thread);
      expect((await refusal(c.holdThread(thread))).code).toBe("thread_busy");
      for (const strategy of ["reject", "enqueue", "interrupt", "rollback"] as const) {
        expect((await refusal(c.admit(contractRow(thread), strategy, "w2"))).code).toBe("thread_busy");
      }
      await release();
      await admitAs(c, thread, "reject", "w2");
    });

    it("list: newest first by created_at, with limit (default 10), offset and status", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const rows: RunRecord[] = [];
      for (let i = 0; i < 12; i++) {
        const row = await admitAs(c, thread, "enqueue", "w1");
        rows.push(row);
      }
      for (const row of rows.slice(0, 12)) {
        const result = await c.claim(thread, row.run_id, "w1");
        expect(result).toBe("claimed");
        await finish(c, row, "w1", rows.indexOf(row) % 3 === 0 ? "error" : "success");
      }
      const newest = [...rows].reverse().map((r) => r.run_id);
      expect((await c.list(thread)).map((r) => r.run_id)).toEqual(newest.slice(0, 10));
      expect((await c.list(thread, { limit: 3, offset: 2 })).map((r) => r.run_id)).toEqual(newest.slice(2, 5));
      const errors = [...rows].reverse().filter((_, i) => (11 - i) % 3 === 0).map((r) => r.run_id);
      expect((await c.list(thread, { status: "error", limit: 50 })).map((r) => r.run_id)).toEqual(errors);
      expect(await c.list(uid("t"))).toEqual([]);
      expect(await c.get(thread, uid("run"))).toBeUndefined();
      // A run is found only under its own thread.
      expect(await c.get(uid("t"), rows[0]!.run_id)).toBeUndefined();
    });

    it("delete is refused with run_active while the run holds its thread; deleteThread removes every row", async () => {
      const { coordinator: c } = await harness();
      const thread = uid("t");
      const row = await admitAs(c, thread, "reject", "w1");
      expect((await refusal(c.delete(thread, row.run_id))).code).toBe("run_active");
      expect(await c.claim(thread, row.run_id, "w1")).toBe("claimed");
      expect(await c.update({ ...row, status: "success" }, "w1")).toBe(true);
      expect((await refusal(c.delete(thread, row.run_id))).code).toBe("run_active");
      expect(await c.release(thread, row.run_id, "w1")).toBe(true);
      expect(await c.delete(thread, row.run_id)).toBe(true);
      expect(await c.delete(thread, row.run_id)).toBe(false);
      expect(await c.get(thread, row.run_id)).toBeUndefined();
      const other = uid("t");
      const kept = await admitAs(c, other, "reject", "w1");
      for (let i = 0; i < 3; i++) {
        const r = await admitAs(c, thread, "enqueue", "w1");
        expect(await c.claim(thread, r.run_id, "w1")).toBe("claimed");
        await finish(c, r, "w1");
      }
      await c.deleteThread(thread);
      expect(await c.list(thread)).toEqual([]);
      expect(await c.get(other, kept.run_id)).toEqual(kept);
      await admitAs(c, thread, "reject", "w2");
    });

    it("sweep never touches a live run, from this coordinator or from another process over the same backend", async () => {
      const made = await harness({ leaseMs: CONTRACT_LEASE_MS });
      const c = made.coordinator;
      const running = await admitAs(c, uid("t"), "reject", "w1");
      expect(await c.claim(running.thread_id, running.run_id, "w1")).toBe("claimed");
      const queued = await admitAs(c, running.thread_id, "enqueue", "w1");
      expect(await c.sweep(SWEPT, 0)).toEqual([]);
      if (Number.isFinite(c.leaseMs)) {
        // Another worker starting (its sweep at start) leaves a live lease alone.
        const other = await made.another();
        expect(await other.sweep(SWEPT, 0)).toEqual([]);
      }
      expect((await c.get(running.thread_id, running.run_id))?.status).toBe("running");
      expect((await c.get(queued.thread_id, queued.run_id))?.status).toBe("pending");
      expect((await c.renew("w1", [running.run_id])).get(running.run_id)?.owned).toBe(true);
    });

    it("sweep marks the runs of an owner whose lease lapsed past the grace interrupted, with the error, and frees the thread", async () => {
      const made = await harness({ leaseMs: CONTRACT_LEASE_MS });
      const c = made.coordinator;
      const thread = uid("t");
      const running = await admitAs(c, thread, "reject", "dead");
      expect(await c.claim(thread, running.run_id, "dead")).toBe("claimed");
      const queued = await admitAs(c, thread, "enqueue", "dead");
      const live = await admitAs(c, uid("t"), "reject", "alive");
      expect(await c.claim(live.thread_id, live.run_id, "alive")).toBe("claimed");
      let sweeper: RunCoordinator;
      if (Number.isFinite(c.leaseMs)) {
        // "dead" stops renewing; "alive" keeps renewing until dead's lease is well past.
        const until = Date.now() + c.leaseMs + 150;
        while (Date.now() < until) {
          await sleep(Math.max(10, Math.floor(c.leaseMs / 4)));
          expect((await c.renew("alive", [live.run_id])).get(live.run_id)?.owned).toBe(true);
        }
        // Lapsed, but within a long grace: not yet.
        expect(await c.sweep(SWEPT, 600_000)).toEqual([]);
        sweeper = c;
      } else {
        // Without leases "lapsed" means: held by no live worker of the sweeping coordinator, which
        // is what a process started after a crash finds. The live run here is the crashed one's too.
        sweeper = await made.another();
      }
      const swept = await sweeper.sweep(SWEPT, 0);
      const byId = new Map(swept.map((s) => [s.row.run_id, s]));
      expect(byId.get(running.run_id)?.previous).toBe("running");
      expect(byId.get(queued.run_id)?.previous).toBe("pending");
      for (const id of [running.run_id, queued.run_id]) {
        expect(byId.get(id)?.row.status).toBe("interrupted");
        expect(byId.get(id)?.row.error).toEqual(SWEPT);
        const stored = await sweeper.get(thread, id);
        expect(stored?.status).toBe("interrupted");
        expect(stored?.error).toEqual(SWEPT);
      }
      if (Number.isFinite(c.leaseMs)) {
        expect(byId.has(live.run_id)).toBe(false);
        expect((await c.get(live.thread_id, live.run_id))?.status).toBe("running");
      }
      // The old owner has lost the run: nothing it writes lands.
      expect((await sweeper.renew("dead", [running.run_id])).get(running.run_id)?.owned).toBe(false);
      expect(await sweeper.update({ ...running, status: "success" }, "dead")).toBe(false);
      expect(await sweeper.release(thread, running.run_id, "dead")).toBe(false);
      expect(await sweeper.claim(thread, queued.run_id, "dead")).toBe("lost");
      expect((await sweeper.get(thread, running.run_id))?.status).toBe("interrupted");
      // The thread is free for a new run.
      expect(await sweeper.hasActiveRun(thread)).toBe(false);
      const next = contractRow(thread);
      await sweeper.admit(next, "reject", "w3");
      expect(await sweeper.claim(thread, next.run_id, "w3")).toBe("claimed");
      // Swept once is swept for good.
      expect((await sweeper.sweep(SWEPT, 0)).map((s) => s.row.run_id)).not.toContain(running.run_id);
    });
  });
}

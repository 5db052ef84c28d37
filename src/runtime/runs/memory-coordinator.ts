import { systemClock } from "../../core/clock.ts";
import { KeyedMutex } from "../../core/keyed-mutex.ts";
import type { KeyValue } from "../../ports/key-value.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import type { Admission, CancelledRun, CancelRequestResult, ClaimResult, RenewResult, RunCoordinator, SweptRun } from "./coordinator.ts";
import { RunStore, type RunListQuery } from "./run-store.ts";
import { RunOperationError, isTerminal, type CancelAction, type MultitaskStrategy, type RunErrorInfo, type RunRecord, type RunStatus } from "./types.ts";

/*
 * The coordinator of one process (the default): rows in a RunStore over the gateway's KeyValue, so
 * the fs driver keeps them across a restart; who holds which thread, and in what order, lives in
 * this instance only. Leases never expire here (`leaseMs` Infinity): the only owner that can die is
 * the process itself, and with it this state, so a sweep marks the in-flight rows no run of this
 * instance holds, which is what a crashed process left behind.
 */

export interface MemoryRunCoordinatorOptions {
  readonly storage: KeyValue;
  readonly prefix?: string;
  readonly clock?: Clock;
}

interface Holder {
  readonly threadId: string;
  readonly workerId: string;
  claimed: boolean;
}

const IN_FLIGHT = new Set<RunStatus>(["pending", "running"]);

export class MemoryRunCoordinator implements RunCoordinator {
  readonly leaseMs = Infinity;
  readonly store: RunStore;
  readonly #clock: Clock;
  readonly #locks = new KeyedMutex();
  /** Run ids holding each thread, in admission order. */
  readonly #queues = new Map<string, string[]>();
  readonly #holders = new Map<string, Holder>();
  /** Threads held for their deletion. */
  readonly #deleting = new Set<string>();
  readonly #cancels = new Map<string, CancelAction>();

  constructor(options: MemoryRunCoordinatorOptions) {
    this.store = new RunStore(options.storage, options.prefix ? { prefix: options.prefix } : {});
    this.#clock = options.clock ?? systemClock;
  }

  get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    return this.store.get(threadId, runId);
  }

  list(threadId: string, query?: RunListQuery): Promise<RunRecord[]> {
    return this.store.list(threadId, query);
  }

  admit(row: RunRecord, strategy: MultitaskStrategy, workerId: string): Promise<Admission> {
    const threadId = row.thread_id;
    return this.#locks.run(threadId, async () => {
      if (this.#deleting.has(threadId)) {
        throw new RunOperationError("thread_busy", `Thread ${threadId} is being deleted; create a new thread for this run.`);
      }
      const queue = this.#queues.get(threadId) ?? [];
      if (queue.length > 0 && strategy === "reject") {
        throw new RunOperationError(
          "run_conflict",
          `Thread ${threadId} already has a run in progress (${queue[0]}); wait for it, cancel it, or send multitask_strategy "interrupt", "rollback" or "enqueue".`,
        );
      }
      const cancelled: CancelledRun[] = [];
      if (strategy === "interrupt" || strategy === "rollback") {
        for (const runId of queue) {
          this.#cancels.set(runId, strategy);
          cancelled.push({ runId, ownerWorker: this.#holders.get(runId)?.workerId ?? null, action: strategy });
        }
      }
      await this.store.put(row);
      this.#queues.set(threadId, [...queue, row.run_id]);
      this.#holders.set(row.run_id, { threadId, workerId, claimed: false });
      return { row, cancelled };
    });
  }

  async claim(threadId: string, runId: string, workerId: string): Promise<ClaimResult> {
    const holder = this.#owned(threadId, runId, workerId);
    if (!holder) return "lost";
    if (holder.claimed) return "claimed";
    if (this.#cancels.has(runId)) return "cancelled";
    if (this.#queues.get(threadId)?.[0] !== runId) return "waiting";
    holder.claimed = true;
    const row = await this.store.get(threadId, runId);
    if (row) await this.store.put({ ...row, status: "running", updated_at: new Date(this.#clock.now()).toISOString() });
    return "claimed";
  }

  async renew(workerId: string, runIds: readonly string[]): Promise<ReadonlyMap<string, RenewResult>> {
    const out = new Map<string, RenewResult>();
    for (const runId of runIds) {
      const owned = this.#holders.get(runId)?.workerId === workerId;
      out.set(runId, { owned, cancel: owned ? (this.#cancels.get(runId) ?? null) : null });
    }
    return out;
  }

  async update(row: RunRecord, workerId: string): Promise<boolean> {
    if (!this.#owned(row.thread_id, row.run_id, workerId)) return false;
    const stored = await this.store.get(row.thread_id, row.run_id);
    if (!stored) return false;
    await this.store.put({ ...stored, status: row.status, error: row.error, updated_at: row.updated_at });
    return true;
  }

  async release(threadId: string, runId: string, workerId: string): Promise<boolean> {
    if (!this.#owned(threadId, runId, workerId)) return false;
    this.#forget(threadId, runId);
    return true;
  }

  async requestCancel(threadId: string, runId: string, action: CancelAction): Promise<CancelRequestResult | undefined> {
    const row = await this.store.get(threadId, runId);
    if (!row) return undefined;
    if (isTerminal(row.status)) return { state: "finished", row };
    const holder = this.#holders.get(runId);
    if (holder?.threadId === threadId) this.#cancels.set(runId, action);
    return { state: "requested", row, ownerWorker: holder?.threadId === threadId ? holder.workerId : null };
  }

  async hasActiveRun(threadId: string): Promise<boolean> {
    return (this.#queues.get(threadId)?.length ?? 0) > 0;
  }

  holdThread(threadId: string): Promise<() => Promise<void>> {
    return this.#locks.run(threadId, async () => {
      if ((this.#queues.get(threadId)?.length ?? 0) > 0 || this.#deleting.has(threadId)) {
        throw new RunOperationError("thread_busy", `Thread ${threadId} has a run in progress; cancel the run or wait for it to finish, then delete the thread.`);
      }
      this.#deleting.add(threadId);
      return async () => void this.#deleting.delete(threadId);
    });
  }

  async delete(threadId: string, runId: string): Promise<boolean> {
    if (this.#holders.get(runId)?.threadId === threadId) {
      const row = await this.store.get(threadId, runId);
      throw new RunOperationError("run_active", `Run ${runId} is still ${row?.status ?? "active"}; cancel it before deleting it.`);
    }
    return this.store.delete(threadId, runId);
  }

  async deleteThread(threadId: string): Promise<void> {
    for (const runId of this.#queues.get(threadId) ?? []) this.#forget(threadId, runId);
    await this.store.deleteThread(threadId);
  }

  async sweep(error: RunErrorInfo, _graceMs: number): Promise<SweptRun[]> {
    const swept: SweptRun[] = [];
    for (const row of await this.store.findByStatus(IN_FLIGHT)) {
      if (this.#holders.get(row.run_id)?.threadId === row.thread_id) continue;
      const next: RunRecord = { ...row, status: "interrupted", error, updated_at: new Date(this.#clock.now()).toISOString() };
      await this.store.put(next);
      swept.push({ row: next, previous: row.status });
    }
    return swept;
  }

  async close(): Promise<void> {}

  #owned(threadId: string, runId: string, workerId: string): Holder | undefined {
    const holder = this.#holders.get(runId);
    return holder && holder.threadId === threadId && holder.workerId === workerId ? holder : undefined;
  }

  #forget(threadId: string, runId: string): void {
    this.#holders.delete(runId);
    this.#cancels.delete(runId);
    const rest = (this.#queues.get(threadId) ?? []).filter((id) => id !== runId);
    if (rest.length > 0) this.#queues.set(threadId, rest);
    else this.#queues.delete(threadId);
  }
}

import type { CancelAction, MultitaskStrategy, RunErrorInfo, RunRecord, RunStatus } from "./types.ts";

/*
 * Where runs are coordinated when one gateway may be many processes (port; implementations:
 * memory, one process, today's behaviour and the default; PostgreSQL under adapters/shared/postgres;
 * Deno KV under adapters/deno). The coordinator owns the run rows. Each process (a "worker") has
 * its own id; the worker that admits a run executes it.
 *
 * A run holds its thread from admission until `release` (after its last write: status, rollback,
 * title, journal close, `end`), so a later run never overlaps an earlier run's cleanup. While it
 * holds the thread its owner renews its lease; a run whose lease ran out past the grace is swept:
 * marked `interrupted`, owner cleared, thread freed. An owner-checked write (`update`, `release`)
 * fails once the row is no longer owned by the caller, so a worker that lost its run (swept while
 * stopped, say) can no longer change it.
 */

/** One run asked to stop because a later run came in with `interrupt` or `rollback`. */
export interface CancelledRun {
  readonly runId: string;
  /** The worker executing (or about to execute) it; null when nobody owns it any more. */
  readonly ownerWorker: string | null;
  readonly action: CancelAction;
}

export interface Admission {
  /** The stored pending row (as given, `status: "pending"`). */
  readonly row: RunRecord;
  /** Runs of the thread this admission asked to stop (interrupt and rollback strategies). */
  readonly cancelled: readonly CancelledRun[];
}

/**
 * claimed: the run is now `running` and owned by the caller.
 * waiting: an earlier run of the thread still holds it; retry on a wake-up (or a poll).
 * cancelled: a cancel was requested before the run started; it never runs (the caller finishes it).
 * lost: the caller no longer owns the run (it was swept, or deleted with its thread).
 */
export type ClaimResult = "claimed" | "waiting" | "cancelled" | "lost";

export interface RenewResult {
  /** False: the lease is gone (swept or taken); the worker must stop the run and write nothing more. */
  readonly owned: boolean;
  /** A durable cancel request the worker has not acted on yet (the fallback when a signal was missed). */
  readonly cancel: CancelAction | null;
}

export type CancelRequestResult =
  /** The request is stored; the owner acts on it (signal, or its next renewal). */
  | { readonly state: "requested"; readonly row: RunRecord; readonly ownerWorker: string | null }
  /** The run had already finished; nothing to cancel. */
  | { readonly state: "finished"; readonly row: RunRecord };

export interface SweptRun {
  readonly row: RunRecord;
  /** Status before the sweep (pending or running). */
  readonly previous: RunStatus;
}

export interface RunCoordinator {
  /** How long a lease lasts without renewal; Infinity where leases never expire (one process). */
  readonly leaseMs: number;

  get(threadId: string, runId: string): Promise<RunRecord | undefined>;
  /** A thread's runs, newest first (created_at, then run_id), `status` filter, offset and limit (default 10). */
  list(threadId: string, query?: { readonly limit?: number; readonly offset?: number; readonly status?: RunStatus }): Promise<RunRecord[]>;

  /**
   * Atomic per thread: refuses with RunOperationError `thread_busy` while the thread is held for a
   * delete, `run_conflict` under `reject` while any run holds the thread; under `interrupt` and
   * `rollback` stores a cancel request (with that action) on every run holding the thread; then
   * stores `row` (pending, owned by `workerId`, with a fresh lease) behind every run admitted before
   * it on this thread (enqueue order, across workers).
   */
  admit(row: RunRecord, strategy: MultitaskStrategy, workerId: string): Promise<Admission>;

  /** See ClaimResult. At most one run per thread is claimed (running) at a time. */
  claim(threadId: string, runId: string, workerId: string): Promise<ClaimResult>;

  /** Extends the leases of the caller's runs; one result per run id asked for. */
  renew(workerId: string, runIds: readonly string[]): Promise<ReadonlyMap<string, RenewResult>>;

  /**
   * Owner-checked write of a status change (status, error, updated_at of `row`). False, writing
   * nothing, when `workerId` no longer owns the run.
   */
  update(row: RunRecord, workerId: string): Promise<boolean>;

  /** The run finished its last write: it stops holding its thread. Owner-checked (false: not owned). */
  release(threadId: string, runId: string, workerId: string): Promise<boolean>;

  /** Durable cancel request; the row's owner acts on it. */
  requestCancel(threadId: string, runId: string, action: CancelAction): Promise<CancelRequestResult | undefined>;

  /** Whether any run holds the thread (queued, running or finalizing). */
  hasActiveRun(threadId: string): Promise<boolean>;

  /**
   * Holds the thread for its deletion: `thread_busy` while a run holds it (or another hold exists);
   * until the returned release resolves no run is admitted on it.
   */
  holdThread(threadId: string): Promise<() => Promise<void>>;

  /** Removes a finished run's row (`run_active` while it holds its thread). */
  delete(threadId: string, runId: string): Promise<boolean>;
  /** Removes every row of a deleted thread. */
  deleteThread(threadId: string): Promise<void>;

  /**
   * Marks `interrupted` (with `error`) every run holding a thread whose owner's lease ran out more
   * than `graceMs` ago, clears its owner and frees its thread. With a lease of Infinity (one
   * process), "ran out" means "owned by no live worker of this coordinator" (what a crashed
   * process left). Never touches a live lease.
   */
  sweep(error: RunErrorInfo, graceMs: number): Promise<SweptRun[]>;

  close(): Promise<void>;
}

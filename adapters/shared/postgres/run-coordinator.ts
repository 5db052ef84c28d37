import type pg from "pg";
import type {
  Admission,
  CancelledRun,
  CancelRequestResult,
  ClaimResult,
  RenewResult,
  RunCoordinator,
  SweptRun,
} from "../../../src/runtime/runs/coordinator.ts";
import { type CancelAction, type MultitaskStrategy, type RunErrorInfo, type RunRecord, RunOperationError, type RunStatus } from "../../../src/runtime/runs/types.ts";

/*
 * The run coordinator over PostgreSQL (tables in runs-schema.ts). Every lease is computed from the
 * database's clock, never a worker's: workers on machines whose clocks disagree still agree on
 * who owns a run. Admission (deerflow_admit, one statement) takes a transaction-scoped advisory
 * lock keyed by the thread, so two admissions on one thread (on any worker) see each other;
 * claiming needs no lock at all, the partial unique index refuses a second running run on a thread.
 */

export interface PostgresRunCoordinatorOptions {
  readonly pool: pg.Pool;
  /** How long a lease lasts without renewal. Default 30 s. */
  readonly leaseMs?: number;
}

const UNIQUE_VIOLATION = "23505";
const LEASE = `now() + $LEASE::double precision * interval '1 ms'`;
/** The database's time as the ISO stamp the run rows carry (what `new Date().toISOString()` writes). */
const NOW_ISO = `to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

function busyForDelete(threadId: string): RunOperationError {
  return new RunOperationError("thread_busy", `Thread ${threadId} has a run in progress; cancel the run or wait for it to finish, then delete the thread.`);
}

export class PostgresRunCoordinator implements RunCoordinator {
  readonly leaseMs: number;
  readonly #pool: pg.Pool;

  constructor(options: PostgresRunCoordinatorOptions) {
    this.#pool = options.pool;
    this.leaseMs = options.leaseMs ?? 30_000;
    if (!(this.leaseMs > 0) || !Number.isFinite(this.leaseMs)) {
      throw new RangeError(`PostgresRunCoordinator: leaseMs must be a positive number of milliseconds, got ${String(options.leaseMs)}.`);
    }
  }

  /** A statement with the lease length bound as its last parameter. */
  #leased(sql: string, params: readonly unknown[]): { text: string; values: unknown[] } {
    return { text: sql.replaceAll("$LEASE", `$${params.length + 1}`), values: [...params, this.leaseMs] };
  }

  async get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    const { rows } = await this.#pool.query<{ row: RunRecord }>(`SELECT "row" FROM deerflow_runs WHERE run_id = $1 AND thread_id = $2`, [runId, threadId]);
    return rows[0]?.row;
  }

  async list(threadId: string, query: { readonly limit?: number; readonly offset?: number; readonly status?: RunStatus } = {}): Promise<RunRecord[]> {
    const offset = Math.max(0, Math.floor(query.offset ?? 0));
    const limit = Math.max(0, Math.floor(query.limit ?? 10));
    const { rows } = await this.#pool.query<{ row: RunRecord }>(
      `SELECT "row" FROM deerflow_runs WHERE thread_id = $1 AND ($2::text IS NULL OR status = $2)
       ORDER BY created_at DESC, run_id DESC OFFSET $3 LIMIT $4`,
      [threadId, query.status ?? null, offset, limit],
    );
    return rows.map((r) => r.row);
  }

  async admit(row: RunRecord, strategy: MultitaskStrategy, workerId: string): Promise<Admission> {
    const threadId = row.thread_id;
    const stored: RunRecord = { ...row, status: "pending" };
    // One statement (deerflow_admit, runs-schema.ts): the lock, the checks, the cancels and the insert.
    const { rows } = await this.#pool.query<{ o_outcome: string; o_run_id: string | null; o_owner: string | null; o_action: CancelAction | null }>(
      `SELECT o_outcome, o_run_id, o_owner, o_action FROM deerflow_admit($1, $2, $3::jsonb, $4, $5::double precision, $6, $7)`,
      [stored.run_id, threadId, JSON.stringify(stored), workerId, this.leaseMs, stored.created_at, strategy],
    );
    const outcome = rows.at(-1)?.o_outcome;
    if (outcome === "held") throw new RunOperationError("thread_busy", `Thread ${threadId} is being deleted; create a new thread for this run.`);
    if (outcome === "busy") {
      throw new RunOperationError(
        "run_conflict",
        `Thread ${threadId} already has a run in progress (${rows.at(-1)!.o_run_id}); wait for it, cancel it, or send multitask_strategy "interrupt", "rollback" or "enqueue".`,
      );
    }
    if (outcome !== "admitted") throw new Error(`deerflow_admit answered ${JSON.stringify(outcome)} for run ${stored.run_id}; expected "admitted", "held" or "busy".`);
    const cancelled: CancelledRun[] = rows
      .filter((r) => r.o_outcome === "cancelled")
      .map((r) => ({ runId: r.o_run_id!, ownerWorker: r.o_owner, action: r.o_action! }));
    return { row: stored, cancelled };
  }

  async claim(threadId: string, runId: string, workerId: string): Promise<ClaimResult> {
    try {
      const claimed = await this.#pool.query(
        this.#leased(
          `UPDATE deerflow_runs r SET claimed = true, status = 'running', "row" = r."row" || '{"status":"running"}'::jsonb,
             lease_expires_at = ${LEASE}, updated_at = now()
           WHERE r.run_id = $1 AND r.thread_id = $2 AND r.owner_worker = $3 AND r.holding AND NOT r.claimed
             AND r.status = 'pending' AND r.cancel_action IS NULL
             AND NOT EXISTS (SELECT 1 FROM deerflow_runs e WHERE e.thread_id = r.thread_id AND e.holding AND e.seq < r.seq)`,
          [runId, threadId, workerId],
        ),
      );
      if (claimed.rowCount) return "claimed";
    } catch (error) {
      if ((error as { code?: string }).code === UNIQUE_VIOLATION) return "waiting";
      throw error;
    }
    const { rows } = await this.#pool.query<{ owner_worker: string | null; holding: boolean; claimed: boolean; cancel_action: string | null }>(
      `SELECT owner_worker, holding, claimed, cancel_action FROM deerflow_runs WHERE run_id = $1 AND thread_id = $2`,
      [runId, threadId],
    );
    const row = rows[0];
    if (!row || row.owner_worker !== workerId || !row.holding) return "lost";
    if (row.claimed) return "claimed";
    if (row.cancel_action !== null) return "cancelled";
    return "waiting";
  }

  async renew(workerId: string, runIds: readonly string[]): Promise<ReadonlyMap<string, RenewResult>> {
    const results = new Map<string, RenewResult>();
    if (runIds.length === 0) return results;
    const { rows } = await this.#pool.query<{ run_id: string; cancel_action: CancelAction | null }>(
      this.#leased(
        `UPDATE deerflow_runs SET lease_expires_at = ${LEASE} WHERE run_id = ANY($1::text[]) AND owner_worker = $2 AND holding
         RETURNING run_id, cancel_action`,
        [[...runIds], workerId],
      ),
    );
    for (const runId of runIds) results.set(runId, { owned: false, cancel: null });
    for (const r of rows) results.set(r.run_id, { owned: true, cancel: r.cancel_action });
    return results;
  }

  async update(row: RunRecord, workerId: string): Promise<boolean> {
    const result = await this.#pool.query(
      `UPDATE deerflow_runs SET status = $4, "row" = "row" || jsonb_build_object('status', $4::text, 'error', $5::jsonb, 'updated_at', $6::text),
         updated_at = now()
       WHERE run_id = $1 AND thread_id = $2 AND owner_worker = $3`,
      [row.run_id, row.thread_id, workerId, row.status, JSON.stringify(row.error ?? null), row.updated_at],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async release(threadId: string, runId: string, workerId: string): Promise<boolean> {
    const result = await this.#pool.query(`UPDATE deerflow_runs SET holding = false, updated_at = now() WHERE run_id = $1 AND thread_id = $2 AND owner_worker = $3`, [
      runId,
      threadId,
      workerId,
    ]);
    return (result.rowCount ?? 0) > 0;
  }

  async requestCancel(threadId: string, runId: string, action: CancelAction): Promise<CancelRequestResult | undefined> {
    const requested = await this.#pool.query<{ row: RunRecord; owner_worker: string | null }>(
      `UPDATE deerflow_runs SET cancel_action = COALESCE(cancel_action, $3), cancel_requested_at = COALESCE(cancel_requested_at, now())
       WHERE run_id = $1 AND thread_id = $2 AND holding AND status IN ('pending', 'running') RETURNING "row", owner_worker`,
      [runId, threadId, action],
    );
    const hit = requested.rows[0];
    if (hit) return { state: "requested", row: hit.row, ownerWorker: hit.owner_worker };
    const row = await this.get(threadId, runId);
    return row ? { state: "finished", row } : undefined;
  }

  async hasActiveRun(threadId: string): Promise<boolean> {
    const { rows } = await this.#pool.query<{ active: boolean }>(`SELECT EXISTS (SELECT 1 FROM deerflow_runs WHERE thread_id = $1 AND holding) AS active`, [threadId]);
    return rows[0]!.active;
  }

  async holdThread(threadId: string): Promise<() => Promise<void>> {
    await this.#transaction(async (client) => {
      await client.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [threadId]);
      const busy = await client.query(`SELECT 1 FROM deerflow_runs WHERE thread_id = $1 AND holding LIMIT 1`, [threadId]);
      if (busy.rowCount) throw busyForDelete(threadId);
      const inserted = await client.query(`INSERT INTO deerflow_thread_holds (thread_id) VALUES ($1) ON CONFLICT DO NOTHING`, [threadId]);
      if (!inserted.rowCount) throw busyForDelete(threadId);
    });
    let released: Promise<void> | undefined;
    return () => (released ??= this.#pool.query(`DELETE FROM deerflow_thread_holds WHERE thread_id = $1`, [threadId]).then(() => undefined));
  }

  async delete(threadId: string, runId: string): Promise<boolean> {
    const deleted = await this.#pool.query(`DELETE FROM deerflow_runs WHERE run_id = $1 AND thread_id = $2 AND NOT holding`, [runId, threadId]);
    if (deleted.rowCount) return true;
    const { rows } = await this.#pool.query<{ status: RunStatus; holding: boolean }>(`SELECT status, holding FROM deerflow_runs WHERE run_id = $1 AND thread_id = $2`, [
      runId,
      threadId,
    ]);
    if (rows[0]?.holding) throw new RunOperationError("run_active", `Run ${runId} is still ${rows[0].status}; cancel it before deleting it.`);
    return false;
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.#pool.query(`DELETE FROM deerflow_runs WHERE thread_id = $1`, [threadId]);
  }

  /*
   * FOR UPDATE re-checks the lease on the newest row version: a renewal that committed first
   * leaves the run alone, and one that comes after finds no owner. A run that already wrote its
   * terminal status but died before releasing keeps that status; only its thread is freed.
   */
  async sweep(error: RunErrorInfo, graceMs: number): Promise<SweptRun[]> {
    const { rows } = await this.#pool.query<{ row: RunRecord; previous: RunStatus; swept: boolean }>(
      `WITH expired AS (
         SELECT run_id, status FROM deerflow_runs
         WHERE holding AND lease_expires_at < now() - $2::double precision * interval '1 ms'
         FOR UPDATE SKIP LOCKED
       )
       UPDATE deerflow_runs r SET
         holding = false, owner_worker = NULL, updated_at = now(),
         status = CASE WHEN expired.status IN ('pending', 'running') THEN 'interrupted' ELSE r.status END,
         "row" = CASE WHEN expired.status IN ('pending', 'running')
           THEN r."row" || jsonb_build_object('status', 'interrupted', 'error', $1::jsonb, 'updated_at', ${NOW_ISO})
           ELSE r."row" END
       FROM expired WHERE r.run_id = expired.run_id
       RETURNING r."row", expired.status AS previous, expired.status IN ('pending', 'running') AS swept`,
      [JSON.stringify({ name: error.name, message: error.message }), Math.max(0, graceMs)],
    );
    return rows.filter((r) => r.swept).map((r) => ({ row: r.row, previous: r.previous }));
  }

  /** The pool belongs to whoever opened it (openPostgresStorage closes it). */
  async close(): Promise<void> {}

  async #transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    // A connection whose rollback failed is in an unknown state: the pool drops it instead of reusing it.
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((cause: unknown) => void (broken = cause instanceof Error ? cause : new Error(String(cause))));
      throw error;
    } finally {
      client.release(broken);
    }
  }
}

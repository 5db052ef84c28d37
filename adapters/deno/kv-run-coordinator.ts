import type {
  Admission,
  CancelledRun,
  CancelRequestResult,
  ClaimResult,
  RenewResult,
  RunCoordinator,
  SweptRun,
} from "../../src/runtime/runs/coordinator.ts";
import { RunOperationError, TERMINAL_RUN_STATUSES } from "../../src/runtime/runs/types.ts";
import type { CancelAction, MultitaskStrategy, RunErrorInfo, RunRecord, RunStatus } from "../../src/runtime/runs/types.ts";
import { DENO_KV_LIMITS, type DenoKvAtomic, type DenoKvEntry, type DenoKvKey, type DenoKvLike } from "./kv-key-value.ts";

/*
 * RunCoordinator over Deno KV, for Deno Deploy where every isolate opens the same database. Each
 * thread has a head key (the runs holding it, in admission order, and a delete hold) and a sequence
 * key; every admission, claim, release and sweep is one atomic commit that checks the head (and the
 * run's state) it read, so two isolates racing for a thread cannot both win: the loser's commit
 * fails its check and it reads again. A lease is an expiry time stored in the run's state and
 * compared on read; Deno KV's `expireIn` deletes a key some time after it lapses, not at it, so it
 * cannot say whether a lease is still held. Lease times come from each isolate's own clock (Deno KV
 * has no server clock), so the grace a sweep adds must cover clock skew between isolates.
 *
 * Keys, under the prefix:
 *   ["head", thread]        { queue: run ids holding the thread, oldest first; hold?: { token, until } }
 *   ["seq", thread]         the next admission number of the thread (never reused, even once the head empties)
 *   ["state", thread, run]  the run's changing part: status, error, updated_at, worker, lease, cancel, held
 *   ["body", thread, run, i] the rest of the row as UTF-8 JSON, in chunks of at most one value
 *   ["run", run]            the run's thread (renew is given run ids only)
 *   ["active", run]         the thread of a run that holds its thread (what sweep scans)
 */

interface RunState {
  readonly status: RunStatus;
  readonly error: RunErrorInfo | null;
  readonly updated_at: string;
  readonly created_at: string;
  readonly worker: string | null;
  /** Epoch ms the lease ends at. */
  readonly lease: number;
  readonly cancel: CancelAction | null;
  /** Whether the run still holds its thread (from admission to release or sweep). */
  readonly held: boolean;
  readonly seq: number;
  /** Chunks of the body. */
  readonly parts: number;
}

interface Head {
  readonly queue: readonly string[];
  readonly hold?: { readonly token: string; readonly until: number };
}

export interface DenoKvRunCoordinatorOptions {
  readonly kv: DenoKvLike;
  /** Key prefix inside the database (default ["runs"]). */
  readonly prefix?: readonly string[];
  /** How long a lease lasts without renewal (default 30 s). */
  readonly leaseMs?: number;
  /** How long a delete hold lasts if its holder never releases it (a crash): default 10 min. */
  readonly holdMs?: number;
  /** Epoch ms now; tests move it. */
  readonly now?: () => number;
}

/** Bytes of body per chunk, under the value limit with room for V8's serialization header. */
const BODY_CHUNK_BYTES = DENO_KV_LIMITS.valueBytes - 1024;
/** Bytes of body a run may have: its chunks go in the admission commit with the rest. */
const BODY_MAX_BYTES = DENO_KV_LIMITS.commitBytes - 64 * 1024;
/** Deno KV takes at most this many checks in one atomic commit (ext/kv: 100), with room to spare. */
const CHECKS_PER_COMMIT = 90;
/** Runs one thread may hold at once: their ids are one head value, which must stay under the 64 KiB value limit. */
const MAX_HOLDERS = 1000;
/** Keys per getMany (ext/kv's limit). */
const GET_MANY = 10;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class DenoKvRunCoordinator implements RunCoordinator {
  readonly leaseMs: number;
  readonly #kv: DenoKvLike;
  readonly #prefix: readonly string[];
  readonly #holdMs: number;
  readonly #now: () => number;

  constructor(options: DenoKvRunCoordinatorOptions) {
    this.#kv = options.kv;
    this.#prefix = options.prefix ?? ["runs"];
    this.leaseMs = options.leaseMs ?? 30_000;
    this.#holdMs = options.holdMs ?? 10 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  #head = (threadId: string): DenoKvKey => [...this.#prefix, "head", threadId];
  #seq = (threadId: string): DenoKvKey => [...this.#prefix, "seq", threadId];
  #state = (threadId: string, runId: string): DenoKvKey => [...this.#prefix, "state", threadId, runId];
  #body = (threadId: string, runId: string, i: number): DenoKvKey => [...this.#prefix, "body", threadId, runId, i];
  #run = (runId: string): DenoKvKey => [...this.#prefix, "run", runId];
  #active = (runId: string): DenoKvKey => [...this.#prefix, "active", runId];

  async get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    const [state, first] = await this.#kv.getMany([this.#state(threadId, runId), this.#body(threadId, runId, 0)]);
    if (!state!.value) return undefined;
    return this.#row(threadId, runId, state!.value as RunState, first!);
  }

  async list(threadId: string, query: { readonly limit?: number; readonly offset?: number; readonly status?: RunStatus } = {}): Promise<RunRecord[]> {
    const states: { runId: string; state: RunState }[] = [];
    for await (const entry of this.#kv.list({ prefix: [...this.#prefix, "state", threadId] }, { batchSize: 500 })) {
      const state = entry.value as RunState;
      if (query.status === undefined || state.status === query.status) states.push({ runId: entry.key[entry.key.length - 1] as string, state });
    }
    states.sort((a, b) => (a.state.created_at !== b.state.created_at ? (a.state.created_at < b.state.created_at ? 1 : -1) : a.runId < b.runId ? 1 : a.runId > b.runId ? -1 : 0));
    const offset = Math.max(0, query.offset ?? 0);
    const page = states.slice(offset, offset + Math.max(0, query.limit ?? 10));
    const rows: RunRecord[] = [];
    for (let i = 0; i < page.length; i += GET_MANY) {
      const group = page.slice(i, i + GET_MANY);
      const firsts = await this.#kv.getMany(group.map(({ runId }) => this.#body(threadId, runId, 0)));
      for (const [n, { runId, state }] of group.entries()) {
        const row = await this.#row(threadId, runId, state, firsts[n]!);
        if (row) rows.push(row);
      }
    }
    return rows;
  }

  async admit(row: RunRecord, strategy: MultitaskStrategy, workerId: string): Promise<Admission> {
    const threadId = row.thread_id;
    const body = this.#encodeBody(row);
    for (;;) {
      const [headEntry, seqEntry] = await this.#kv.getMany([this.#head(threadId), this.#seq(threadId)]);
      const head = this.#liveHead(headEntry!);
      if (head.hold) throw busyForDelete(threadId);
      if (strategy === "reject" && head.queue.length > 0) {
        throw new RunOperationError(
          "run_conflict",
          `Thread ${threadId} already has a run in progress (${head.queue[0]}); wait for it, cancel it, or send multitask_strategy "interrupt", "rollback" or "enqueue".`,
        );
      }
      if (head.queue.length >= MAX_HOLDERS) {
        throw new RunOperationError(
          "run_conflict",
          `Thread ${threadId} already has ${head.queue.length} runs queued or running, the most one thread holds on Deno KV; wait for some to finish, or start the run on another thread.`,
        );
      }
      const cancelled: CancelledRun[] = [];
      let raced = false;
      if (strategy === "interrupt" || strategy === "rollback") {
        // Cancel requests first, a page of checked commits at a time; they are idempotent, so a
        // retry after a lost race stores them again harmlessly. The admission below checks the
        // head, so no run joined the thread unseen in between.
        for (let i = 0; i < head.queue.length; i += CHECKS_PER_COMMIT) {
          const page = await this.#states(threadId, head.queue.slice(i, i + CHECKS_PER_COMMIT));
          const op = this.#kv.atomic();
          for (const { runId, entry } of page) {
            const state = entry.value as RunState | null;
            if (!state) continue;
            op.check({ key: entry.key, versionstamp: entry.versionstamp });
            if (!TERMINAL_RUN_STATUSES.has(state.status)) op.set(entry.key, { ...state, cancel: strategy } satisfies RunState);
            cancelled.push({ runId, ownerWorker: state.worker, action: strategy });
          }
          if (!(await op.commit()).ok) {
            raced = true;
            break;
          }
        }
        if (raced) continue;
      }
      const seq = typeof seqEntry!.value === "number" ? seqEntry!.value : 0;
      const state: RunState = {
        status: "pending",
        error: row.error,
        updated_at: row.updated_at,
        created_at: row.created_at,
        worker: workerId,
        lease: this.#now() + this.leaseMs,
        cancel: null,
        held: true,
        seq,
        parts: body.length,
      };
      const op = this.#kv
        .atomic()
        .check({ key: headEntry!.key, versionstamp: headEntry!.versionstamp }, { key: seqEntry!.key, versionstamp: seqEntry!.versionstamp })
        .check({ key: this.#state(threadId, row.run_id), versionstamp: null })
        .set(this.#head(threadId), { queue: [...head.queue, row.run_id] } satisfies Head)
        .set(this.#seq(threadId), seq + 1)
        .set(this.#state(threadId, row.run_id), state)
        .set(this.#run(row.run_id), threadId)
        .set(this.#active(row.run_id), threadId);
      body.forEach((chunk, i) => op.set(this.#body(threadId, row.run_id, i), chunk));
      if ((await op.commit()).ok) return { row: { ...row, status: "pending" }, cancelled };
      const existing = await this.#kv.get(this.#state(threadId, row.run_id));
      if (existing.versionstamp !== null) throw new RunOperationError("run_active", `Run ${row.run_id} was admitted already; admit each run once.`);
    }
  }

  async claim(threadId: string, runId: string, workerId: string): Promise<ClaimResult> {
    for (;;) {
      const [headEntry, stateEntry] = await this.#kv.getMany([this.#head(threadId), this.#state(threadId, runId)]);
      const state = stateEntry!.value as RunState | null;
      if (!state || state.worker !== workerId || !state.held) return "lost";
      if (state.status === "running") return "claimed";
      if (state.status !== "pending") return "lost";
      if (state.cancel) return "cancelled";
      const head = (headEntry!.value as Head | null) ?? { queue: [] };
      if (head.queue[0] !== runId) return head.queue.includes(runId) ? "waiting" : "lost";
      const ok = await this.#kv
        .atomic()
        .check({ key: headEntry!.key, versionstamp: headEntry!.versionstamp }, { key: stateEntry!.key, versionstamp: stateEntry!.versionstamp })
        .set(stateEntry!.key, { ...state, status: "running", lease: this.#now() + this.leaseMs } satisfies RunState)
        .commit();
      if (ok.ok) return "claimed";
    }
  }

  async renew(workerId: string, runIds: readonly string[]): Promise<ReadonlyMap<string, RenewResult>> {
    const out = new Map<string, RenewResult>();
    const threads = await this.#getMany(runIds.map((runId) => this.#run(runId)));
    await Promise.all(
      runIds.map(async (runId, i) => {
        const threadId = threads[i]!.value as string | null;
        out.set(runId, threadId === null ? { owned: false, cancel: null } : await this.#renewOne(threadId, runId, workerId));
      }),
    );
    return new Map(runIds.map((runId) => [runId, out.get(runId)!]));
  }

  async #renewOne(threadId: string, runId: string, workerId: string): Promise<RenewResult> {
    for (;;) {
      const entry = await this.#kv.get(this.#state(threadId, runId));
      const state = entry.value as RunState | null;
      if (!state || state.worker !== workerId || !state.held) return { owned: false, cancel: null };
      const ok = await this.#kv
        .atomic()
        .check({ key: entry.key, versionstamp: entry.versionstamp })
        .set(entry.key, { ...state, lease: this.#now() + this.leaseMs } satisfies RunState)
        .commit();
      if (ok.ok) return { owned: true, cancel: state.cancel };
    }
  }

  async update(row: RunRecord, workerId: string): Promise<boolean> {
    for (;;) {
      const entry = await this.#kv.get(this.#state(row.thread_id, row.run_id));
      const state = entry.value as RunState | null;
      if (!state || state.worker !== workerId) return false;
      const ok = await this.#kv
        .atomic()
        .check({ key: entry.key, versionstamp: entry.versionstamp })
        .set(entry.key, { ...state, status: row.status, error: row.error, updated_at: row.updated_at } satisfies RunState)
        .commit();
      if (ok.ok) return true;
    }
  }

  async release(threadId: string, runId: string, workerId: string): Promise<boolean> {
    for (;;) {
      const [headEntry, stateEntry] = await this.#kv.getMany([this.#head(threadId), this.#state(threadId, runId)]);
      const state = stateEntry!.value as RunState | null;
      if (!state || state.worker !== workerId) return false;
      if (!state.held) return true;
      const op = this.#kv
        .atomic()
        .check({ key: headEntry!.key, versionstamp: headEntry!.versionstamp }, { key: stateEntry!.key, versionstamp: stateEntry!.versionstamp })
        .set(stateEntry!.key, { ...state, held: false } satisfies RunState)
        .delete(this.#active(runId));
      this.#withoutRun(op, headEntry!, runId);
      if ((await op.commit()).ok) return true;
    }
  }

  async requestCancel(threadId: string, runId: string, action: CancelAction): Promise<CancelRequestResult | undefined> {
    for (;;) {
      const [stateEntry, first] = await this.#kv.getMany([this.#state(threadId, runId), this.#body(threadId, runId, 0)]);
      const state = stateEntry!.value as RunState | null;
      if (!state) return undefined;
      if (TERMINAL_RUN_STATUSES.has(state.status)) {
        const row = await this.#row(threadId, runId, state, first!);
        return row ? { state: "finished", row } : undefined;
      }
      const next: RunState = { ...state, cancel: action };
      const ok = await this.#kv.atomic().check({ key: stateEntry!.key, versionstamp: stateEntry!.versionstamp }).set(stateEntry!.key, next).commit();
      if (!ok.ok) continue;
      const row = await this.#row(threadId, runId, next, first!);
      return row ? { state: "requested", row, ownerWorker: next.held ? next.worker : null } : undefined;
    }
  }

  async hasActiveRun(threadId: string): Promise<boolean> {
    const head = (await this.#kv.get(this.#head(threadId))).value as Head | null;
    return (head?.queue.length ?? 0) > 0;
  }

  async holdThread(threadId: string): Promise<() => Promise<void>> {
    const token = crypto.randomUUID();
    for (;;) {
      const entry = await this.#kv.get(this.#head(threadId));
      const head = this.#liveHead(entry);
      if (head.hold) throw busyForDelete(threadId);
      if (head.queue.length > 0) {
        throw new RunOperationError("thread_busy", `Thread ${threadId} has a run in progress (${head.queue[0]}); cancel it or wait for it to finish, then delete the thread.`);
      }
      const ok = await this.#kv
        .atomic()
        .check({ key: entry.key, versionstamp: entry.versionstamp })
        .set(entry.key, { queue: [], hold: { token, until: this.#now() + this.#holdMs } } satisfies Head)
        .commit();
      if (ok.ok) break;
    }
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      for (;;) {
        const entry = await this.#kv.get(this.#head(threadId));
        const head = entry.value as Head | null;
        if (head?.hold?.token !== token) return;
        const op = this.#kv.atomic().check({ key: entry.key, versionstamp: entry.versionstamp });
        if (head.queue.length === 0) op.delete(entry.key);
        else op.set(entry.key, { queue: head.queue } satisfies Head);
        if ((await op.commit()).ok) return;
      }
    };
  }

  async delete(threadId: string, runId: string): Promise<boolean> {
    const entry = await this.#kv.get(this.#state(threadId, runId));
    const state = entry.value as RunState | null;
    if (!state) return false;
    if (state.held) throw new RunOperationError("run_active", `Run ${runId} is still going; cancel it or wait for it to finish, then delete it.`);
    const op = this.#kv.atomic().check({ key: entry.key, versionstamp: entry.versionstamp }).delete(entry.key).delete(this.#run(runId));
    for (let i = 0; i < state.parts; i++) op.delete(this.#body(threadId, runId, i));
    // A lost race means the row changed under us (a cancel request, say): it is still there to delete.
    return (await op.commit()).ok || this.delete(threadId, runId);
  }

  async deleteThread(threadId: string): Promise<void> {
    const keys: DenoKvKey[] = [this.#head(threadId), this.#seq(threadId)];
    for await (const entry of this.#kv.list({ prefix: [...this.#prefix, "state", threadId] }, { batchSize: 500 })) {
      const runId = entry.key[entry.key.length - 1] as string;
      const state = entry.value as RunState;
      keys.push(entry.key, this.#run(runId), this.#active(runId));
      for (let i = 0; i < state.parts; i++) keys.push(this.#body(threadId, runId, i));
    }
    // Rows are small keys and a run's keys are few, so pages of 500 deletes stay far under the limits.
    for (let i = 0; i < keys.length; i += 500) {
      const op = this.#kv.atomic();
      for (const key of keys.slice(i, i + 500)) op.delete(key);
      await op.commit();
    }
  }

  async sweep(error: RunErrorInfo, graceMs: number): Promise<SweptRun[]> {
    const swept: SweptRun[] = [];
    const active: { runId: string; threadId: string }[] = [];
    for await (const entry of this.#kv.list({ prefix: [...this.#prefix, "active"] }, { batchSize: 500 })) {
      active.push({ runId: entry.key[entry.key.length - 1] as string, threadId: entry.value as string });
    }
    for (const { runId, threadId } of active) {
      for (;;) {
        const [headEntry, stateEntry, first] = await this.#kv.getMany([this.#head(threadId), this.#state(threadId, runId), this.#body(threadId, runId, 0)]);
        const state = stateEntry!.value as RunState | null;
        const now = this.#now();
        if (state && state.held && state.lease + graceMs >= now) break;
        const op = this.#kv
          .atomic()
          .check({ key: headEntry!.key, versionstamp: headEntry!.versionstamp }, { key: stateEntry!.key, versionstamp: stateEntry!.versionstamp })
          .delete(this.#active(runId));
        this.#withoutRun(op, headEntry!, runId);
        let next: RunState | undefined;
        if (state) {
          // A run that had already finished its status only loses its hold: its status stays.
          const finished = TERMINAL_RUN_STATUSES.has(state.status);
          next = finished
            ? { ...state, held: false, worker: null }
            : { ...state, status: "interrupted", error, updated_at: new Date(now).toISOString(), held: false, worker: null };
          op.set(stateEntry!.key, next);
        }
        if (!(await op.commit()).ok) continue;
        if (state && next && !TERMINAL_RUN_STATUSES.has(state.status)) {
          const row = await this.#row(threadId, runId, next, first!);
          if (row) swept.push({ row, previous: state.status });
        }
        break;
      }
    }
    return swept;
  }

  async close(): Promise<void> {
    // The Kv handle belongs to whoever opened it (the storage shares it).
  }

  /** The head as it stands, a hold whose holder never came back counting as none. */
  #liveHead(entry: DenoKvEntry): Head {
    const head = (entry.value as Head | null) ?? { queue: [] };
    return head.hold && head.hold.until < this.#now() ? { queue: head.queue } : head;
  }

  /** Adds to `op` the head without `runId` (deleted when nothing is left in it). */
  #withoutRun(op: DenoKvAtomic, headEntry: DenoKvEntry, runId: string): void {
    const head = (headEntry.value as Head | null) ?? { queue: [] };
    const queue = head.queue.filter((id) => id !== runId);
    if (queue.length === 0 && !head.hold) op.delete(headEntry.key);
    else op.set(headEntry.key, { ...head, queue } satisfies Head);
  }

  async #states(threadId: string, runIds: readonly string[]): Promise<{ runId: string; entry: DenoKvEntry }[]> {
    const entries = await this.#getMany(runIds.map((runId) => this.#state(threadId, runId)));
    return runIds.map((runId, i) => ({ runId, entry: entries[i]! }));
  }

  async #getMany(keys: DenoKvKey[]): Promise<DenoKvEntry[]> {
    const out: DenoKvEntry[] = [];
    for (let i = 0; i < keys.length; i += GET_MANY) out.push(...(await this.#kv.getMany(keys.slice(i, i + GET_MANY))));
    return out;
  }

  #encodeBody(row: RunRecord): Uint8Array[] {
    const { status: _status, error: _error, updated_at: _updated, ...rest } = row;
    const bytes = encoder.encode(JSON.stringify(rest));
    if (bytes.length > BODY_MAX_BYTES) {
      throw new RunOperationError(
        "invalid_run_request",
        `The run request is ${Math.ceil(bytes.length / 1024)} KiB, more than the ${Math.floor(BODY_MAX_BYTES / 1024)} KiB a run may carry on Deno KV (one atomic commit); send large inputs as uploads and refer to them.`,
      );
    }
    const chunks: Uint8Array[] = [];
    for (let offset = 0; offset < bytes.length; offset += BODY_CHUNK_BYTES) chunks.push(bytes.slice(offset, offset + BODY_CHUNK_BYTES));
    return chunks;
  }

  async #row(threadId: string, runId: string, state: RunState, first: DenoKvEntry): Promise<RunRecord | undefined> {
    let bytes = first.value as Uint8Array | null;
    if (!bytes) return undefined;
    if (state.parts > 1) {
      const chunks: Uint8Array[] = [];
      for await (const entry of this.#kv.list({ prefix: [...this.#prefix, "body", threadId, runId] })) chunks.push(entry.value as Uint8Array);
      if (chunks.length !== state.parts) return undefined;
      bytes = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      let offset = 0;
      for (const chunk of chunks) {
        bytes.set(chunk, offset);
        offset += chunk.length;
      }
    }
    const rest = JSON.parse(decoder.decode(bytes)) as Omit<RunRecord, "status" | "error" | "updated_at">;
    return { ...rest, status: state.status, error: state.error, updated_at: state.updated_at };
  }
}

function busyForDelete(threadId: string): RunOperationError {
  return new RunOperationError("thread_busy", `Thread ${threadId} is being deleted; create a new thread for this run.`);
}

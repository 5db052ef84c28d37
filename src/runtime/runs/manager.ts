import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { systemClock } from "../../core/clock.ts";
import { errorMessage } from "../../core/errors.ts";
import { newId } from "../../core/ids.ts";
import { KeyedMutex } from "../../core/keyed-mutex.ts";
import { EMPTY_EXTENSIONS, type LoadedExtensions } from "../../extensions/registry.ts";
import type { KeyValue } from "../../ports/key-value.ts";
import type { Clock, ReclaimMemory } from "../../ports/runtime-ports.ts";
import { readThreadValues } from "./checkpoints.ts";
import { IdleReclaimer } from "./reclaim.ts";
import { RunJournal, type JournalPage } from "./journal.ts";
import { RunStore, type RunListQuery } from "./run-store.ts";
import { MemoryStreamBridge, type StreamBridge, type StreamFrame } from "./stream-bridge.ts";
import {
  RunOperationError,
  isTerminal,
  type CancelAction,
  type RunAgentFactory,
  type RunDiagnostic,
  type RunErrorInfo,
  type RunPrincipal,
  type RunRecord,
  type RunRequest,
  type RunStatus,
  type RunThreadStore,
} from "./types.ts";
import { runWorker, type ActiveRun, type WorkerDeps } from "./worker.ts";

export interface RunManagerOptions<U extends RunPrincipal> {
  readonly storage: KeyValue;
  readonly checkpointer: BaseCheckpointSaver;
  readonly threads: RunThreadStore;
  readonly agentFactory: RunAgentFactory<U>;
  readonly extensions?: LoadedExtensions;
  readonly clock?: Clock;
  readonly bridge?: StreamBridge;
  readonly onDiagnostic?: (diagnostic: RunDiagnostic) => void;
  /** Model names a run may ask for (`context.model_name`); others are refused with 400 before a run exists. */
  readonly modelNames?: () => readonly string[];
  /** The lifecycle hooks' shared budget per pass (default 3 s). */
  readonly notifyBudgetMs?: number;
  readonly storePrefix?: string;
  /**
   * Asked for once the runs went quiet (the last active run finished, or the default bridge dropped
   * its last replay window): see {@link IdleReclaimer}. Absent: nothing is asked.
   */
  readonly reclaimMemory?: ReclaimMemory;
}

export interface CancelOptions {
  readonly action?: CancelAction;
  /** Resolve only after the run has finished finalizing. */
  readonly wait?: boolean;
}

export interface ShutdownReport {
  /** Runs that settled within the budget. */
  readonly drained: number;
  /** Runs still unsettled at the deadline, persisted as interrupted. */
  readonly abandoned: number;
}

const INTERRUPTED_BY_RESTART: RunErrorInfo = Object.freeze({
  name: "GatewayRestarted",
  message: "The gateway stopped while this run was in flight; start a new run to continue the thread.",
});
const INTERRUPTED_BY_SHUTDOWN: RunErrorInfo = Object.freeze({
  name: "GatewayShutdown",
  message: "The gateway shut down before this run could finish; start a new run to continue the thread.",
});

/**
 * Runs of every thread: admission under a per-thread lock (multitask strategies), one worker per
 * run, cancel, join, stream, and the shutdown drain. Rows live in KeyValue and survive a restart;
 * what a run is doing right now (its abort controller, its finalizing barrier) lives here only.
 *
 * After a crash, rows still pending or running belong to no process: {@link recover} marks them
 * `interrupted` at startup (call it once before serving).
 */
export class RunManager<U extends RunPrincipal = RunPrincipal> {
  readonly store: RunStore;
  readonly journal: RunJournal;
  readonly bridge: StreamBridge;
  readonly clock: Clock;
  readonly extensions: LoadedExtensions;
  readonly #options: RunManagerOptions<U>;
  readonly #active = new Map<string, ActiveRun<U> & { done: Promise<void> }>();
  readonly #byThread = new Map<string, string[]>();
  readonly #locks = new KeyedMutex();
  /** Threads being deleted: no run may start on them meanwhile. */
  readonly #reserved = new Set<string>();
  #lastStamp = 0;
  #closing = false;
  readonly #reclaimer: IdleReclaimer | undefined;

  constructor(options: RunManagerOptions<U>) {
    this.#options = options;
    this.clock = options.clock ?? systemClock;
    this.extensions = options.extensions ?? EMPTY_EXTENSIONS;
    this.store = new RunStore(options.storage, options.storePrefix ? { prefix: options.storePrefix } : {});
    const reclaimer = options.reclaimMemory ? new IdleReclaimer(this.clock, options.reclaimMemory) : undefined;
    this.#reclaimer = reclaimer;
    // A closed replay window is memory given back too: the frames of a burst's runs go 60 s after it.
    this.bridge =
      options.bridge ??
      new MemoryStreamBridge({ clock: this.clock, ...(reclaimer ? { onDrained: () => this.#active.size === 0 && reclaimer.idle() } : {}) });
    this.journal = new RunJournal(options.storage, { clock: this.clock });
  }

  /** Marks rows a crashed process left pending or running as interrupted; returns them. */
  async recover(): Promise<RunRecord[]> {
    const orphans = await this.store.findByStatus(new Set<RunStatus>(["pending", "running"]));
    const recovered: RunRecord[] = [];
    for (const row of orphans) {
      if (this.#active.has(row.run_id)) continue;
      const next = { ...row, status: "interrupted" as const, error: INTERRUPTED_BY_RESTART, updated_at: this.#stamp() };
      await this.store.put(next);
      await this.journal
        .append(row.thread_id, row.run_id, "status", {
          status: "interrupted",
          error: INTERRUPTED_BY_RESTART,
          reason: "Interrupted by a restart: the gateway process that ran this run ended before the run did.",
          previous_status: row.status,
        })
        .catch((cause: unknown) => this.#report("error", `run ${row.run_id}`, `could not journal its interruption: ${errorMessage(cause)}`));
      await this.#options.threads.update(row.thread_id, { status: "interrupted" }).catch(() => undefined);
      recovered.push(next);
    }
    return recovered;
  }

  /** Admits a run on `threadId` under its multitask strategy and starts its worker; returns the pending row. */
  async create(threadId: string, request: RunRequest, user: U): Promise<RunRecord> {
    if (this.#closing) throw new RunOperationError("shutting_down", "The gateway is shutting down and accepts no new runs; retry once it is back.");
    this.#checkModel(request);
    return this.#withThreadLock(threadId, async () => {
      if (this.#closing) throw new RunOperationError("shutting_down", "The gateway is shutting down and accepts no new runs; retry once it is back.");
      if (this.#reserved.has(threadId)) {
        throw new RunOperationError("thread_busy", `Thread ${threadId} is being deleted; create a new thread for this run.`);
      }
      const inFlight = this.#inFlight(threadId);
      const strategy = request.multitaskStrategy;
      if (inFlight.length > 0 && strategy === "reject") {
        throw new RunOperationError(
          "run_conflict",
          `Thread ${threadId} already has a run in progress (${inFlight[0]!.row.run_id}); wait for it, cancel it, or send multitask_strategy "interrupt", "rollback" or "enqueue".`,
        );
      }
      if (strategy === "interrupt" || strategy === "rollback") {
        for (const old of inFlight) this.#abort(old, strategy);
      }
      const stamp = this.#stamp();
      const row: RunRecord = {
        run_id: newId(),
        thread_id: threadId,
        assistant_id: request.assistantId,
        status: "pending",
        metadata: { ...request.metadata },
        multitask_strategy: strategy,
        created_at: stamp,
        updated_at: stamp,
        owner_id: user.id,
        error: null,
        kwargs: runKwargs(request),
      };
      await this.store.put(row);
      await this.journal.record(threadId, row.run_id, "status", { status: "pending" });
      this.bridge.open(row.run_id);
      const run = {
        row,
        request,
        user,
        controller: new AbortController(),
        abortAction: null,
        started: false,
        settled: false,
        // Every earlier same-thread run, finalizing included: the new one never overlaps their cleanup.
        predecessors: inFlight.map((old) => old.done),
      } as unknown as ActiveRun<U> & { done: Promise<void> };
      run.done = runWorker(this.#workerDeps(), run)
        .catch((cause: unknown) => this.#report("error", `run ${row.run_id}`, `worker crashed: ${errorMessage(cause)}`))
        .finally(() => this.#forget(run));
      this.#active.set(row.run_id, run);
      this.#reclaimer?.busy();
      this.#byThread.set(threadId, [...(this.#byThread.get(threadId) ?? []), row.run_id]);
      return row;
    });
  }

  /** What the run's journal holds (status changes, custom events, errors), a page at a time; undefined for an unknown run. */
  async events(threadId: string, runId: string, query: { afterSeq?: number; limit?: number } = {}): Promise<JournalPage | undefined> {
    if (!(await this.store.get(threadId, runId))) return undefined;
    return this.journal.list(threadId, runId, query);
  }

  async get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    const active = this.#active.get(runId);
    if (active && active.row.thread_id === threadId) return active.row;
    return this.store.get(threadId, runId);
  }

  async list(threadId: string, query: RunListQuery = {}): Promise<RunRecord[]> {
    const rows = await this.store.list(threadId, query);
    return rows.map((row) => this.#active.get(row.run_id)?.row ?? row);
  }

  /**
   * Holds `threadId` for a delete: refused (409) while a run is in flight, and until the returned
   * release is called no run can start on it, so nothing writes to a thread half gone.
   */
  async reserveThread(threadId: string): Promise<() => void> {
    return this.#withThreadLock(threadId, async () => {
      if (this.#inFlight(threadId).length > 0 || this.#reserved.has(threadId)) {
        throw new RunOperationError("thread_busy", `Thread ${threadId} has a run in progress; cancel the run or wait for it to finish, then delete the thread.`);
      }
      this.#reserved.add(threadId);
      return () => void this.#reserved.delete(threadId);
    });
  }

  /** Whether the thread has a run that is queued, running or still finalizing. */
  hasActiveRun(threadId: string): boolean {
    return this.#inFlight(threadId).length > 0;
  }

  /**
   * Stops a pending or running run: `interrupt` keeps its checkpoints, `rollback` restores the
   * thread to before it. Cancelling an interrupted run again is a no-op; any other finished run is
   * a 409.
   */
  async cancel(threadId: string, runId: string, options: CancelOptions = {}): Promise<RunRecord> {
    const row = await this.get(threadId, runId);
    if (!row) throw notFound(runId);
    const active = this.#active.get(runId);
    if (active && !active.settled) {
      this.#abort(active, options.action ?? "interrupt");
      if (options.wait) await active.done;
      return active.row;
    }
    if (row.status === "interrupted") return row;
    if (!isTerminal(row.status)) {
      throw new RunOperationError("run_not_active", `Run ${runId} is ${row.status} but not active in this gateway, so it cannot be cancelled here.`);
    }
    throw new RunOperationError("run_not_cancellable", `Run ${runId} is not cancellable (status: ${row.status}); only pending or running runs can be cancelled.`);
  }

  /**
   * Resolves once every run active now has finished (at once when none is). A host that ends a
   * request's work when its response is sent (a Cloudflare Worker) hands this to its waitUntil.
   */
  settled(): Promise<void> {
    return Promise.all([...this.#active.values()].map((run) => run.done)).then(() => undefined);
  }

  /** Resolves with the run's terminal row (or its current row when `signal` aborts first). */
  async join(threadId: string, runId: string, signal?: AbortSignal): Promise<RunRecord> {
    const active = this.#active.get(runId);
    if (active && active.row.thread_id === threadId) {
      await untilAborted(active.done, signal);
      return active.row;
    }
    const row = await this.store.get(threadId, runId);
    if (!row) throw notFound(runId);
    return row;
  }

  /**
   * The run's frames from the start (or after `lastEventId`), then live ones. A finished run whose
   * frames were released yields just `end`.
   */
  async *stream(threadId: string, runId: string, options: { lastEventId?: string; signal?: AbortSignal } = {}): AsyncGenerator<StreamFrame> {
    const row = await this.get(threadId, runId);
    if (!row) throw notFound(runId);
    if (this.bridge.has(runId)) {
      yield* this.bridge.subscribe(runId, options);
      return;
    }
    if (!isTerminal(row.status)) {
      throw new RunOperationError("run_not_active", `Run ${runId} is ${row.status} but not active in this gateway, so it cannot be streamed here.`);
    }
    yield { id: `${this.clock.now()}-0`, event: "end", data: null };
  }

  /** The thread's values after the run, as `/wait` and `/join` return them. */
  async threadValues(threadId: string): Promise<Record<string, unknown> | undefined> {
    return readThreadValues(this.#options.checkpointer, threadId);
  }

  async delete(threadId: string, runId: string): Promise<void> {
    const row = await this.get(threadId, runId);
    if (!row) throw notFound(runId);
    if (this.#active.has(runId)) {
      throw new RunOperationError("run_active", `Run ${runId} is still ${row.status}; cancel it before deleting it.`);
    }
    await this.store.delete(threadId, runId);
    await this.journal.deleteRun(threadId, runId);
  }

  /** Forgets every run row and journal entry of a deleted thread. */
  async deleteThread(threadId: string): Promise<void> {
    await this.store.deleteThread(threadId);
    await this.journal.deleteThread(threadId);
  }

  /**
   * Interrupts every active run and waits for them, within `timeoutMs` in all; runs still unsettled
   * at the deadline are persisted as interrupted. New runs are refused from the first moment.
   */
  async shutdown(timeoutMs = 5000): Promise<ShutdownReport> {
    this.#closing = true;
    this.#reclaimer?.close();
    const runs = [...this.#active.values()];
    for (const run of runs) if (!run.settled) this.#abort(run, "interrupt");
    const deadline = new AbortController();
    const settled = new Set<ActiveRun<U>>();
    const all = Promise.all(runs.map((run) => run.done.then(() => void settled.add(run))));
    await Promise.race([all, this.clock.sleep(timeoutMs, deadline.signal).catch(() => undefined)]);
    deadline.abort();
    const abandoned = runs.filter((run) => !settled.has(run));
    for (const run of abandoned) {
      run.settled = true;
      await this.#setStatus(run, "interrupted", INTERRUPTED_BY_SHUTDOWN).catch(() => undefined);
      await this.journal.close(run.row.thread_id, run.row.run_id).catch(() => undefined);
      await this.bridge.end(run.row.run_id).catch(() => undefined);
    }
    return { drained: runs.length - abandoned.length, abandoned: abandoned.length };
  }

  #abort(run: ActiveRun<U>, action: CancelAction): void {
    if (run.controller.signal.aborted) return;
    run.abortAction = action;
    run.controller.abort(new DOMException(`Run ${run.row.run_id} was cancelled (${action}).`, "AbortError"));
  }

  #inFlight(threadId: string): Array<ActiveRun<U> & { done: Promise<void> }> {
    return (this.#byThread.get(threadId) ?? []).map((id) => this.#active.get(id)!).filter(Boolean);
  }

  #forget(run: ActiveRun<U>): void {
    const runId = run.row.run_id;
    this.#active.delete(runId);
    const rest = (this.#byThread.get(run.row.thread_id) ?? []).filter((id) => id !== runId);
    if (rest.length > 0) this.#byThread.set(run.row.thread_id, rest);
    else this.#byThread.delete(run.row.thread_id);
    if (this.#active.size === 0) this.#reclaimer?.idle();
  }

  #checkModel(request: RunRequest): void {
    const requested = request.context.model_name ?? request.configurable.model_name;
    if (requested === undefined || requested === null || !this.#options.modelNames) return;
    const known = this.#options.modelNames();
    if (typeof requested !== "string" || !known.includes(requested)) {
      throw new RunOperationError(
        "unknown_model",
        `context.model_name ${JSON.stringify(requested)} is not a configured model; use one of: ${known.map((n) => JSON.stringify(n)).join(", ")}.`,
      );
    }
  }

  #withThreadLock<T>(threadId: string, fn: () => Promise<T>): Promise<T> {
    return this.#locks.run(threadId, fn);
  }

  /** Strictly increasing ISO stamps, so creation order survives a tie of the clock. */
  #stamp(): string {
    const now = Math.max(this.clock.now(), this.#lastStamp + 1);
    this.#lastStamp = now;
    return new Date(now).toISOString();
  }

  async #setStatus(run: ActiveRun<U>, status: RunStatus, error?: RunErrorInfo | null): Promise<void> {
    run.row = { ...run.row, status, updated_at: this.#stamp(), ...(error === undefined ? {} : { error }) };
    await this.store.put(run.row);
    await this.journal.record(run.row.thread_id, run.row.run_id, "status", { status, ...(error ? { error } : {}) });
  }

  #workerDeps(): WorkerDeps<U> {
    const options = this.#options;
    return {
      bridge: this.bridge,
      journal: this.journal,
      checkpointer: options.checkpointer,
      threads: options.threads,
      agentFactory: options.agentFactory,
      extensions: this.extensions,
      clock: this.clock,
      ...(options.notifyBudgetMs === undefined ? {} : { notifyBudgetMs: options.notifyBudgetMs }),
      report: (d) => this.#report(d.level, d.source, d.message),
      setStatus: (run, status, error) => this.#setStatus(run, status, error),
    };
  }

  #report(level: RunDiagnostic["level"], source: string, message: string): void {
    try {
      this.#options.onDiagnostic?.({ level, source, message });
    } catch {
      // A broken diagnostics sink must not break a run.
    }
  }
}

function notFound(runId: string): RunOperationError {
  return new RunOperationError("run_not_found", `Run ${runId} not found`);
}

function runKwargs(request: RunRequest): Record<string, unknown> {
  return {
    input: request.input,
    command: request.command,
    config: { configurable: request.configurable, ...(request.recursionLimit === undefined ? {} : { recursion_limit: request.recursionLimit }) },
    context: request.context,
    stream_mode: request.streamMode,
    on_disconnect: request.onDisconnect,
  };
}

function untilAborted(promise: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    promise.then(done, done);
  });
}

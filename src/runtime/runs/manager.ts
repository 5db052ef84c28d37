import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { systemClock } from "../../core/clock.ts";
import { errorMessage } from "../../core/errors.ts";
import { newId } from "../../core/ids.ts";
import { KeyedMutex } from "../../core/keyed-mutex.ts";
import { EMPTY_EXTENSIONS, type LoadedExtensions } from "../../extensions/registry.ts";
import type { KeyValue } from "../../ports/key-value.ts";
import type { Clock, ReclaimMemory } from "../../ports/runtime-ports.ts";
import { readThreadValues } from "./checkpoints.ts";
import type { ClaimResult, RunCoordinator, SweptRun } from "./coordinator.ts";
import { FencedRunJournal, LeaseFence, RunLeaseLostError, type FenceLease } from "./fence.ts";
import { MemoryRunCoordinator } from "./memory-coordinator.ts";
import { IdleReclaimer } from "./reclaim.ts";
import { RunJournal, type JournalEntry, type JournalPage } from "./journal.ts";
import { RunStore, type RunListQuery } from "./run-store.ts";
import { MemoryStreamBridge, type StreamBridge, type StreamFrame } from "./stream-bridge.ts";
import { LocalSignals, type BusSignal, type StreamBus } from "./stream-bus.ts";
import {
  RunOperationError,
  isTerminal,
  type CancelAction,
  type RunAgentFactory,
  type RunDiagnostic,
  type RunErrorInfo,
  type RunPrincipal,
  type RunProbe,
  type RunRecord,
  type RunRequest,
  type RunStatus,
  type RunThreadStore,
} from "./types.ts";
import { requestedAgentName, runContext, runWorker, type ActiveRun, type WorkerDeps } from "./worker.ts";
import { unknownCustomAgent } from "../custom-agents.ts";

export interface RunManagerOptions<U extends RunPrincipal> {
  readonly storage: KeyValue;
  readonly checkpointer: BaseCheckpointSaver;
  readonly threads: RunThreadStore;
  readonly agentFactory: RunAgentFactory<U>;
  readonly extensions?: LoadedExtensions;
  readonly clock?: Clock;
  /** Where runs are admitted, claimed and leased (default: a MemoryRunCoordinator over `storage`: one process). */
  readonly coordinator?: RunCoordinator;
  /** Frames and signals across processes (default: a MemoryStreamBridge). */
  readonly bus?: StreamBus;
  /** The older name of `bus`; a bridge without signals gets this process's own. */
  readonly bridge?: StreamBridge | StreamBus;
  /** This process's id as a worker of the coordinator (default: a fresh one). */
  readonly workerId?: string;
  /** How long past its lease a run of a dead worker is left before the sweep interrupts it (default 10 s). */
  readonly leaseGraceMs?: number;
  /** Fences the checkpointer the agents write through (see fenceCheckpointer); default: one of this manager's own. */
  readonly fence?: LeaseFence;
  readonly onDiagnostic?: (diagnostic: RunDiagnostic) => void;
  /** Model names a run may ask for (`context.model_name`); others are refused with 400 before a run exists. */
  readonly modelNames?: () => readonly string[];
  /** Whether `context.agent_name` names a custom agent; a run naming none is refused with 400 before it exists. */
  readonly customAgentExists?: (name: string) => Promise<boolean>;
  /** The lifecycle hooks' shared budget per pass (default 3 s). */
  readonly notifyBudgetMs?: number;
  readonly storePrefix?: string;
  /**
   * Asked for once the runs went quiet (the last active run finished, or the default bridge dropped
   * its last replay window) and no stream is read through this process: see {@link IdleReclaimer}.
   * Absent: nothing is asked.
   */
  readonly reclaimMemory?: ReclaimMemory;
  /** Measures each run this process executes (the gateway's workspace changes); see RunProbe. */
  readonly probe?: RunProbe<U>;
}

/** What a gateway (or client) that is one of several processes over one store hands its RunManager. */
export interface RunCoordination {
  readonly coordinator: RunCoordinator;
  readonly bus: StreamBus;
  readonly workerId: string;
  readonly leaseGraceMs?: number;
}

/** The RunManagerOptions `coordination` stands for (none when absent: the memory defaults). */
export function coordinationOptions(coordination: RunCoordination | undefined): Pick<RunManagerOptions<RunPrincipal>, "coordinator" | "bus" | "workerId" | "leaseGraceMs"> {
  if (!coordination) return {};
  const { coordinator, bus, workerId, leaseGraceMs } = coordination;
  return { coordinator, bus, workerId, ...(leaseGraceMs === undefined ? {} : { leaseGraceMs }) };
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

/**
 * With several workers, the share of the shutdown budget a draining worker's runs get to finish
 * before they are interrupted; the rest of the budget is for the interrupted runs' cleanup (saves,
 * status, release), which must land before the process exits.
 */
const DRAIN_SHARE = 0.8;

const INTERRUPTED_BY_RESTART: RunErrorInfo = Object.freeze({
  name: "GatewayRestarted",
  message: "The gateway stopped while this run was in flight; start a new run to continue the thread.",
});
const INTERRUPTED_BY_LOST_WORKER: RunErrorInfo = Object.freeze({
  name: "WorkerLost",
  message: "The gateway worker running this run stopped renewing its lease (it crashed or lost its database); start a new run to continue the thread.",
});
const INTERRUPTED_BY_SHUTDOWN: RunErrorInfo = Object.freeze({
  name: "GatewayShutdown",
  message: "The gateway shut down before this run could finish; start a new run to continue the thread.",
});

/**
 * Runs of every thread: admission through the coordinator (multitask strategies, atomic per thread
 * even across processes), one worker per run, cancel, join, stream, and the shutdown drain. Rows
 * live in the coordinator; what a run this process executes is doing right now (its abort
 * controller, its finalizing barrier) lives here only.
 *
 * Rows left pending or running by a process that died belong to no live worker: {@link recover}
 * marks them `interrupted` at startup (call it once before serving); with leases, a sweep does the
 * same for other workers as their leases lapse.
 */
export class RunManager<U extends RunPrincipal = RunPrincipal> {
  readonly store: RunStore;
  readonly journal: RunJournal;
  readonly coordinator: RunCoordinator;
  readonly bus: StreamBus;
  /** The bus, under the name it had when it served one process. */
  readonly bridge: StreamBus;
  readonly fence: LeaseFence;
  readonly workerId: string;
  readonly clock: Clock;
  readonly extensions: LoadedExtensions;
  readonly #options: RunManagerOptions<U>;
  readonly #active = new Map<string, LocalRun<U>>();
  readonly #locks = new KeyedMutex();
  /** Runs waiting for their thread, by thread: woken by a `wake` signal. */
  readonly #waiting = new Map<string, Set<() => void>>();
  readonly #unlisten: () => void;
  readonly #graceMs: number;
  readonly #timers = new AbortController();
  #lastStamp = 0;
  #closing = false;
  readonly #reclaimer: IdleReclaimer | undefined;
  /** Streams read through this process (and joins waiting on another process's run): see {@link #reading}. */
  #readers = 0;

  constructor(options: RunManagerOptions<U>) {
    this.#options = options;
    this.clock = options.clock ?? systemClock;
    this.extensions = options.extensions ?? EMPTY_EXTENSIONS;
    const prefix = options.storePrefix ? { prefix: options.storePrefix } : {};
    this.coordinator = options.coordinator ?? new MemoryRunCoordinator({ storage: options.storage, clock: this.clock, ...prefix });
    this.store = this.coordinator instanceof MemoryRunCoordinator ? this.coordinator.store : new RunStore(options.storage, prefix);
    this.workerId = options.workerId ?? newId("worker");
    this.#graceMs = options.leaseGraceMs ?? 10_000;
    const reclaimer = options.reclaimMemory ? new IdleReclaimer(this.clock, options.reclaimMemory) : undefined;
    this.#reclaimer = reclaimer;
    const given = options.bus ?? options.bridge;
    // A closed replay window is memory given back too: the frames of a burst's runs go 60 s after it.
    this.bus = given
      ? withSignals(given)
      : new MemoryStreamBridge({ clock: this.clock, ...(reclaimer ? { onDrained: () => this.#wentQuiet() } : {}) });
    this.bridge = this.bus;
    this.fence = options.fence ?? new LeaseFence(this.clock);
    this.journal = new FencedRunJournal(options.storage, { clock: this.clock, fence: this.fence });
    this.#unlisten = this.bus.listen((signal) => this.#onSignal(signal));
    if (Number.isFinite(this.coordinator.leaseMs)) {
      void this.#every(this.coordinator.leaseMs / 3, () => this.#renewLeases());
      // A dead worker's run is interrupted by lease + grace at the latest: the sweep comes every
      // half grace (or half lease, if shorter) and allows what is left of the grace after one
      // interval. A live worker renews every lease/3, so its leases never come that close.
      const sweepEveryMs = Math.min(this.coordinator.leaseMs, this.#graceMs) / 2;
      void this.#every(sweepEveryMs, () =>
        this.#sweep(INTERRUPTED_BY_LOST_WORKER, "Interrupted by the sweep: the worker that ran this run stopped renewing its lease.", this.#graceMs - sweepEveryMs),
      );
    }
  }

  /** Marks rows a crashed process left pending or running as interrupted; returns them. */
  async recover(): Promise<RunRecord[]> {
    return this.#sweep(INTERRUPTED_BY_RESTART, "Interrupted by a restart: the gateway process that ran this run ended before the run did.");
  }

  async #sweep(error: RunErrorInfo, reason: string, graceMs = this.#graceMs): Promise<RunRecord[]> {
    const swept: SweptRun[] = await this.coordinator.sweep(error, graceMs);
    for (const { row, previous } of swept) {
      await this.journal
        .append(row.thread_id, row.run_id, "status", { status: "interrupted", error, reason, previous_status: previous })
        .catch((cause: unknown) => this.#report("error", `run ${row.run_id}`, `could not journal its interruption: ${errorMessage(cause)}`));
      await this.#options.threads.update(row.thread_id, { status: "interrupted" }).catch(() => undefined);
      // Readers following it from any process end with it.
      if (await this.bus.has(row.run_id)) await this.bus.end(row.run_id).catch(() => undefined);
    }
    return swept.map((s) => s.row);
  }

  /** Admits a run on `threadId` under its multitask strategy and starts its worker; returns the pending row. */
  async create(threadId: string, request: RunRequest, user: U): Promise<RunRecord> {
    if (this.#closing) throw new RunOperationError("shutting_down", "The gateway is shutting down and accepts no new runs; retry once it is back.");
    this.#checkModel(request);
    await this.#checkAgent(request);
    return this.#locks.run(threadId, async () => {
      if (this.#closing) throw new RunOperationError("shutting_down", "The gateway is shutting down and accepts no new runs; retry once it is back.");
      const strategy = request.multitaskStrategy;
      const stamp = this.#stamp();
      const pending: RunRecord = {
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
      const { row, cancelled } = await this.coordinator.admit(pending, strategy, this.workerId);
      for (const old of cancelled) {
        const local = this.#active.get(old.runId);
        if (local) this.#abort(local, old.action);
        else await this.#signal({ kind: "cancel", run_id: old.runId, thread_id: threadId, action: old.action });
      }
      await this.journal.record(threadId, row.run_id, "status", { status: "pending" });
      await this.bus.open(row.run_id);
      const run = {
        row,
        request,
        user,
        controller: new AbortController(),
        abortAction: null,
        started: false,
        settled: false,
        lost: null,
        lease: null,
        deadline: this.clock.now() + this.coordinator.leaseMs,
        released: false,
      } as unknown as LocalRun<U>;
      run.done = runWorker(this.#workerDeps(), run)
        .catch((cause: unknown) => this.#report("error", `run ${row.run_id}`, `worker crashed: ${errorMessage(cause)}`))
        .finally(() => this.#forget(run));
      this.#active.set(row.run_id, run);
      this.#reclaimer?.busy();
      return row;
    });
  }

  /** What the run's journal holds (status changes, custom events, errors), a page at a time; undefined for an unknown run. */
  async events(
    threadId: string,
    runId: string,
    query: { afterSeq?: number; limit?: number; accept?: (entry: JournalEntry) => boolean } = {},
  ): Promise<JournalPage | undefined> {
    if (!(await this.coordinator.get(threadId, runId))) return undefined;
    return this.journal.list(threadId, runId, query);
  }

  async get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    const active = this.#active.get(runId);
    if (active && active.row.thread_id === threadId) return active.row;
    return this.coordinator.get(threadId, runId);
  }

  async list(threadId: string, query: RunListQuery = {}): Promise<RunRecord[]> {
    const rows = await this.coordinator.list(threadId, query);
    return rows.map((row) => this.#active.get(row.run_id)?.row ?? row);
  }

  /**
   * Holds `threadId` for a delete: refused (409) while a run is in flight in any process, and until
   * the returned release is called no run can start on it, so nothing writes to a thread half gone.
   */
  async reserveThread(threadId: string): Promise<() => Promise<void>> {
    return this.#locks.run(threadId, () => this.coordinator.holdThread(threadId));
  }

  /**
   * Something outside the runs let go of a lot of memory (an upload's body streamed to storage):
   * reclaim it as after the last run, once quiet and if no run is active here (a running one
   * asks when it ends). Without this a server that takes uploads between runs keeps the garbage:
   * 30 uploads of 20 MB left Deno 90 MB up, and 9 MB under its start with this (bench/uploads.ts).
   */
  memoryReleased(): void {
    this.#wentQuiet();
  }

  /** Whether the thread has a run that is queued, running or still finalizing (in any process). */
  hasActiveRun(threadId: string): Promise<boolean> {
    return this.coordinator.hasActiveRun(threadId);
  }

  /**
   * Stops a pending or running run: `interrupt` keeps its checkpoints, `rollback` restores the
   * thread to before it. Cancelling an interrupted run again is a no-op; any other finished run is
   * a 409. A run of another process is asked to stop through the coordinator (durable) and a signal.
   */
  async cancel(threadId: string, runId: string, options: CancelOptions = {}): Promise<RunRecord> {
    let row = await this.get(threadId, runId);
    if (!row) throw notFound(runId);
    const action = options.action ?? "interrupt";
    const active = this.#active.get(runId);
    if (active && !active.settled) {
      this.#abort(active, action);
      if (options.wait) await active.done;
      return active.row;
    }
    if (!active && !isTerminal(row.status)) {
      const request = await this.coordinator.requestCancel(threadId, runId, action);
      if (!request) throw notFound(runId);
      if (request.state === "requested") {
        if (request.ownerWorker === null) {
          throw new RunOperationError("run_not_active", `Run ${runId} is ${row.status} but not active in this gateway, so it cannot be cancelled here.`);
        }
        await this.#signal({ kind: "cancel", run_id: runId, thread_id: threadId, action });
        return options.wait ? this.join(threadId, runId) : request.row;
      }
      row = request.row;
    }
    if (row.status === "interrupted") return row;
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
    let row = await this.coordinator.get(threadId, runId);
    if (!row) throw notFound(runId);
    if (isTerminal(row.status)) return row;
    const release = this.#reading();
    try {
      // Another process runs it: its stream ends after its terminal status is written.
      if (await this.bus.has(runId)) {
        for await (const frame of this.bus.subscribe(runId, signal ? { signal } : {})) if (frame.event === "end") break;
      }
      for (;;) {
        row = (await this.coordinator.get(threadId, runId)) ?? row;
        if (isTerminal(row.status) || signal?.aborted) return row;
        // The bus dropped the log (or has none): the row is the answer, polled.
        try {
          await this.clock.sleep(JOIN_POLL_MS, signal);
        } catch {
          return row;
        }
      }
    } finally {
      release();
    }
  }

  /**
   * The run's frames from the start (or after `lastEventId`), then live ones. A finished run whose
   * frames were released yields just `end`.
   */
  async *stream(threadId: string, runId: string, options: { lastEventId?: string; signal?: AbortSignal } = {}): AsyncGenerator<StreamFrame> {
    const row = await this.get(threadId, runId);
    if (!row) throw notFound(runId);
    if (await this.bus.has(runId)) {
      const release = this.#reading();
      try {
        yield* this.bus.subscribe(runId, options);
      } finally {
        release();
      }
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
    await this.coordinator.delete(threadId, runId);
    await this.journal.deleteRun(threadId, runId);
  }

  /** Forgets every run row and journal entry of a deleted thread. */
  async deleteThread(threadId: string): Promise<void> {
    await this.coordinator.deleteThread(threadId);
    await this.journal.deleteThread(threadId);
  }

  /**
   * Stops this process's runs, within `timeoutMs` in all; runs still unsettled at the deadline are
   * persisted as interrupted. New runs are refused from the first moment. Every run of this process
   * releases its thread, so other workers take the thread.
   *
   * One process (a coordinator without leases): every active run is interrupted at once, since no
   * one else would serve the deployment meanwhile. Several workers (leases): the others keep
   * serving, so this one drains: its runs may finish for the first `drainShare` of the budget, and
   * only those still going then are interrupted, with the rest of it for their cleanup.
   */
  async shutdown(timeoutMs = 5000): Promise<ShutdownReport> {
    this.#closing = true;
    this.#reclaimer?.close();
    const runs = [...this.#active.values()];
    const deadline = new AbortController();
    const settled = new Set<ActiveRun<U>>();
    const all = Promise.all(runs.map((run) => run.done.then(() => void settled.add(run))));
    let cleanupMs = timeoutMs;
    if (Number.isFinite(this.coordinator.leaseMs) && runs.length > 0) {
      const drainMs = Math.floor(timeoutMs * DRAIN_SHARE);
      const drained = new AbortController();
      await Promise.race([all, this.clock.sleep(drainMs, drained.signal).catch(() => undefined)]);
      drained.abort();
      cleanupMs = timeoutMs - drainMs;
    }
    for (const run of runs) if (!run.settled) this.#abort(run, "interrupt");
    await Promise.race([all, this.clock.sleep(cleanupMs, deadline.signal).catch(() => undefined)]);
    deadline.abort();
    const abandoned = runs.filter((run) => !settled.has(run));
    for (const run of abandoned) {
      run.settled = true;
      await this.#setStatus(run, "interrupted", INTERRUPTED_BY_SHUTDOWN).catch(() => undefined);
      await this.journal.close(run.row.thread_id, run.row.run_id).catch(() => undefined);
      await this.bus.end(run.row.run_id).catch(() => undefined);
      await this.#release(run).catch(() => undefined);
    }
    this.#timers.abort();
    this.#unlisten();
    return { drained: runs.length - abandoned.length, abandoned: abandoned.length };
  }

  #abort(run: ActiveRun<U>, action: CancelAction): void {
    if (run.controller.signal.aborted) return;
    run.abortAction = action;
    run.controller.abort(new DOMException(`Run ${run.row.run_id} was cancelled (${action}).`, "AbortError"));
  }

  /** The run can no longer write: another worker may own it now. It ends as `error`. */
  #loseLease(run: LocalRun<U>, cause: string): void {
    if (run.lost || run.released) return;
    const lost = new RunLeaseLostError(`Run ${run.row.run_id} lost its lease: ${cause}`);
    run.lost = lost;
    if (run.lease) run.lease.lost = lost;
    this.#report("error", `run ${run.row.run_id}`, lost.message);
    // An AbortError as a cancel's: the engine stops at once on it (the run ends on `lost`, not on the reason).
    if (!run.controller.signal.aborted) run.controller.abort(new DOMException(lost.message, "AbortError"));
  }

  #onSignal(signal: BusSignal): void {
    if (signal.kind === "cancel") {
      const run = this.#active.get(signal.run_id);
      if (run && !run.settled) this.#abort(run, signal.action);
      return;
    }
    const waiting = this.#waiting.get(signal.thread_id);
    if (!waiting) return;
    this.#waiting.delete(signal.thread_id);
    for (const wake of waiting) wake();
  }

  async #signal(signal: BusSignal): Promise<void> {
    await this.bus.signal(signal).catch((cause: unknown) => this.#report("warning", "runs", `could not send a ${signal.kind} signal: ${errorMessage(cause)}`));
  }

  /** Claims the run's turn on its thread, waiting for a wake-up (or a poll, with leases) while an earlier run holds it. */
  async #acquire(run: LocalRun<U>): Promise<ClaimResult> {
    const { thread_id: threadId, run_id: runId } = run.row;
    const signal = run.controller.signal;
    for (;;) {
      if (run.lost) return "lost";
      if (signal.aborted) return "cancelled";
      // Listening before the claim, so a release between the claim and the wait is not missed.
      let wake!: () => void;
      const woken = new Promise<void>((resolve) => (wake = resolve));
      const waiters = this.#waiting.get(threadId) ?? new Set<() => void>();
      waiters.add(wake);
      this.#waiting.set(threadId, waiters);
      const stop = new AbortController();
      try {
        const result = await this.coordinator.claim(threadId, runId, this.workerId);
        if (result === "claimed") {
          run.lease = this.fence.enter(threadId, runId, run.deadline);
          return result;
        }
        if (result === "cancelled" && !signal.aborted) this.#abort(run, "interrupt");
        if (result === "lost") this.#loseLease(run, "it was taken from this worker before it started");
        if (result !== "waiting") return result;
        const turns: Promise<unknown>[] = [woken, aborted(signal)];
        if (Number.isFinite(this.coordinator.leaseMs)) turns.push(this.clock.sleep(CLAIM_POLL_MS, stop.signal).catch(() => undefined));
        await Promise.race(turns);
      } finally {
        stop.abort();
        waiters.delete(wake);
        if (waiters.size === 0 && this.#waiting.get(threadId) === waiters) this.#waiting.delete(threadId);
      }
    }
  }

  /** The run's last write is done: its thread goes to the next run, in whichever process. */
  async #release(run: LocalRun<U>): Promise<void> {
    if (run.released) return;
    run.released = true;
    if (run.lease) this.fence.leave(run.lease);
    if (run.lost) return;
    await this.coordinator.release(run.row.thread_id, run.row.run_id, this.workerId);
    await this.#signal({ kind: "wake", thread_id: run.row.thread_id });
  }

  async #renewLeases(): Promise<void> {
    const runs = [...this.#active.values()].filter((run) => !run.released && !run.lost);
    if (runs.length === 0) return;
    const asked = this.clock.now();
    let results: ReadonlyMap<string, { owned: boolean; cancel: CancelAction | null }>;
    try {
      results = await this.coordinator.renew(
        this.workerId,
        runs.map((run) => run.row.run_id),
      );
    } catch (cause) {
      const now = this.clock.now();
      for (const run of runs) if (now > run.deadline) this.#loseLease(run, errorMessage(cause));
      return;
    }
    for (const run of runs) {
      const result = results.get(run.row.run_id);
      if (!result?.owned) {
        this.#loseLease(run, "the coordinator no longer counts this worker as its owner (it was swept or its thread deleted)");
        continue;
      }
      run.deadline = asked + this.coordinator.leaseMs;
      if (run.lease) run.lease.deadline = run.deadline;
      if (result.cancel && !run.settled) this.#abort(run, result.cancel);
    }
  }

  /** Runs `step` every `ms` of this manager's clock until shutdown; a failing step is reported, never fatal. */
  async #every(ms: number, step: () => Promise<unknown>): Promise<void> {
    const signal = this.#timers.signal;
    while (!signal.aborted) {
      try {
        await this.clock.sleep(ms, signal);
      } catch {
        return;
      }
      await step().catch((cause: unknown) => this.#report("warning", "runs", `lease upkeep failed: ${errorMessage(cause)}`));
    }
  }

  #forget(run: LocalRun<U>): void {
    this.#active.delete(run.row.run_id);
    if (run.lease) this.fence.leave(run.lease);
    this.#wentQuiet();
  }

  /** Asks for a reclaim once quiet when nothing here needs a steady event loop: no run of this process, no stream read through it. */
  #wentQuiet(): void {
    if (this.#active.size === 0 && this.#readers === 0) this.#reclaimer?.idle();
  }

  /**
   * Marks a stream read (or a join waiting) through this process until the returned release: no
   * reclaim meanwhile. A worker that serves a run of another worker has no run of its own, and its
   * reclaim (a full collection, 80-120 ms with 60 MB live, measured in bench/cluster) stalled every
   * frame it was relaying: the remote reader's p99.
   */
  #reading(): () => void {
    this.#readers += 1;
    this.#reclaimer?.busy();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#readers -= 1;
      this.#wentQuiet();
    };
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

  async #checkAgent(request: RunRequest): Promise<void> {
    const name = requestedAgentName(runContext(request));
    if (name === undefined || !this.#options.customAgentExists) return;
    if (!(await this.#options.customAgentExists(name))) throw unknownCustomAgent(name);
  }

  /** Strictly increasing ISO stamps, so creation order survives a tie of the clock. */
  #stamp(): string {
    const now = Math.max(this.clock.now(), this.#lastStamp + 1);
    this.#lastStamp = now;
    return new Date(now).toISOString();
  }

  /** False when nothing was written: the run lost its lease (it is aborted then). */
  async #setStatus(run: LocalRun<U>, status: RunStatus, error?: RunErrorInfo | null): Promise<boolean> {
    run.row = { ...run.row, status, updated_at: this.#stamp(), ...(error === undefined ? {} : { error }) };
    if (run.lost) return false;
    // The claim wrote `running` already; the journal still tells of it.
    if (status !== "running" && !(await this.coordinator.update(run.row, this.workerId))) {
      this.#loseLease(run, "its status write was refused: another worker owns it now");
      return false;
    }
    await this.journal.record(run.row.thread_id, run.row.run_id, "status", { status, ...(error ? { error } : {}) });
    return true;
  }

  #workerDeps(): WorkerDeps<U> {
    const options = this.#options;
    return {
      bridge: this.bus,
      journal: this.journal,
      checkpointer: options.checkpointer,
      threads: options.threads,
      agentFactory: options.agentFactory,
      extensions: this.extensions,
      clock: this.clock,
      ...(options.notifyBudgetMs === undefined ? {} : { notifyBudgetMs: options.notifyBudgetMs }),
      report: (d) => this.#report(d.level, d.source, d.message),
      ...(options.probe ? { probe: options.probe } : {}),
      setStatus: (run, status, error) => this.#setStatus(run as LocalRun<U>, status, error),
      acquire: (run) => this.#acquire(run as LocalRun<U>),
      release: (run) => this.#release(run as LocalRun<U>),
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

/** How often a run waiting for its thread asks again when a wake-up may be lost (leases: many processes). */
const CLAIM_POLL_MS = 1000;
/** How often a join of another process's run reads its row once the bus has no log of it. */
const JOIN_POLL_MS = 1000;

/** A run this process executes. */
interface LocalRun<U extends RunPrincipal> extends ActiveRun<U> {
  done: Promise<void>;
  /** Set once claimed: what the fence checks. */
  lease: FenceLease | null;
  /** The local lease deadline: the last successful renewal (or the admission) plus the lease. */
  deadline: number;
  released: boolean;
}

/** A bus as given, or a plain bridge with this process's own signals. */
function withSignals(given: StreamBridge | StreamBus): StreamBus {
  if ("signal" in given && "listen" in given) return given;
  const signals = new LocalSignals();
  const bridge = given as StreamBridge;
  return {
    open: (runId) => bridge.open(runId),
    publish: (runId, event, data) => bridge.publish(runId, event, data),
    end: (runId) => bridge.end(runId),
    has: (runId) => bridge.has(runId),
    subscribe: (runId, options) => bridge.subscribe(runId, options),
    release: (runId, delayMs) => bridge.release(runId, delayMs),
    signal: (signal) => signals.signal(signal),
    listen: (handler) => signals.listen(handler),
    close: async () => {
      signals.clear();
      await bridge.close();
    },
  };
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
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

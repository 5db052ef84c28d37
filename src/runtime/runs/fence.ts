import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { systemClock } from "../../core/clock.ts";
import { DeerflowError } from "../../core/errors.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import { RunJournal } from "./journal.ts";
import { trackCheckpointWrites, wrapSaverWrites } from "./settle.ts";

/*
 * The worker's side of the owner check. The coordinator refuses a status write or a release from a
 * worker that no longer owns the run; checkpoints and journal entries go to storage directly, so
 * this process refuses them itself once a run it executes lost its lease (told so, or its lease
 * deadline passed without a renewal): a worker stopped past its lease, then resumed, can no longer
 * write over the thread a new owner may be running.
 */

/** A run of this process can no longer write: another worker may own it (or its thread) now. */
export class RunLeaseLostError extends DeerflowError {
  declare readonly code: "run_lease_lost";

  constructor(message: string) {
    super("run_lease_lost", message);
    this.name = "RunLeaseLostError";
  }
}

/** A claimed run's lease as this process knows it. */
export interface FenceLease {
  readonly runId: string;
  readonly threadId: string;
  /** Epoch ms after which the lease counts as gone (Infinity: never). */
  deadline: number;
  /** Why the lease is gone, once it is. */
  lost: RunLeaseLostError | null;
}

export class LeaseFence {
  readonly #clock: Clock;
  readonly #byThread = new Map<string, Set<FenceLease>>();

  constructor(clock: Clock = systemClock) {
    this.#clock = clock;
  }

  /** Starts fencing writes to `threadId` by the lease of `runId`; the returned lease is updated by its owner. */
  enter(threadId: string, runId: string, deadline: number): FenceLease {
    const lease: FenceLease = { runId, threadId, deadline, lost: null };
    const leases = this.#byThread.get(threadId) ?? new Set<FenceLease>();
    leases.add(lease);
    this.#byThread.set(threadId, leases);
    return lease;
  }

  leave(lease: FenceLease): void {
    const leases = this.#byThread.get(lease.threadId);
    if (!leases) return;
    leases.delete(lease);
    if (leases.size === 0) this.#byThread.delete(lease.threadId);
  }

  /** Why writes to `threadId` are refused now; undefined when they are not. */
  refusal(threadId: string): RunLeaseLostError | undefined {
    const leases = this.#byThread.get(threadId);
    if (!leases) return undefined;
    const now = this.#clock.now();
    for (const lease of leases) {
      if (lease.lost) return lease.lost;
      if (now > lease.deadline) {
        return new RunLeaseLostError(
          `Run ${lease.runId} lost its lease on thread ${lease.threadId}: it was not renewed in time, so this worker no longer writes to the thread.`,
        );
      }
    }
    return undefined;
  }

  /** Throws RunLeaseLostError when writes to `threadId` are refused. */
  check(threadId: string): void {
    const refusal = this.refusal(threadId);
    if (refusal) throw refusal;
  }
}

/** The same saver, refusing `put` and `putWrites` for a thread `fence` refuses. */
export function fenceCheckpointer<T extends BaseCheckpointSaver>(saver: T, fence: LeaseFence): T {
  return wrapSaverWrites(saver, async (threadId, write) => {
    if (threadId !== undefined) fence.check(threadId);
    return write();
  });
}

/**
 * The saver a gateway or an embedded client hands its agents and its run manager: fenced (a run
 * of this process that lost its lease writes no checkpoint), then tracked (a cancelled run's
 * cleanup waits for its saves).
 */
export function runSaver<T extends BaseCheckpointSaver>(saver: T, fence: LeaseFence): T {
  return trackCheckpointWrites(fenceCheckpointer(saver, fence));
}

/** A journal that writes nothing for a thread `fence` refuses (what was queued is dropped with the run). */
export class FencedRunJournal extends RunJournal {
  readonly #fence: LeaseFence;

  constructor(storage: ConstructorParameters<typeof RunJournal>[0], options: ConstructorParameters<typeof RunJournal>[1] & { fence: LeaseFence }) {
    super(storage, options);
    this.#fence = options.fence;
  }

  override record(threadId: string, runId: string, kind: Parameters<RunJournal["record"]>[2], data: unknown): Promise<void> {
    if (this.#fence.refusal(threadId)) return Promise.resolve();
    return super.record(threadId, runId, kind, data);
  }

  override flush(threadId: string, runId: string): Promise<void> {
    if (this.#fence.refusal(threadId)) return Promise.resolve();
    return super.flush(threadId, runId);
  }
}

import type { Clock, ReclaimMemory } from "../../ports/runtime-ports.ts";

/** Quiet time after the last run before memory is reclaimed: a burst's runs end close together. */
const QUIET_MS = 2000;
/**
 * At most one reclaim this often: each is a full (on Node compacting) collection that holds the
 * event loop for a while (0.3-1.2 s with 80 MB live on a loaded 2-core machine), though only once
 * no run has been active for QUIET_MS.
 */
const MIN_INTERVAL_MS = 30_000;

/**
 * Calls `reclaim` once the runs went quiet: `idle()` when nothing is running any more (or a
 * resource the runs left behind was dropped), `busy()` when a run starts. A reclaim fires `quietMs`
 * after the last `idle()` with no `busy()` in between, and never twice within `minIntervalMs`
 * (one asked for too soon waits for the interval to pass).
 */
export class IdleReclaimer {
  readonly #clock: Clock;
  readonly #reclaim: ReclaimMemory;
  readonly #quietMs: number;
  readonly #minIntervalMs: number;
  #pending: AbortController | undefined;
  #last = -Infinity;
  #closed = false;

  constructor(clock: Clock, reclaim: ReclaimMemory, options: { quietMs?: number; minIntervalMs?: number } = {}) {
    this.#clock = clock;
    this.#reclaim = reclaim;
    this.#quietMs = options.quietMs ?? QUIET_MS;
    this.#minIntervalMs = options.minIntervalMs ?? MIN_INTERVAL_MS;
  }

  busy(): void {
    this.#pending?.abort();
    this.#pending = undefined;
  }

  idle(): void {
    if (this.#closed) return;
    this.busy();
    const pending = new AbortController();
    this.#pending = pending;
    const wait = Math.max(this.#quietMs, this.#last + this.#minIntervalMs - this.#clock.now());
    this.#clock.sleep(wait, pending.signal).then(
      () => {
        if (this.#pending !== pending) return;
        this.#pending = undefined;
        this.#last = this.#clock.now();
        try {
          this.#reclaim();
        } catch {
          // A hint: a runtime that refuses it changes nothing for the runs.
        }
      },
      () => undefined,
    );
  }

  close(): void {
    this.#closed = true;
    this.busy();
  }
}

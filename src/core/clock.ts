/** Wall clock and timers; tests swap in a manual clock. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

/** The wall clock: Date.now and setTimeout. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(abortReason(signal!));
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, Math.max(0, ms));
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
};

interface PendingSleep {
  readonly due: number;
  readonly seq: number;
  readonly resolve: () => void;
}

/**
 * A clock that only moves when a test calls `advance`. Sleeps resolve in due order, and a sleep
 * started by code woken during an advance still fires within that same advance if it falls due.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #pending: PendingSleep[] = [];

  constructor(startMs = 0) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  /** Sleeps not yet resolved or aborted. */
  get pendingSleeps(): number {
    return this.#pending.length;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    if (ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const entry: PendingSleep = {
        due: this.#now + ms,
        seq: this.#seq++,
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.#pending = this.#pending.filter((p) => p !== entry);
        reject(abortReason(signal!));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#pending.push(entry);
    });
  }

  /** Moves time forward by `ms`, resolving every sleep that falls due, earliest first. */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0)) throw new RangeError(`ManualClock.advance needs a non-negative number of ms, got ${ms}`);
    const target = this.#now + ms;
    for (;;) {
      await settle();
      const next = this.#nextDue(target);
      if (!next) break;
      this.#pending = this.#pending.filter((p) => p !== next);
      this.#now = next.due;
      next.resolve();
    }
    this.#now = target;
    await settle();
  }

  #nextDue(target: number): PendingSleep | undefined {
    let best: PendingSleep | undefined;
    for (const p of this.#pending) {
      if (p.due > target) continue;
      if (!best || p.due < best.due || (p.due === best.due && p.seq < best.seq)) best = p;
    }
    return best;
  }
}

/** Lets the promise continuations of woken sleepers run before time moves on. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/*
 * A cap on model calls in flight. A provider's burst-rate limit fires on the slope of the request
 * rate, so the cap has to bound the aggregate of every agent built from one configuration (lead
 * and subagents alike), not one middleware instance. One permit covers one attempt, never the
 * retry loop: a call sleeping in backoff holds no permit.
 */

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

interface Waiter {
  readonly grant: () => void;
}

export class LlmCallLimiter {
  readonly limit: number;
  #inFlight = 0;
  #waiters: Waiter[] = [];

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`LlmCallLimiter needs a positive integer limit, got ${String(limit)}`);
    }
    this.limit = limit;
  }

  /** Calls holding a permit. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Calls waiting for a permit. */
  get queued(): number {
    return this.#waiters.length;
  }

  /**
   * Takes a permit, waiting in FIFO order when none is free. An abort while waiting leaves the
   * queue and rejects; a permit handed over just as the abort lands is passed on, never lost.
   */
  async acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw abortReason(signal);
    if (this.#inFlight < this.limit) {
      this.#inFlight += 1;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(abortReason(signal!));
      };
      const waiter: Waiter = {
        grant: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(waiter);
    });
    // The permit was transferred to us; if the run was cancelled in between, hand it on.
    if (signal?.aborted) {
      this.release();
      throw abortReason(signal);
    }
  }

  /** Returns a permit, transferring it to the longest waiter when there is one. */
  release(): void {
    const next = this.#waiters.shift();
    if (next) {
      next.grant();
      return;
    }
    if (this.#inFlight > 0) this.#inFlight -= 1;
  }

  /** Runs `fn` under a permit, released however `fn` ends. */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.acquire(signal);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }
}

// Keyed by the caller's `llm_call` config object, so every middleware built from one loaded
// configuration shares one limiter while two configurations (two tests, a reloaded config) never
// do; an entry lives exactly as long as its config object.
const limitersByConfig = new WeakMap<object, LlmCallLimiter>();

/**
 * The limiter shared by everything built from this `llm_call` section, created on first use with
 * that section's cap (later instances reuse it as it is). Undefined when the cap is 0 (off).
 */
export function sharedLlmCallLimiter(section: object | undefined, limit: number): LlmCallLimiter | undefined {
  if (limit <= 0) return undefined;
  if (section === undefined) return new LlmCallLimiter(limit);
  let limiter = limitersByConfig.get(section);
  if (!limiter) {
    limiter = new LlmCallLimiter(limit);
    limitersByConfig.set(section, limiter);
  }
  return limiter;
}

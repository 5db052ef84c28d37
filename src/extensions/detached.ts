import type { Clock } from "../ports/runtime-ports.ts";

/*
 * Observations the host runs in the background, outside any live task: the report of a system
 * model call that ended cancelled, a context-compaction report, the observation of system work with
 * no run (memory extraction after the run). At shutdown the host stops accepting them before the
 * memory flush (spec: "Shutdown stops accepting detached observations before the memory shutdown
 * flush"), after the run drain, so the interrupts a drain causes are still reported; then it waits
 * for the ones it accepted before the services they may use are stopped.
 */
export class DetachedObservations {
  #accepting = true;
  readonly #pending = new Set<Promise<void>>();

  /** False once `close()` was called: a new observation is dropped, never started. */
  get accepting(): boolean {
    return this.#accepting;
  }

  /** Accepted observations still running. */
  get pending(): number {
    return this.#pending.size;
  }

  /**
   * Starts `observe` in the background and tracks it, or, once closed, starts nothing and returns
   * false. `observe` contains its own failures; a rejection that escapes is absorbed here.
   */
  submit(observe: () => Promise<void>): boolean {
    if (!this.#accepting) return false;
    const running = (async () => {
      await observe();
    })().catch(() => undefined);
    this.#pending.add(running);
    void running.finally(() => this.#pending.delete(running));
    return true;
  }

  /**
   * Stops accepting, then waits for every observation accepted before: true once all settled,
   * false when `within`'s budget ran out first (they go on in the background). Idempotent.
   */
  async close(within?: { readonly timeoutMs: number; readonly clock: Clock }): Promise<boolean> {
    this.#accepting = false;
    const settled = (async () => {
      while (this.#pending.size > 0) await Promise.all([...this.#pending]);
      return true;
    })();
    if (within === undefined || this.#pending.size === 0) return settled;
    const timer = new AbortController();
    try {
      return await Promise.race([settled, within.clock.sleep(within.timeoutMs, timer.signal).then(() => false, () => false)]);
    } finally {
      timer.abort();
    }
  }
}

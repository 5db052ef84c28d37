/** One abort signal for the caller's signal and our own (idle) timeout. */
export class Deadline {
  readonly #controller = new AbortController();
  readonly #outer: AbortSignal | undefined;
  readonly #ms: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  timedOut = false;

  constructor(ms: number, outer: AbortSignal | undefined) {
    this.#ms = ms;
    this.#outer = outer;
    if (outer?.aborted) this.#controller.abort(outer.reason);
    else outer?.addEventListener("abort", this.#onOuterAbort, { once: true });
    this.reset();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get callerAborted(): boolean {
    return this.#outer?.aborted === true;
  }

  reset(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.timedOut = true;
      this.#controller.abort(new DOMException("model call timed out", "TimeoutError"));
    }, this.#ms);
  }

  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#outer?.removeEventListener("abort", this.#onOuterAbort);
  }

  #onOuterAbort = (): void => {
    this.#controller.abort(this.#outer?.reason);
  };
}

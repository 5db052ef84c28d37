/**
 * Why a run failed although its graph ran to the end: decided by the middleware that knows it (the
 * model provider failed after retries: LLMErrorHandling; an empty final reply: TerminalResponse),
 * recorded through the run scope and read off the engine's RunRecord by whoever reports the run.
 */
export interface RunFailure {
  readonly name: string;
  readonly message: string;
}

/**
 * Per-run mutable facts (stop reason, activation tokens, policy decisions). The engine creates one
 * scope per run and hands it to hooks through runtime.scope; nothing the caller passes in can
 * reach or replace it, which is what keeps caller context read-only.
 */
export class RunScope {
  readonly #values = new Map<string, unknown>();
  #failure: RunFailure | undefined;
  readonly runId: string;

  constructor(runId: string) {
    this.runId = runId;
  }

  get<T = unknown>(key: string): T | undefined {
    return this.#values.get(key) as T | undefined;
  }

  has(key: string): boolean {
    return this.#values.has(key);
  }

  set(key: string, value: unknown): void {
    this.#values.set(key, value);
  }

  delete(key: string): boolean {
    return this.#values.delete(key);
  }

  /** Reads and removes a value in one step (a stop reason is consumed once). */
  take<T = unknown>(key: string): T | undefined {
    const value = this.#values.get(key) as T | undefined;
    this.#values.delete(key);
    return value;
  }

  /** Marks the run failed; a later mark replaces an earlier one. */
  fail(failure: RunFailure): void {
    this.#failure = Object.freeze({ name: failure.name, message: failure.message });
  }

  /** Withdraws a failure marked earlier in the run: a later model call answered after all. */
  clearFailure(): void {
    this.#failure = undefined;
  }

  /** The run's failure as last marked, if any. */
  get failure(): RunFailure | undefined {
    return this.#failure;
  }

  /** A JSON-safe copy of the scope for diagnostics. */
  snapshot(): Record<string, unknown> {
    return Object.fromEntries(this.#values);
  }
}

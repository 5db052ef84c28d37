/**
 * Per-run mutable facts (stop reason, activation tokens, policy decisions). The engine creates one
 * scope per run and hands it to hooks through runtime.scope; nothing the caller passes in can
 * reach or replace it, which is what keeps caller context read-only.
 */
export class RunScope {
  readonly #values = new Map<string, unknown>();
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

  /** A JSON-safe copy of the scope for diagnostics. */
  snapshot(): Record<string, unknown> {
    return Object.fromEntries(this.#values);
  }
}

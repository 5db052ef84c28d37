/**
 * An async mutex per key: bodies under one key run one after another in arrival order, bodies under
 * different keys run freely. A key's entry is dropped as soon as nobody holds or waits for it, so
 * the table only ever holds keys that are in use right now.
 */
export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(key: string, body: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => held);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await body();
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }

  /** Keys currently held or awaited (for tests and diagnostics). */
  get size(): number {
    return this.#tails.size;
  }
}

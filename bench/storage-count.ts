/**
 * The storage-write counting decorator the benches share (bench/storage-writes.ts, bench/profile.ts):
 * a KeyValue wrapped so every call through it is counted, overall and by key prefix, and forwarded
 * unchanged. What is counted: writes (setItem, setItemRaw, removeItem, one per item of setItems;
 * the versioned port's compare-and-set writes go through setItem and are counted there), bytes
 * written (UTF-8 length of a string, byteLength of bytes, the JSON of anything else), reads
 * (getItem, getItemRaw, hasItem, one per item of getItems) and key listings (getKeys).
 */
import type { KeyValue } from "../src/ports/key-value.ts";

const encoder = new TextEncoder();

export interface Tally {
  writes: number;
  removes: number;
  bytes: number;
  reads: number;
  listings: number;
}

export const emptyTally = (): Tally => ({ writes: 0, removes: 0, bytes: 0, reads: 0, listings: 0 });

function sizeOf(value: unknown): number {
  if (value === null || value === undefined) return 0;
  if (typeof value === "string") return encoder.encode(value).byteLength;
  if (value instanceof Uint8Array) return value.byteLength;
  if (value instanceof ArrayBuffer) return value.byteLength;
  return encoder.encode(JSON.stringify(value)).byteLength;
}

const CHECKPOINT_KINDS: Record<string, string> = { c: "checkpoint", b: "blob", w: "write" };

/**
 * The kind of record a key holds: its leading non-id segments. Checkpointer keys
 * (`<prefix>:<thread>:<ns>:<kind>:...`, ids hex-encoded as x.. / y.. pieces) become
 * `<prefix>:<kind>`; other keys keep their segments up to the first that looks like an id.
 */
export function prefixOf(key: string): string {
  const pieces = key.split(/[:/]/).filter((p) => p !== "");
  const named: string[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i]!;
    if (/^[xy](?:[0-9a-f]{2})*$/.test(piece)) {
      // A checkpointer key: skip the encoded thread and namespace, then the record kind.
      const kind = pieces.slice(i).find((p) => p in CHECKPOINT_KINDS);
      return [...named, ...(kind === undefined ? [] : [CHECKPOINT_KINDS[kind]!])].join(":");
    }
    const looksLikeId = /[0-9a-f]{8}-[0-9a-f]{4}-/.test(piece) || /\d{6,}/.test(piece) || piece.length > 24 || named.length >= 3;
    if (looksLikeId) break;
    named.push(piece);
  }
  return named.join(":") || "(root)";
}

export class Counter {
  total = emptyTally();
  byPrefix = new Map<string, Tally>();

  readonly #splitByPrefix: boolean;

  /** `byPrefix: false` counts the totals only (no key parsing per call: bench/profile.ts profiles through it). */
  constructor(options: { readonly byPrefix?: boolean } = {}) {
    this.#splitByPrefix = options.byPrefix ?? true;
  }

  #tallies(key: string): Tally[] {
    return this.#splitByPrefix ? [this.total, this.#at(key)] : [this.total];
  }

  #at(key: string): Tally {
    const prefix = prefixOf(key);
    let tally = this.byPrefix.get(prefix);
    if (tally === undefined) this.byPrefix.set(prefix, (tally = emptyTally()));
    return tally;
  }

  write(key: string, value: unknown): void {
    const bytes = sizeOf(value);
    for (const t of this.#tallies(key)) {
      t.writes++;
      t.bytes += bytes;
    }
  }

  remove(key: string): void {
    for (const t of this.#tallies(key)) {
      t.writes++;
      t.removes++;
    }
  }

  read(key: string): void {
    for (const t of this.#tallies(key)) t.reads++;
  }

  list(base: string): void {
    for (const t of this.#tallies(base)) t.listings++;
  }

  reset(): void {
    this.total = emptyTally();
    this.byPrefix = new Map();
  }
}

const keyOf = (item: unknown): string => (typeof item === "string" ? item : String((item as { key: string }).key));

/** A KeyValue that counts every call through it and forwards it unchanged. */
export function counting(storage: KeyValue, counter: Counter): KeyValue {
  const wrap: Record<string, (...args: any[]) => unknown> = {
    setItem: (key: string, value: unknown) => counter.write(key, value),
    setItemRaw: (key: string, value: unknown) => counter.write(key, value),
    removeItem: (key: string) => counter.remove(key),
    getItem: (key: string) => counter.read(key),
    getItemRaw: (key: string) => counter.read(key),
    hasItem: (key: string) => counter.read(key),
    getKeys: (base?: string) => counter.list(base ?? ""),
    setItems: (items: Array<{ key: string; value: unknown }>) => {
      for (const item of items) counter.write(item.key, item.value);
    },
    getItems: (items: unknown[]) => {
      for (const item of items) counter.read(keyOf(item));
    },
  };
  return new Proxy(storage, {
    get(target, property, receiver) {
      const original = Reflect.get(target, property, receiver);
      const count = typeof property === "string" ? wrap[property] : undefined;
      if (count === undefined || typeof original !== "function") return original;
      return (...args: unknown[]) => {
        count(...args);
        return (original as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

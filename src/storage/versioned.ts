import { DeerflowError } from "../core/errors.ts";
import { KeyedMutex } from "../core/keyed-mutex.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { VersionedKeyValue, VersionedValue } from "../ports/versioned-key-value.ts";

/*
 * Compare-and-set over a KeyValue that only this process writes (the memory and fs drivers): a
 * per-key mutex makes check and write one step. The version is the stored text itself, so a write
 * that went straight to the KeyValue (an older code path, a hand edit) still changes it, which a
 * counter kept in memory would miss. Two processes over one fs folder are not coordinated by this:
 * each has its own mutex; a deployment of several processes passes a store that can compare-and-set
 * (PostgreSQL, Deno KV).
 */

const decoder = new TextDecoder();

function asText(raw: unknown): string | null {
  if (raw === null || raw === undefined) return null;
  if (typeof raw === "string") return raw;
  if (raw instanceof Uint8Array) return decoder.decode(raw);
  if (raw instanceof ArrayBuffer) return decoder.decode(new Uint8Array(raw));
  // A driver that keeps parsed values (none of ours does): the text getItem would round-trip.
  return JSON.stringify(raw);
}

/** `v:` keeps the version of an empty value distinct from null (nothing there). */
const versionOf = (text: string | null): string | null => (text === null ? null : `v:${text}`);

export class KeyValueVersioned implements VersionedKeyValue {
  readonly #storage: KeyValue;
  readonly #locks = new KeyedMutex();

  constructor(storage: KeyValue) {
    this.#storage = storage;
  }

  async #text(key: string): Promise<string | null> {
    return asText(await this.#storage.getItemRaw(key));
  }

  async read(key: string): Promise<VersionedValue> {
    const value = await this.#text(key);
    return { value, version: versionOf(value) };
  }

  write(key: string, value: string | null, expected: string | null): Promise<boolean> {
    return this.#locks.run(key, async () => {
      if (versionOf(await this.#text(key)) !== expected) return false;
      if (value === null) await this.#storage.removeItem(key);
      // setItem keeps a string as it is, so getItem still parses what was written as JSON.
      else await this.#storage.setItem(key, value);
      return true;
    });
  }
}

const shared = new WeakMap<KeyValue, VersionedKeyValue>();

/**
 * The in-process VersionedKeyValue of a KeyValue, one per KeyValue, so every consumer in this
 * process (threads, memory, auth, sandbox) shares one lock table over the same keys.
 */
export function versionedOver(storage: KeyValue): VersionedKeyValue {
  let versioned = shared.get(storage);
  if (versioned === undefined) {
    versioned = new KeyValueVersioned(storage);
    shared.set(storage, versioned);
  }
  return versioned;
}

/** Why a read-modify-write gave up: the record kept changing under it. */
export const CAS_MAX_ATTEMPTS = 64;

/**
 * Read-modify-write with retry: `change` gets what the key holds now and returns what it should
 * hold (null deletes; undefined: leave it, and `update` returns undefined). Retried from a fresh
 * read whenever another writer got there first, so no concurrent change is lost.
 */
export async function updateVersioned<T>(
  versioned: VersionedKeyValue,
  key: string,
  change: (current: string | null) => { value: string | null; result: T } | undefined | Promise<{ value: string | null; result: T } | undefined>,
): Promise<T | undefined> {
  for (let attempt = 0; attempt < CAS_MAX_ATTEMPTS; attempt++) {
    const { value, version } = await versioned.read(key);
    const next = await change(value);
    if (next === undefined) return undefined;
    if (next.value === value) return next.result;
    if (await versioned.write(key, next.value, version)) return next.result;
  }
  throw new VersionedConflictError(key);
}

export class VersionedConflictError extends DeerflowError {
  declare readonly code: "storage_write_conflict";
  constructor(key: string) {
    super(
      "storage_write_conflict",
      `The record ${key} changed under every one of ${CAS_MAX_ATTEMPTS} attempts to update it, so the update was not written; retry the request.`,
    );
    this.name = "VersionedConflictError";
  }
}

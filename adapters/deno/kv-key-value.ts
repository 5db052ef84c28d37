import { createStorage, type Driver, type StorageValue } from "unstorage";
import { DeerflowError } from "../../src/core/errors.ts";
import { DENO_KV_NEEDS_DENO, StorageConfigError } from "../shared/storage.ts";
import type { KeyValue } from "../../src/ports/key-value.ts";
import type { VersionedKeyValue } from "../../src/ports/versioned-key-value.ts";

/**
 * The part of Deno KV this driver uses (the project type-checks with @types/node, not Deno's lib).
 * Any object with this shape works, so a test can wrap a real `Deno.openKv()` to inject failures.
 */
export interface DenoKvLike {
  get(key: DenoKvKey): Promise<DenoKvEntry>;
  getMany(keys: DenoKvKey[]): Promise<DenoKvEntry[]>;
  list(selector: { prefix: DenoKvKey }, options?: { batchSize?: number }): AsyncIterable<DenoKvEntry>;
  atomic(): DenoKvAtomic;
  close(): void;
}
/** What run coordination needs beyond the KeyValue's part: `watch` (a real `Deno.Kv` has it). */
export interface DenoKvWatchable extends DenoKvLike {
  watch(keys: DenoKvKey[]): ReadableStream<DenoKvEntry[]>;
  list(
    selector: { prefix: DenoKvKey } | { start: DenoKvKey; end: DenoKvKey },
    options?: { batchSize?: number; limit?: number; reverse?: boolean },
  ): AsyncIterable<DenoKvEntry>;
}
export type DenoKvKey = readonly (string | number)[];
export interface DenoKvEntry {
  readonly key: DenoKvKey;
  readonly value: unknown;
  readonly versionstamp: string | null;
}
export interface DenoKvAtomic {
  check(...checks: { key: DenoKvKey; versionstamp: string | null }[]): DenoKvAtomic;
  set(key: DenoKvKey, value: unknown, options?: { expireIn?: number }): DenoKvAtomic;
  delete(key: DenoKvKey): DenoKvAtomic;
  commit(): Promise<{ ok: boolean }>;
}

/**
 * Deno KV's limits (deno ext/kv, the same for a local file and for Deno Deploy; checked on Deno
 * 2.9.6): a value up to 64 KiB, at most 1000 mutations and 800 KiB of keys plus values per atomic
 * commit, at most 80 KiB of keys per commit, at most 10 keys per getMany.
 */
export const DENO_KV_LIMITS = {
  valueBytes: 64 * 1024,
  mutationsPerCommit: 1000,
  commitBytes: 800 * 1024,
  commitKeyBytes: 80 * 1024,
} as const;

/** Bytes of one chunk: a Uint8Array value is stored as is, so a chunk may fill the whole value limit. */
const CHUNK_BYTES = DENO_KV_LIMITS.valueBytes;
/** What a commit of chunks may carry, leaving room for the head, its checks and deletes. */
const COMMIT_BUDGET = DENO_KV_LIMITS.commitBytes - 16 * 1024;
/** A string this short fits one value however V8 serializes it (two bytes a character at worst). */
const INLINE_STRING_CHARS = 32 * 1024 - 64;
/** A generation marker this old belongs to a write that died (a crash between chunks and head): swept. */
const STALE_GENERATION_MS = 15 * 60 * 1000;

/**
 * The key layout, under an optional prefix:
 *   ["k", ...key]      the head: { t: "s" | "b", n: chunks, s: bytes, g?: generation }; the only
 *                      key space getKeys lists, so listing never reads a value
 *   ["v", ...key]      the whole value when it fits one Deno KV value (n = 0)
 *   ["c", g, i]        chunk i of generation g
 *   ["p", g]           { at }: generation g is not referenced by any head (being written, or replaced)
 */
type Head = { t: "s" | "b"; n: number; s: number; g?: string };

export interface DenoKvOptions {
  /** A local KV file (Deno.openKv(path)); Deno's default database when absent. */
  path?: string | undefined;
  /** An already open KV (or a wrapper of one); `path` is then ignored and dispose() closes it. */
  kv?: DenoKvLike | Promise<DenoKvLike>;
  /** Key prefix inside the database, so several stores can share one. */
  prefix?: readonly string[];
  /** A generation unreferenced for this long belongs to a write that died; swept on open (default 15 min). */
  staleGenerationMs?: number;
}

/** A KeyValue on Deno KV: values of any size, each replaced atomically (see createDenoKvDriver). */
export function createDenoKvKeyValue(options: DenoKvOptions = {}): KeyValue {
  // Opened now, so a Deno without --unstable-kv is refused before anything starts.
  const kv = options.kv ?? openDenoKv(options.path);
  return createStorage({ driver: createDenoKvDriver({ ...options, kv }) });
}

/**
 * An unstorage driver over Deno KV. A value past the 64 KiB value limit is split into chunks
 * written under a fresh generation id; a small head record then points at that generation, in one
 * atomic commit that also checks the head it replaces. The head flip is the only moment the value
 * changes, so a reader sees the old value or the new one, never half of either, and a write that
 * fails before the flip leaves the old value whole. A value whose chunks fit one commit (about
 * 780 KiB) goes in a single commit with its head; a larger one is written a commit at a time first.
 * The replaced generation is deleted after the flip; one left by a crash is swept on the next open.
 */
export function createDenoKvDriver(options: DenoKvOptions = {}): Driver {
  return createDenoKvRecords(options).driver;
}

/** The driver and a compare-and-set over the same keys (the head's versionstamp is the version). */
export function createDenoKvRecords(options: DenoKvOptions = {}): { driver: Driver; versioned: VersionedKeyValue } {
  const prefix = [...(options.prefix ?? [])];
  const K = (segs: readonly string[]): DenoKvKey => [...prefix, "k", ...segs];
  const V = (segs: readonly string[]): DenoKvKey => [...prefix, "v", ...segs];
  const C = (g: string, i: number): DenoKvKey => [...prefix, "c", g, i];
  const P = (g: string): DenoKvKey => [...prefix, "p", g];
  let opened: Promise<DenoKvLike> | undefined;
  const kvOf = (): Promise<DenoKvLike> => {
    if (!opened) {
      opened = Promise.resolve(options.kv ?? openDenoKv(options.path)).then(async (kv) => {
        await sweepStaleGenerations(kv).catch(() => undefined);
        return kv;
      });
    }
    return opened;
  };

  const sweepStaleGenerations = async (kv: DenoKvLike): Promise<void> => {
    const now = Date.now();
    for await (const marker of kv.list({ prefix: [...prefix, "p"] })) {
      const at = (marker.value as { at?: unknown } | null)?.at;
      if (typeof at === "number" && now - at < (options.staleGenerationMs ?? STALE_GENERATION_MS)) continue;
      const g = marker.key[marker.key.length - 1] as string;
      await dropGeneration(kv, g);
    }
  };

  /** Deletes a generation's chunks (however many there are), then its marker. */
  const dropGeneration = async (kv: DenoKvLike, g: string): Promise<void> => {
    const keys: DenoKvKey[] = [];
    for await (const entry of kv.list({ prefix: [...prefix, "c", g] }, { batchSize: 500 })) keys.push(entry.key);
    for (let i = 0; i < keys.length; i += 500) {
      const op = kv.atomic();
      for (const key of keys.slice(i, i + 500)) op.delete(key);
      await op.commit();
    }
    await kv.atomic().delete(P(g)).commit();
  };

  const readHeadAndValue = async (kv: DenoKvLike, segs: readonly string[]): Promise<unknown> => (await readVersioned(kv, segs)).value;

  /** The value with the versionstamp of the head it was read through (a generation's chunks never change). */
  const readVersioned = async (kv: DenoKvLike, segs: readonly string[]): Promise<{ value: unknown; version: string | null }> => {
    for (let attempt = 0; attempt < 8; attempt++) {
      const [head, inline] = await kv.getMany([K(segs), V(segs)]);
      const meta = head!.value as Head | null;
      const version = head!.versionstamp;
      if (meta === null) return { value: null, version: null };
      if (meta.n === 0) return { value: inline!.value ?? null, version };
      const bytes = await readChunks(kv, meta);
      if (bytes) return { value: meta.t === "s" ? new TextDecoder().decode(bytes) : bytes, version };
      // The generation went away under us: a writer flipped the head and dropped it. Read again.
      const again = await kv.get(K(segs));
      if (again.versionstamp === head!.versionstamp) {
        throw new DeerflowError("storage_corrupt", `Deno KV value ${JSON.stringify(segs.join(":"))} is missing chunks of generation ${meta.g}; write it again or remove it.`);
      }
    }
    throw new DeerflowError("storage_busy", `Deno KV value ${JSON.stringify(segs.join(":"))} kept changing while it was read; try again.`);
  };

  const readChunks = async (kv: DenoKvLike, meta: Head): Promise<Uint8Array | undefined> => {
    const out = new Uint8Array(meta.s);
    let offset = 0;
    let index = 0;
    for await (const entry of kv.list({ prefix: [...prefix, "c", meta.g!] }, { batchSize: 12 })) {
      const chunk = entry.value as Uint8Array;
      if (entry.key[entry.key.length - 1] !== index || offset + chunk.length > meta.s) return undefined;
      out.set(chunk, offset);
      offset += chunk.length;
      index++;
    }
    return index === meta.n && offset === meta.s ? out : undefined;
  };

  /** Replaces the head (and inline value) if it is still `old`; sets a marker on the generation it drops. */
  const flip = (kv: DenoKvLike, segs: readonly string[], old: DenoKvEntry, next: { head: Head; inline?: unknown } | null, extra?: (op: DenoKvAtomic) => void) => {
    const op = kv.atomic().check({ key: K(segs), versionstamp: old.versionstamp });
    if (next === null) op.delete(K(segs)).delete(V(segs));
    else {
      op.set(K(segs), next.head);
      if (next.inline !== undefined) op.set(V(segs), next.inline);
      else op.delete(V(segs));
    }
    const oldGen = (old.value as Head | null)?.g;
    if (oldGen) op.set(P(oldGen), { at: Date.now() });
    extra?.(op);
    return op.commit();
  };

  /** After a flip: the replaced generation's chunks go (a failure here leaves a marker for the sweep). */
  const afterFlip = async (kv: DenoKvLike, old: DenoKvEntry): Promise<void> => {
    const oldGen = (old.value as Head | null)?.g;
    if (oldGen) await dropGeneration(kv, oldGen).catch(() => undefined);
  };

  /**
   * Flips the head until the flip lands (last writer wins); with `expected` (a compare-and-set)
   * once, and only over that version: false when the head is another.
   */
  const flipUntil = async (
    kv: DenoKvLike,
    segs: readonly string[],
    expected: string | null | undefined,
    next: { head: Head; inline?: unknown } | null,
    extra?: (op: DenoKvAtomic) => void,
  ): Promise<boolean> => {
    for (;;) {
      const old = await kv.get(K(segs));
      if (expected !== undefined && old.versionstamp !== expected) return false;
      if (expected === undefined && next === null && old.versionstamp === null) return true;
      const result = await flip(kv, segs, old, next, extra);
      if (result.ok) {
        await afterFlip(kv, old);
        return true;
      }
      if (expected !== undefined) return false;
    }
  };

  const write = async (key: string, value: unknown, expected?: string | null): Promise<boolean> => {
    const segs = segments(key);
    const kv = await kvOf();
    const encoded = encodeValue(value);
    if (encoded.inline !== undefined) return flipUntil(kv, segs, expected, { head: { t: encoded.t, n: 0, s: encoded.size }, inline: encoded.inline });
    const bytes = encoded.bytes!;
    const g = crypto.randomUUID().replaceAll("-", "");
    const chunks: Uint8Array[] = [];
    for (let offset = 0; offset < bytes.length; offset += CHUNK_BYTES) chunks.push(bytes.subarray(offset, offset + CHUNK_BYTES));
    const head: Head = { t: encoded.t, n: chunks.length, s: bytes.length, g };
    const keyBytes = keySize(K(segs)) + keySize(V(segs));
    const chunkKeyBytes = keySize(C(g, chunks.length));
    if (bytes.length + chunks.length * chunkKeyBytes + keyBytes <= COMMIT_BUDGET && chunks.length < DENO_KV_LIMITS.mutationsPerCommit - 8) {
      // Fits one commit: the chunks and the head that points at them land together.
      return flipUntil(kv, segs, expected, { head }, (op) => chunks.forEach((chunk, i) => op.set(C(g, i), chunk)));
    }
    // Too big for one commit: the chunks first, under a generation nobody points at yet (its marker
    // says so), then the head flip, which also removes the marker.
    try {
      await kv.atomic().set(P(g), { at: Date.now() }).commit();
      let op = kv.atomic();
      let budget = 0;
      for (let i = 0; i < chunks.length; i++) {
        const size = chunks[i]!.length + chunkKeyBytes;
        if (budget > 0 && budget + size > COMMIT_BUDGET) {
          await commitOrThrow(op, key);
          op = kv.atomic();
          budget = 0;
        }
        op.set(C(g, i), chunks[i]!);
        budget += size;
      }
      await commitOrThrow(op, key);
      if (await flipUntil(kv, segs, expected, { head }, (o) => o.delete(P(g)))) return true;
      await dropGeneration(kv, g).catch(() => undefined);
      return false;
    } catch (error) {
      // Nothing points at generation g: drop what was written of it (or leave it to the sweep).
      await dropGeneration(kv, g).catch(() => undefined);
      throw error;
    }
  };

  const remove = async (key: string, expected?: string | null): Promise<boolean> => flipUntil(await kvOf(), segments(key), expected, null);

  const listKeys = async (base: string | undefined): Promise<string[]> => {
    const kv = await kvOf();
    const keys: string[] = [];
    const skip = prefix.length + 1;
    for await (const entry of kv.list({ prefix: K(segments(base ?? "")) }, { batchSize: 1000 })) {
      keys.push(entry.key.slice(skip).join(":"));
    }
    return keys;
  };

  const versioned: VersionedKeyValue = {
    async read(key) {
      const { value, version } = await readVersioned(await kvOf(), segments(key));
      // A value stored as bytes reads as its UTF-8 text, as the port deals in text.
      return { value: value === null ? null : value instanceof Uint8Array ? new TextDecoder().decode(value) : String(value), version };
    },
    write: (key, value, expected) => (value === null ? remove(key, expected) : write(key, value, expected)),
  };

  const driver: Driver = {
    name: "deno-kv",
    getInstance: kvOf,
    async hasItem(key) {
      const kv = await kvOf();
      return (await kv.get(K(segments(key)))).versionstamp !== null;
    },
    async getItem(key) {
      return readHeadAndValue(await kvOf(), segments(key));
    },
    async getItemRaw(key) {
      return readHeadAndValue(await kvOf(), segments(key));
    },
    // Five keys a round trip (a head and an inline value each: getMany's 10 keys); a chunked value
    // is then read on its own, as getItem reads it.
    async getItems(items) {
      const kv = await kvOf();
      const out: { key: string; value: StorageValue }[] = [];
      for (let i = 0; i < items.length; i += 5) {
        const group = items.slice(i, i + 5).map((item) => ({ key: item.key, segs: segments(item.key) }));
        const entries = await kv.getMany(group.flatMap(({ segs }) => [K(segs), V(segs)]));
        for (const [n, { key, segs }] of group.entries()) {
          const meta = entries[2 * n]!.value as Head | null;
          const value = meta === null ? null : meta.n === 0 ? (entries[2 * n + 1]!.value ?? null) : await readHeadAndValue(kv, segs);
          out.push({ key, value: value as StorageValue });
        }
      }
      return out;
    },
    setItem: async (key, value) => void (await write(key, value)),
    setItemRaw: async (key, value) => void (await write(key, value)),
    removeItem: async (key) => void (await remove(key)),
    getKeys: (base) => listKeys(base),
    async clear(base) {
      for (const key of await listKeys(base)) await remove(key);
    },
    async dispose() {
      if (!opened) return;
      const kv = await opened.catch(() => undefined);
      opened = undefined;
      kv?.close();
    },
  };
  return { driver, versioned };
}

async function commitOrThrow(op: DenoKvAtomic, key: string): Promise<void> {
  // A commit without checks only fails by throwing; ok: false would mean a check we did not make.
  const result = await op.commit();
  if (!result.ok) throw new DeerflowError("storage_write_failed", `Deno KV refused a chunk commit of ${JSON.stringify(key)}; try again.`);
}

function segments(key: string): string[] {
  return key.split(":").filter(Boolean);
}

/** Bytes a key takes in a commit, rounded up (the tuple encoding adds a few bytes a part). */
function keySize(key: DenoKvKey): number {
  let size = 0;
  for (const part of key) size += (typeof part === "string" ? new TextEncoder().encode(part).length : 8) + 2;
  return size;
}

function encodeValue(value: unknown): { t: "s" | "b"; size: number; inline?: unknown; bytes?: Uint8Array } {
  if (typeof value === "string") {
    if (value.length <= INLINE_STRING_CHARS) return { t: "s", size: value.length, inline: value };
    const bytes = new TextEncoder().encode(value);
    return { t: "s", size: bytes.length, bytes };
  }
  const bytes =
    value instanceof Uint8Array
      ? new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
      : value instanceof ArrayBuffer
        ? new Uint8Array(value)
        : ArrayBuffer.isView(value)
          ? new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
          : new TextEncoder().encode(JSON.stringify(value));
  // A plain Uint8Array (not a Buffer subclass), so Deno KV stores it as bytes.
  if (bytes.length <= CHUNK_BYTES) return { t: "b", size: bytes.length, inline: bytes.slice() };
  return { t: "b", size: bytes.length, bytes };
}

declare const Deno:
  | {
      openKv?: (path?: string) => Promise<DenoKvLike>;
      permissions: { querySync(descriptor: { name: "write"; path: string }): { state: string } };
    }
  | undefined;

/**
 * The fs store under a Deno that may not write there (Deno Deploy's permission set has no
 * --allow-write) would fail its first write: refused at start instead, naming the ways out.
 */
export function assertDenoMayWrite(base: string): void {
  if (typeof Deno === "undefined") return;
  let state = "granted";
  try {
    state = Deno.permissions.querySync({ name: "write", path: base }).state;
  } catch {
    // A Deno without the permissions API: let the write itself decide.
  }
  if (state !== "granted") {
    throw new StorageConfigError(
      `storage.driver "fs" writes under ${base}, which this Deno may not write: grant --allow-write (or --allow-write=${base}), or set storage.driver to "deno-kv" (with --unstable-kv) or "memory".`,
    );
  }
}

/** Deno.openKv, or the one sentence saying what is missing. */
export function openDenoKv(path?: string): Promise<DenoKvLike> {
  const deno = typeof Deno === "undefined" ? undefined : Deno;
  if (!deno) throw new StorageConfigError(DENO_KV_NEEDS_DENO);
  if (typeof deno.openKv !== "function") {
    throw new StorageConfigError(`storage.driver "deno-kv" needs Deno KV, which this Deno was started without: add --unstable-kv to the deno command (or "unstable": ["kv"] to deno.json).`);
  }
  return deno.openKv(path);
}

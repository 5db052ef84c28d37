import { KeyedMutex } from "../core/keyed-mutex.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { parseStoredJson, updateVersioned, versionedOver } from "../storage/versioned.ts";
import type { SandboxScope, UploadFileSink } from "../ports/sandbox.ts";
import { scopeKey } from "./scope.ts";

/*
 * Uploaded files in KeyValue, apart from the sandbox snapshot: each file's bytes as records of
 * RECORD_BYTES under `<prefix>:<user>:<thread>:data:<file id>:<seq>`, and one index per thread
 * under `<prefix>:<user>:<thread>:index` naming the current file id of each name. The index is
 * written last, in one write: a reader never sees half a file, a request's files appear together,
 * and a request that fails (or a crash mid-upload) leaves only records no index names, which the
 * next commit of that thread sweeps away.
 *
 * Several workers may change one thread's uploads (an upload through one while a run's sandbox on
 * another saves): the index is written by compare-and-set, each change applied by name onto the
 * index as it is then, so no worker's file is dropped by another's write. A record no index names
 * may be another worker's upload still on its way, so the sweep leaves any younger than
 * ORPHAN_GRACE_MS (file ids are UUIDv7: their age is in the id).
 */

export const RECORD_BYTES = 256 * 1024;
const SEQ_WIDTH = 6;
/** An unindexed record younger than this may be another worker's upload in flight. */
export const ORPHAN_GRACE_MS = 15 * 60_000;

/** A UUIDv7 without dashes: 48 bits of milliseconds, then random bits. */
function newFileId(now: number): string {
  const random = crypto.randomUUID().replaceAll("-", "");
  return `${now.toString(16).padStart(12, "0").slice(-12)}7${random.slice(13)}`;
}

/** When a UUIDv7 file id was made; undefined for the UUIDv4 ids of earlier versions. */
function fileIdTime(id: string): number | undefined {
  return id[12] === "7" ? Number.parseInt(id.slice(0, 12), 16) : undefined;
}

export interface StoredUpload {
  readonly id: string;
  readonly size: number;
  readonly records: number;
}

interface UploadIndex {
  format: "deerflow-edge.uploads";
  version: 1;
  files: Record<string, StoredUpload>;
}

export interface StagedUpload extends StoredUpload {
  readonly name: string;
}

function isStoredUpload(value: unknown): value is StoredUpload {
  const v = value as Partial<StoredUpload> | null;
  return !!v && typeof v.id === "string" && /^[0-9a-f]{32}$/.test(v.id) && Number.isSafeInteger(v.size) && Number.isSafeInteger(v.records);
}

/** The usable entries of a stored index (anything else reads as no uploads). */
function filesOf(value: unknown): Record<string, StoredUpload> {
  const index = value as Partial<UploadIndex> | null;
  if (!index || index.format !== "deerflow-edge.uploads" || typeof index.files !== "object" || index.files === null) return {};
  const files: Record<string, StoredUpload> = {};
  for (const [name, entry] of Object.entries(index.files)) if (isStoredUpload(entry)) files[name] = entry;
  return files;
}

function toBytes(value: unknown): Uint8Array | undefined {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  return undefined;
}

export class UploadStore {
  readonly #storage: KeyValue;
  readonly #versioned: VersionedKeyValue;
  readonly #prefix: string;
  readonly #now: () => number;
  readonly #locks = new KeyedMutex();
  /** File ids being written by a request still in flight: never swept. */
  readonly #inFlight = new Set<string>();

  constructor(storage: KeyValue, options: { prefix?: string; versioned?: VersionedKeyValue; now?: () => number } = {}) {
    this.#storage = storage;
    this.#versioned = options.versioned ?? versionedOver(storage);
    this.#prefix = options.prefix ?? "sandbox:uploads";
    this.#now = options.now ?? (() => Date.now());
  }

  #indexKey(scope: SandboxScope): string {
    return `${this.#base(scope)}:index`;
  }

  #base(scope: SandboxScope): string {
    return `${this.#prefix}:${scope.userId}:${scope.threadId}`;
  }

  #recordKey(scope: SandboxScope, id: string, seq: number): string {
    return `${this.#base(scope)}:data:${id}:${String(seq).padStart(SEQ_WIDTH, "0")}`;
  }

  /** Runs `fn` alone among this process's changes of the thread's uploads (another worker's are merged by compare-and-set). */
  exclusive<T>(scope: SandboxScope, fn: () => Promise<T>): Promise<T> {
    return this.#locks.run(scopeKey(scope), fn);
  }

  /** The thread's stored uploads by name. */
  async index(scope: SandboxScope): Promise<Record<string, StoredUpload>> {
    return filesOf(await this.#storage.getItem<UploadIndex>(this.#indexKey(scope)));
  }

  /** Applies `change` to the index as it is now, retried on another writer's change; `change` returns what to report, or undefined to write nothing. */
  async #changeIndex<T>(scope: SandboxScope, change: (files: Record<string, StoredUpload>) => T | undefined): Promise<T | undefined> {
    return updateVersioned(this.#versioned, this.#indexKey(scope), (text) => {
      const files = filesOf(parseStoredJson(text));
      const result = change(files);
      if (result === undefined) return undefined;
      const index: UploadIndex = { format: "deerflow-edge.uploads", version: 1, files };
      return { value: JSON.stringify(index), result };
    });
  }

  /**
   * A sink that writes one file's bytes as records, none of it visible until committed. `onClose`
   * receives what was stored; `discard` removes the records.
   */
  stage(scope: SandboxScope, name: string): UploadFileSink & { staged(): StagedUpload; discard(): Promise<void> } {
    const id = newFileId(this.#now());
    this.#inFlight.add(id);
    let pending = new Uint8Array(RECORD_BYTES);
    let filled = 0;
    let size = 0;
    let records = 0;
    let closed = false;
    const flush = async (): Promise<void> => {
      if (filled === 0) return;
      const record = filled === pending.length ? pending : pending.slice(0, filled);
      await this.#storage.setItemRaw(this.#recordKey(scope, id, records), record);
      records++;
      // The record written may be the buffer itself (the memory driver keeps it), so a fresh one.
      pending = new Uint8Array(RECORD_BYTES);
      filled = 0;
    };
    return {
      write: async (chunk) => {
        let offset = 0;
        while (offset < chunk.length) {
          const take = Math.min(chunk.length - offset, pending.length - filled);
          pending.set(chunk.subarray(offset, offset + take), filled);
          filled += take;
          offset += take;
          size += take;
          if (filled === pending.length) await flush();
        }
      },
      close: async () => {
        await flush();
        closed = true;
      },
      staged: () => {
        if (!closed) throw new Error(`Upload ${JSON.stringify(name)} was committed before it was closed.`);
        return { name, id, size, records };
      },
      discard: async () => {
        this.#inFlight.delete(id);
        await this.#removeRecords(scope, id, records + (filled > 0 ? 1 : 0));
      },
    };
  }

  /**
   * Points the index at the staged files in one write, then removes the records of the files they
   * replaced and any record a failed or crashed request left. Call inside `exclusive`.
   */
  async commitLocked(scope: SandboxScope, staged: readonly StagedUpload[]): Promise<void> {
    const written = (await this.#changeIndex(scope, (files) => {
      const replaced: StoredUpload[] = [];
      for (const file of staged) {
        const before = files[file.name];
        if (before) replaced.push(before);
        files[file.name] = { id: file.id, size: file.size, records: file.records };
      }
      return { files, replaced };
    }))!;
    for (const file of staged) this.#inFlight.delete(file.id);
    await this.#sweep(scope, written.files, written.replaced);
  }

  /** Drops a name from the index, then its records; false when no upload has that name. Call inside `exclusive`. */
  async removeLocked(scope: SandboxScope, name: string): Promise<boolean> {
    const entry = await this.#changeIndex(scope, (files) => {
      const found = files[name];
      if (found) delete files[name];
      return found;
    });
    if (!entry) return false;
    await this.#removeRecords(scope, entry.id, entry.records);
    return true;
  }

  /** One stored file's bytes, reassembled; undefined when a record is missing. */
  async read(scope: SandboxScope, entry: StoredUpload): Promise<Uint8Array | undefined> {
    const out = new Uint8Array(entry.size);
    let offset = 0;
    for (let seq = 0; seq < entry.records; seq++) {
      const record = toBytes(await this.#storage.getItemRaw(this.#recordKey(scope, entry.id, seq)));
      if (!record || offset + record.length > entry.size) return undefined;
      out.set(record, offset);
      offset += record.length;
    }
    return offset === entry.size ? out : undefined;
  }

  /** Stores `bytes` as `name` at once (a file the agent wrote into the uploads folder). Call inside `exclusive`. */
  async putLocked(scope: SandboxScope, name: string, bytes: Uint8Array): Promise<void> {
    const sink = this.stage(scope, name);
    try {
      for (let offset = 0; offset < bytes.length; offset += RECORD_BYTES) await sink.write(bytes.subarray(offset, offset + RECORD_BYTES));
      await sink.close();
      await this.commitLocked(scope, [sink.staged()]);
    } catch (error) {
      await sink.discard().catch(() => undefined);
      throw error;
    }
  }

  /** Deletes every upload of the thread. */
  async forget(scope: SandboxScope): Promise<void> {
    await this.exclusive(scope, async () => {
      const base = this.#base(scope);
      await this.#storage.removeItem(`${base}:index`);
      const keys = await this.#storage.getKeys(`${base}:data`);
      await Promise.all(keys.map((key) => this.#storage.removeItem(key)));
    });
  }

  async #removeRecords(scope: SandboxScope, id: string, records: number): Promise<void> {
    const keys = Array.from({ length: records }, (_, seq) => this.#recordKey(scope, id, seq));
    await Promise.all(keys.map((key) => this.#storage.removeItem(key)));
  }

  async #sweep(scope: SandboxScope, files: Record<string, StoredUpload>, replaced: readonly StoredUpload[]): Promise<void> {
    for (const entry of replaced) await this.#removeRecords(scope, entry.id, entry.records);
    const live = new Set(Object.values(files).map((entry) => entry.id));
    const prefix = `${this.#base(scope)}:data:`;
    const orphans = (await this.#storage.getKeys(`${this.#base(scope)}:data`)).filter((key) => {
      const id = key.startsWith(prefix) ? key.slice(prefix.length).split(":")[0]! : "";
      if (live.has(id) || this.#inFlight.has(id)) return false;
      const made = fileIdTime(id);
      return made === undefined || this.#now() - made > ORPHAN_GRACE_MS;
    });
    await Promise.all(orphans.map((key) => this.#storage.removeItem(key)));
  }
}

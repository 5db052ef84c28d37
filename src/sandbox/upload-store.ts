import { KeyedMutex } from "../core/keyed-mutex.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { SandboxScope, UploadFileSink } from "../ports/sandbox.ts";
import { scopeKey } from "./scope.ts";

/*
 * Uploaded files in KeyValue, apart from the sandbox snapshot: each file's bytes as records of
 * RECORD_BYTES under `<prefix>:<user>:<thread>:data:<file id>:<seq>`, and one index per thread
 * under `<prefix>:<user>:<thread>:index` naming the current file id of each name. The index is
 * written last, in one write: a reader never sees half a file, a request's files appear together,
 * and a request that fails (or a crash mid-upload) leaves only records no index names, which the
 * next commit of that thread sweeps away.
 */

export const RECORD_BYTES = 256 * 1024;
const SEQ_WIDTH = 6;

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

function toBytes(value: unknown): Uint8Array | undefined {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  return undefined;
}

export class UploadStore {
  readonly #storage: KeyValue;
  readonly #prefix: string;
  readonly #locks = new KeyedMutex();
  /** File ids being written by a request still in flight: never swept. */
  readonly #inFlight = new Set<string>();

  constructor(storage: KeyValue, prefix = "sandbox:uploads") {
    this.#storage = storage;
    this.#prefix = prefix;
  }

  #base(scope: SandboxScope): string {
    return `${this.#prefix}:${scope.userId}:${scope.threadId}`;
  }

  #recordKey(scope: SandboxScope, id: string, seq: number): string {
    return `${this.#base(scope)}:data:${id}:${String(seq).padStart(SEQ_WIDTH, "0")}`;
  }

  /** Runs `fn` alone among this thread's index changes. */
  exclusive<T>(scope: SandboxScope, fn: () => Promise<T>): Promise<T> {
    return this.#locks.run(scopeKey(scope), fn);
  }

  /** The thread's stored uploads by name. */
  async index(scope: SandboxScope): Promise<Record<string, StoredUpload>> {
    const value = (await this.#storage.getItem<UploadIndex>(`${this.#base(scope)}:index`)) as UploadIndex | null;
    if (!value || value.format !== "deerflow-edge.uploads" || typeof value.files !== "object" || value.files === null) return {};
    const files: Record<string, StoredUpload> = {};
    for (const [name, entry] of Object.entries(value.files)) if (isStoredUpload(entry)) files[name] = entry;
    return files;
  }

  /**
   * A sink that writes one file's bytes as records, none of it visible until committed. `onClose`
   * receives what was stored; `discard` removes the records.
   */
  stage(scope: SandboxScope, name: string): UploadFileSink & { staged(): StagedUpload; discard(): Promise<void> } {
    const id = crypto.randomUUID().replaceAll("-", "");
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
    const files = await this.index(scope);
    const replaced: StoredUpload[] = [];
    for (const file of staged) {
      const before = files[file.name];
      if (before) replaced.push(before);
      files[file.name] = { id: file.id, size: file.size, records: file.records };
    }
    await this.#writeIndex(scope, files);
    for (const file of staged) this.#inFlight.delete(file.id);
    await this.#sweep(scope, files, replaced);
  }

  /** Drops a name from the index, then its records; false when no upload has that name. Call inside `exclusive`. */
  async removeLocked(scope: SandboxScope, name: string): Promise<boolean> {
    const files = await this.index(scope);
    const entry = files[name];
    if (!entry) return false;
    delete files[name];
    await this.#writeIndex(scope, files);
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

  async #writeIndex(scope: SandboxScope, files: Record<string, StoredUpload>): Promise<void> {
    const index: UploadIndex = { format: "deerflow-edge.uploads", version: 1, files };
    await this.#storage.setItem(`${this.#base(scope)}:index`, index as never);
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
      return !live.has(id) && !this.#inFlight.has(id);
    });
    await Promise.all(orphans.map((key) => this.#storage.removeItem(key)));
  }
}

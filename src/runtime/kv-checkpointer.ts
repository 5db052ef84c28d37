// LangGraph's checkpoint saver over the KeyValue port, one cohesive thing (the saver and the id
// checks it applies); its key encoding (kv-checkpoint-keys.ts) and records (kv-checkpoint-records.ts) sit beside it.
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
} from "@langchain/langgraph-checkpoint";
import type {
  ChannelVersions,
  Checkpoint,
  CheckpointListOptions,
  CheckpointMetadata,
  CheckpointPendingWrite,
  CheckpointTuple,
  PendingWrite,
  SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { DeerflowError } from "../core/errors.ts";
import { base64ToBytes } from "../core/base64.ts";
import type { KeyValue } from "../ports/key-value.ts";
import { decodeSegment, encodeSegment, takeSegments } from "./kv-checkpoint-keys.ts";
import {
  isBlobRecord,
  isCheckpointRecord,
  isWriteBatchRecord,
  isWriteRecord,
  toSerialized,
  type CheckpointRecord,
  type InlineBlob,
  type SerializedValue,
  type WriteBatchRecord,
  type WriteRecord,
} from "./kv-checkpoint-records.ts";

export type CheckpointerErrorCode =
  | "missing_thread_id"
  | "missing_checkpoint_id"
  | "invalid_config_value"
  | "invalid_prefix"
  | "corrupt_record";

export class CheckpointerError extends DeerflowError {
  declare readonly code: CheckpointerErrorCode;

  constructor(code: CheckpointerErrorCode, message: string) {
    super(code, message);
    this.name = "CheckpointerError";
  }
}

export interface KeyValueCheckpointSaverOptions {
  storage: KeyValue;
  /** Key prefix (unstorage base) under which everything is stored. `/` and `:` both separate levels. */
  prefix?: string;
  serde?: SerializerProtocol;
}

/*
 * Storage layout under the prefix, every id encoded by `encodeSegment`:
 *
 *   <thread>:<ns>:c:<checkpoint>                one CheckpointRecord per checkpoint
 *   <thread>:<ns>:b:<channel>:<version>         one BlobRecord per channel version (written before
 *                                               values were inline; still read, no longer written)
 *   <thread>:<ns>:w:<checkpoint>:<task>:<batch> one WriteBatchRecord per putWrites call (`<batch>`
 *                                               is "b" + a time-ordered id)
 *   <thread>:<ns>:w:<checkpoint>:<task>:<idx>   one WriteRecord per pending write (written before
 *                                               writes were batched; still read)
 *
 * A checkpoint record holds the checkpoint without its channel values, plus inline (`blobs`) the
 * values of the channels named in `newVersions` only, and for each channel it inherited unchanged
 * the id of the checkpoint holding that version (`blob_at`, taken from the parent's record), so an
 * unchanged channel is not copied into every checkpoint and a put is one write: a crash leaves a
 * checkpoint with all its values or no checkpoint. A value found neither way is read from its
 * BlobRecord (threads stored by earlier versions). Every checkpoint and write is its own key, so
 * concurrent puts and putWrites never read-modify-write a shared value and cannot lose one another.
 *
 * Key enumeration is the index: one `getKeys(<thread>:<ns>)` finds a thread's checkpoints and
 * their writes; values are read only for what is returned. Everything of a thread sits under
 * one base, so a driver that enumerates by base (deno-kv) touches only that thread. unstorage's
 * fs driver ignores the base and walks its whole tree on every getKeys, so with it the cost of
 * getTuple grows with the size of the store.
 */

// Shared by every saver in the process, so a fresh saver's batch still sorts after an older one's.
let lastBatchMs = 0;
let batchSeq = 0;

/** A batch id later than every one made before in this process (time first, so ids sort across processes). */
function nextBatchId(): string {
  const now = Math.max(Date.now(), lastBatchMs);
  batchSeq = now === lastBatchMs ? batchSeq + 1 : 0;
  lastBatchMs = now;
  const random = Math.floor(Math.random() * 0x100000000).toString(16).padStart(8, "0");
  return `b${now.toString().padStart(15, "0")}.${batchSeq.toString().padStart(9, "0")}.${random}`;
}

/** How many recently put checkpoint records a saver keeps to find a next put's parent. */
const RECENT_RECORDS = 64;

interface ScanResult {
  checkpoints: CheckpointEntry[];
  /** Write keys by the encoded `<thread>:<ns>:<checkpoint>` they belong to. */
  writes: Map<string, string[]>;
}

interface CheckpointEntry {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  key: string;
  /** `<thread>:<ns>:<checkpoint>` encoded; names the checkpoint's writes in a ScanResult. */
  group: string;
}

// ---------------------------------------------------------------------------------------------
// Config validation. Any string is storable; what is refused is what cannot round-trip.

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

function requireId(field: string, value: unknown, allowEmpty = false): string {
  if (typeof value !== "string") {
    throw new CheckpointerError(
      "invalid_config_value",
      `${field} must be a string (got ${describeType(value)}). Pass the id as a string.`,
    );
  }
  if (!allowEmpty && value === "") {
    throw new CheckpointerError(
      "invalid_config_value",
      `${field} must not be empty. Pass a non-empty id.`,
    );
  }
  if (LONE_SURROGATE.test(value)) {
    throw new CheckpointerError(
      "invalid_config_value",
      `${field} contains an unpaired UTF-16 surrogate and cannot be stored. Use a well-formed string.`,
    );
  }
  return value;
}

function missingThreadId(operation: string): CheckpointerError {
  return new CheckpointerError(
    "missing_thread_id",
    `Failed to ${operation}: the RunnableConfig has no "thread_id" in its "configurable". ` +
      `Pass one so the checkpointer knows which thread to persist, e.g. ` +
      `graph.invoke(input, { configurable: { thread_id: "my-thread-id" } }).`,
  );
}

function normalizePrefix(prefix: string): string {
  const normalized = prefix.replace(/[/\\]/g, ":").replace(/:+/g, ":").replace(/^:|:$/g, "");
  if (/[?#$]/.test(normalized) || normalized.split(":").some((s) => s === "." || s === "..")) {
    throw new CheckpointerError(
      "invalid_prefix",
      `Checkpointer prefix ${JSON.stringify(prefix)} is not a safe storage key. ` +
        `Use letters, digits, "-", "_" and ":" or "/" as separators.`,
    );
  }
  return normalized;
}

/**
 * `<20-digit counter>.<uuid>`: ordered like the counter under both `>` and `localeCompare` (the
 * two ways LangGraph compares versions), and unique per call, so two branches forked from one
 * checkpoint never write the same blob key.
 */
function nextChannelVersion(current: string | number | undefined): string {
  const counter =
    typeof current === "number" ? current : typeof current === "string" ? Number.parseInt(current, 10) || 0 : 0;
  return `${String(Math.trunc(counter) + 1).padStart(20, "0")}.${crypto.randomUUID()}`;
}

function compareIdsDescending(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}

/**
 * A LangGraph checkpoint saver over a KeyValue (unstorage) store; the data lives as long as the
 * store does (fs, deno-kv, redis drivers). getTuple, list and putWrites behave like `MemorySaver`
 * (write indices, de-duplication, write order, filters, `before`, `limit`), except that channel
 * values are stored once per channel version (see the layout above), channel versions are
 * `<counter>.<uuid>` strings, and a pending write keeps its serializer type.
 */
export class KeyValueCheckpointSaver extends BaseCheckpointSaver {
  readonly storage: KeyValue;
  readonly prefix: string;
  /** The prefix with its trailing ":" ("" for an empty prefix). */
  readonly #root: string;
  /**
   * Where the values of the records this saver put last are (their channel versions and
   * `blob_at`, not the values), by key: the next put's parent is almost always one of them, so it
   * is not read back. A record is never changed once written, only rewritten whole by a put
   * of the same id, which goes through here too.
   */
  readonly #recent = new Map<string, Pick<CheckpointRecord, "blobs" | "blob_at">>();

  constructor({ storage, prefix = "checkpoints", serde }: KeyValueCheckpointSaverOptions) {
    super(serde);
    this.storage = storage;
    this.prefix = normalizePrefix(prefix);
    this.#root = this.prefix ? this.prefix + ":" : "";
  }

  // -- keys -------------------------------------------------------------------------------------

  #threadBase(threadId: string): string {
    return this.#root + encodeSegment(threadId);
  }

  #namespaceBase(threadId: string, checkpointNs: string): string {
    return `${this.#threadBase(threadId)}:${encodeSegment(checkpointNs)}`;
  }

  #checkpointKey(threadId: string, checkpointNs: string, checkpointId: string): string {
    return `${this.#namespaceBase(threadId, checkpointNs)}:c:${encodeSegment(checkpointId)}`;
  }

  #blobKey(threadId: string, checkpointNs: string, channel: string, version: string | number): string {
    return `${this.#namespaceBase(threadId, checkpointNs)}:b:${encodeSegment(channel)}:${encodeSegment(String(version))}`;
  }

  #writeBase(threadId: string, checkpointNs: string, checkpointId: string): string {
    return `${this.#namespaceBase(threadId, checkpointNs)}:w:${encodeSegment(checkpointId)}`;
  }

  #group(threadId: string, checkpointNs: string, checkpointId: string): string {
    return [encodeSegment(threadId), encodeSegment(checkpointNs), encodeSegment(checkpointId)].join(":");
  }

  /** Splits one of our keys into its encoded thread and namespace, its kind and the rest. */
  #parseKey(key: string): { thread: string; ns: string; kind: string; rest: string[] } | undefined {
    if (!key.startsWith(this.#root)) return undefined;
    const head = takeSegments(key.slice(this.#root.length).split(":"), 2);
    if (!head || head.rest.length === 0) return undefined;
    const [thread, ns] = head.segments as [string, string];
    const [kind, ...rest] = head.rest as [string, ...string[]];
    return { thread, ns, kind, rest };
  }

  /** One key enumeration under `base`: its checkpoints (parsed) and its write keys (grouped). */
  async #scan(base: string): Promise<ScanResult> {
    const result: ScanResult = { checkpoints: [], writes: new Map() };
    for (const key of await this.storage.getKeys(base)) {
      const parsed = this.#parseKey(key);
      if (parsed?.kind === "c") {
        const id = takeSegments(parsed.rest, 1);
        if (!id || id.rest.length > 0) continue;
        const checkpoint = id.segments[0]!;
        const threadId = decodeSegment(parsed.thread);
        const checkpointNs = decodeSegment(parsed.ns);
        const checkpointId = decodeSegment(checkpoint);
        if (threadId === undefined || checkpointNs === undefined || checkpointId === undefined) continue;
        const group = [parsed.thread, parsed.ns, checkpoint].join(":");
        result.checkpoints.push({ threadId, checkpointNs, checkpointId, key, group });
      } else if (parsed?.kind === "w") {
        const ids = takeSegments(parsed.rest, 3);
        if (!ids || ids.rest.length > 0) continue;
        const group = [parsed.thread, parsed.ns, ids.segments[0]].join(":");
        const keys = result.writes.get(group);
        if (keys) keys.push(key);
        else result.writes.set(group, [key]);
      }
    }
    return result;
  }

  async #writeKeysOf(threadId: string, checkpointNs: string, checkpointId: string): Promise<string[]> {
    const { writes } = await this.#scan(this.#writeBase(threadId, checkpointNs, checkpointId));
    return writes.get(this.#group(threadId, checkpointNs, checkpointId)) ?? [];
  }

  // -- values -----------------------------------------------------------------------------------

  async #load(value: SerializedValue): Promise<unknown> {
    return this.serde.loadsTyped(value.t, "b" in value ? base64ToBytes(value.b) : value.s);
  }

  async #readCheckpoint(key: string): Promise<CheckpointRecord | undefined> {
    const value = await this.storage.getItem<unknown>(key);
    if (value === null || value === undefined) return undefined;
    if (!isCheckpointRecord(value)) {
      throw new CheckpointerError(
        "corrupt_record",
        `Checkpoint record at ${JSON.stringify(key)} is unreadable. Remove the key or restore it from a backup.`,
      );
    }
    return value;
  }

  /** The stored checkpoint with its channel values joined back in from the blobs. */
  async #loadCheckpoint(entry: CheckpointEntry, record: CheckpointRecord): Promise<Checkpoint> {
    const checkpoint = (await this.#load(record.checkpoint)) as Checkpoint;
    const versions = Object.entries(checkpoint.channel_versions ?? {});
    // Records an inherited value lives in, each read once however many channels it holds.
    const holders = new Map<string, Promise<CheckpointRecord | undefined>>();
    const holder = (id: string) => {
      let found = holders.get(id);
      if (found === undefined) {
        found = this.#readCheckpoint(this.#checkpointKey(entry.threadId, entry.checkpointNs, id));
        holders.set(id, found);
      }
      return found;
    };
    const blobs = await Promise.all(
      versions.map(async ([channel, version]) => {
        const inline = await this.#inlineBlob(record, channel, String(version), holder);
        if (inline !== undefined) {
          return inline.value === undefined ? undefined : ([channel, await this.#load(inline.value)] as const);
        }
        // A value written before checkpoints carried them inline: its own BlobRecord.
        const key = this.#blobKey(entry.threadId, entry.checkpointNs, channel, version);
        const blob = await this.storage.getItem<unknown>(key);
        if (blob === null || blob === undefined) return undefined;
        if (!isBlobRecord(blob)) {
          throw new CheckpointerError(
            "corrupt_record",
            `Channel value record at ${JSON.stringify(key)} is unreadable. Remove the key or restore it from a backup.`,
          );
        }
        return blob.value === undefined ? undefined : ([channel, await this.#load(blob.value)] as const);
      }),
    );
    checkpoint.channel_values = Object.fromEntries(blobs.filter((b) => b !== undefined));
    return checkpoint;
  }

  /** A channel version's value held inline by `record` or by the checkpoint its `blob_at` names. */
  async #inlineBlob(
    record: CheckpointRecord,
    channel: string,
    version: string,
    holder: (checkpointId: string) => Promise<CheckpointRecord | undefined>,
  ): Promise<InlineBlob | undefined> {
    const own = record.blobs?.[channel];
    if (own !== undefined && own.version === version) return own;
    const at = record.blob_at?.[channel];
    if (at === undefined) return undefined;
    const held = (await holder(at))?.blobs?.[channel];
    return held !== undefined && held.version === version ? held : undefined;
  }

  /**
   * Where `put` finds the values of the channels it did not give a new version: the checkpoint
   * holding each one inline, from the parent's record. A channel not found there (a parent written
   * before values were inline, or none) is read from its BlobRecord as before.
   */
  async #inheritedBlobs(
    threadId: string,
    checkpointNs: string,
    parentId: string | undefined,
    versions: ChannelVersions,
    newVersions: ChannelVersions,
  ): Promise<Record<string, string>> {
    const inherited = Object.entries(versions).filter(([channel]) => !Object.prototype.hasOwnProperty.call(newVersions, channel));
    if (parentId === undefined || inherited.length === 0) return {};
    const parentKey = this.#checkpointKey(threadId, checkpointNs, parentId);
    const parent = this.#recent.get(parentKey) ?? (await this.#readCheckpoint(parentKey));
    if (parent === undefined) return {};
    const at: Record<string, string> = {};
    for (const [channel, version] of inherited) {
      const own = parent.blobs?.[channel];
      if (own !== undefined && own.version === String(version)) at[channel] = parentId;
      else if (parent.blob_at?.[channel] !== undefined) at[channel] = parent.blob_at[channel]!;
    }
    return at;
  }

  /**
   * Writes in `writesSortKey` order (task path, task id, idx), as live execution applies them. Of
   * several writes to one (task, idx), across calls in the order they were made (old per-write
   * records first: they predate every batch), a special channel's last and a regular write's first
   * is the one kept, as MemorySaver keeps them.
   */
  async #readWrites(keys: string[]): Promise<WriteRecord[]> {
    const ordered = keys.map((key) => ({ key, batch: this.#batchIdOf(key) })).sort((a, b) =>
      a.batch === b.batch ? 0 : a.batch === undefined ? -1 : b.batch === undefined ? 1 : a.batch < b.batch ? -1 : 1,
    );
    const values = await Promise.all(ordered.map(({ key }) => this.storage.getItem<unknown>(key)));
    const kept = new Map<string, WriteRecord>();
    const keep = (record: WriteRecord) => {
      const slot = JSON.stringify([record.task_id, record.idx]);
      if (record.idx >= 0 && kept.has(slot)) return;
      kept.set(slot, record);
    };
    values.forEach((value, i) => {
      if (value === null || value === undefined) return;
      if (isWriteRecord(value)) return keep(value);
      if (isWriteBatchRecord(value)) {
        for (const w of value.writes) keep({ v: 1, task_id: value.task_id, task_path: value.task_path, idx: w.idx, channel: w.channel, value: w.value });
        return;
      }
      throw new CheckpointerError(
        "corrupt_record",
        `Pending-write record at ${JSON.stringify(ordered[i]!.key)} is unreadable. Remove the key or restore it from a backup.`,
      );
    });
    return [...kept.values()]
      .map((record) => ({ record, sortKey: writesSortKey(record.task_path, record.task_id, record.idx) }))
      .sort((a, b) => compareWritesSortKeys(a.sortKey, b.sortKey))
      .map(({ record }) => record);
  }

  /** A batch key's time-ordered id; undefined for an old per-write key (its last segment an index). */
  #batchIdOf(key: string): string | undefined {
    // Both an index and a batch id are short enough to be one piece: the key's last.
    const id = decodeSegment(key.slice(key.lastIndexOf(":") + 1));
    return id !== undefined && id.startsWith("b") ? id : undefined;
  }

  #nextBatchId(): string {
    return nextBatchId();
  }

  async #pendingWrites(records: WriteRecord[]): Promise<CheckpointPendingWrite[]> {
    return Promise.all(
      records.map(async (r): Promise<CheckpointPendingWrite> => [r.task_id, r.channel, await this.#load(r.value)]),
    );
  }

  /** Checkpoints older than format v4 kept pending sends as writes on the parent. */
  async #migratePendingSends(checkpoint: Checkpoint, parentWriteKeys: string[]): Promise<void> {
    const sends = await Promise.all(
      (await this.#readWrites(parentWriteKeys)).filter((r) => r.channel === TASKS).map((r) => this.#load(r.value)),
    );
    const mutable = checkpoint as { channel_values?: Record<string, unknown>; channel_versions?: ChannelVersions };
    mutable.channel_values ??= {};
    mutable.channel_values[TASKS] = sends;
    mutable.channel_versions ??= {};
    const versions = Object.values(mutable.channel_versions);
    mutable.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }

  async #tuple(
    entry: CheckpointEntry,
    record: CheckpointRecord,
    config: RunnableConfig,
    /** Write keys of a checkpoint of this entry's thread and namespace. */
    writeKeys: (checkpointId: string) => Promise<string[]>,
    metadata?: CheckpointMetadata,
  ): Promise<CheckpointTuple> {
    const parentId = record.parent_checkpoint_id;
    const [checkpoint, loadedMetadata, writes] = await Promise.all([
      this.#loadCheckpoint(entry, record),
      metadata ?? (this.#load(record.metadata) as Promise<CheckpointMetadata>),
      writeKeys(entry.checkpointId).then((keys) => this.#readWrites(keys)),
    ]);
    if (checkpoint.v < 4 && parentId !== undefined) {
      await this.#migratePendingSends(checkpoint, await writeKeys(parentId));
    }
    const tuple: CheckpointTuple = {
      config,
      checkpoint,
      metadata: loadedMetadata,
      pendingWrites: await this.#pendingWrites(writes),
    };
    if (parentId !== undefined) {
      tuple.parentConfig = {
        configurable: { thread_id: entry.threadId, checkpoint_ns: entry.checkpointNs, checkpoint_id: parentId },
      };
    }
    return tuple;
  }

  #remember(key: string, record: CheckpointRecord): void {
    this.#recent.delete(key);
    // Only where values are, not the values: a long thread's messages are not held twice.
    const versions = Object.fromEntries(Object.entries(record.blobs ?? {}).map(([channel, blob]) => [channel, { version: blob.version }]));
    this.#recent.set(key, { blobs: versions, ...(record.blob_at !== undefined ? { blob_at: record.blob_at } : {}) });
    if (this.#recent.size > RECENT_RECORDS) this.#recent.delete(this.#recent.keys().next().value!);
  }

  // -- BaseCheckpointSaver ----------------------------------------------------------------------

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const rawThreadId: unknown = config.configurable?.thread_id;
    if (rawThreadId === undefined) return undefined;
    const threadId = requireId("configurable.thread_id", rawThreadId);
    const checkpointNs = requireId("configurable.checkpoint_ns", config.configurable?.checkpoint_ns ?? "", true);
    const requestedId = getCheckpointId(config);

    if (requestedId) {
      const checkpointId = requireId("configurable.checkpoint_id", requestedId);
      const key = this.#checkpointKey(threadId, checkpointNs, checkpointId);
      const record = await this.#readCheckpoint(key);
      if (!record) return undefined;
      const entry = { threadId, checkpointNs, checkpointId, key, group: this.#group(threadId, checkpointNs, checkpointId) };
      return this.#tuple(entry, record, config, (id) => this.#writeKeysOf(threadId, checkpointNs, id));
    }

    // One enumeration finds the newest checkpoint and its writes.
    const scan = await this.#scan(this.#namespaceBase(threadId, checkpointNs));
    const writeKeys = async (id: string) => scan.writes.get(this.#group(threadId, checkpointNs, id)) ?? [];
    const entries = scan.checkpoints
      .filter((e) => e.threadId === threadId && e.checkpointNs === checkpointNs)
      .sort((a, b) => compareIdsDescending(a.checkpointId, b.checkpointId));
    const latest = entries[0];
    const record = latest && (await this.#readCheckpoint(latest.key));
    if (!latest || !record) return undefined;
    const latestConfig = {
      configurable: { thread_id: threadId, checkpoint_id: latest.checkpointId, checkpoint_ns: checkpointNs },
    };
    return this.#tuple(latest, record, latestConfig, writeKeys);
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options ?? {};
    let limit = options?.limit;
    const rawThreadId: unknown = config.configurable?.thread_id;
    const threadId = rawThreadId === undefined ? undefined : requireId("configurable.thread_id", rawThreadId);
    const rawNs: unknown = config.configurable?.checkpoint_ns;
    const checkpointNs = rawNs === undefined ? undefined : requireId("configurable.checkpoint_ns", rawNs, true);
    const rawId: unknown = config.configurable?.checkpoint_id;
    const onlyId = rawId ? requireId("configurable.checkpoint_id", rawId) : undefined;
    const rawBefore: unknown = before?.configurable?.checkpoint_id;
    const beforeId = rawBefore ? requireId("before.configurable.checkpoint_id", rawBefore) : undefined;

    const base =
      threadId === undefined
        ? this.prefix
        : checkpointNs === undefined
          ? this.#threadBase(threadId)
          : this.#namespaceBase(threadId, checkpointNs);
    // One enumeration for the checkpoints and the writes of everything this call can yield.
    const scan = await this.#scan(base);
    const entries = scan.checkpoints
      .filter(
        (e) =>
          (threadId === undefined || e.threadId === threadId) &&
          (checkpointNs === undefined || e.checkpointNs === checkpointNs) &&
          (onlyId === undefined || e.checkpointId === onlyId) &&
          (beforeId === undefined || e.checkpointId < beforeId),
      )
      // Newest first across the whole result, ties (same id in several threads) by thread, ns.
      .sort(
        (a, b) =>
          compareIdsDescending(a.checkpointId, b.checkpointId) ||
          -compareIdsDescending(a.threadId, b.threadId) ||
          -compareIdsDescending(a.checkpointNs, b.checkpointNs),
      );

    for (const entry of entries) {
      const record = await this.#readCheckpoint(entry.key);
      if (!record) continue;
      const metadata = (await this.#load(record.metadata)) as CheckpointMetadata;
      if (filter && !Object.entries(filter).every(([key, value]) => (metadata as Record<string, unknown>)[key] === value)) {
        continue;
      }
      if (limit !== undefined) {
        if (limit <= 0) break;
        limit -= 1;
      }
      const tupleConfig = {
        configurable: { thread_id: entry.threadId, checkpoint_ns: entry.checkpointNs, checkpoint_id: entry.checkpointId },
      };
      const writeKeys = async (id: string) =>
        scan.writes.get(this.#group(entry.threadId, entry.checkpointNs, id)) ?? [];
      yield await this.#tuple(entry, record, tupleConfig, writeKeys, metadata);
    }
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const rawThreadId: unknown = config.configurable?.thread_id;
    if (rawThreadId === undefined) throw missingThreadId("put checkpoint");
    const threadId = requireId("configurable.thread_id", rawThreadId);
    const checkpointNs = requireId("configurable.checkpoint_ns", config.configurable?.checkpoint_ns ?? "", true);
    const checkpointId = requireId("checkpoint.id", checkpoint.id);
    const rawParent: unknown = config.configurable?.checkpoint_id;
    const parentId = rawParent ? requireId("configurable.checkpoint_id", rawParent) : undefined;

    const { channel_values: values, ...withoutValues } = copyCheckpoint(checkpoint);
    const channelValues: Record<string, unknown> = values ?? {};
    // The new values travel inside the checkpoint record: one write, so a checkpoint is stored
    // with its values or not at all.
    const blobs: Record<string, InlineBlob> = {};
    await Promise.all(
      Object.entries(newVersions ?? {}).map(async ([channel, version]) => {
        blobs[channel] = Object.prototype.hasOwnProperty.call(channelValues, channel)
          ? { version: String(version), value: toSerialized(await this.serde.dumpsTyped(channelValues[channel])) }
          : { version: String(version) };
      }),
    );
    const [serializedCheckpoint, serializedMetadata, blobAt] = await Promise.all([
      this.serde.dumpsTyped(withoutValues),
      this.serde.dumpsTyped(metadata),
      this.#inheritedBlobs(threadId, checkpointNs, parentId, checkpoint.channel_versions ?? {}, newVersions ?? {}),
    ]);
    const record: CheckpointRecord = {
      v: 1,
      thread_id: threadId,
      checkpoint_ns: checkpointNs,
      checkpoint_id: checkpointId,
      ...(parentId !== undefined ? { parent_checkpoint_id: parentId } : {}),
      checkpoint: toSerialized(serializedCheckpoint),
      metadata: toSerialized(serializedMetadata),
      blobs,
      ...(Object.keys(blobAt).length > 0 ? { blob_at: blobAt } : {}),
    };
    const key = this.#checkpointKey(threadId, checkpointNs, checkpointId);
    await this.storage.setItem(key, record);
    this.#remember(key, record);
    return { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, checkpoint_id: checkpointId } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const rawThreadId: unknown = config.configurable?.thread_id;
    const rawCheckpointId: unknown = config.configurable?.checkpoint_id;
    if (rawThreadId === undefined) throw missingThreadId("put writes");
    if (rawCheckpointId === undefined) {
      throw new CheckpointerError(
        "missing_checkpoint_id",
        `Failed to put writes: the RunnableConfig has no "checkpoint_id" in its "configurable". ` +
          `Pass the config returned by put().`,
      );
    }
    const threadId = requireId("configurable.thread_id", rawThreadId);
    const checkpointNs = requireId("configurable.checkpoint_ns", config.configurable?.checkpoint_ns ?? "", true);
    const checkpointId = requireId("configurable.checkpoint_id", rawCheckpointId);
    const task = requireId("taskId", taskId);
    const writeBase = this.#writeBase(threadId, checkpointNs, checkpointId);
    const taskSegment = encodeSegment(task);

    // Special channels (errors, interrupts, ...) map to fixed negative indices and replace the
    // previous write; regular writes keep their position and a repeated (task, idx) is kept once
    // (resolved when read, see #readWrites). Within one call the last write to an idx wins.
    const byIdx = new Map<number, { idx: number; channel: string; value: unknown }>();
    writes.forEach(([channel, value], position) => {
      const idx = WRITES_IDX_MAP[channel] || position;
      byIdx.set(idx, { idx, channel, value });
    });
    if (byIdx.size === 0) return;
    const record: WriteBatchRecord = {
      v: 1,
      task_id: task,
      task_path: taskPath ?? "",
      writes: await Promise.all(
        Array.from(byIdx.values(), async ({ idx, channel, value }) => ({ idx, channel, value: toSerialized(await this.serde.dumpsTyped(value)) })),
      ),
    };
    // One key for the call: its writes are stored together or not at all.
    await this.storage.setItem(`${writeBase}:${taskSegment}:${encodeSegment(this.#nextBatchId())}`, record);
  }

  async deleteThread(threadId: string): Promise<void> {
    const base = this.#threadBase(requireId("threadId", threadId));
    for (const key of this.#recent.keys()) if (key.startsWith(base + ":")) this.#recent.delete(key);
    const keys = await this.storage.getKeys(base);
    const isCheckpoint = (key: string) => this.#parseKey(key)?.kind === "c";
    // Checkpoints first: values and writes are only reached through a checkpoint, so a delete
    // that stops halfway never leaves a checkpoint visible without them. Newest first, one after
    // another: a checkpoint's inherited values live in an older checkpoint's record (ids grow
    // with time and the encoding keeps their order), so what is left holds all its values.
    for (const key of keys.filter(isCheckpoint).sort().reverse()) await this.storage.removeItem(key);
    await Promise.all(keys.filter((key) => !isCheckpoint(key)).map((key) => this.storage.removeItem(key)));
  }

  /**
   * Versions are `<counter>.<uuid>` strings (see `nextChannelVersion`). LangGraph compares
   * versions with `>` and `localeCompare`, which both accept strings; the base class merely
   * types them as numbers by default, hence the cast.
   */
  override getNextVersion(current: number | undefined): number {
    return nextChannelVersion(current) as unknown as number;
  }
}

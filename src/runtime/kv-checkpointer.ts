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
  isWriteRecord,
  toSerialized,
  type BlobRecord,
  type CheckpointRecord,
  type SerializedValue,
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
 *   <thread>:<ns>:b:<channel>:<version>         one BlobRecord per channel version
 *   <thread>:<ns>:w:<checkpoint>:<task>:<idx>   one WriteRecord per pending write
 *
 * A checkpoint record holds the checkpoint without its channel values; put() stores a blob only
 * for the channels named in `newVersions`, and a read joins `channel_versions` with the blobs
 * (the layout of the Postgres saver), so an unchanged channel is not copied into every
 * checkpoint. Every checkpoint, blob and write is its own key, so concurrent puts and putWrites
 * never read-modify-write a shared value and cannot lose one another.
 *
 * Key enumeration is the index: one `getKeys(<thread>:<ns>)` finds a thread's checkpoints and
 * their writes; values are read only for what is returned. Everything of a thread sits under
 * one base, so a driver that enumerates by base (deno-kv) touches only that thread. unstorage's
 * fs driver ignores the base and walks its whole tree on every getKeys, so with it the cost of
 * getTuple grows with the size of the store.
 */

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
    const blobs = await Promise.all(
      versions.map(async ([channel, version]) => {
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

  /** Writes in `writesSortKey` order (task path, task id, idx), as live execution applies them. */
  async #readWrites(keys: string[]): Promise<WriteRecord[]> {
    const values = await Promise.all(keys.map((key) => this.storage.getItem<unknown>(key)));
    const records: WriteRecord[] = [];
    values.forEach((value, i) => {
      if (value === null || value === undefined) return;
      if (!isWriteRecord(value)) {
        throw new CheckpointerError(
          "corrupt_record",
          `Pending-write record at ${JSON.stringify(keys[i])} is unreadable. Remove the key or restore it from a backup.`,
        );
      }
      records.push(value);
    });
    return records
      .map((record) => ({ record, sortKey: writesSortKey(record.task_path, record.task_id, record.idx) }))
      .sort((a, b) => compareWritesSortKeys(a.sortKey, b.sortKey))
      .map(({ record }) => record);
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
    // Blobs before the record, so a reader that sees the checkpoint finds its values.
    await Promise.all(
      Object.entries(newVersions ?? {}).map(async ([channel, version]) => {
        const blob: BlobRecord = Object.prototype.hasOwnProperty.call(channelValues, channel)
          ? { v: 1, value: toSerialized(await this.serde.dumpsTyped(channelValues[channel])) }
          : { v: 1 };
        await this.storage.setItem(this.#blobKey(threadId, checkpointNs, channel, version), blob);
      }),
    );
    const [serializedCheckpoint, serializedMetadata] = await Promise.all([
      this.serde.dumpsTyped(withoutValues),
      this.serde.dumpsTyped(metadata),
    ]);
    const record: CheckpointRecord = {
      v: 1,
      thread_id: threadId,
      checkpoint_ns: checkpointNs,
      checkpoint_id: checkpointId,
      ...(parentId !== undefined ? { parent_checkpoint_id: parentId } : {}),
      checkpoint: toSerialized(serializedCheckpoint),
      metadata: toSerialized(serializedMetadata),
    };
    await this.storage.setItem(this.#checkpointKey(threadId, checkpointNs, checkpointId), record);
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
    // previous write; regular writes keep their position and a repeated (task, idx) is kept once.
    // Within one call the last write to a key wins.
    const byKey = new Map<string, { idx: number; channel: string; value: unknown }>();
    writes.forEach(([channel, value], position) => {
      const idx = WRITES_IDX_MAP[channel] || position;
      byKey.set(`${writeBase}:${taskSegment}:${encodeSegment(String(idx))}`, { idx, channel, value });
    });
    await Promise.all(
      Array.from(byKey, async ([key, { idx, channel, value }]) => {
        if (idx >= 0 && (await this.storage.hasItem(key))) return;
        const record: WriteRecord = {
          v: 1,
          task_id: task,
          idx,
          channel,
          task_path: taskPath ?? "",
          value: toSerialized(await this.serde.dumpsTyped(value)),
        };
        await this.storage.setItem(key, record);
      }),
    );
  }

  async deleteThread(threadId: string): Promise<void> {
    const keys = await this.storage.getKeys(this.#threadBase(requireId("threadId", threadId)));
    const isCheckpoint = (key: string) => this.#parseKey(key)?.kind === "c";
    // Checkpoints first: values and writes are only reached through a checkpoint, so a delete
    // that stops halfway never leaves a checkpoint visible without them.
    await Promise.all(keys.filter(isCheckpoint).map((key) => this.storage.removeItem(key)));
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

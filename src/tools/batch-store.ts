import * as v from "valibot";
import { DeerflowError } from "../core/errors.ts";
import { NAMED_ID_MAX, NAMED_ID_PATTERN, idFormatHint } from "../core/ids.ts";
import type { KeyValue } from "../ports/key-value.ts";
import { SUBAGENT_STOP_REASONS, type SubagentStopReason } from "./subagent-result.ts";
import type { SubagentUsage } from "./subagent-run.ts";

/*
 * The durable record of a `batch_task` batch. KeyValue has no rename and no transaction, so a
 * batch is spread over keys that are each written whole:
 *
 *   <prefix>:<user>:<thread>:<batch>:meta            the batch: its tasks and the limits it was created with
 *   <prefix>:<user>:<thread>:<batch>:item:<index>    one item's status, verdict, usage and attempts
 *   <prefix>:<user>:<thread>:<batch>:result:<index>  one completed item's full text
 *
 * Item records are written before the meta, so a batch is visible only once every item exists;
 * a completed item's text is written before its record says "completed", so a record that says so
 * always has its text behind it. A crash therefore loses at most the items that were running.
 * Every id in a key is [A-Za-z0-9_-] (thread and user ids are checked by ThreadData, batch ids
 * here), which unstorage keeps as is and every driver maps to a safe path.
 */

export const BATCH_KEY_PREFIX = "batch_task";
export const BATCH_RECORD_VERSION = 1;

export const BATCH_ITEM_STATUSES = ["pending", "running", "completed", "failed", "cancelled", "timed_out"] as const;
export type BatchItemStatus = (typeof BATCH_ITEM_STATUSES)[number];
/**
 * Verdicts an item keeps: re-running would repeat work (completed) or a result the subagent itself
 * produced (failed, timed out). Cancelled is the run's doing, not the item's, so it runs again.
 */
export const SETTLED_BATCH_ITEM_STATUSES: ReadonlySet<BatchItemStatus> = new Set(["completed", "failed", "timed_out"]);

export const BATCH_ID_PATTERN = NAMED_ID_PATTERN;

export interface BatchLimits {
  /** Items the batch may hold. */
  readonly max_total: number;
  /** Unfinished batches its thread may hold; it stays enforced while this batch is open. */
  readonly max_live: number;
  /** Items of the batch running at once. */
  readonly max_running: number;
}

export interface BatchTaskSpec {
  readonly description: string;
  readonly prompt: string;
  readonly subagent_type: string;
}

export interface BatchRecord {
  readonly version: typeof BATCH_RECORD_VERSION;
  readonly batch_id: string;
  readonly user_id: string;
  readonly thread_id: string;
  readonly description: string;
  readonly created_at: string;
  readonly created_run_id: string;
  readonly limits: BatchLimits;
  readonly tasks: readonly BatchTaskSpec[];
  /** canonical hash of `tasks`, to tell a resume from a different batch under the same id. */
  readonly tasks_sha256: string;
}

export interface BatchItemRecord {
  readonly version: typeof BATCH_RECORD_VERSION;
  readonly index: number;
  readonly status: BatchItemStatus;
  /** Runs started for this item, across calls. */
  readonly attempts: number;
  readonly stop_reason: SubagentStopReason | null;
  readonly result_brief: string | null;
  readonly result_sha256: string | null;
  readonly error: string | null;
  /** Tokens spent on the item, summed over its attempts. */
  readonly usage: SubagentUsage;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  /** The parent run of the latest attempt. */
  readonly run_id: string | null;
  readonly subagent_thread_id: string | null;
}

export interface BatchSnapshot {
  readonly record: BatchRecord;
  readonly items: readonly BatchItemRecord[];
}

/** Whose batches: the user and thread a run resolved (ThreadData's rules). */
export interface BatchOwner {
  readonly userId: string;
  readonly threadId: string;
}

export type BatchStoreErrorCode = "batch_record_malformed" | "invalid_batch_id";

export class BatchStoreError extends DeerflowError {
  declare readonly code: BatchStoreErrorCode;

  constructor(code: BatchStoreErrorCode, message: string) {
    super(code, message);
    this.name = "BatchStoreError";
  }
}

const count = v.pipe(v.number(), v.integer(), v.minValue(0));
const UsageSchema = v.object({ input_tokens: count, output_tokens: count, total_tokens: count });
const nullableText = v.nullable(v.string());

const BatchRecordSchema = v.object({
  version: v.literal(BATCH_RECORD_VERSION),
  batch_id: v.pipe(v.string(), v.regex(BATCH_ID_PATTERN)),
  user_id: v.string(),
  thread_id: v.string(),
  description: v.string(),
  created_at: v.string(),
  created_run_id: v.string(),
  limits: v.object({ max_total: v.pipe(count, v.minValue(1)), max_live: v.pipe(count, v.minValue(1)), max_running: v.pipe(count, v.minValue(1)) }),
  tasks: v.pipe(v.array(v.object({ description: v.string(), prompt: v.string(), subagent_type: v.string() })), v.minLength(1)),
  tasks_sha256: v.string(),
});

const BatchItemRecordSchema = v.object({
  version: v.literal(BATCH_RECORD_VERSION),
  index: count,
  status: v.picklist(BATCH_ITEM_STATUSES),
  attempts: count,
  stop_reason: v.nullable(v.picklist(SUBAGENT_STOP_REASONS)),
  result_brief: nullableText,
  result_sha256: nullableText,
  error: nullableText,
  usage: UsageSchema,
  started_at: nullableText,
  finished_at: nullableText,
  run_id: nullableText,
  subagent_thread_id: nullableText,
});

const BatchResultSchema = v.object({ version: v.literal(BATCH_RECORD_VERSION), sha256: v.string(), text: v.string() });

export function zeroUsage(): SubagentUsage {
  return { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
}

export function addUsage(a: SubagentUsage, b: SubagentUsage): SubagentUsage {
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    total_tokens: a.total_tokens + b.total_tokens,
  };
}

/** The record of an item that has not run yet. */
export function pendingItem(index: number): BatchItemRecord {
  return {
    version: BATCH_RECORD_VERSION,
    index,
    status: "pending",
    attempts: 0,
    stop_reason: null,
    result_brief: null,
    result_sha256: null,
    error: null,
    usage: zeroUsage(),
    started_at: null,
    finished_at: null,
    run_id: null,
    subagent_thread_id: null,
  };
}

export function isItemSettled(item: Pick<BatchItemRecord, "status">): boolean {
  return SETTLED_BATCH_ITEM_STATUSES.has(item.status);
}

/** Open: some item has no verdict to keep yet (pending, running when a process died, cancelled). */
export function isBatchOpen(snapshot: BatchSnapshot): boolean {
  return snapshot.items.some((item) => !isItemSettled(item));
}

export function assertBatchId(batchId: string): void {
  if (!BATCH_ID_PATTERN.test(batchId)) {
    throw new BatchStoreError(
      "invalid_batch_id",
      `Invalid batch_id ${JSON.stringify(batchId)}: use ${idFormatHint(NAMED_ID_MAX)}, or leave batch_id out to start a new batch.`,
    );
  }
}

/**
 * Batches of one KeyValue. Besides the storage it keeps two in-process guards, shared by everyone
 * holding this instance: creation is serialised per thread, so two batch_task calls of one model
 * response cannot both slip under the live limit, and a batch runs in one call at a time, so the
 * same item is never run twice at once.
 */
export class BatchStore {
  readonly storage: KeyValue;
  readonly prefix: string;
  readonly #threadLocks = new Map<string, Promise<unknown>>();
  readonly #active = new Set<string>();

  constructor(storage: KeyValue, options: { prefix?: string } = {}) {
    this.storage = storage;
    this.prefix = (options.prefix ?? BATCH_KEY_PREFIX).replace(/:+$/, "");
  }

  threadBase(owner: BatchOwner): string {
    return `${this.prefix}:${owner.userId}:${owner.threadId}`;
  }

  metaKey(owner: BatchOwner, batchId: string): string {
    return `${this.threadBase(owner)}:${batchId}:meta`;
  }

  itemKey(owner: BatchOwner, batchId: string, index: number): string {
    return `${this.threadBase(owner)}:${batchId}:item:${index}`;
  }

  resultKey(owner: BatchOwner, batchId: string, index: number): string {
    return `${this.threadBase(owner)}:${batchId}:result:${index}`;
  }

  /** The batch with its items, or undefined when no batch has this id in the thread. */
  async read(owner: BatchOwner, batchId: string): Promise<BatchSnapshot | undefined> {
    assertBatchId(batchId);
    const key = this.metaKey(owner, batchId);
    const raw = await this.storage.getItem(key);
    if (raw === null || raw === undefined) return undefined;
    const parsed = v.safeParse(BatchRecordSchema, raw);
    if (!parsed.success || parsed.output.batch_id !== batchId) {
      throw new BatchStoreError(
        "batch_record_malformed",
        `The stored batch at "${key}" is not a batch record this version can read, so it was left untouched; ` +
          `start a new batch under another batch_id, or remove that key.`,
      );
    }
    const record = parsed.output as BatchRecord;
    const items = await Promise.all(
      record.tasks.map(async (_, index) => {
        const item = v.safeParse(BatchItemRecordSchema, await this.storage.getItem(this.itemKey(owner, batchId, index)));
        // An unreadable item has no verdict anyone could rely on: it runs again.
        return item.success && item.output.index === index ? (item.output as BatchItemRecord) : pendingItem(index);
      }),
    );
    return { record, items };
  }

  /** Ids of the thread's batches, from their meta keys. */
  async listBatchIds(owner: BatchOwner): Promise<string[]> {
    const base = this.threadBase(owner);
    const keys = await this.storage.getKeys(base);
    const ids = new Set<string>();
    for (const key of keys) {
      const rest = key.startsWith(`${base}:`) ? key.slice(base.length + 1).split(":") : [];
      if (rest.length === 2 && rest[1] === "meta" && BATCH_ID_PATTERN.test(rest[0]!)) ids.add(rest[0]!);
    }
    return [...ids].sort();
  }

  /** The thread's batches that still have unfinished items; unreadable ones are skipped. */
  async openBatches(owner: BatchOwner): Promise<BatchSnapshot[]> {
    const open: BatchSnapshot[] = [];
    for (const id of await this.listBatchIds(owner)) {
      let snapshot: BatchSnapshot | undefined;
      try {
        snapshot = await this.read(owner, id);
      } catch (error) {
        if (error instanceof BatchStoreError) continue;
        throw error;
      }
      if (snapshot && isBatchOpen(snapshot)) open.push(snapshot);
    }
    return open;
  }

  /** Writes a new batch: every item as pending first, the meta last. */
  async create(owner: BatchOwner, record: BatchRecord): Promise<BatchSnapshot> {
    assertBatchId(record.batch_id);
    const items = record.tasks.map((_, index) => pendingItem(index));
    for (const item of items) await this.writeItem(owner, record.batch_id, item);
    await this.storage.setItem(this.metaKey(owner, record.batch_id), record as unknown as Record<string, unknown>);
    return { record, items };
  }

  async writeItem(owner: BatchOwner, batchId: string, item: BatchItemRecord): Promise<void> {
    await this.storage.setItem(this.itemKey(owner, batchId, item.index), item as unknown as Record<string, unknown>);
  }

  async writeResult(owner: BatchOwner, batchId: string, index: number, text: string, sha256: string): Promise<void> {
    await this.storage.setItem(this.resultKey(owner, batchId, index), { version: BATCH_RECORD_VERSION, sha256, text });
  }

  /** A completed item's full text, or undefined when it is missing or is not the text its record names. */
  async readResult(owner: BatchOwner, batchId: string, item: BatchItemRecord): Promise<string | undefined> {
    if (item.status !== "completed" || item.result_sha256 === null) return undefined;
    const parsed = v.safeParse(BatchResultSchema, await this.storage.getItem(this.resultKey(owner, batchId, item.index)));
    return parsed.success && parsed.output.sha256 === item.result_sha256 ? parsed.output.text : undefined;
  }

  /** Runs `fn` after every earlier call for the same thread has settled. */
  async withThreadLock<T>(owner: BatchOwner, fn: () => Promise<T>): Promise<T> {
    const key = this.threadBase(owner);
    const previous = this.#threadLocks.get(key) ?? Promise.resolve();
    const current = previous.then(fn, fn);
    const tail = current.catch(() => {});
    this.#threadLocks.set(key, tail);
    try {
      return await current;
    } finally {
      if (this.#threadLocks.get(key) === tail) this.#threadLocks.delete(key);
    }
  }

  /** Marks the batch as being run here; false when a call in this process already runs it. */
  claim(owner: BatchOwner, batchId: string): boolean {
    const key = `${this.threadBase(owner)}:${batchId}`;
    if (this.#active.has(key)) return false;
    this.#active.add(key);
    return true;
  }

  release(owner: BatchOwner, batchId: string): void {
    this.#active.delete(`${this.threadBase(owner)}:${batchId}`);
  }
}

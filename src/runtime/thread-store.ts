import { systemClock } from "../core/clock.ts";
import { DeerflowError } from "../core/errors.ts";
import { NAMED_ID_MAX, NAMED_ID_PATTERN, idFormatHint, isNamedId } from "../core/ids.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { CAS_MAX_ATTEMPTS, parseStoredJson, updateVersioned, VersionedConflictError, versionedOver } from "../storage/versioned.ts";
import type { Clock } from "../ports/runtime-ports.ts";
import type { ThreadRecord, ThreadSearchQuery, ThreadStatus, ThreadStore } from "./thread-types.ts";
import { isRecord } from "../core/guards.ts";

/** Thread ids are named ids (core/ids.ts): they also name sandbox folders and storage keys. */
export const THREAD_ID_PATTERN = NAMED_ID_PATTERN;
/** `metadata.deerflow_pinned === true` lists a thread before every unpinned one. */
export const PINNED_METADATA_KEY = "deerflow_pinned";
export const THREAD_STATUSES: readonly ThreadStatus[] = Object.freeze(["idle", "busy", "interrupted", "error"]);
export const SEARCH_LIMIT_MAX = 1000;

export type ThreadStoreErrorCode = "invalid_thread_id" | "invalid_search_query" | "invalid_thread_update" | "corrupt_thread_record";

export class ThreadStoreError extends DeerflowError {
  declare readonly code: ThreadStoreErrorCode;
  constructor(code: ThreadStoreErrorCode, message: string) {
    super(code, message);
    this.name = "ThreadStoreError";
  }
}

/**
 * The one owner rule: a thread is visible to the user who owns it, and an ownerless thread (written
 * before auth was on, or by an embedded caller without users) to everyone. There is no admin
 * bypass: the owner check is about whose conversation it is, not about who runs the server.
 */
export function isThreadVisibleTo(thread: Pick<ThreadRecord, "owner_id">, userId: string): boolean {
  return thread.owner_id === null || thread.owner_id === userId;
}

export function isValidThreadId(value: unknown): value is string {
  return isNamedId(value);
}

export function assertThreadId(value: unknown): string {
  if (isValidThreadId(value)) return value;
  const shown = typeof value === "string" ? JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value) : typeof value;
  throw new ThreadStoreError(
    "invalid_thread_id",
    `Thread id ${shown} is not valid: use ${idFormatHint(NAMED_ID_MAX)} (a UUID works), or leave it out to get a new one.`,
  );
}

interface StoredThread {
  v: 1;
  thread_id: string;
  created_at: string;
  updated_at: string;
  metadata: Record<string, unknown>;
  status: ThreadStatus;
  owner_id: string | null;
  display_name: string | null;
}

function isStoredThread(value: unknown): value is StoredThread {
  if (!isRecord(value)) return false;
  return (
    value.v === 1 &&
    isValidThreadId(value.thread_id) &&
    typeof value.created_at === "string" &&
    typeof value.updated_at === "string" &&
    isRecord(value.metadata) &&
    THREAD_STATUSES.includes(value.status as ThreadStatus) &&
    (value.owner_id === null || typeof value.owner_id === "string") &&
    (value.display_name === null || value.display_name === undefined || typeof value.display_name === "string")
  );
}

function toRecord(stored: StoredThread): ThreadRecord {
  return Object.freeze({
    thread_id: stored.thread_id,
    created_at: stored.created_at,
    updated_at: stored.updated_at,
    metadata: Object.freeze(structuredClone(stored.metadata)),
    status: stored.status,
    owner_id: stored.owner_id,
    display_name: stored.display_name ?? null,
  });
}

/** JSON equality: what "exact match" means for a metadata filter value. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (isRecord(a) && isRecord(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key], b[key]));
  }
  return false;
}

function isPinned(record: ThreadRecord): boolean {
  return record.metadata[PINNED_METADATA_KEY] === true;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortThreads(records: ThreadRecord[], query: ThreadSearchQuery): ThreadRecord[] {
  const { sortBy, sortOrder } = query;
  if (sortBy) {
    const direction = sortOrder === "asc" ? 1 : -1;
    return records.sort(
      (a, b) => direction * compareStrings(a[sortBy], b[sortBy]) || compareStrings(a.thread_id, b.thread_id),
    );
  }
  return records.sort(
    (a, b) =>
      Number(isPinned(b)) - Number(isPinned(a)) ||
      compareStrings(b.updated_at, a.updated_at) ||
      compareStrings(b.thread_id, a.thread_id),
  );
}

function validateQuery(query: ThreadSearchQuery): void {
  const { limit, offset } = query;
  if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_LIMIT_MAX) {
    throw new ThreadStoreError("invalid_search_query", `limit must be an integer from 1 to ${SEARCH_LIMIT_MAX}, got ${String(limit)}.`);
  }
  if (!Number.isInteger(offset) || offset < 0) {
    throw new ThreadStoreError("invalid_search_query", `offset must be a whole number of 0 or more, got ${String(offset)}.`);
  }
  if (query.status !== undefined && !THREAD_STATUSES.includes(query.status)) {
    throw new ThreadStoreError("invalid_search_query", `status must be one of ${THREAD_STATUSES.join(", ")}, got ${String(query.status)}.`);
  }
}

export interface KeyValueThreadStoreOptions {
  readonly storage: KeyValue;
  readonly clock?: Clock;
  /** Key prefix; default `gateway:threads`. */
  readonly prefix?: string;
  /**
   * Compare-and-set over the same keys as `storage`; what makes writes of several processes to one
   * thread safe. Default: the in-process one over `storage` (one process).
   */
  readonly versioned?: VersionedKeyValue;
}

/**
 * Thread meta rows, one KeyValue item per thread under `gateway:threads:<id>`. Search reads every
 * row of the prefix and filters in memory: fine for the embedded store's thousands of threads; a
 * deployment past that plugs a ThreadStore over a database instead.
 *
 * Every write is a compare-and-set on the thread's row (retried from a fresh read when another
 * writer got there first), so two concurrent metadata patches both land, from one process or from
 * several over a shared versioned store.
 */
export class KeyValueThreadStore implements ThreadStore {
  readonly #storage: KeyValue;
  readonly #clock: Clock;
  readonly #prefix: string;
  readonly #versioned: VersionedKeyValue;

  constructor(options: KeyValueThreadStoreOptions) {
    this.#storage = options.storage;
    this.#clock = options.clock ?? systemClock;
    this.#prefix = (options.prefix ?? "gateway:threads").replace(/:+$/, "");
    this.#versioned = options.versioned ?? versionedOver(options.storage);
  }

  #key(threadId: string): string {
    return `${this.#prefix}:${threadId}`;
  }

  #now(): string {
    return new Date(this.#clock.now()).toISOString();
  }

  async #read(threadId: string): Promise<StoredThread | undefined> {
    return this.#parse(threadId, await this.#storage.getItem<unknown>(this.#key(threadId)));
  }

  #parse(threadId: string, value: unknown): StoredThread | undefined {
    if (value === null || value === undefined) return undefined;
    if (!isStoredThread(value)) {
      throw new ThreadStoreError(
        "corrupt_thread_record",
        `The stored record of thread ${threadId} is unreadable. Delete the key ${this.#key(threadId)} or restore it from a backup.`,
      );
    }
    return value;
  }

  async create(input: {
    threadId?: string;
    metadata?: Record<string, unknown>;
    ownerId: string | null;
  }): Promise<{ thread: ThreadRecord; created: boolean }> {
    const threadId = input.threadId === undefined ? crypto.randomUUID() : assertThreadId(input.threadId);
    const key = this.#key(threadId);
    // Create-if-absent first, then read what stood there: a new thread (the usual case, and every
    // generated id) costs one round trip instead of a read and a write. A thread deleted between the
    // refused write and the read is tried again.
    for (let attempt = 0; attempt < CAS_MAX_ATTEMPTS; attempt++) {
      const now = this.#now();
      const stored: StoredThread = {
        v: 1,
        thread_id: threadId,
        created_at: now,
        updated_at: now,
        metadata: structuredClone(input.metadata ?? {}),
        status: "idle",
        owner_id: input.ownerId,
        display_name: null,
      };
      if (await this.#versioned.write(key, JSON.stringify(stored), null)) return { thread: toRecord(stored), created: true };
      const existing = await this.#versionedRead(threadId);
      if (existing) return { thread: toRecord(existing), created: false };
    }
    throw new VersionedConflictError(key);
  }

  async #versionedRead(threadId: string): Promise<StoredThread | undefined> {
    const { value } = await this.#versioned.read(this.#key(threadId));
    return this.#parse(threadId, parseStoredJson(value));
  }

  async get(threadId: string): Promise<ThreadRecord | undefined> {
    if (!isValidThreadId(threadId)) return undefined;
    const stored = await this.#read(threadId);
    return stored && toRecord(stored);
  }

  async search(query: ThreadSearchQuery): Promise<ThreadRecord[]> {
    validateQuery(query);
    const ids = query.ids === undefined ? undefined : new Set(query.ids);
    const keys = await this.#storage.getKeys(this.#prefix);
    const base = `${this.#prefix}:`;
    const wanted = keys.filter((key) => {
      if (!key.startsWith(base)) return false;
      const threadId = key.slice(base.length);
      return isValidThreadId(threadId) && (ids === undefined || ids.has(threadId));
    });
    const items = wanted.length === 0 ? [] : await this.#storage.getItems(wanted);
    const filters = Object.entries(query.metadata ?? {});
    const matches: ThreadRecord[] = [];
    for (const { value } of items) {
      // A row written by something else (or half-written) is skipped in a listing; get() reports it.
      if (!isStoredThread(value)) continue;
      if (query.ownerId !== undefined && !isThreadVisibleTo(value, query.ownerId)) continue;
      if (query.status !== undefined && value.status !== query.status) continue;
      if (!filters.every(([key, expected]) => Object.hasOwn(value.metadata, key) && jsonEqual(value.metadata[key], expected))) continue;
      matches.push(toRecord(value));
    }
    return sortThreads(matches, query).slice(query.offset, query.offset + query.limit);
  }

  async update(
    threadId: string,
    patch: { metadata?: Record<string, unknown>; status?: ThreadStatus; display_name?: string | null },
  ): Promise<ThreadRecord | undefined> {
    if (!isValidThreadId(threadId)) return undefined;
    if (patch.status !== undefined && !THREAD_STATUSES.includes(patch.status)) {
      throw new ThreadStoreError("invalid_thread_update", `status must be one of ${THREAD_STATUSES.join(", ")}, got ${String(patch.status)}.`);
    }
    return updateVersioned(this.#versioned, this.#key(threadId), (current) => {
      const existing = this.#parse(threadId, parseStoredJson(current));
      if (!existing) return undefined;
      const stored: StoredThread = {
        ...existing,
        metadata: patch.metadata ? { ...existing.metadata, ...structuredClone(patch.metadata) } : existing.metadata,
        status: patch.status ?? existing.status,
        display_name: patch.display_name === undefined ? (existing.display_name ?? null) : patch.display_name,
        updated_at: this.#now(),
      };
      return { value: JSON.stringify(stored), result: toRecord(stored) };
    });
  }

  async delete(threadId: string): Promise<boolean> {
    if (!isValidThreadId(threadId)) return false;
    const deleted = await updateVersioned(this.#versioned, this.#key(threadId), (current) =>
      current === null ? undefined : { value: null, result: true },
    );
    return deleted === true;
  }
}

import { bytesToHex } from "../../core/hex.ts";
import type { KeyValue } from "../../ports/key-value.ts";
import { RUN_STATUSES, type RunRecord, type RunStatus } from "./types.ts";

/*
 * Run rows over KeyValue, one key per run under `<prefix>:<thread>:<run>`. Ids are hex-encoded in
 * keys: a thread id may differ from another only by case, which a case-insensitive file system
 * (the fs driver) would merge. Enumerating `<prefix>:<thread>` is the per-thread index.
 */

export interface RunListQuery {
  readonly limit?: number;
  readonly offset?: number;
  readonly status?: RunStatus;
}

const encoder = new TextEncoder();

/** A key segment for an id: hex, so ids that differ only by case stay apart on a case-insensitive file system. */
export function keySegment(id: string): string {
  return `x${bytesToHex(encoder.encode(id))}`;
}

function isRunRecord(value: unknown): value is RunRecord {
  if (typeof value !== "object" || value === null) return false;
  const row = value as Record<string, unknown>;
  return (
    typeof row.run_id === "string" &&
    typeof row.thread_id === "string" &&
    typeof row.created_at === "string" &&
    (RUN_STATUSES as readonly unknown[]).includes(row.status)
  );
}

export class RunStore {
  readonly storage: KeyValue;
  readonly prefix: string;

  constructor(storage: KeyValue, options: { prefix?: string } = {}) {
    this.storage = storage;
    this.prefix = options.prefix ?? "gateway:runs";
  }

  #key(threadId: string, runId: string): string {
    return `${this.prefix}:${keySegment(threadId)}:${keySegment(runId)}`;
  }

  async put(row: RunRecord): Promise<void> {
    await this.storage.setItem(this.#key(row.thread_id, row.run_id), row as never);
  }

  async get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    const value = await this.storage.getItem<unknown>(this.#key(threadId, runId));
    return isRunRecord(value) && value.thread_id === threadId ? value : undefined;
  }

  async delete(threadId: string, runId: string): Promise<boolean> {
    const key = this.#key(threadId, runId);
    if (!(await this.storage.hasItem(key))) return false;
    await this.storage.removeItem(key);
    return true;
  }

  /** A thread's runs, newest first. */
  async list(threadId: string, query: RunListQuery = {}): Promise<RunRecord[]> {
    const rows = await this.#rowsUnder(`${this.prefix}:${keySegment(threadId)}`);
    const offset = Math.max(0, query.offset ?? 0);
    const limit = Math.max(0, query.limit ?? 10);
    return rows
      .filter((row) => row.thread_id === threadId && (query.status === undefined || row.status === query.status))
      .sort(newestFirst)
      .slice(offset, offset + limit);
  }

  /** Every row whose status is one of `statuses` (startup recovery). */
  async findByStatus(statuses: ReadonlySet<RunStatus>): Promise<RunRecord[]> {
    return (await this.#rowsUnder(this.prefix)).filter((row) => statuses.has(row.status));
  }

  async deleteThread(threadId: string): Promise<void> {
    const keys = await this.storage.getKeys(`${this.prefix}:${keySegment(threadId)}`);
    await Promise.all(keys.map((key) => this.storage.removeItem(key)));
  }

  async #rowsUnder(base: string): Promise<RunRecord[]> {
    const keys = await this.storage.getKeys(base);
    const values = await Promise.all(keys.map((key) => this.storage.getItem<unknown>(key)));
    return values.filter(isRunRecord);
  }
}

/** The manager hands out strictly increasing created_at stamps, so creation order is time order. */
function newestFirst(a: RunRecord, b: RunRecord): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0;
}

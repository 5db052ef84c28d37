import type { KeyValue } from "../../ports/key-value.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import { keySegment } from "./run-store.ts";

/*
 * The run journal: what happened during a run, kept after its stream is gone. Every status change
 * of the row and every custom event the graph wrote (guard warnings, tool receipts, sandbox audit
 * decisions, subagent progress...) whether or not a client streamed `custom`, so an operator can
 * read a finished run's events after a restart. One key per write under
 * `<prefix>:<thread>:<run>:<seq>`, `<seq>` that of the last entry it holds: a lone entry as
 * itself, the entries of one flush together (`{ entries }`, one write, stored whole or not at
 * all). Entries that say how a run went (status changes, errors) are written when they happen,
 * with whatever was queued before them, so a crash cannot lose them; custom events are batched
 * and written in order, at the latest when the run ends.
 */

export type JournalEntryKind = "status" | "custom" | "error";

export interface JournalEntry {
  readonly seq: number;
  readonly at: string;
  readonly kind: JournalEntryKind;
  readonly data: unknown;
}

export interface JournalPage {
  readonly events: readonly JournalEntry[];
  /** Pass as `after_seq` for the next page; null when this page reached the end. */
  readonly next_after_seq: number | null;
}

interface OpenRun {
  next: number;
  buffer: JournalEntry[];
  writing: Promise<void>;
}

const FLUSH_AT = 32;
const SEQ_WIDTH = 8;

function seqKey(base: string, seq: number): string {
  return `${base}:${String(seq).padStart(SEQ_WIDTH, "0")}`;
}

/** The entries one stored value holds: itself, or the entries of a flushed batch. */
function storedEntries(value: unknown): JournalEntry[] {
  if (value === null || typeof value !== "object") return [];
  const batch = (value as { entries?: unknown }).entries;
  if (!Array.isArray(batch)) return [value as JournalEntry];
  return batch.filter((entry): entry is JournalEntry => entry !== null && typeof entry === "object");
}

export class RunJournal {
  readonly #storage: KeyValue;
  readonly #clock: Clock;
  readonly #prefix: string;
  readonly #open = new Map<string, OpenRun>();

  constructor(storage: KeyValue, options: { clock: Clock; prefix?: string }) {
    this.#storage = storage;
    this.#clock = options.clock;
    this.#prefix = options.prefix ?? "gateway:journal";
  }

  #base(threadId: string, runId: string): string {
    return `${this.#prefix}:${keySegment(threadId)}:${keySegment(runId)}`;
  }

  /**
   * Queues one entry. A status or error entry is written at once (the promise settles when it is
   * stored, and never rejects: a journal that cannot be written must not fail the run); a custom
   * one with the next flush (every 32 entries, and when the run ends).
   */
  record(threadId: string, runId: string, kind: JournalEntryKind, data: unknown): Promise<void> {
    const base = this.#base(threadId, runId);
    let run = this.#open.get(base);
    if (!run) {
      run = { next: 0, buffer: [], writing: Promise.resolve() };
      this.#open.set(base, run);
    }
    run.buffer.push({ seq: run.next++, at: new Date(this.#clock.now()).toISOString(), kind, data: data ?? null });
    if (kind !== "custom" || run.buffer.length >= FLUSH_AT) return this.flush(threadId, runId).catch(() => undefined);
    return Promise.resolve();
  }

  /**
   * Appends one entry, written at once, to the journal of a run this process does not have open
   * (one a restart left behind), after the entries it already has.
   */
  async append(threadId: string, runId: string, kind: JournalEntryKind, data: unknown): Promise<void> {
    const base = this.#base(threadId, runId);
    await this.#open.get(base)?.writing.catch(() => undefined);
    let seq = 0;
    for (const key of await this.#storage.getKeys(base)) {
      const n = Number(key.slice(key.lastIndexOf(":") + 1));
      if (Number.isInteger(n) && n >= seq) seq = n + 1;
    }
    const entry: JournalEntry = { seq, at: new Date(this.#clock.now()).toISOString(), kind, data: data ?? null };
    await this.#storage.setItem(seqKey(base, seq), entry as never);
  }

  /** Writes what is queued for the run, after any earlier write of it finished. */
  flush(threadId: string, runId: string): Promise<void> {
    const base = this.#base(threadId, runId);
    const run = this.#open.get(base);
    if (!run || run.buffer.length === 0) return run?.writing ?? Promise.resolve();
    const batch = run.buffer;
    run.buffer = [];
    run.writing = run.writing
      .catch(() => undefined)
      .then(() => this.#storage.setItem(seqKey(base, batch.at(-1)!.seq), (batch.length === 1 ? batch[0]! : { entries: batch }) as never));
    return run.writing;
  }

  /** Flushes and forgets the run's buffer: call once the run has ended. */
  async close(threadId: string, runId: string): Promise<void> {
    try {
      await this.flush(threadId, runId);
    } finally {
      this.#open.delete(this.#base(threadId, runId));
    }
  }

  /**
   * A page of the run's entries in order, after `afterSeq`; with `accept`, only the entries it
   * accepts count towards `limit` (the page is filled from later entries, read a batch at a time).
   */
  async list(
    threadId: string,
    runId: string,
    query: { afterSeq?: number; limit?: number; accept?: (entry: JournalEntry) => boolean } = {},
  ): Promise<JournalPage> {
    const base = this.#base(threadId, runId);
    await this.#open.get(base)?.writing.catch(() => undefined);
    const afterSeq = query.afterSeq ?? -1;
    const limit = Math.min(Math.max(1, query.limit ?? 100), 1000);
    const keys = (await this.#storage.getKeys(base))
      .map((key) => ({ key, seq: Number(key.slice(key.lastIndexOf(":") + 1)) }))
      .filter((entry) => Number.isInteger(entry.seq) && entry.seq > afterSeq)
      .sort((a, b) => a.seq - b.seq);
    const accept = query.accept ?? (() => true);
    const events: JournalEntry[] = [];
    // The seq of the last entry looked at, and whether any is left after it.
    let lastSeq = afterSeq;
    let more = false;
    pages: for (let read = 0; read < keys.length; ) {
      if (events.length === limit) {
        more = true;
        break;
      }
      const batch = keys.slice(read, read + (query.accept ? Math.max(limit, FLUSH_AT) : limit - events.length));
      read += batch.length;
      const values = new Map((await this.#storage.getItems(batch.map((entry) => entry.key))).map((item) => [item.key, item.value]));
      for (const { key, seq } of batch) {
        const entries = storedEntries(values.get(key)).filter((entry) => entry.seq > afterSeq);
        for (const entry of entries) {
          if (events.length === limit) {
            more = true;
            break pages;
          }
          lastSeq = entry.seq;
          if (accept(entry)) events.push(entry);
        }
        // A key whose value is gone still moves the page on past it.
        if (entries.length === 0) lastSeq = seq;
      }
    }
    return { events, next_after_seq: more ? lastSeq : null };
  }

  async deleteRun(threadId: string, runId: string): Promise<void> {
    const keys = await this.#storage.getKeys(this.#base(threadId, runId));
    await Promise.all(keys.map((key) => this.#storage.removeItem(key)));
  }

  async deleteThread(threadId: string): Promise<void> {
    const keys = await this.#storage.getKeys(`${this.#prefix}:${keySegment(threadId)}`);
    await Promise.all(keys.map((key) => this.#storage.removeItem(key)));
  }
}

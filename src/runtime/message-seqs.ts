import type { KeyValue } from "../ports/key-value.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { parseStoredJson, updateVersioned, versionedOver } from "../storage/versioned.ts";
import { keySegment } from "./runs/run-store.ts";

/*
 * Thread-global message sequence numbers, as the web UI's history pages order and page by them:
 * one record per thread, message key -> the seq it was given and when (the caller's key: the
 * gateway uses the run and the message id, so a turn a run replays gets seqs of its own). A seq once given never
 * changes, and every write is a compare-and-set over the record, so two writers (two requests, two
 * processes over a store that can compare-and-set) never hand out one seq twice.
 */

export interface MessageSeq {
  readonly seq: number;
  /** When the message was first given its seq (ISO 8601). */
  readonly created_at: string;
}

interface SeqRecord {
  /** The next seq to give; seqs start at 1. */
  next: number;
  /** message key -> [seq, created_at]. */
  seqs: Record<string, [number, string]>;
}

function parseRecord(text: string | null): SeqRecord {
  const value = parseStoredJson(text);
  const { next, seqs } = (typeof value === "object" && value !== null ? value : {}) as Partial<SeqRecord>;
  return {
    next: typeof next === "number" && Number.isInteger(next) && next >= 1 ? next : 1,
    // Without a prototype: a key holds a message id, the client's to choose, `__proto__` included.
    seqs: Object.assign(Object.create(null) as Record<string, [number, string]>, typeof seqs === "object" && seqs !== null ? seqs : {}),
  };
}

export class MessageSeqStore {
  readonly #storage: KeyValue;
  readonly #versioned: VersionedKeyValue;
  readonly #prefix: string;

  constructor(storage: KeyValue, options: { readonly versioned?: VersionedKeyValue; readonly prefix?: string } = {}) {
    this.#storage = storage;
    this.#versioned = options.versioned ?? versionedOver(storage);
    this.#prefix = options.prefix ?? "gateway:message-seqs";
  }

  #key(threadId: string): string {
    return `${this.#prefix}:${keySegment(threadId)}`;
  }

  /**
   * The seq of every message in `messages` by its key, giving those that have none yet the next
   * seqs in the order they are listed (conversation order), created at their `at`.
   */
  async assign(threadId: string, messages: readonly { readonly key: string; readonly at: string }[]): Promise<Map<string, MessageSeq>> {
    const ids = messages.map((message) => message.key);
    const result = await updateVersioned(this.#versioned, this.#key(threadId), (text) => {
      const record = parseRecord(text);
      let changed = false;
      for (const { key: id, at } of messages) {
        if (Object.hasOwn(record.seqs, id)) continue;
        record.seqs[id] = [record.next++, at];
        changed = true;
      }
      const seqs = new Map<string, MessageSeq>();
      for (const id of ids) {
        const [seq, createdAt] = record.seqs[id]!;
        seqs.set(id, { seq, created_at: createdAt });
      }
      return { value: changed ? JSON.stringify(record) : text, result: seqs };
    });
    return result ?? new Map();
  }

  /** Forgets a thread's seqs (its deletion). */
  async deleteThread(threadId: string): Promise<void> {
    await this.#storage.removeItem(this.#key(threadId));
  }
}

import type { KeyValue } from "../ports/key-value.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { parseStoredJson, updateVersioned, versionedOver } from "../storage/versioned.ts";
import { keySegment } from "./runs/run-store.ts";

/*
 * A user's thumbs-up/down on a run, kept in storage beside the run rows (one record per thread, run
 * and user, under `<prefix>:<thread>:<run>:<user>`), so it survives a restart and each user sees
 * only their own.
 */

export interface RunFeedback {
  readonly feedback_id: string;
  readonly run_id: string;
  readonly thread_id: string;
  readonly user_id: string;
  readonly message_id: string | null;
  readonly rating: 1 | -1;
  readonly comment: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

function isFeedback(value: unknown): value is RunFeedback {
  if (typeof value !== "object" || value === null) return false;
  const row = value as Record<string, unknown>;
  return typeof row.feedback_id === "string" && typeof row.run_id === "string" && (row.rating === 1 || row.rating === -1);
}

export class RunFeedbackStore {
  readonly #storage: KeyValue;
  readonly #versioned: VersionedKeyValue;
  readonly #prefix: string;

  constructor(storage: KeyValue, options: { readonly versioned?: VersionedKeyValue; readonly prefix?: string } = {}) {
    this.#storage = storage;
    this.#versioned = options.versioned ?? versionedOver(storage);
    this.#prefix = options.prefix ?? "gateway:run-feedback";
  }

  #key(threadId: string, runId: string, userId: string): string {
    return `${this.#prefix}:${keySegment(threadId)}:${keySegment(runId)}:${keySegment(userId)}`;
  }

  async get(threadId: string, runId: string, userId: string): Promise<RunFeedback | undefined> {
    const { value } = await this.#versioned.read(this.#key(threadId, runId, userId));
    const row = parseStoredJson(value);
    return isFeedback(row) && row.thread_id === threadId ? row : undefined;
  }

  /** Creates or replaces the user's feedback on the run; its id and creation time stay. */
  async upsert(
    input: { threadId: string; runId: string; userId: string; rating: 1 | -1; comment: string | null; now: string; newId: () => string },
  ): Promise<RunFeedback> {
    const saved = await updateVersioned(this.#versioned, this.#key(input.threadId, input.runId, input.userId), (text) => {
      const current = parseStoredJson(text);
      const previous = isFeedback(current) ? current : undefined;
      const row: RunFeedback = {
        feedback_id: previous?.feedback_id ?? input.newId(),
        run_id: input.runId,
        thread_id: input.threadId,
        user_id: input.userId,
        message_id: null,
        rating: input.rating,
        comment: input.comment,
        created_at: previous?.created_at ?? input.now,
        updated_at: input.now,
      };
      return { value: JSON.stringify(row), result: row };
    });
    return saved!;
  }

  /** True when there was feedback to delete. */
  async delete(threadId: string, runId: string, userId: string): Promise<boolean> {
    const deleted = await updateVersioned(this.#versioned, this.#key(threadId, runId, userId), (text) =>
      text === null ? { value: null, result: false } : { value: null, result: true },
    );
    return deleted === true;
  }

  /** Every feedback row of a thread (its deletion). */
  async deleteThread(threadId: string): Promise<void> {
    const base = `${this.#prefix}:${keySegment(threadId)}`;
    // getKeys matches by prefix: the thread's own keys are those under `<base>:`.
    const keys = (await this.#storage.getKeys(base)).filter((key) => key.startsWith(`${base}:`));
    await Promise.all(keys.map((key) => this.#storage.removeItem(key)));
  }
}

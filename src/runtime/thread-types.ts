/* Thread meta rows: the runs manager, the thread routes and the embedded client share this seam. */

export type ThreadStatus = "idle" | "busy" | "interrupted" | "error";

/** One thread's meta row (the LangGraph `Thread` shape plus its owner). */
export interface ThreadRecord {
  readonly thread_id: string;
  readonly created_at: string;
  readonly updated_at: string;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly status: ThreadStatus;
  /** Null for an ownerless thread (visible to everyone who may read threads). */
  readonly owner_id: string | null;
  readonly display_name?: string | null;
}

export interface ThreadSearchQuery {
  readonly metadata?: Record<string, unknown>;
  readonly status?: ThreadStatus;
  readonly limit: number;
  readonly offset: number;
  /** Only this owner's threads (plus ownerless ones); undefined = no owner filter. */
  readonly ownerId?: string;
  /** Only these thread ids. */
  readonly ids?: readonly string[];
  /** Default: pinned threads first, then updated_at descending. */
  readonly sortBy?: "thread_id" | "status" | "created_at" | "updated_at";
  readonly sortOrder?: "asc" | "desc";
}

/** Thread meta rows over KeyValue; the checkpoints themselves live in the checkpointer. */
export interface ThreadStore {
  create(input: { threadId?: string; metadata?: Record<string, unknown>; ownerId: string | null }): Promise<{ thread: ThreadRecord; created: boolean }>;
  get(threadId: string): Promise<ThreadRecord | undefined>;
  search(query: ThreadSearchQuery): Promise<ThreadRecord[]>;
  /** Merges metadata; bumps updated_at. Undefined when the thread does not exist. */
  update(threadId: string, patch: { metadata?: Record<string, unknown>; status?: ThreadStatus; display_name?: string | null }): Promise<ThreadRecord | undefined>;
  delete(threadId: string): Promise<boolean>;
}

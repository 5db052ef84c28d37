// The facts memory keeps and the extractor contract: shared by the store (store.ts) and the
// extractors that produce facts (extractors.ts).

export const MEMORY_FACT_CATEGORIES = ["preference", "knowledge", "context", "behavior", "goal", "correction"] as const;
export type MemoryFactCategory = (typeof MEMORY_FACT_CATEGORIES)[number];

/** A fact as an extractor proposes it. */
export interface MemoryFact {
  readonly content: string;
  readonly category: MemoryFactCategory;
  /** 0..1; an explicit statement by the user is 0.9 or more. */
  readonly confidence: number;
}

/**
 * A fact as stored: identity and timestamps added by the store. Its category is one of the
 * extractors' own, or a user's label: DeerFlow's UI (and upstream's API) take free text for a fact
 * added or edited by hand.
 */
export interface StoredMemoryFact extends Omit<MemoryFact, "category"> {
  readonly category: string;
  readonly id: string;
  /** ISO 8601. */
  readonly createdAt: string;
  /** ISO 8601: when an extraction last produced this fact again. */
  readonly lastConfirmedAt: string;
  readonly sourceThreadId?: string;
}

/** One summary section of a memory document (upstream's `user.workContext` ...), kept as imported. */
export interface MemorySummary {
  readonly summary: string;
  readonly updatedAt: string;
}

/** Summary sections by group and name (`user` -> `workContext` -> ...): kept and shown, never injected. */
export type MemorySummaries = Readonly<Record<string, Readonly<Record<string, MemorySummary>>>>;

/** One turn of a conversation as memory sees it: the user's own words or a final answer. */
export interface MemoryMessage {
  readonly id?: string;
  readonly role: "user" | "assistant";
  readonly text: string;
}

export interface MemoryExtractionInput {
  readonly userId: string;
  readonly threadId: string;
  /** Only the turns not yet processed for this thread. */
  readonly messages: readonly MemoryMessage[];
  readonly existing: readonly StoredMemoryFact[];
}

/**
 * Turns a conversation into facts to remember. `policy` identifies the extractor in release
 * declarations (an extractor without one is declared as `{ kind: "custom" }`).
 */
export type MemoryExtractor = ((input: MemoryExtractionInput) => Promise<MemoryFact[]>) & {
  readonly policy?: Readonly<Record<string, unknown>>;
};

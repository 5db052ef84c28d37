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

/** A fact as stored: identity and timestamps added by the store. */
export interface StoredMemoryFact extends MemoryFact {
  readonly id: string;
  /** ISO 8601. */
  readonly createdAt: string;
  /** ISO 8601: when an extraction last produced this fact again. */
  readonly lastConfirmedAt: string;
  readonly sourceThreadId?: string;
}

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

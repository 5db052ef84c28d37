import type { ExtensionData } from "./task-store.ts";

/**
 * Context compaction: the one moment a lossy transform of the conversation can still be described.
 * Once the source messages have left state, which message went into which summary cannot be
 * reconstructed, so the host reports it here while it still knows.
 */

/** The lossy transforms the host reports. */
export type CompactionTransformKind = "summarization";

/** Bumped whenever what a summarization event's fields mean changes. */
export const SUMMARIZATION_TRANSFORM_VERSION = 1;

/**
 * One compaction. Field names are snake_case because events are exchanged with the Python host.
 * Hashes are `canonicalHash` of a message's `content` itself (a string, or a list of content
 * blocks), never of a stringified copy, so two hosts hash the same content alike.
 */
export interface CompactionEvent {
  readonly transform_kind: CompactionTransformKind;
  readonly transform_version: number;
  /** One hash per message removed from state, in conversation order, taken before the summary was made. */
  readonly source_content_hashes: readonly string[];
  /** Hash of the summary text that replaced them. */
  readonly summary_content_hash: string;
  /** How many messages left state. */
  readonly compacted_message_count: number;
  /** How many messages state kept (the tail plus anything rescued from the compacted range). */
  readonly kept_message_count: number;
}

/**
 * Told after each compaction. Notification is fire-and-forget: the run never waits for an
 * observer, and an observer that throws or rejects never affects the run or the other observers.
 * There is no live task at that moment, so `taskStore` is a detached store (scope id "detached"),
 * one per compaction, shared by the observers told of it.
 */
export interface ContextCompactionObserver {
  onContextCompacted(event: CompactionEvent, taskStore: ExtensionData): void | Promise<void>;
}

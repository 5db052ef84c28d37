import { bytesToBase64 } from "../core/base64.ts";

// The JSON records the checkpointer stores (checkpoint, channel blob, pending write), and the
// guards that tell a stored value is one of ours before it is read.

export type SerializedValue = { t: string; b: string } | { t: string; s: string };

export interface CheckpointRecord {
  v: 1;
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id?: string;
  checkpoint: SerializedValue;
  metadata: SerializedValue;
  /**
   * The values of the channels this checkpoint gave a new version (put's `newVersions`), inline,
   * so a checkpoint is one write. Absent in records written before: their values are BlobRecords.
   */
  blobs?: Record<string, InlineBlob>;
  /** For a channel whose version this checkpoint inherited: the checkpoint whose `blobs` hold it. */
  blob_at?: Record<string, string>;
}

export interface InlineBlob {
  /** The channel version the value belongs to, as `String(version)`. */
  version: string;
  /** Absent when the channel was emptied at this version. */
  value?: SerializedValue;
}

export interface BlobRecord {
  v: 1;
  /** Absent when the channel was emptied at this version. */
  value?: SerializedValue;
}

export interface WriteRecord {
  v: 1;
  task_id: string;
  idx: number;
  channel: string;
  task_path: string;
  value: SerializedValue;
}

/**
 * The writes of one putWrites call, one key (`w:<checkpoint>:<task>:<batch id>`); earlier versions
 * stored one WriteRecord per write (`w:<checkpoint>:<task>:<idx>`), still read.
 */
export interface WriteBatchRecord {
  v: 1;
  task_id: string;
  task_path: string;
  writes: Array<{ idx: number; channel: string; value: SerializedValue }>;
}

// Serialized values as JSON-safe records: text as text, other bytes as base64.

const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * A serializer's output as a record. The "json" type's bytes are UTF-8 JSON text (JsonPlusSerializer
 * encodes it so) and are kept as that text, a quarter smaller than its base64, read back by the
 * same `loadsTyped` (the SerializerProtocol takes a string or bytes); bytes that are not UTF-8,
 * and every other type, stay base64.
 */
export function toSerialized([type, data]: [string, Uint8Array | string]): SerializedValue {
  if (typeof data === "string") return { t: type, s: data };
  if (type === "json") {
    try {
      return { t: type, s: utf8Strict.decode(data) };
    } catch {
      // Not UTF-8: stored as the bytes they are.
    }
  }
  return { t: type, b: bytesToBase64(data) };
}

export function isSerialized(value: unknown): value is SerializedValue {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.t === "string" && (typeof v.b === "string" || typeof v.s === "string");
}

export function isCheckpointRecord(value: unknown): value is CheckpointRecord {
  if (typeof value !== "object" || value === null) return false;
  const r = value as Record<string, unknown>;
  return (
    r.v === 1 &&
    typeof r.checkpoint_id === "string" &&
    (r.parent_checkpoint_id === undefined || typeof r.parent_checkpoint_id === "string") &&
    isSerialized(r.checkpoint) &&
    isSerialized(r.metadata)
  );
}

export function isBlobRecord(value: unknown): value is BlobRecord {
  if (typeof value !== "object" || value === null) return false;
  const r = value as Record<string, unknown>;
  return r.v === 1 && (r.value === undefined || isSerialized(r.value));
}

export function isWriteRecord(value: unknown): value is WriteRecord {
  if (typeof value !== "object" || value === null) return false;
  const r = value as Record<string, unknown>;
  return (
    r.v === 1 &&
    typeof r.task_id === "string" &&
    typeof r.idx === "number" &&
    typeof r.channel === "string" &&
    typeof r.task_path === "string" &&
    isSerialized(r.value)
  );
}

export function isWriteBatchRecord(value: unknown): value is WriteBatchRecord {
  if (typeof value !== "object" || value === null) return false;
  const r = value as Record<string, unknown>;
  return (
    r.v === 1 &&
    typeof r.task_id === "string" &&
    typeof r.task_path === "string" &&
    Array.isArray(r.writes) &&
    r.writes.every(
      (w: unknown) =>
        typeof w === "object" &&
        w !== null &&
        typeof (w as Record<string, unknown>).idx === "number" &&
        typeof (w as Record<string, unknown>).channel === "string" &&
        isSerialized((w as Record<string, unknown>).value),
    )
  );
}

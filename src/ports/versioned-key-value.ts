/*
 * Compare-and-set over single records, for the records several gateway processes write: thread rows
 * and metadata, a user's memory record, the JWT secret, login lockout counters, sandbox snapshot
 * manifests. unstorage has no compare-and-set, so this is a port of its own, implemented per
 * driver over the same keys the KeyValue reads (memory and fs: one process, a per-key lock;
 * PostgreSQL: a version column; Deno KV: versionstamps).
 */

/** What a key holds now: its value (raw text, as KeyValue's getItemRaw would give it) and a version token. */
export interface VersionedValue {
  /** null: the key holds nothing. */
  readonly value: string | null;
  /** Opaque; null exactly when the key holds nothing. Pass it back to `write` unchanged. */
  readonly version: string | null;
}

export interface VersionedKeyValue {
  read(key: string): Promise<VersionedValue>;
  /**
   * Writes `value` (null deletes) only if the key's version is still `expected` (null: the key must
   * hold nothing). Returns false, writing nothing, when another writer got there first.
   */
  write(key: string, value: string | null, expected: string | null): Promise<boolean>;
}

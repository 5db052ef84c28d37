import type pg from "pg";
import type { VersionedKeyValue, VersionedValue } from "../../../src/ports/versioned-key-value.ts";
import { KV_TABLE, KV_VERSION_SEQUENCE } from "./schema.ts";

/**
 * Compare-and-set over the kv table's version column: the same rows the KeyValue reads, so a
 * plain setItem also moves a key's version on. Versions come from one sequence (schema.ts), never
 * reused, so a key removed and written again does not match a version read before.
 */
export class PostgresVersionedKeyValue implements VersionedKeyValue {
  readonly #pool: pg.Pool;

  constructor(options: { pool: pg.Pool }) {
    this.#pool = options.pool;
  }

  async read(key: string): Promise<VersionedValue> {
    const result = await this.#pool.query<{ value: Buffer; version: string }>(`SELECT value, version FROM ${KV_TABLE} WHERE key = $1`, [key]);
    const row = result.rows[0];
    return row ? { value: row.value.toString("utf8"), version: String(row.version) } : { value: null, version: null };
  }

  async write(key: string, value: string | null, expected: string | null): Promise<boolean> {
    const bytes = value === null ? null : Buffer.from(value, "utf8");
    if (expected === null) {
      if (bytes === null) return (await this.read(key)).version === null;
      const inserted = await this.#pool.query(`INSERT INTO ${KV_TABLE} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, [key, bytes]);
      return inserted.rowCount === 1;
    }
    if (!/^\d+$/.test(expected)) return false;
    const changed =
      bytes === null
        ? await this.#pool.query(`DELETE FROM ${KV_TABLE} WHERE key = $1 AND version = $2`, [key, expected])
        : await this.#pool.query(
            `UPDATE ${KV_TABLE} SET value = $3, version = nextval('${KV_VERSION_SEQUENCE}'), updated_at = now() WHERE key = $1 AND version = $2`,
            [key, expected, bytes],
          );
    return changed.rowCount === 1;
  }
}

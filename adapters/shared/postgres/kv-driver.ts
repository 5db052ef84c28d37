import type pg from "pg";
import { createStorage, defineDriver, type Driver } from "unstorage";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { KV_TABLE, KV_VERSION_SEQUENCE } from "./schema.ts";

/** A LIKE pattern matching every key that starts with `prefix` literally. */
export function prefixPattern(prefix: string): string {
  return `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** The upsert every plain write goes through: a new version, so a compare-and-set holding the old one fails. */
export const UPSERT_SQL = `INSERT INTO ${KV_TABLE} (key, value) VALUES ($1, $2)
  ON CONFLICT (key) DO UPDATE SET value = excluded.value, version = nextval('${KV_VERSION_SEQUENCE}'), updated_at = now()`;

const textOf = (value: Buffer): string => value.toString("utf8");

/**
 * An unstorage driver over the kv table (migrated by schema.ts). Values are bytes: text as UTF-8,
 * raw values (uploads, sandbox files) as given. The pool is the caller's: dispose() leaves it open.
 */
export const postgresDriver = defineDriver((options: { pool: pg.Pool }): Driver => {
  const { pool } = options;
  const read = async (key: string): Promise<Buffer | null> => {
    const result = await pool.query<{ value: Buffer }>(`SELECT value FROM ${KV_TABLE} WHERE key = $1`, [key]);
    return result.rows[0]?.value ?? null;
  };
  const write = async (key: string, value: Uint8Array): Promise<void> => {
    await pool.query(UPSERT_SQL, [key, value]);
  };
  return {
    name: "deerflow-postgres",
    options,
    async hasItem(key) {
      const result = await pool.query(`SELECT 1 FROM ${KV_TABLE} WHERE key = $1`, [key]);
      return (result.rowCount ?? 0) > 0;
    },
    async getItem(key) {
      const value = await read(key);
      return value === null ? null : textOf(value);
    },
    async getItems(items) {
      const keys = items.map((item) => item.key);
      const result = await pool.query<{ key: string; value: Buffer }>(`SELECT key, value FROM ${KV_TABLE} WHERE key = ANY($1::text[])`, [keys]);
      const found = new Map(result.rows.map((row) => [row.key, textOf(row.value)]));
      return keys.map((key) => ({ key, value: found.get(key) ?? null }));
    },
    getItemRaw: (key) => read(key),
    setItem: (key, value) => write(key, Buffer.from(value, "utf8")),
    setItemRaw: (key, value) => write(key, toBytes(value)),
    async removeItem(key) {
      await pool.query(`DELETE FROM ${KV_TABLE} WHERE key = $1`, [key]);
    },
    async getMeta(key) {
      const result = await pool.query<{ updated_at: Date }>(`SELECT updated_at FROM ${KV_TABLE} WHERE key = $1`, [key]);
      const row = result.rows[0];
      return row ? { mtime: row.updated_at } : null;
    },
    async getKeys(base) {
      const result = await pool.query<{ key: string }>(`SELECT key FROM ${KV_TABLE} WHERE key LIKE $1 ORDER BY key`, [prefixPattern(base ?? "")]);
      return result.rows.map((row) => row.key);
    },
    async clear(base) {
      await pool.query(`DELETE FROM ${KV_TABLE} WHERE key LIKE $1`, [prefixPattern(base ?? "")]);
    },
    dispose: () => undefined,
  };
});

/** A KeyValue over the kv table of `pool`'s database (already migrated). */
export function createPostgresKeyValue(options: { pool: pg.Pool }): KeyValue {
  return createStorage({ driver: postgresDriver(options) });
}

function toBytes(value: unknown): Uint8Array {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (typeof value === "string") return Buffer.from(value, "utf8");
  throw new TypeError(`a raw value must be bytes (Uint8Array), got ${typeof value}`);
}

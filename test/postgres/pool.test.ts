// StoragePool's named statements over a real PostgreSQL (Node only: the test starts the server).
// A parameterised text gets a statement name, so each connection prepares it once; the server's
// pg_prepared_statements view (per session) shows what was prepared.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StoragePool } from "../../adapters/shared/postgres/pool.ts";
import { startTestPostgres, type TestPostgres } from "../support/embedded-postgres.ts";

let server: TestPostgres;
const pools: StoragePool[] = [];

beforeAll(async () => {
  server = await startTestPostgres();
}, 60_000);

afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
  await server?.stop();
});

/** One connection, so every pool.query lands on the session the view describes. */
function onePool(): StoragePool {
  const pool = new StoragePool({ url: server.url, max: 1 });
  pools.push(pool);
  return pool;
}

const prepared = async (pool: StoragePool) =>
  (await pool.query("SELECT name, statement FROM pg_prepared_statements ORDER BY name")).rows as Array<{ name: string; statement: string }>;

describe("StoragePool's named statements", () => {
  it("prepares a parameterised text once per connection, on pool.query and on a checked-out client alike", async () => {
    const pool = onePool();
    for (let i = 0; i < 3; i++) expect((await pool.query("SELECT $1::int + 1 AS n", [i])).rows[0].n).toBe(i + 1);
    const client = await pool.connect();
    try {
      expect((await client.query("SELECT $1::text || 'b' AS s", ["a"])).rows[0].s).toBe("ab");
      await client.query("SELECT $1::text || 'b' AS s", ["c"]);
    } finally {
      client.release();
    }
    const rows = await prepared(pool);
    expect(rows.map((row) => row.statement)).toEqual(["SELECT $1::int + 1 AS n", "SELECT $1::text || 'b' AS s"]);
    expect(rows.every((row) => row.name.startsWith("deerflow_"))).toBe(true);
  });

  it("leaves a text without values and a config object as they came", async () => {
    const pool = onePool();
    await pool.query("SELECT 1");
    await pool.query({ text: "SELECT $1::int AS n", values: [1] });
    expect(await prepared(pool)).toEqual([]);
  });

  it("keeps serving a name after its statement failed, at parse and at execution", async () => {
    const pool = onePool();
    for (let i = 0; i < 2; i++) await expect(pool.query("SELECT $1::no_such_type", [1])).rejects.toThrow(/no_such_type/);
    await expect(pool.query("SELECT 1 / $1::int AS q", [0])).rejects.toThrow(/division by zero/);
    expect((await pool.query("SELECT 1 / $1::int AS q", [1])).rows[0].q).toBe(1);
  });

  it("names at most 256 distinct texts; later ones go unnamed and still answer", async () => {
    const pool = onePool();
    for (let i = 0; i < 300; i++) expect((await pool.query(`SELECT $1::int + ${i} AS n`, [1])).rows[0].n).toBe(1 + i);
    const rows = await prepared(pool);
    expect(rows).toHaveLength(256);
    expect(rows.some((row) => row.statement === "SELECT $1::int + 299 AS n")).toBe(false);
  });
});

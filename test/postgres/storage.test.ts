// KeyValue and compare-and-set over a real PostgreSQL (Node only: the test starts the server).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresKeyValue, postgresDriver } from "../../adapters/shared/postgres/kv-driver.ts";
import { StoragePool } from "../../adapters/shared/postgres/pool.ts";
import { migrate } from "../../adapters/shared/postgres/schema.ts";
import { PostgresVersionedKeyValue } from "../../adapters/shared/postgres/versioned.ts";
import { startTestPostgres, type TestPostgres } from "../support/embedded-postgres.ts";
import { storageContract } from "../support/storage-contract.ts";

let server: TestPostgres;
let pool: StoragePool;
let other: StoragePool;

beforeAll(async () => {
  server = await startTestPostgres();
  pool = new StoragePool({ url: server.url, max: 4 });
  other = new StoragePool({ url: server.url, max: 4 });
  await migrate(pool);
}, 60_000);

afterAll(async () => {
  await pool?.end();
  await other?.end();
  await server?.stop();
});

storageContract("postgres", async () => {
  await pool.query("DELETE FROM deerflow_kv");
  return createPostgresKeyValue({ pool });
});

describe("the PostgreSQL KeyValue", () => {
  it("keeps bytes as bytes and text as text, and another pool (another worker) reads them", async () => {
    const kv = createPostgresKeyValue({ pool });
    const bytes = new Uint8Array([0, 255, 1, 128, 10, 13]);
    await kv.setItemRaw("uploads:u1:t1:blob", bytes);
    await kv.setItem("threads:t1:meta", { title: "Réport ✓" });
    const elsewhere = createPostgresKeyValue({ pool: other });
    expect(new Uint8Array((await elsewhere.getItemRaw("uploads:u1:t1:blob")) as Uint8Array)).toEqual(bytes);
    expect(await elsewhere.getItem("threads:t1:meta")).toEqual({ title: "Réport ✓" });
    expect((await elsewhere.getMeta("threads:t1:meta")).mtime).toBeInstanceOf(Date);
  });

  it("takes % and _ in a base literally, and clears only under the base", async () => {
    const kv = createPostgresKeyValue({ pool });
    await kv.clear();
    await kv.setItem("a_b:1", 1);
    await kv.setItem("axb:1", 2);
    await kv.setItem("a%:1", 3);
    await kv.setItem("ab:1", 4);
    expect(await kv.getKeys("a_b")).toEqual(["a_b:1"]);
    expect(await kv.getKeys("a%")).toEqual(["a%:1"]);
    // unstorage's clear(base) reaches a driver only through a mount at or under base: the driver's own clear.
    await postgresDriver({ pool }).clear!("a_b:", {});
    expect((await kv.getKeys()).sort()).toEqual(["a%:1", "ab:1", "axb:1"]);
  });

  it("answers getKeys(prefix) from the primary key's index, not a scan", async () => {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SET LOCAL enable_seqscan = off");
      const plan = await client.query<{ "QUERY PLAN": string }>("EXPLAIN SELECT key FROM deerflow_kv WHERE key LIKE 'checkpoints:t1:%' ORDER BY key");
      const text = plan.rows.map((row) => row["QUERY PLAN"]).join("\n");
      expect(text).toMatch(/Index (Only )?Scan (using|on) deerflow_kv_pkey/);
      expect(text).toMatch(/Index Cond: \(\(key >= 'checkpoints:t1:'::text\) AND \(key < 'checkpoints:t1;'::text\)\)/);
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  });
});

describe("the PostgreSQL VersionedKeyValue", () => {
  it("inserts only when absent, updates only from the version read, deletes the same way", async () => {
    const cas = new PostgresVersionedKeyValue({ pool });
    const key = "memory:u-cas";
    expect(await cas.read(key)).toEqual({ value: null, version: null });
    expect(await cas.write(key, "one", null)).toBe(true);
    expect(await cas.write(key, "again", null)).toBe(false);
    const first = await cas.read(key);
    expect(first.value).toBe("one");
    expect(await cas.write(key, "two", first.version)).toBe(true);
    expect(await cas.write(key, "stale", first.version)).toBe(false);
    expect(await cas.write(key, "bogus", "not-a-version")).toBe(false);
    const second = await cas.read(key);
    expect(second.value).toBe("two");
    expect(await cas.write(key, null, first.version)).toBe(false);
    expect(await cas.write(key, null, second.version)).toBe(true);
    expect(await cas.read(key)).toEqual({ value: null, version: null });
    expect(await cas.write(key, null, null)).toBe(true);
  });

  it("a key removed and written again never matches a version read before (no ABA)", async () => {
    const cas = new PostgresVersionedKeyValue({ pool });
    const key = "lockout:aba";
    await cas.write(key, "a", null);
    const before = await cas.read(key);
    await cas.write(key, null, before.version);
    await cas.write(key, "b", null);
    expect(await cas.write(key, "c", before.version)).toBe(false);
    expect((await cas.read(key)).value).toBe("b");
  });

  it("a plain KeyValue write moves the version on, so a compare-and-set holding the old one fails", async () => {
    const cas = new PostgresVersionedKeyValue({ pool });
    const kv = createPostgresKeyValue({ pool });
    await kv.setItem("jwt:secret", "s1");
    const read = await cas.read("jwt:secret");
    expect(read.value).toBe(JSON.stringify("s1").slice(1, -1));
    await kv.setItem("jwt:secret", "s2");
    expect(await cas.write("jwt:secret", "s3", read.version)).toBe(false);
  });

  it("20 concurrent increments from two pools through read/write-retry lose none", async () => {
    const stores = [new PostgresVersionedKeyValue({ pool }), new PostgresVersionedKeyValue({ pool: other })];
    const key = "counter:shared";
    let conflicts = 0;
    const increment = async (cas: PostgresVersionedKeyValue) => {
      for (;;) {
        const current = await cas.read(key);
        const next = String(Number(current.value ?? "0") + 1);
        if (await cas.write(key, next, current.version)) return;
        conflicts++;
      }
    };
    await Promise.all(Array.from({ length: 20 }, (_, i) => increment(stores[i % 2]!)));
    expect((await stores[0]!.read(key)).value).toBe("20");
    // The increments really raced: some read a version another had already replaced.
    expect(conflicts).toBeGreaterThan(0);
  });
});

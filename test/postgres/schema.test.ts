// Start-up over a real PostgreSQL: migrations under concurrent starts, a newer schema refused, an
// unreachable server or a wrong password named in one sentence without the password (Node only).
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertSupportedServer, openPostgresStorage } from "../../adapters/shared/postgres/open.ts";
import { StoragePool } from "../../adapters/shared/postgres/pool.ts";
import { migrate, SCHEMA_VERSION } from "../../adapters/shared/postgres/schema.ts";
import { createGatewayHost } from "../../adapters/shared/gateway-host.ts";
import { mapEnv } from "../../src/core/env.ts";
import { StorageUnavailableError } from "../../src/ports/key-value.ts";
import { freeLoopbackPort, startTestPostgres, type TestPostgres } from "../support/embedded-postgres.ts";

let server: TestPostgres;

beforeAll(async () => {
  server = await startTestPostgres();
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

const stderr = { write: () => undefined, isTTY: false };

async function withPool<T>(url: string, use: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const pool = new StoragePool({ url, max: 2 });
  try {
    return await use(pool);
  } finally {
    await pool.end();
  }
}

describe("migrate", () => {
  it("4 workers migrating one empty database at once: each returns, the schema is made once, at this build's version", async () => {
    const url = await server.createDatabase("concurrent");
    const pools = Array.from({ length: 4 }, () => new StoragePool({ url, max: 2 }));
    try {
      await Promise.all(pools.map((pool) => migrate(pool)));
      const version = await pools[0]!.query("SELECT version FROM deerflow_schema");
      expect(version.rows).toEqual([{ version: SCHEMA_VERSION }]);
      const tables = await pools[0]!.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
      );
      expect(tables.rows.map((row) => row.table_name)).toEqual(
        expect.arrayContaining(["checkpoint_blobs", "checkpoint_migrations", "checkpoint_writes", "checkpoints", "deerflow_kv", "deerflow_schema"]),
      );
      // The saver's own migrations were applied once each, not once per worker.
      const saver = await pools[0]!.query<{ count: string }>("SELECT count(*) AS count, count(DISTINCT v) AS distinct FROM checkpoint_migrations");
      expect(saver.rows[0]).toEqual({ count: "5", distinct: "5" });
      // A later start finds nothing to do.
      await migrate(pools[1]!);
      expect((await pools[1]!.query("SELECT version FROM deerflow_schema")).rows).toEqual([{ version: SCHEMA_VERSION }]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });

  it("a pool of one connection migrates too (the checkpoint setup borrows the locked connection)", async () => {
    const url = await server.createDatabase("single");
    const pool = new StoragePool({ url, max: 1 });
    try {
      await migrate(pool);
      expect((await pool.query("SELECT version FROM deerflow_schema")).rows).toEqual([{ version: SCHEMA_VERSION }]);
    } finally {
      await pool.end();
    }
  });

  it("upgrades a database at version 3 (before the admission function): migration 4 alone applies, and admission works on it", async () => {
    const url = await server.createDatabase("upgrade_from_3");
    await withPool(url, async (pool) => {
      await migrate(pool);
      // What a version-3 build left: every table, no deerflow_admit.
      await pool.query("DROP FUNCTION deerflow_admit");
      await pool.query("UPDATE deerflow_schema SET version = 3");
      await migrate(pool);
      expect((await pool.query("SELECT version FROM deerflow_schema")).rows).toEqual([{ version: SCHEMA_VERSION }]);
      const { rows } = await pool.query<{ o_outcome: string }>(
        `SELECT o_outcome FROM deerflow_admit('r1', 't1', '{"run_id":"r1"}'::jsonb, 'w1', 30000, '2026-01-01T00:00:00.000Z', 'reject')`,
      );
      expect(rows).toEqual([{ o_outcome: "admitted" }]);
      const again = await pool.query<{ o_outcome: string; o_run_id: string }>(
        `SELECT o_outcome, o_run_id FROM deerflow_admit('r2', 't1', '{"run_id":"r2"}'::jsonb, 'w1', 30000, '2026-01-01T00:00:00.001Z', 'reject')`,
      );
      expect(again.rows).toEqual([{ o_outcome: "busy", o_run_id: "r1" }]);
    });
  });

  it("refuses a database whose schema is newer than this build, naming both versions", async () => {
    const url = await server.createDatabase("newer");
    await withPool(url, async (pool) => {
      await migrate(pool);
      await pool.query("UPDATE deerflow_schema SET version = $1", [SCHEMA_VERSION + 1]);
      await expect(migrate(pool)).rejects.toThrow(
        `The database's deerflow schema is version ${SCHEMA_VERSION + 1}, newer than this build knows (version ${SCHEMA_VERSION})`,
      );
    });
    await expect(openPostgresStorage({ url })).rejects.toMatchObject({ code: "schema_version_newer" });
  });
});

describe("opening PostgreSQL at start", () => {
  it("a closed port: one sentence naming host:port and database, never the password", async () => {
    const port = await freeLoopbackPort();
    const url = `postgres://deerflow:s3cret-pw@127.0.0.1:${port}/appdb`;
    const error = (await openPostgresStorage({ url }).catch((e: unknown) => e)) as Error & { code?: string };
    expect(error.code).toBe("postgres_unreachable");
    expect(error.message).toContain(`Could not connect to PostgreSQL at 127.0.0.1:${port} (database appdb)`);
    expect(error.message).toContain("ECONNREFUSED");
    expect(error.message).not.toContain("s3cret-pw");
    expect(error.message.split("\n")).toHaveLength(1);
  });

  it("refuses a server older than 14 by its server_version_num, and accepts 14.0 and this test's server", async () => {
    expect(() => assertSupportedServer(130011, "13.11", "db.internal:5432 (database app)")).toThrow(
      "PostgreSQL at db.internal:5432 (database app) is version 13.11; deerflow-edge needs PostgreSQL 14 or newer.",
    );
    expect(() => assertSupportedServer(Number.NaN, "unknown", "x")).toThrow(/needs PostgreSQL 14 or newer/);
    expect(() => assertSupportedServer(140000, "14.0", "x")).not.toThrow();
    const url = await server.createDatabase("version_check");
    const opened = await openPostgresStorage({ url });
    await opened.close();
  });

  it("a wrong password: named as such, the password never in the message", async () => {
    const url = server.url.replace(`:${server.password}@`, ":not-the-pw-42@");
    const error = (await openPostgresStorage({ url }).catch((e: unknown) => e)) as Error & { code?: string };
    expect(error.code).toBe("postgres_unreachable");
    expect(error.message).toContain(`127.0.0.1:${server.port} (database deerflow)`);
    expect(error.message).toMatch(/password authentication failed/);
    expect(error.message).not.toContain("not-the-pw-42");
    expect(error.message).not.toContain(server.password);
  });

  it("the host reads the URL from the variable url_env names, and says which when it is unset", async () => {
    const host = createGatewayHost({ env: mapEnv({}), stderr });
    await expect(host.openSharedStorage!({ driver: "postgres", base: ".deer-flow", url_env: "PG_MAIN" })).rejects.toThrow(
      'storage.driver "postgres" reads its connection URL from PG_MAIN, which is not set; set it to postgres://user:password@host:5432/database.',
    );
  });

  it("opens every store of one worker on one pool, with a worker id, and closes it", async () => {
    const url = await server.createDatabase("opened");
    const opened = await openPostgresStorage({ url, poolMax: 3 });
    try {
      expect(opened.workerId).toMatch(/^w-[0-9a-f]{8}$/);
      expect(opened.pool.options.max).toBe(3);
      await opened.storage.setItem("threads:t1:meta", { ok: true });
      expect(await opened.storage.getItem("threads:t1:meta")).toEqual({ ok: true });
      expect((await opened.versioned.read("threads:t1:meta")).version).not.toBeNull();
    } finally {
      await opened.close();
    }
    await expect(opened.pool.query("SELECT 1")).rejects.toThrow(/Cannot use a pool after calling end/);
  });
});

describe("the pool when the server goes away", () => {
  it("a query fails as StorageUnavailableError naming the server; the same pool serves again once it is back", async () => {
    const url = await server.createDatabase("outage");
    const idle: Error[] = [];
    const pool = new StoragePool({ url, max: 2, onIdleError: (error) => void idle.push(error) });
    try {
      await migrate(pool);
      await pool.query("SELECT 1");
      await server.halt();
      const error = await pool.query("SELECT 1").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StorageUnavailableError);
      expect((error as StorageUnavailableError).message).toContain(`PostgreSQL at 127.0.0.1:${server.port} (database outage) cannot be reached`);
      expect((error as StorageUnavailableError).message).not.toContain(server.password);
      const client = await pool.connect().catch((e: unknown) => e);
      expect(client).toBeInstanceOf(StorageUnavailableError);
      await server.resume();
      expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
      // The idle connection the shutdown killed reached the handler, not the process.
      expect(idle.length).toBeGreaterThan(0);
    } finally {
      await pool.end();
    }
  }, 30_000);
});

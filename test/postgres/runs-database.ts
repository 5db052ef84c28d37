// A fresh database with the run coordination tables, on a PostgreSQL the test file started. The
// migration is applied here by hand until schema.ts's migrate() runs it for the gateway.
import pg from "pg";
import { RUNS_MIGRATION_SQL } from "../../adapters/shared/postgres/runs-schema.ts";
import { startTestPostgres, type TestPostgres } from "../support/embedded-postgres.ts";

export interface RunsDatabase {
  readonly server: TestPostgres;
  readonly url: string;
  /** A pool of its own (one per simulated worker); closed by close(). */
  pool(): pg.Pool;
  close(): Promise<void>;
}

export async function startRunsDatabase(): Promise<RunsDatabase> {
  const server = await startTestPostgres();
  const pools: pg.Pool[] = [];
  try {
    const setup = new pg.Client({ connectionString: server.url });
    await setup.connect();
    try {
      await setup.query("BEGIN");
      for (const statement of RUNS_MIGRATION_SQL) await setup.query(statement);
      await setup.query("COMMIT");
    } finally {
      await setup.end();
    }
  } catch (error) {
    await server.stop();
    throw error;
  }
  return {
    server,
    url: server.url,
    pool() {
      const pool = new pg.Pool({ connectionString: server.url, max: 10 });
      pools.push(pool);
      return pool;
    },
    async close() {
      await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
      // pool.end() resolves once it asked its clients to end, not once they are gone: a server
      // stopped before then terminates them, and each such client throws an uncaught 57P01.
      const probe = new pg.Client({ connectionString: server.url });
      try {
        await probe.connect();
        for (let i = 0; i < 100; i++) {
          const { rows } = await probe.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
          );
          if (rows[0]!.n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        await probe.end().catch(() => undefined);
        await server.stop();
      }
    },
  };
}

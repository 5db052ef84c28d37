// Databases with the run coordination tables, on a PostgreSQL the test file started. The migration
// and the admission function are applied here by hand (schema.ts's migrate() applies them for the gateway,
// with the kv and checkpoint tables these tests do not need).
import pg from "pg";
import { ADMIT_FUNCTION_SQL, RUNS_MIGRATION_SQL } from "../../adapters/shared/postgres/runs-schema.ts";
import { startTestPostgres, type TestPostgres } from "../support/embedded-postgres.ts";

export interface RunsDatabase {
  readonly url: string;
  /** A pool of its own (one per simulated worker); closed by close(). */
  pool(): pg.Pool;
  /** Ends this database's pools and waits until their connections are gone. */
  close(): Promise<void>;
}

export interface RunsServer {
  readonly server: TestPostgres;
  /** A fresh, migrated database on the server (one per test keeps a sweep from seeing other tests' runs). */
  database(): Promise<RunsDatabase>;
  /** Closes every database's pools, then stops the server. */
  stop(): Promise<void>;
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function startRunsServer(): Promise<RunsServer> {
  const server = await startTestPostgres();
  const databases: RunsDatabase[] = [];
  let made = 0;
  return {
    server,
    async database() {
      const url = made === 0 ? server.url : await server.createDatabase(`runs_${made}`);
      made += 1;
      await withClient(url, async (client) => {
        await client.query("BEGIN");
        for (const statement of [...RUNS_MIGRATION_SQL, ADMIT_FUNCTION_SQL]) await client.query(statement);
        await client.query("COMMIT");
      });
      const pools: pg.Pool[] = [];
      const database: RunsDatabase = {
        url,
        pool() {
          const pool = new pg.Pool({ connectionString: url, max: 10 });
          pools.push(pool);
          return pool;
        },
        async close() {
          await Promise.all(pools.splice(0).map((pool) => pool.end().catch(() => undefined)));
          // pool.end() resolves once it asked its clients to end, not once they are gone: a server
          // stopped before then terminates them, and each such client throws an uncaught 57P01.
          await withClient(url, async (probe) => {
            for (let i = 0; i < 100; i++) {
              const { rows } = await probe.query<{ n: number }>(
                `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
              );
              if (rows[0]!.n === 0) return;
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
          }).catch(() => undefined);
        },
      };
      databases.push(database);
      return database;
    },
    async stop() {
      try {
        for (const database of databases.splice(0)) await database.close();
      } finally {
        await server.stop();
      }
    },
  };
}

/** One server with one database, for a test file that needs no more. */
export async function startRunsDatabase(): Promise<RunsDatabase> {
  const server = await startRunsServer();
  try {
    const database = await server.database();
    // Closing it stops the server too.
    return { url: database.url, pool: () => database.pool(), close: () => server.stop() };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

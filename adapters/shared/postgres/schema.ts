import type pg from "pg";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { PostgresStorageError } from "./errors.ts";
import { ADMIT_FUNCTION_SQL, RUNS_MIGRATION_SQL } from "./runs-schema.ts";

/** The key-value table: KeyValue and VersionedKeyValue read and write the same rows. */
export const KV_TABLE = "deerflow_kv";
/** Every write takes the next number, so a key deleted and written again never repeats a version a reader holds. */
export const KV_VERSION_SEQUENCE = "deerflow_kv_version";

interface Migration {
  run(client: pg.PoolClient): Promise<void>;
  /** false: the step cannot run inside a transaction (it expects and recovers from its own errors). */
  readonly transaction: boolean;
}

const statements = (list: readonly string[]): Migration => ({
  transaction: true,
  async run(client) {
    for (const sql of list) await client.query(sql);
  },
});

/**
 * Position + 1 is the version. Append only: a released migration never changes, so every
 * database at version n holds the same tables.
 */
const MIGRATIONS: readonly Migration[] = [
  statements([
    `CREATE SEQUENCE ${KV_VERSION_SEQUENCE}`,
    // COLLATE "C": the primary key's btree then serves getKeys' LIKE 'prefix%' (byte order, as unstorage sorts).
    `CREATE TABLE ${KV_TABLE} (
       key text COLLATE "C" PRIMARY KEY,
       value bytea NOT NULL,
       version bigint NOT NULL DEFAULT nextval('${KV_VERSION_SEQUENCE}'),
       updated_at timestamptz NOT NULL DEFAULT now()
     )`,
  ]),
  statements(RUNS_MIGRATION_SQL),
  // The checkpoint tables are the saver's own (it versions them in checkpoint_migrations); setup()
  // runs again on every start below, so a newer saver's migrations apply too. It reads its table
  // and recovers from "no such table", which would abort a surrounding transaction.
  { transaction: false, run: (client) => checkpointSetup(client) },
  statements([ADMIT_FUNCTION_SQL]),
];

/** The schema version this build creates and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** One key for every deerflow gateway on a database: "deer" in ASCII. */
const MIGRATION_LOCK = 0x64656572;

/**
 * Creates or upgrades the schema. Several workers may start at once: each waits for the advisory
 * lock, then finds the work done. A database newer than this build is refused, naming both
 * versions, before anything reads it.
 */
export async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
    try {
      await client.query("CREATE TABLE IF NOT EXISTS deerflow_schema (only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), version integer NOT NULL)");
      const found = await client.query<{ version: number }>("SELECT version FROM deerflow_schema");
      const current = found.rows[0]?.version ?? 0;
      if (current > SCHEMA_VERSION) {
        throw new PostgresStorageError(
          "schema_version_newer",
          `The database's deerflow schema is version ${current}, newer than this build knows (version ${SCHEMA_VERSION}); run a deerflow-edge as new as the other workers on this database.`,
        );
      }
      for (let version = current + 1; version <= SCHEMA_VERSION; version++) {
        const migration = MIGRATIONS[version - 1]!;
        if (migration.transaction) await client.query("BEGIN");
        try {
          await migration.run(client);
          await client.query(
            "INSERT INTO deerflow_schema (only_row, version) VALUES (true, $1) ON CONFLICT (only_row) DO UPDATE SET version = excluded.version",
            [version],
          );
          if (migration.transaction) await client.query("COMMIT");
        } catch (error) {
          if (migration.transaction) await client.query("ROLLBACK").catch(() => undefined);
          throw error;
        }
      }
      if (current === SCHEMA_VERSION) await checkpointSetup(client);
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]).catch(() => undefined);
    }
  } finally {
    client.release();
  }
}

/**
 * PostgresSaver.setup() is not safe run twice at once, so it runs here under the lock, on the
 * locked connection itself: handed a pool that lends that one client, it needs no second
 * connection (a pool of one would otherwise wait for itself).
 */
async function checkpointSetup(client: pg.PoolClient): Promise<void> {
  const lent = { query: (text: string, values?: unknown[]) => client.query(text, values), release: () => undefined };
  const lender = { connect: async () => lent };
  await new PostgresSaver(lender as unknown as pg.Pool).setup();
}

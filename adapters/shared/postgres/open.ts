import type pg from "pg";
import type { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import type { VersionedKeyValue } from "../../../src/ports/versioned-key-value.ts";
import { createPostgresCheckpointer } from "./checkpointer.ts";
import { passwordOf, PostgresStorageError, reasonOf, redact } from "./errors.ts";
import { createPostgresKeyValue } from "./kv-driver.ts";
import { StoragePool } from "./pool.ts";
import { PostgresRunCoordinator } from "./run-coordinator.ts";
import { migrate } from "./schema.ts";
import { PostgresStreamBus } from "./stream-bus.ts";
import { PostgresVersionedKeyValue } from "./versioned.ts";

/** The oldest server this build runs on (server_version_num). */
export const MIN_SERVER_VERSION_NUM = 140000;

export interface OpenPostgresOptions {
  /** postgres://user:password@host:port/database */
  readonly url: string;
  readonly leaseMs?: number;
  readonly poolMax?: number;
  /** Where an idle connection's death is told (default: nothing). */
  readonly onIdleError?: (error: Error) => void;
  /** This process's id among the workers; default w-<8 random hex>. */
  readonly workerId?: string;
}

export interface PostgresStorage {
  readonly storage: KeyValue;
  readonly versioned: VersionedKeyValue;
  readonly checkpointer: PostgresSaver;
  readonly coordinator: PostgresRunCoordinator;
  readonly bus: PostgresStreamBus;
  readonly workerId: string;
  readonly pool: pg.Pool;
  /** Stops the bus's LISTEN connection, then the pool. */
  close(): Promise<void>;
}

/**
 * Connects (refusing a server older than 14, or one it cannot reach, in one sentence naming
 * host:port and database), migrates under the advisory lock, and opens every store of one worker
 * on one pool: `poolMax` connections at most, plus the bus's one LISTEN connection.
 */
export async function openPostgresStorage(options: OpenPostgresOptions): Promise<PostgresStorage> {
  const pool = new StoragePool({ url: options.url, ...(options.poolMax === undefined ? {} : { max: options.poolMax }), ...(options.onIdleError ? { onIdleError: options.onIdleError } : {}) });
  let bus: PostgresStreamBus | undefined;
  try {
    await checkServer(pool, options.url);
    await migrate(pool);
    bus = new PostgresStreamBus({ pool, clientConfig: { connectionString: options.url } });
    await bus.start();
  } catch (error) {
    await bus?.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    throw error;
  }
  const opened = bus;
  let closing: Promise<void> | undefined;
  return {
    storage: createPostgresKeyValue({ pool }),
    versioned: new PostgresVersionedKeyValue({ pool }),
    checkpointer: createPostgresCheckpointer({ pool }),
    coordinator: new PostgresRunCoordinator({ pool, ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }) }),
    bus: opened,
    workerId: options.workerId ?? `w-${crypto.randomUUID().slice(0, 8)}`,
    pool,
    close() {
      closing ??= (async () => {
        await opened.close().catch(() => undefined);
        await pool.end().catch(() => undefined);
      })();
      return closing;
    },
  };
}

async function checkServer(pool: StoragePool, url: string): Promise<void> {
  try {
    const result = await pool.query<{ version_num: string; version: string }>(
      "SELECT current_setting('server_version_num') AS version_num, current_setting('server_version') AS version",
    );
    assertSupportedServer(Number(result.rows[0]?.version_num), String(result.rows[0]?.version), pool.server);
  } catch (error) {
    if (error instanceof PostgresStorageError) throw error;
    const cause = (error as { cause?: unknown }).cause ?? error;
    throw new PostgresStorageError(
      "postgres_unreachable",
      `Could not connect to PostgreSQL at ${pool.server}: ${redact(reasonOf(cause), passwordOf(url))}; check that the server runs and that the URL (user, password, database) is right.`,
      { cause },
    );
  }
}

/** Refuses a server older than PostgreSQL 14 (by its server_version_num), in one sentence. */
export function assertSupportedServer(versionNum: number, version: string, server: string): void {
  if (Number.isFinite(versionNum) && versionNum >= MIN_SERVER_VERSION_NUM) return;
  throw new PostgresStorageError("postgres_version_unsupported", `PostgreSQL at ${server} is version ${version}; deerflow-edge needs PostgreSQL 14 or newer.`);
}

import { validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import type { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { createPostgresCheckpointer } from "../../adapters/shared/postgres/checkpointer.ts";
import { StoragePool } from "../../adapters/shared/postgres/pool.ts";
import { migrate } from "../../adapters/shared/postgres/schema.ts";
import { startTestPostgres, type TestPostgres } from "../support/embedded-postgres.ts";

// The saver the postgres driver ships, on the pool and schema the gateway opens (migrate, never the
// saver's own setup()). Node only: vitest.checkpoint.config.ts leaves it out of the Deno and Bun
// passes, which cannot start the server. Each saver gets its own database: the list specs count
// every checkpoint the saver can see.
let server: TestPostgres | undefined;
let count = 0;
const pools = new WeakMap<PostgresSaver, StoragePool>();

const postgresInitializer: CheckpointSaverTestInitializer<PostgresSaver> = {
  checkpointerName: "PostgresSaver (deerflow postgres storage)",
  beforeAllTimeout: 60_000,
  beforeAll: async () => {
    server = await startTestPostgres();
  },
  createCheckpointer: async () => {
    const url = await server!.createDatabase(`checkpoints_${++count}`);
    const pool = new StoragePool({ url, max: 4 });
    await migrate(pool);
    const saver = createPostgresCheckpointer({ pool });
    pools.set(saver, pool);
    return saver;
  },
  destroyCheckpointer: async (saver) => {
    await pools.get(saver)?.end();
  },
  afterAll: async () => {
    await server?.stop();
    server = undefined;
  },
};

validate(postgresInitializer);

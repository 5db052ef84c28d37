import type pg from "pg";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";

/**
 * LangGraph's own PostgreSQL saver on the gateway's pool. Its tables come from migrate() (under the
 * advisory lock): setup() is never called here, since two workers running it at once collide.
 */
export function createPostgresCheckpointer(options: { pool: pg.Pool }): PostgresSaver {
  return new PostgresSaver(options.pool);
}

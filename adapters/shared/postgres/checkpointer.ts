import type pg from "pg";
import type { RunnableConfig } from "@langchain/core/runnables";
import { WRITES_IDX_MAP, type ChannelVersions, type Checkpoint, type CheckpointMetadata, type PendingWrite } from "@langchain/langgraph-checkpoint";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";

/**
 * LangGraph's own PostgreSQL saver on the gateway's pool, with its two write paths each sent as one
 * statement. Its tables come from migrate() (under the advisory lock): setup() is never called
 * here, since two workers running it at once collide.
 *
 * Why a subclass: the official put() checks a client out of the pool and sends BEGIN, one INSERT
 * per new channel blob, the checkpoint's INSERT and COMMIT; putWrites() sends BEGIN, one INSERT per
 * write and COMMIT. A demo run's checkpoints were about 65 round trips that way (6 puts with 18
 * blobs, 7 write batches with 15 writes). Here each put is one statement (a data-modifying CTE
 * inserting the blobs, then the checkpoint) and each putWrites one multi-row INSERT: a statement
 * is its own transaction, so a crash still leaves a checkpoint either whole or absent. The rows,
 * the conflict rules and the serialisation are the official saver's own (its SQL, its _dump*
 * methods); reads, list() and deleteThread() are inherited unchanged, and the official conformance
 * suite runs on this class (test/checkpoint/postgres.test.ts). `bench/pg-checkpoint.ts` measures
 * both savers over one PostgreSQL.
 */
export class BatchedPostgresSaver extends PostgresSaver {
  readonly #pool: pg.Pool;
  readonly #tables: { readonly blobs: string; readonly checkpoints: string; readonly writes: string };

  constructor(pool: pg.Pool, options: { schema?: string } = {}) {
    super(pool, undefined, options.schema === undefined ? undefined : { schema: options.schema });
    this.#pool = pool;
    const schema = `"${options.schema ?? "public"}"`;
    this.#tables = { blobs: `${schema}.checkpoint_blobs`, checkpoints: `${schema}.checkpoints`, writes: `${schema}.checkpoint_writes` };
  }

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    if (config.configurable === undefined) throw new Error(`Missing "configurable" field in "config" param`);
    const { thread_id, checkpoint_ns = "", checkpoint_id } = config.configurable as { thread_id: string; checkpoint_ns?: string; checkpoint_id?: string };
    const [blobs, serializedMetadata] = await Promise.all([
      this._dumpBlobs(thread_id, checkpoint_ns, checkpoint.channel_values, newVersions),
      this._dumpMetadata(metadata),
    ]);
    if (blobs.length * 4 + 6 > MAX_PARAMETERS) return super.put(config, checkpoint, metadata, newVersions);
    // $1 and $2 (thread, namespace) are shared by the checkpoint row and every blob row.
    const params: unknown[] = [thread_id, checkpoint_ns, checkpoint.id, checkpoint_id, this._dumpCheckpoint(checkpoint), serializedMetadata];
    const rows = blobs.map(([, , channel, version, type, blob]) => {
      const at = params.push(channel, version, type, blob);
      return `($1, $2, $${at - 3}, $${at - 2}, $${at - 1}, $${at})`;
    });
    const insertCheckpoint = `INSERT INTO ${this.#tables.checkpoints} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
  VALUES ($1, $2, $3, $4, $5, $6)
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata`;
    const sql = rows.length === 0 ? insertCheckpoint : `WITH blobs AS (
  INSERT INTO ${this.#tables.blobs} (thread_id, checkpoint_ns, channel, version, type, blob)
  VALUES ${rows.join(", ")}
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
)
${insertCheckpoint}`;
    await this.#pool.query(sql, params);
    return { configurable: { thread_id, checkpoint_ns, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void> {
    if (writes.length === 0) return;
    if (writes.length * 4 + 4 > MAX_PARAMETERS) return super.putWrites(config, writes, taskId);
    const configurable = (config.configurable ?? {}) as { thread_id?: string; checkpoint_ns?: string; checkpoint_id?: string };
    // The official saver's choice: writes all on special channels (error, interrupt, ...; fixed
    // negative idx) replace a row of the same idx, any other batch never overwrites.
    const replace = writes.every(([channel]) => channel in WRITES_IDX_MAP);
    let dumped = await this._dumpWrites(configurable.thread_id!, configurable.checkpoint_ns!, configurable.checkpoint_id!, taskId, writes as [string, unknown][]);
    // One statement cannot update a row twice: where the official loop would upsert one idx twice
    // and keep the last, only the last is sent. (An INSERT ... DO NOTHING keeps the first of two
    // rows of one key in one statement, as the loop did.)
    if (replace) dumped = [...new Map(dumped.map((row) => [row[4], row] as const)).values()];
    const [threadId, namespace, checkpointId] = dumped[0]!;
    const params: unknown[] = [threadId, namespace, checkpointId, taskId];
    const rows = dumped.map(([, , , , idx, channel, type, blob]) => {
      const at = params.push(idx, channel, type, blob);
      return `($1, $2, $3, $4, $${at - 3}, $${at - 2}, $${at - 1}, $${at})`;
    });
    const onConflict = replace ? "DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob" : "DO NOTHING";
    await this.#pool.query(
      `INSERT INTO ${this.#tables.writes} (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
  VALUES ${rows.join(", ")}
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) ${onConflict}`,
      params,
    );
  }
}

/** PostgreSQL's limit on a statement's parameters; a larger batch takes the official saver's path. */
const MAX_PARAMETERS = 65_535;

export function createPostgresCheckpointer(options: { pool: pg.Pool }): PostgresSaver {
  return new BatchedPostgresSaver(options.pool);
}

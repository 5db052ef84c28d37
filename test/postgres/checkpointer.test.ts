// The postgres driver's checkpoint saver against LangGraph's own, over a real PostgreSQL (Node only:
// the test starts the server). The conformance suite (test/checkpoint/postgres.test.ts) pins what
// a saver reads back; these pin what BatchedPostgresSaver adds: one statement per put and per
// putWrites, the same rows the official saver writes, and a failed put leaving nothing behind.
import { emptyCheckpoint, type Checkpoint, type CheckpointMetadata, type PendingWrite } from "@langchain/langgraph-checkpoint";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchedPostgresSaver } from "../../adapters/shared/postgres/checkpointer.ts";
import { StoragePool } from "../../adapters/shared/postgres/pool.ts";
import { migrate } from "../../adapters/shared/postgres/schema.ts";
import { countPool } from "../support/counted-pool.ts";
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

let databases = 0;
async function freshPool(): Promise<StoragePool> {
  const pool = new StoragePool({ url: await server.createDatabase(`saver_${++databases}`), max: 4 });
  pools.push(pool);
  await migrate(pool);
  return pool;
}

const config = (thread: string, checkpointId?: string) => ({ configurable: { thread_id: thread, checkpoint_ns: "", ...(checkpointId ? { checkpoint_id: checkpointId } : {}) } });
const metadata = (step: number): CheckpointMetadata => ({ source: "loop", step, parents: {} });

function checkpointWith(id: string, values: Record<string, unknown>, versions: Record<string, number>): Checkpoint {
  return { ...emptyCheckpoint(), id, ts: "2026-12-07T00:00:00.000Z", channel_values: values, channel_versions: versions, versions_seen: { agent: { a: 1 } } };
}

/** The same sequence on any saver: blobs new and unchanged, an absent value ("empty"), both write paths with a repeated key. */
async function script(saver: PostgresSaver): Promise<void> {
  const first = checkpointWith("1ef00000-0000-6000-8000-000000000001", { a: "x".repeat(3000), b: { n: 1 }, c: [1, 2] }, { a: 1, b: 1, c: 1 });
  await saver.put(config("t"), first, metadata(0), { a: 1, b: 1, c: 1 });
  const second = checkpointWith("1ef00000-0000-6000-8000-000000000002", { a: "y", b: { n: 1 } }, { a: 2, b: 1, c: 2 });
  // c's new version has no value (a channel emptied): the official saver stores it as "empty".
  await saver.put(config("t", first.id), second, metadata(1), { a: 2, c: 2 });
  // The same checkpoint id again: its row is replaced, blobs of known versions are kept.
  await saver.put(config("t", first.id), second, metadata(2), {});
  const tuple = config("t", second.id);
  const ordinary: PendingWrite[] = [["a", "w1"], ["b", { deep: [1] }], ["a", "w3"]];
  await saver.putWrites(tuple, ordinary, "task-1");
  // Ordinary writes never overwrite: the same task's batch again changes nothing.
  await saver.putWrites(tuple, [["a", "changed"], ["b", "changed"]], "task-1");
  // All on special channels: replaced; two interrupts in one batch keep the last.
  await saver.putWrites(tuple, [["__interrupt__", "first"], ["__interrupt__", "second"], ["__error__", "boom"]], "task-2");
  await saver.putWrites(tuple, [["__error__", "boom again"]], "task-2");
  // A special channel inside an ordinary batch keeps its first row, as the loop's DO NOTHING did.
  await saver.putWrites(tuple, [["x", 1], ["__interrupt__", "kept"], ["__interrupt__", "dropped"]], "task-3");
  await saver.putWrites(tuple, [], "task-4");
}

async function rows(pool: pg.Pool): Promise<unknown> {
  const read = async (sql: string) => (await pool.query(sql)).rows;
  return {
    checkpoints: await read("SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints ORDER BY checkpoint_id"),
    blobs: await read("SELECT thread_id, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs ORDER BY channel, version"),
    writes: await read("SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob FROM checkpoint_writes ORDER BY task_id, idx"),
  };
}

describe("BatchedPostgresSaver", () => {
  it("writes exactly the rows LangGraph's PostgresSaver writes, for the same calls", async () => {
    const [officialPool, batchedPool] = await Promise.all([freshPool(), freshPool()]);
    await script(new PostgresSaver(officialPool));
    await script(new BatchedPostgresSaver(batchedPool));
    const official = await rows(officialPool);
    expect(await rows(batchedPool)).toEqual(official);
    // The script reached every case it names (so equal is not equal-and-empty).
    const { blobs, writes } = official as { blobs: { type: string }[]; writes: { task_id: string; idx: number }[] };
    expect(blobs.map((blob) => blob.type)).toContain("empty");
    expect(writes.filter((write) => write.task_id === "task-2").map((write) => write.idx).sort((x, y) => x - y)).toEqual([-3, -1]);
    expect(writes).toHaveLength(3 + 2 + 2);
  });

  it("reads back what the script wrote: the last interrupt and error, the first of an ordinary batch", async () => {
    const saver = new BatchedPostgresSaver(await freshPool());
    await script(saver);
    const tuple = await saver.getTuple(config("t"));
    expect(tuple?.checkpoint.channel_values).toEqual({ a: "y", b: { n: 1 } });
    expect(tuple?.metadata?.step).toBe(2);
    const writes = (tuple?.pendingWrites ?? []).map(([task, channel, value]) => `${task}:${channel}=${JSON.stringify(value)}`);
    expect(writes).toEqual([
      'task-1:a="w1"', 'task-1:b={"deep":[1]}', 'task-1:a="w3"',
      'task-2:__interrupt__="second"', 'task-2:__error__="boom again"',
      'task-3:__interrupt__="kept"', "task-3:x=1",
    ]);
  });

  it("sends each put and each putWrites as one statement, where the official saver sends a transaction", async () => {
    const officialPool = await freshPool();
    const official = countPool(officialPool);
    await script(new PostgresSaver(officialPool));
    const batchedPool = await freshPool();
    const batched = countPool(batchedPool);
    await script(new BatchedPostgresSaver(batchedPool));
    // 3 puts + 5 non-empty putWrites.
    expect(batched.statements).toBe(8);
    expect(batched.checkouts).toBe(0);
    expect(official.statements).toBeGreaterThan(30);
  });

  it("leaves no blob behind when the checkpoint's row is refused (one statement is one transaction)", async () => {
    const pool = await freshPool();
    const saver = new BatchedPostgresSaver(pool);
    // jsonb refuses \u0000; the checkpoint's JSON carries it, the blobs do not.
    const bad = { ...checkpointWith("1ef00000-0000-6000-8000-00000000000a", { a: 1, b: 2 }, { a: 1, b: 1 }), note: "nul\u0000" } as Checkpoint;
    await expect(saver.put(config("bad"), bad, metadata(0), { a: 1, b: 1 })).rejects.toThrow(/unicode|\\u0000/i);
    expect((await pool.query("SELECT count(*)::int AS n FROM checkpoint_blobs WHERE thread_id = 'bad'")).rows[0].n).toBe(0);
    expect(await saver.getTuple(config("bad"))).toBeUndefined();
  });

  it("takes the official transaction past PostgreSQL's parameter limit, with the same result", async () => {
    const pool = await freshPool();
    const batched = countPool(pool);
    const saver = new BatchedPostgresSaver(pool);
    const base = checkpointWith("1ef00000-0000-6000-8000-00000000000b", {}, {});
    await saver.put(config("big"), base, metadata(0), {});
    const writes: PendingWrite[] = Array.from({ length: 17_000 }, (_, i) => [`c${i % 7}`, i]);
    const before = batched.statements;
    await saver.putWrites(config("big", base.id), writes, "fan-out");
    expect(batched.checkouts).toBe(1);
    expect(batched.statements - before).toBe(17_002);
    expect((await pool.query("SELECT count(*)::int AS n FROM checkpoint_writes WHERE thread_id = 'big'")).rows[0].n).toBe(17_000);
  });
});

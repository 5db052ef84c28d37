/**
 * profile: where the CPU of one demo run goes (issue 18 point 2), from a sampled CPU profile.
 *
 * Builds the gateway in-process (bench/gateway-app.ts: what `serve` builds from the embedded
 * defaults, demo model, virtual sandbox) over an in-memory KeyValue (BENCH_PROFILE_STORAGE=fs: the
 * fs driver in a temporary folder) wrapped by the storage-write counter (bench/storage-count.ts),
 * warms up with BENCH_PROFILE_WARMUP_RUNS demo runs (default 5), then takes a CPU profile over
 * `--runs` demo runs (default 50; bench/gateway-app.ts demoRun: create a thread, stream one run of
 * the "Write a note ..." prompt, checked), one after the other.
 *
 * The profile comes from `node:inspector`'s Session (Profiler.enable, setSamplingInterval, start,
 * stop) on all three runtimes: Node and Deno (V8's sampler) and Bun (1.4: its node:inspector
 * Session drives JSC's sampling profiler and returns the same nodes/samples/timeDeltas shape,
 * without special nodes, so Bun's gc is 0 and its idle is never sampled; it also takes fewer
 * samples than asked, so its sampled CPU is lower against process_cpu_ms_per_run than V8's: read
 * Bun's shares, not its absolute ms). Sampling interval: BENCH_PROFILE_INTERVAL_US (default 250).
 *
 * bench/profile-attribution.ts puts each sample in a category (its CATEGORY_RULES is the one
 * table: the first frame from the leaf toward the root that a rule claims decides). Output, one
 * summary line per runtime: cpu_ms_per_run by category (chain_hooks, engine, checkpoint_serde,
 * storage, sandbox, sse, http, model, runs, bench, gc, other), share (of the sampled CPU),
 * sampled_cpu_ms_per_run, process_cpu_ms_per_run (process.cpuUsage over the same window, every
 * thread of the process: a check on the sampled figure), sandbox_ms_per_run (the sandbox's CPU
 * by phase: start, commands, files, save, and unattributed: an async continuation inside just-bash
 * with no caller of ours on its stack), special_ms_per_run, storage writes, bytes and reads per
 * run (the counter over the profiled runs, totals only), and the load average.
 * BENCH_PROFILE_TOP=N (default 0) adds `top`: per category, the N functions most of its samples
 * ended in, with the frame that decided the category; BENCH_PROFILE_OUT=file.cpuprofile keeps
 * the raw profile (open it in Chrome DevTools).
 *
 * Run: npx tsx bench/profile.ts [--runs 50]   (also under deno / bun; BENCH_NAMES=profile npm run bench)
 */
import "../adapters/shared/als.ts";
import { Session } from "node:inspector";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuUsage } from "node:process";
import { createFsKeyValue } from "../adapters/shared/fs-key-value.ts";
import type { KeyValue } from "../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import { createBenchGateway, demoRun } from "./gateway-app.ts";
import { emit, envCount, envNumber, envString, loadAverage, progressLog, round3, round4, runBench, runsFlag, runtimeInfo } from "./harness.ts";
import { attributeProfile, CATEGORIES, type CpuProfile } from "./profile-attribution.ts";
import { Counter, counting } from "./storage-count.ts";

const log = progressLog("profile");

/** Runs `body` under a sampling CPU profile; resolves to its profile. */
async function profiled(intervalUs: number, body: () => Promise<void>): Promise<CpuProfile> {
  const session = new Session();
  session.connect();
  const post = (method: string, params: Record<string, unknown> = {}): Promise<any> =>
    new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
  try {
    await post("Profiler.enable");
    await post("Profiler.setSamplingInterval", { interval: intervalUs });
    await post("Profiler.start");
    const failed = await body().then(
      () => null,
      (error: unknown) => ({ error }),
    );
    const { profile } = (await post("Profiler.stop")) as { profile: CpuProfile };
    await post("Profiler.disable");
    if (failed !== null) throw failed.error;
    return profile;
  } finally {
    session.disconnect();
  }
}

async function benchStorage(): Promise<{ storage: KeyValue; cleanup: () => Promise<void> }> {
  const kind = envString("BENCH_PROFILE_STORAGE") ?? "memory";
  if (kind === "memory") return { storage: createMemoryKeyValue(), cleanup: async () => {} };
  if (kind !== "fs") throw new Error(`BENCH_PROFILE_STORAGE must be memory or fs, got ${JSON.stringify(kind)}`);
  const dir = await mkdtemp(join(tmpdir(), "deerflow-profile-"));
  return { storage: createFsKeyValue(dir), cleanup: () => rm(dir, { recursive: true, force: true }) };
}

runBench("profile", async () => {
  const runs = runsFlag(50);
  const warmupRuns = envCount("BENCH_PROFILE_WARMUP_RUNS", 5);
  const intervalUs = envNumber("BENCH_PROFILE_INTERVAL_US", 250);
  const topCount = envCount("BENCH_PROFILE_TOP", 0);
  const loadAtStart = loadAverage();
  const counter = new Counter({ byPrefix: false });
  const { storage, cleanup } = await benchStorage();
  const gateway = await createBenchGateway(counting(storage, counter));
  try {
    for (let i = 0; i < warmupRuns; i++) await demoRun(gateway, i);
    // Background work the warm-up left (journal trimming, snapshot saves) lands before the count.
    await new Promise((resolve) => setTimeout(resolve, 200));
    counter.reset();
    log(`profiling ${runs} demo runs (interval ${intervalUs} us)`);
    let cpuMs = 0;
    const started = performance.now();
    const profile = await profiled(intervalUs, async () => {
      const before = cpuUsage();
      for (let i = 0; i < runs; i++) await demoRun(gateway, warmupRuns + i);
      // What the last run left behind belongs to it, as each run's leftovers land in the next.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const used = cpuUsage(before);
      cpuMs = (used.user + used.system) / 1000;
    });
    const wallMs = performance.now() - started;
    const outFile = envString("BENCH_PROFILE_OUT");
    if (outFile !== undefined) await writeFile(outFile, JSON.stringify(profile));

    const attribution = attributeProfile(profile, { root: new URL("..", import.meta.url).href, top: topCount });
    const sampled = CATEGORIES.reduce((sum, c) => sum + attribution.cpu_ms[c], 0);
    const perRun = (ms: number): number => round3(ms / runs);
    emit({
      bench: "profile",
      summary: true,
      runtime: runtimeInfo(),
      storage: envString("BENCH_PROFILE_STORAGE") ?? "memory",
      runs,
      warmup_runs: warmupRuns,
      interval_us: intervalUs,
      samples: attribution.samples,
      sample_cap_ms: attribution.sample_cap_ms,
      cpu_ms_per_run: Object.fromEntries(CATEGORIES.map((c) => [c, perRun(attribution.cpu_ms[c])])),
      share: Object.fromEntries(CATEGORIES.map((c) => [c, sampled > 0 ? round4(attribution.cpu_ms[c] / sampled) : null])),
      sampled_cpu_ms_per_run: perRun(sampled),
      process_cpu_ms_per_run: perRun(cpuMs),
      wall_ms_per_run: perRun(wallMs),
      sandbox_ms_per_run: Object.fromEntries(Object.entries(attribution.sandbox_ms).map(([k, v]) => [k, perRun(v)])),
      special_ms_per_run: Object.fromEntries(Object.entries(attribution.special_ms).map(([k, v]) => [k, perRun(v)])),
      storage_per_run: { writes: round3(counter.total.writes / runs), bytes: round3(counter.total.bytes / runs), reads: round3(counter.total.reads / runs) },
      ...(topCount > 0 ? { top: attribution.top } : {}),
      load_avg_1m: { start: loadAtStart, end: loadAverage() },
    });
  } finally {
    await gateway.shutdown();
    await cleanup();
  }
});

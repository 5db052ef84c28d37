/**
 * sandbox-runaway: what a virtual-sandbox command that never yields does to the gateway, with the
 * interpreter on the gateway's thread ("in-process", createVirtualSandboxProvider without workers)
 * and in workers ("worker": worker_threads on Node, Web Workers on Deno and Bun). Two parts:
 *
 * 1. ok-latency: the real gateway on this runtime's own server on 127.0.0.1; first idle for 2 s (the
 *    machine's own baseline, mode "idle"), then 1 or 3 sandboxes run
 *    `i=0; while true; do i=$((i+1)); done` (timeout BENCH_RUNAWAY_TIMEOUT_MS, default 2000) while
 *    GET /api/ok is sent on a fixed schedule every BENCH_PROBE_MS (default 100) until every loop has
 *    stopped. The client shares the gateway's process, so a probe's latency is measured from the
 *    moment it was due, not from when a blocked event loop got round to sending it: what a client
 *    in another process would see. Reported: probes, p50, p99 and max latency (ms), and how long
 *    the loops ran (ms).
 * 2. echo: the cost of a normal command, `sb.exec("echo hi")`, in both modes, in calibrated blocks
 *    interleaved per sample (bench/harness.ts runSamples), in an empty thread and in one holding
 *    BENCH_ECHO_FILES (default 100) files of BENCH_ECHO_FILE_KB (default 10) KiB, and in that one
 *    with a file API write before each command: a worker command carries a copy of the thread's
 *    files to the worker when they changed since its last command, and their changes back.
 *    Reported per command (µs, median over samples) and the ratios worker / in-process of the run.
 *
 * Run: npx tsx bench/sandbox-runaway.ts | npx deno run -A --unstable-no-legacy-abort
 * bench/sandbox-runaway.ts | npx bun bench/sandbox-runaway.ts. Env knobs: BENCH_SAMPLES (default
 * 9), BENCH_BLOCK_MS (default 100), BENCH_WARMUP_MS (default 300), BENCH_PROBE_MS,
 * BENCH_RUNAWAY_TIMEOUT_MS, BENCH_ECHO_FILES, BENCH_ECHO_FILE_KB. About a minute per runtime.
 *
 * Output: one JSON line per measured configuration on stdout, then one summary line.
 */
import "../adapters/shared/als.ts";
import { validateLeadConfig } from "../src/agents/app-config.ts";
import { createGateway } from "../src/gateway/app.ts";
import type { ServeFetch } from "../src/ports/http-server.ts";
import type { Sandbox, SandboxProvider } from "../src/ports/sandbox.ts";
import type { SandboxWorkerPort } from "../src/ports/sandbox-worker.ts";
import { createVirtualSandboxProvider } from "../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import {
  calibrateBlock,
  collectGarbage,
  emit,
  envNumber,
  groupBy,
  loadAverage,
  median,
  progressLog,
  quantile,
  round3,
  runBench,
  runSamples,
  runtimeInfo,
} from "./harness.ts";

const BENCH = "sandbox-runaway";
const log = progressLog(BENCH);
const { runtime, version } = runtimeInfo();
const SAMPLES = envNumber("BENCH_SAMPLES", 9);
const BLOCK_MS = envNumber("BENCH_BLOCK_MS", 100);
const WARMUP_MS = envNumber("BENCH_WARMUP_MS", 300);
const PROBE_MS = envNumber("BENCH_PROBE_MS", 100);
/** How long the baseline (no loop) probes for. */
const IDLE_MS = 2_000;
const RUNAWAY_TIMEOUT_MS = envNumber("BENCH_RUNAWAY_TIMEOUT_MS", 2_000);
const RUNAWAY = "i=0; while true; do i=$((i+1)); done";
/** The files in the second echo thread: what a worker command copies there and back. */
const ECHO_FILES = envNumber("BENCH_ECHO_FILES", 100);
const ECHO_FILE_KB = envNumber("BENCH_ECHO_FILE_KB", 10);
type Mode = "in-process" | "worker";
type LatencyMode = Mode | "idle";

async function runtimePorts(): Promise<{ serve: ServeFetch; workers: SandboxWorkerPort }> {
  if (runtime === "deno") {
    return {
      serve: (await import("../adapters/deno/serve.ts")).serveDeno,
      workers: (await import("../adapters/shared/web-sandbox-worker.ts")).createWebSandboxWorkers(),
    };
  }
  if (runtime === "bun") {
    return {
      serve: (await import("../adapters/bun/serve.ts")).serveBun,
      workers: (await import("../adapters/shared/web-sandbox-worker.ts")).createWebSandboxWorkers(),
    };
  }
  return {
    serve: (await import("../adapters/node/serve.ts")).serveNode,
    workers: (await import("../adapters/node/sandbox-worker.ts")).createNodeSandboxWorkers(),
  };
}

async function acquireAll(provider: SandboxProvider, count: number, tag: string): Promise<Sandbox[]> {
  const sandboxes = await Promise.all(Array.from({ length: count }, (_, i) => provider.acquire({ userId: `bench-${tag}-${i}`, threadId: "t" })));
  // A first command loads the interpreter's modules, so the loops below measure only themselves.
  await Promise.all(sandboxes.map((sb) => sb.exec("echo warm")));
  return sandboxes;
}

async function okLatency(url: string, provider: SandboxProvider, mode: LatencyMode, loops: number): Promise<void> {
  const sandboxes = await acquireAll(provider, loops, `${mode}-${loops}`);
  const latencies: number[] = [];
  const failures: string[] = [];
  const probes: Promise<void>[] = [];
  const start = performance.now();
  let running = true;
  const loopsDone = (
    loops === 0
      ? new Promise((resolve) => setTimeout(resolve, IDLE_MS))
      : Promise.all(sandboxes.map((sb) => sb.exec(RUNAWAY, { timeoutMs: RUNAWAY_TIMEOUT_MS })))
  ).finally(() => {
    running = false;
  });
  let loopMs = 0;
  void loopsDone.then(() => (loopMs = performance.now() - start));
  for (let due = start; running || due === start; due += PROBE_MS) {
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const scheduled = due;
    probes.push(
      fetch(`${url}/api/ok`).then(
        async (response) => {
          await response.arrayBuffer();
          if (response.status === 200) latencies.push(performance.now() - scheduled);
          else failures.push(`status ${response.status}`);
        },
        (error: unknown) => {
          // A probe the blocked server could not take in time: its wait counts, and it is reported.
          latencies.push(performance.now() - scheduled);
          failures.push(String((error as Error)?.cause ?? error));
        },
      ),
    );
  }
  await loopsDone;
  await Promise.all(probes);
  emit({
    bench: BENCH,
    part: "ok-latency",
    runtime,
    version,
    mode,
    loops,
    probe_every_ms: PROBE_MS,
    probes: latencies.length,
    failed_probes: failures.length,
    ...(failures.length ? { first_failure: failures[0] } : {}),
    p50_ms: round3(median(latencies)),
    p99_ms: round3(quantile(latencies, 0.99)),
    max_ms: round3(Math.max(...latencies)),
    loops_ran_ms: round3(loopMs),
    load_average: loadAverage(),
  });
  await Promise.all(sandboxes.map((sb) => provider.release(sb.id)));
}

async function main(): Promise<void> {
  const { serve, workers } = await runtimePorts();
  const providers: Record<Mode, SandboxProvider> = {
    "in-process": createVirtualSandboxProvider({ storage: createMemoryKeyValue() }),
    worker: createVirtualSandboxProvider({ storage: createMemoryKeyValue(), workers }),
  };
  const gateway = await createGateway({ config: validateLeadConfig({}, BENCH), storage: createMemoryKeyValue(), listening: { host: "127.0.0.1" } });
  const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
  try {
    log("ok-latency idle (no loop), the machine's own baseline");
    await okLatency(server.url, providers.worker, "idle", 0);
    for (const loops of [1, 3]) {
      for (const mode of ["worker", "in-process"] as const) {
        log(`ok-latency ${mode}, ${loops} loop(s)`);
        await okLatency(server.url, providers[mode], mode, loops);
      }
    }

    // A worker command carries a copy of the thread's files there when they changed since its last
    // command, and their changes back: an empty thread, one holding ECHO_FILES files of ECHO_FILE_KB
    // KiB in its workspace, and that one with a file written through the file API before each
    // command (so every command carries the copy; the write is timed in both modes).
    const variants = [
      { files: 0, writeFirst: false },
      { files: ECHO_FILES, writeFirst: false },
      { files: ECHO_FILES, writeFirst: true },
    ];
    const nameOf = (v: { files: number; writeFirst: boolean }) => `${v.files}${v.writeFirst ? "-after-write" : ""}`;
    const echoers: Record<string, Sandbox> = {};
    const filler = new TextEncoder().encode("x".repeat(ECHO_FILE_KB * 1024));
    for (const mode of ["in-process", "worker"] as const) {
      for (const variant of variants) {
        const sb = (await acquireAll(providers[mode], 1, `echo-${nameOf(variant)}`))[0]!;
        for (let i = 0; i < variant.files; i++) await sb.writeFileBytes(`data/f${i}.txt`, filler);
        echoers[`${mode}:${nameOf(variant)}`] = sb;
      }
    }
    const configs = (["in-process", "worker"] as const).flatMap((mode) => variants.map((variant) => ({ mode, ...variant, units: 1, perOpUs: [] as number[] })));
    type EchoConfig = (typeof configs)[number];
    const runEcho = async (config: EchoConfig, n: number) => {
      const sb = echoers[`${config.mode}:${nameOf(config)}`]!;
      for (let i = 0; i < n; i++) {
        if (config.writeFirst) await sb.writeFile("note.txt", String(i));
        await sb.exec("echo hi");
      }
    };
    const timeEcho = async (config: EchoConfig, n: number) => {
      const t0 = performance.now();
      await runEcho(config, n);
      return performance.now() - t0;
    };
    for (const config of configs) {
      config.units = await calibrateBlock({ warmupMs: WARMUP_MS, blockMs: BLOCK_MS, run: (n) => runEcho(config, n), time: (n) => timeEcho(config, n) });
    }
    log(`echo: ${SAMPLES} samples`);
    await runSamples(groupBy(configs, (config) => `echo-${nameOf(config)}`), SAMPLES, async (config) => {
      collectGarbage("minor");
      config.perOpUs.push(((await timeEcho(config, config.units)) / config.units) * 1000);
    }, { beforeGroup: () => collectGarbage() });
    const medians: Record<string, number> = {};
    for (const config of configs) {
      const key = `${config.mode}:${nameOf(config)}`;
      medians[key] = median(config.perOpUs);
      emit({
        bench: BENCH,
        part: "echo",
        runtime,
        version,
        mode: config.mode,
        files: config.files,
        file_kib: config.files === 0 ? 0 : ECHO_FILE_KB,
        file_write_before_each: config.writeFirst,
        units_per_block: config.units,
        samples: SAMPLES,
        per_command_us: round3(medians[key]!),
        load_average: loadAverage(),
      });
    }
    emit({
      bench: BENCH,
      summary: true,
      runtime,
      version,
      echo_ratio_worker_over_in_process: round3(medians["worker:0"]! / medians["in-process:0"]!),
      [`echo_ratio_worker_over_in_process_${ECHO_FILES}_files`]: round3(medians[`worker:${ECHO_FILES}`]! / medians[`in-process:${ECHO_FILES}`]!),
      [`echo_ratio_worker_over_in_process_${ECHO_FILES}_files_after_write`]: round3(
        medians[`worker:${ECHO_FILES}-after-write`]! / medians[`in-process:${ECHO_FILES}-after-write`]!,
      ),
      definitions: {
        "ok-latency": "GET /api/ok latency from the moment the probe was due, while the loops run",
        echo:
          "one sandbox exec of `echo hi`, median per-command time over samples, in an empty thread and in one with `files` files of `file_kib` KiB; " +
          "with file_write_before_each a file API write precedes each command (timed in both modes), so a worker command always carries the copy",
      },
    });
  } finally {
    await server.close();
    await gateway.shutdown();
    await Promise.all(Object.values(providers).map((provider) => provider.close()));
  }
}

runBench(BENCH, async () => {
  await main();
  // A Deno Web Worker that nobody terminated would keep the process; the providers closed them all.
  const g = globalThis as { process?: { exit(code: number): void }; Deno?: { exit(code: number): void } };
  g.Deno?.exit(0);
});

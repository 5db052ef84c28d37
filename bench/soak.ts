/**
 * soak: does the gateway's memory come back after bursts of CPU-bound streams?
 *
 * Starts the real gateway (the CLI's `serve`, adapters/<runtime>/cli.ts, embedded defaults: demo
 * model, virtual sandbox, auth off) in a child process on 127.0.0.1 with fs storage in a temp dir,
 * under the runtime asked for (node: node --import tsx; deno: deno run; bun: bun). Then, `bursts`
 * times: `concurrency` clients at once each create a thread and stream one run on it
 * (POST /threads/{id}/runs/stream, values + messages-tuple, read to the end; the demo model on a
 * "Write a note ..." prompt writes a file and runs bash in the sandbox, at full speed, so the
 * streams are CPU-bound), every run checked (no error frame, the final state holds both tool
 * results and the answer). After each burst, once every stream ended, the server is left idle for
 * `--idle-seconds` and its RSS is sampled once a second.
 *
 * Memory is read from the child, no collection forced (what an operator sees): RSS from
 * /proc/<pid>/status (VmRSS) where there is one, and RSS and heap from bench/soak-probe.ts, which
 * the bench preloads into the server (opt-in: SOAK_PROBE_FILE) and asks with SIGUSR2.
 *
 * Run: npx tsx bench/soak.ts [--runtime node|deno|bun] [--bursts 10] [--concurrency 200]
 *      [--idle-seconds 20] [--final-idle-seconds 60] [--margin-mb 64] [--burst-timeout-seconds 600]
 *      [--gc] (a full collection in the server before each heap reading: tells garbage apart from
 *      what is retained; the RSS criterion then measures a server that was helped)
 * (the bench itself runs on Node, Deno or Bun; --runtime defaults to the one it runs on, so
 * `BENCH_NAMES=soak npm run bench` soaks each runtime). Env knobs: BENCH_SOAK_BURSTS,
 * BENCH_SOAK_CONCURRENCY, BENCH_SOAK_IDLE_SECONDS, BENCH_SOAK_FINAL_IDLE_SECONDS,
 * BENCH_SOAK_MARGIN_MB (flags win); BENCH_SOAK_CONFIG: YAML appended to the server's config.yaml
 * (for example `sandbox:\n  max_workers: 1`), to soak one setting against the default.
 *
 * Output: one JSON line for the start, one per burst, then the summary line. Progress on stderr.
 *
 * Definitions (also in the summary line):
 * - start_rss: RSS after the server started, served `warmup` runs and sat idle `--idle-seconds`.
 * - idle_rss (per burst): RSS at the end of the idle time after the burst; idle_rss_min the lowest
 *   sample in it; heap_used the probe's heap at that moment.
 * - probe_rss (per burst): RSS as the probe read it, right after idle_rss (after the collection
 *   with --gc).
 * - idle_ok_max_ms (per burst and overall): the slowest GET /api/ok while the server idled, asked one
 *   after another 100 ms apart: the longest its idle memory reclaim held the event loop, at most.
 * - back_within_s: after the last burst, the seconds from which RSS stayed within margin_mb of
 *   start_rss to the end of --final-idle-seconds (null: above it at some reading since, or never within).
 * - fails (exit 1) when a run fails, when RSS grows from burst to burst (the last 5 bursts' idle
 *   RSS rising at every step and by more than 10 % overall), or when RSS is not back within
 *   margin_mb of start_rss within --final-idle-seconds of the last run.
 */
// Installed first, as in the other benches
// (docs/toolchain.md, AsyncLocalStorage before any import).
import "../adapters/shared/als.ts";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { createInterface } from "node:readline";
import { currentEnv, forwardLines, ROOT } from "./gateway-servers.ts";
import { checkFinalValues, createThread, LoadError, streamRun, type Target } from "./gateway-sse.ts";
import { emit, envNumber, loadAverage, progressLog, round3, runBench, runtimeInfo, type Runtime } from "./harness.ts";

const log = progressLog("soak");
const g = globalThis as any;
const MB = 1024 * 1024;
const GROWTH_BURSTS = 5;
const GROWTH_RATIO = 1.1;
const TOPICS = ["portable runtimes", "edge caching", "stream resumption", "sandbox limits", "heap snapshots", "event loops", "checkpoint storage", "SSE replay"];

interface Options {
  runtime: Runtime;
  bursts: number;
  concurrency: number;
  idleSeconds: number;
  finalIdleSeconds: number;
  marginMb: number;
  burstTimeoutSeconds: number;
  warmup: number;
  gc: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const flags = new Map<string, string>();
  let gc = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--gc") {
      gc = true;
      continue;
    }
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${JSON.stringify(arg)}; flags are --runtime, --gc, --bursts, --concurrency, --idle-seconds, --final-idle-seconds, --margin-mb, --burst-timeout-seconds, --warmup`);
    const [name, inline] = arg.slice(2).split("=", 2) as [string, string | undefined];
    const value = inline ?? argv[++i];
    if (value === undefined) throw new Error(`--${name} needs a value`);
    flags.set(name, value);
  }
  const number = (name: string, env: string, fallback: number): number => {
    const raw = flags.get(name);
    flags.delete(name);
    if (raw === undefined) return envNumber(env, fallback);
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number, got ${JSON.stringify(raw)}`);
    return value;
  };
  const runtime = (flags.get("runtime") ?? runtimeInfo().runtime) as Runtime;
  flags.delete("runtime");
  if (!["node", "deno", "bun"].includes(runtime)) throw new Error(`--runtime must be node, deno or bun, got ${JSON.stringify(runtime)}`);
  const options: Options = {
    runtime,
    bursts: Math.round(number("bursts", "BENCH_SOAK_BURSTS", 10)),
    concurrency: Math.round(number("concurrency", "BENCH_SOAK_CONCURRENCY", 200)),
    idleSeconds: number("idle-seconds", "BENCH_SOAK_IDLE_SECONDS", 20),
    finalIdleSeconds: number("final-idle-seconds", "BENCH_SOAK_FINAL_IDLE_SECONDS", 60),
    marginMb: number("margin-mb", "BENCH_SOAK_MARGIN_MB", 64),
    burstTimeoutSeconds: number("burst-timeout-seconds", "BENCH_SOAK_BURST_TIMEOUT_SECONDS", 600),
    warmup: Math.round(number("warmup", "BENCH_SOAK_WARMUP", 5)),
    gc,
  };
  if (flags.size > 0) throw new Error(`unknown flag --${[...flags.keys()][0]}`);
  return options;
}

// ---------------------------------------------------------------------------------------------
// The server: `serve` in a child process

interface Server {
  readonly target: Target;
  readonly pid: number;
  /** RSS from /proc (Linux), else from the probe. */
  rss(): Promise<number>;
  /** The probe's reading. */
  probe(): Promise<{ rss: number; heap_used: number; heap_total: number; external: number }>;
  close(): Promise<void>;
}

function commandFor(runtime: Runtime, probe: string, cli: string, config: string, gc: boolean): [string, string[]] {
  const serveArgs = [cli, "serve", "--config", config, "--host", "127.0.0.1", "--port", "0"];
  const bin = (name: string) => join(ROOT, "node_modules", ".bin", name);
  switch (runtime) {
    case "node":
      return [runtimeInfo().runtime === "node" ? String(g.process.execPath) : "node", [...(gc ? ["--expose-gc"] : []), "--import", join(ROOT, "node_modules", "tsx", "dist", "loader.mjs"), "--import", probe, ...serveArgs]];
    case "deno":
      return [runtimeInfo().runtime === "deno" ? String(g.Deno.execPath()) : bin("deno"), ["run", "-A", "--unstable-no-legacy-abort", "--config", join(ROOT, "deno.json"), ...(gc ? ["--v8-flags=--expose-gc"] : []), "--preload", probe, ...serveArgs]];
    case "bun":
      return [runtimeInfo().runtime === "bun" ? String(g.process.execPath) : bin("bun"), ["--preload", probe, ...serveArgs]];
  }
}

function procRss(pid: number): number | undefined {
  try {
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function startServer(runtime: Runtime, gc: boolean): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), "deerflow-bench-soak-"));
  const config = join(dir, "config.yaml");
  writeFileSync(config, `storage:\n  driver: fs\n  base: ${JSON.stringify(join(dir, "storage"))}\n${process.env["BENCH_SOAK_CONFIG"] ?? ""}`);
  const probeFile = join(dir, "memory.json");
  const [command, args] = commandFor(runtime, join(ROOT, "bench", "soak-probe.ts"), join(ROOT, "adapters", runtime, "cli.ts"), config, gc);
  const child: ChildProcess = spawn(command, args, { cwd: dir, env: { ...currentEnv(), SOAK_PROBE_FILE: probeFile, ...(gc ? { SOAK_PROBE_GC: "1" } : {}) }, stdio: ["ignore", "pipe", "pipe"] });
  forwardLines(child.stderr, `  [serve ${runtime}] `);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once("close", () => ((exited = true), resolve()));
    child.once("error", (error) => {
      log(`serve could not start: ${error.message}`);
      exited = true;
      resolve();
    });
  });
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const close = async (): Promise<void> => {
    if (!exited) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exit;
      clearTimeout(killer);
    }
    cleanup();
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("serve printed no URL within 60 s; its output is above")), 60_000);
      void exit.then(() => reject(new Error("serve exited before it listened; its output is above")));
      createInterface({ input: child.stdout! }).on("line", (line) => {
        const found = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1];
        if (found !== undefined && line.startsWith("deerflow-edge gateway")) {
          clearTimeout(timer);
          resolve(found);
        } else console.error(`  [serve ${runtime}] ${line}`);
      });
    });
    let seq = 0;
    const probe = async () => {
      // Not child.kill: Deno's ChildProcess sends a signal only once and ignores every later kill().
      process.kill(child.pid!, "SIGUSR2");
      const deadline = performance.now() + 10_000;
      while (performance.now() < deadline) {
        if (existsSync(probeFile)) {
          const record = JSON.parse(readFileSync(probeFile, "utf8")) as { seq: number; rss: number; heap_used: number; heap_total: number; external: number };
          if (record.seq > seq) {
            seq = record.seq;
            return record;
          }
        }
        await sleep(20);
      }
      throw new Error("the server's memory probe did not answer SIGUSR2 within 10 s");
    };
    return {
      target: { apiUrl: `${url}/api`, assistantId: "lead_agent" },
      pid: child.pid!,
      rss: async () => procRss(child.pid!) ?? (await probe()).rss,
      probe,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// Load

async function oneRun(target: Target, index: number): Promise<void> {
  const threadId = await createThread(target);
  const topic = TOPICS[index % TOPICS.length]!;
  const outcome = await streamRun(target, threadId, {
    input: { messages: [{ role: "user", content: `Write a note about ${topic} (${index}) and count its words.` }] },
    stream_mode: ["values", "messages-tuple"],
  });
  if (outcome.errorFrame !== undefined) throw new LoadError(`error frame ${outcome.errorFrame.slice(0, 300)}`);
  const problem = checkFinalValues(outcome.lastValues);
  if (problem !== null) throw new LoadError(problem);
}

/** `count` runs at once; rejects on the first failure or after `timeoutMs`. */
async function burst(target: Target, count: number, timeoutMs: number, base: number): Promise<number> {
  const started = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`a burst of ${count} runs did not finish within ${timeoutMs / 1000} s`)), timeoutMs);
  });
  try {
    await Promise.race([Promise.all(Array.from({ length: count }, (_, i) => oneRun(target, base + i))), timeout]);
  } finally {
    clearTimeout(timer);
  }
  return performance.now() - started;
}

/**
 * RSS once a second for `seconds`; `until` may end it early. Meanwhile GET /api/ok one after
 * another, 100 ms apart: the slowest answer is the longest the idle server held its event loop
 * (its memory reclaim's collection, say), as a user would have waited.
 */
async function idle(server: Server, seconds: number, until?: (rss: number, elapsedS: number) => boolean): Promise<{ last: number; min: number; samples: number[]; okMaxMs: number }> {
  const started = performance.now();
  const samples: number[] = [];
  let pinging = true;
  let okMaxMs = 0;
  const pinger = (async () => {
    while (pinging) {
      const sent = performance.now();
      const response = await fetch(`${server.target.apiUrl}/ok`);
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`GET /api/ok answered ${response.status} while the server idled`);
      okMaxMs = Math.max(okMaxMs, performance.now() - sent);
      await sleep(100);
    }
  })();
  try {
    for (;;) {
      const rss = await server.rss();
      samples.push(rss);
      const elapsed = (performance.now() - started) / 1000;
      if (until?.(rss, elapsed) || elapsed >= seconds) break;
      await sleep(Math.min(1000, Math.max(0, (seconds - elapsed) * 1000)));
    }
  } finally {
    pinging = false;
    await pinger;
  }
  return { last: samples.at(-1)!, min: Math.min(...samples), samples, okMaxMs };
}

const mb = (bytes: number) => round3(bytes / MB);

/** The last `GROWTH_BURSTS` values rising at every step and by more than GROWTH_RATIO overall. */
function growsBurstToBurst(values: readonly number[]): boolean {
  const tail = values.slice(-GROWTH_BURSTS);
  if (tail.length < GROWTH_BURSTS) return false;
  const rising = tail.every((v, i) => i === 0 || v > tail[i - 1]!);
  return rising && tail.at(-1)! > tail[0]! * GROWTH_RATIO;
}

async function main(): Promise<void> {
  const options = parseOptions(g.Deno ? g.Deno.args : g.process.argv.slice(2));
  const self = runtimeInfo();
  log(`starting serve on ${options.runtime}: ${options.bursts} bursts of ${options.concurrency} streamed runs`);
  const server = await startServer(options.runtime, options.gc);
  const failures: string[] = [];
  try {
    const firstBurst = await burst(server.target, options.warmup, options.burstTimeoutSeconds * 1000, 0);
    const startIdle = await idle(server, options.idleSeconds);
    const startRss = startIdle.last;
    const startProbe = await server.probe();
    emit({ bench: "soak", runtime: options.runtime, phase: "start", warmup_runs: options.warmup, warmup_ms: round3(firstBurst), rss_mb: mb(startRss), heap_used_mb: mb(startProbe.heap_used), load_avg: loadAverage() });

    const idleRss: number[] = [];
    const okMaxMs: number[] = [startIdle.okMaxMs];
    let runs = options.warmup;
    let backWithinS: number | null = null;
    let finalRss = startRss;
    for (let b = 1; b <= options.bursts; b++) {
      const rssBefore = await server.rss();
      let peak = rssBefore;
      const sampler = setInterval(() => (peak = Math.max(peak, procRss(server.pid) ?? 0)), 250);
      let elapsed: number;
      try {
        elapsed = await burst(server.target, options.concurrency, options.burstTimeoutSeconds * 1000, runs);
      } finally {
        clearInterval(sampler);
      }
      runs += options.concurrency;
      const afterRuns = await server.rss();
      const last = b === options.bursts;
      const seconds = last ? options.finalIdleSeconds : options.idleSeconds;
      const margin = options.marginMb * MB;
      let back: number | null = afterRuns <= startRss + margin ? 0 : null;
      const settled = await idle(server, seconds, (rss, s) => {
        // Back means back to stay: a reading above the margin later in the idle time undoes it.
        if (rss > startRss + margin) back = null;
        else if (back === null) back = round3(s);
        return false;
      });
      const probe = await server.probe();
      idleRss.push(settled.last);
      okMaxMs.push(settled.okMaxMs);
      if (last) {
        backWithinS = back;
        finalRss = settled.last;
      }
      emit({
        bench: "soak",
        runtime: options.runtime,
        burst: b,
        runs: options.concurrency,
        burst_ms: round3(elapsed),
        runs_per_s: round3(options.concurrency / (elapsed / 1000)),
        rss_before_mb: mb(rssBefore),
        rss_peak_mb: mb(Math.max(peak, afterRuns)),
        rss_after_runs_mb: mb(afterRuns),
        idle_s: seconds,
        idle_rss_mb: mb(settled.last),
        idle_rss_min_mb: mb(settled.min),
        heap_used_mb: mb(probe.heap_used),
        probe_rss_mb: mb(probe.rss),
        heap_total_mb: mb(probe.heap_total),
        external_mb: mb(probe.external),
        back_within_margin_s: back,
        idle_ok_max_ms: round3(settled.okMaxMs),
        load_avg: loadAverage(),
      });
      log(`burst ${b}: ${round3(elapsed / 1000)} s, RSS peak ${mb(peak)} MB, after ${seconds} s idle ${mb(settled.last)} MB (start ${mb(startRss)} MB), heap ${mb(probe.heap_used)} MB`);
    }
    if (growsBurstToBurst(idleRss)) failures.push(`RSS grows from burst to burst: the last ${GROWTH_BURSTS} idle readings ${idleRss.slice(-GROWTH_BURSTS).map(mb).join(", ")} MB`);
    if (backWithinS === null) failures.push(`RSS did not come back within ${options.marginMb} MB of the start (${mb(startRss)} MB) within ${options.finalIdleSeconds} s of the last run: ${mb(finalRss)} MB`);
    emit({
      bench: "soak",
      summary: true,
      runtime: options.runtime,
      bench_runtime: self.runtime,
      forced_gc: options.gc,
      bursts: options.bursts,
      concurrency: options.concurrency,
      runs,
      start_rss_mb: mb(startRss),
      idle_rss_mb: idleRss.map(mb),
      final_rss_mb: mb(finalRss),
      back_within_s: backWithinS,
      margin_mb: options.marginMb,
      idle_ok_max_ms: round3(Math.max(...okMaxMs)),
      ok: failures.length === 0,
      failures,
      definitions: {
        start_rss: `RSS after ${options.warmup} warm-up runs and ${options.idleSeconds} s idle`,
        idle_rss: `RSS at the end of the idle time after each burst (${options.idleSeconds} s; ${options.finalIdleSeconds} s after the last), no collection forced`,
        idle_ok_max_ms: "the slowest GET /api/ok while the server idled (one after another, 100 ms apart): how long its memory reclaim held the event loop, at most",
        back_within_s: `after the last burst, seconds from which RSS stayed within margin_mb of start_rss until ${options.finalIdleSeconds} s (null: not back to stay)`,
        fails_when: `a run fails; the last ${GROWTH_BURSTS} idle_rss rise at every step and by more than ${Math.round((GROWTH_RATIO - 1) * 100)} % overall; or back_within_s is null`,
      },
    });
  } finally {
    await server.close();
  }
  if (failures.length > 0) throw new Error(failures.join("; "));
}

runBench("soak", main);

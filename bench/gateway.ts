/**
 * gateway: deerflow-edge's gateway under load, with the demo model, next to the official LangGraph
 * API server (@langchain/langgraph-api) serving an equivalent graph, in the same run.
 *
 * Servers:
 * - deerflow-edge: what `deerflow-edge serve` builds from the embedded defaults (demo model,
 *   virtual sandbox, auth disabled on 127.0.0.1), served inside this process by the runtime's own
 *   serve function (serveNode / serveDeno / serveBun), so `npm run bench` measures it on Node, Deno
 *   and Bun. Storage: fs in a temp dir, as `npm start` stores under .deer-flow/; one more case with
 *   memory storage (whose key listing scans every key of the store, so it slows down as threads
 *   accumulate: the case shows by how much against fs at the same client count).
 * - langgraph-api 1.5.1: bench/lgapi/serve.ts (startServer, no CLI) under Node in its own process,
 *   cwd in a temp dir, analytics off, log level warn, as many run workers as clients (at least 10,
 *   the CLI's default), so its queue never holds a run back. Its graph (bench/lgapi/graph.ts) is a
 *   bare model/tools loop with a scripted model that streams the demo model's conversation word by
 *   word (write_file, bash, final answer) over in-memory tools. Ours runs the whole lead
 *   middleware chain and a real virtual sandbox, so the comparison does not favour us. Installed on
 *   first use (npm ci --prefix bench/lgapi); when that fails, or with BENCH_GATEWAY_LGAPI=0, one
 *   line `{"skipped":"lgapi","reason":...}` and the rest runs.
 * - langgraph-api serving our lead agent (bench/lead-agent.ts: the agent the gateway assembles for
 *   the auth-disabled caller, memory storage, run in one graph node, langgraph-api checkpointing):
 *   the same chain on both servers, so the ratio is what the server costs.
 * - in-process: the same lead agent in this process over fs storage with the gateway's
 *   checkpointer, no HTTP, run manager or SSE, by as many concurrent loops as clients (the same
 *   input, stream modes and check): the floor under the gateway, whose overhead is then a ratio.
 *   These two ("the fair comparison") run unless BENCH_GATEWAY_FAIR=0.
 * A fresh server per case, so no case inherits the threads of an earlier one.
 *
 * Load: a separate Node process (bench/gateway-load.ts), the same for both servers, so the client's
 * own CPU never counts against the server's event loop and both are driven identically. It runs
 * `clients` loops, each: POST /threads, then POST /threads/{id}/runs/stream with stream_mode
 * ["values","messages-tuple"], read to the end over raw fetch; every run is checked (no error
 * frame, the final state holds the write_file and bash results and the final answer). Before any
 * timing, one run per server goes through the official @langchain/langgraph-sdk Client and is
 * checked the same way. Load and server share the machine's cores.
 *
 * Memory per idle thread: each server in a process of its own that serves nothing else
 * (deerflow-edge: bench/gateway-serve.ts under the bench's runtime, with memory storage so that
 * what a thread stores counts, as it does in langgraph-api's in-memory store); 20 warm-up runs; the
 * load cases run meanwhile on other servers; once BENCH_GATEWAY_IDLE_AFTER_SECONDS have passed
 * since the warm-up (its replay windows closed), gc, reading; K threads with one finished run
 * each, gc, reading ("just finished"); BENCH_GATEWAY_IDLE_AFTER_SECONDS after that, gc, reading
 * ("idle": deerflow-edge keeps each finished run's frames 60 s for replay).
 *
 * Run: npx tsx --expose-gc bench/gateway.ts | deno run -A --unstable-no-legacy-abort
 * --v8-flags=--expose-gc bench/gateway.ts | bun bench/gateway.ts (or `BENCH_NAMES=gateway npm run
 * bench`).
 * Env knobs: BENCH_GATEWAY_SECONDS (measured seconds per case, default 10),
 * BENCH_GATEWAY_WARMUP_SECONDS (unmeasured seconds before each case, default 2),
 * BENCH_GATEWAY_CLIENTS (concurrent clients, default "1 10 50"), BENCH_GATEWAY_MEMORY_CLIENTS (the
 * memory storage case, default 10; 0 skips it), BENCH_GATEWAY_IDLE_THREADS (K, default 200; 0 skips
 * the memory per idle thread),
 * BENCH_GATEWAY_IDLE_AFTER_SECONDS (default 65), BENCH_GATEWAY_LGAPI (0 skips the official server),
 * BENCH_GATEWAY_FAIR (0 skips langgraph-api serving our lead agent and the in-process floor).
 *
 * Output: one JSON line per load case (server × storage × clients), one per server for memory per
 * idle thread, then the summary line with the ratios ours ÷ langgraph-api. Progress goes to stderr.
 *
 * Definitions (also in the summary line):
 * - runs_per_s: runs completed in a case ÷ the case's wall time (deadline plus the runs in flight).
 * - frames_per_s: SSE frames (events; heartbeat comments not counted) received ÷ wall time.
 * - first_frame_ms: request sent → first frame received (`metadata` on both servers);
 *   first_data_frame_ms: → first frame that is not `metadata`. p50 and p99 over the case's runs.
 * - heap/rss_per_thread_bytes: (reading − the reading before the K threads) ÷ K. RSS rarely shrinks
 *   after a collection, so its figure is noisy and can be negative; the heap is the one to read.
 * - runs_with_unexpected_frames: runs whose frames per event differ from the server's check run
 *   (the same input, so the same frames are due): a server that drops frames under load shows here.
 */
// Installed first, as in the other benches
// (docs/toolchain.md, AsyncLocalStorage before any import).
import "../adapters/shared/als.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFsKeyValue } from "../adapters/shared/fs-key-value.ts";
import { serializeValues } from "../src/runtime/serialize.ts";
import { startOurs } from "./gateway-ours.ts";
import { ensureLgapiInstalled, runLoad, startLgapi, startOursProcess, type ChildServer } from "./gateway-servers.ts";
import { BENCH_TASK, checkFinalValues, LoadError, type RunOutcome, type Target } from "./gateway-sse.ts";
import { createLeadAgent, type BenchLeadAgent } from "./lead-agent.ts";
import { measureLoad, type LoadResult } from "./load-loop.ts";
import { emit, envCount, envNumber, envString, loadAverage, progressLog, round3, runBench, runtimeInfo } from "./harness.ts";

const log = progressLog("gateway");

function clientCounts(): number[] {
  const raw = envString("BENCH_GATEWAY_CLIENTS") ?? "1 10 50";
  const counts = raw.split(/[\s,]+/).filter((x) => x !== "").map(Number);
  if (counts.length === 0 || counts.some((n) => !Number.isInteger(n) || n < 1)) {
    throw new Error(`BENCH_GATEWAY_CLIENTS must list whole numbers >= 1, such as "1 10 50"; got ${JSON.stringify(raw)}`);
  }
  return counts;
}

/**
 * The load cases' subjects: our gateway; langgraph-api serving its bare graph; langgraph-api
 * serving our lead agent (bench/lead-agent.ts); our lead agent in-process with no server.
 */
type ServerName = "deerflow-edge" | "langgraph-api" | "langgraph-api-lead" | "in-process";
/** The two that serve memory figures. */
type MemoryServer = "deerflow-edge" | "langgraph-api";

/** One run of the lead agent in this process, no HTTP: the input, stream modes and check of a load run. */
async function inProcessRun(lead: BenchLeadAgent): Promise<RunOutcome> {
  const threadId = crypto.randomUUID();
  const runId = crypto.randomUUID();
  const started = performance.now();
  const framesByEvent: Record<string, number> = {};
  let frames = 0;
  let firstFrameMs = NaN;
  let lastValues: unknown;
  const stream = lead.agent.stream(
    { messages: [{ role: "user", content: BENCH_TASK }] } as never,
    { threadId, runId, context: lead.context(threadId, runId), streamMode: ["values", "messages"] },
  );
  for await (const item of stream) {
    const [mode, chunk] = item as [string, unknown];
    if (frames++ === 0) firstFrameMs = performance.now() - started;
    framesByEvent[mode] = (framesByEvent[mode] ?? 0) + 1;
    if (mode === "values") lastValues = chunk;
  }
  const values = lastValues === undefined ? undefined : JSON.stringify(serializeValues(lastValues));
  const problem = checkFinalValues(values);
  if (problem !== null) throw new LoadError(problem);
  return { frames, framesByEvent, firstFrameMs, firstDataFrameMs: firstFrameMs, totalMs: performance.now() - started, ended: true, lastValues: values, errorFrame: undefined };
}

/** The lead agent in this process over fs storage in a temp dir (as our fs case), removed on close. */
async function startInProcess(): Promise<{ lead: BenchLeadAgent; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "deerflow-bench-inprocess-"));
  const lead = await createLeadAgent(createFsKeyValue(dir));
  return {
    lead,
    close: async () => {
      await lead.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface CaseLine {
  server: ServerName;
  storage: string;
  clients: number;
  result: LoadResult;
}

function caseRecord(runtime: string, version: string, line: CaseLine, serverRuntime: string, seconds: number): Record<string, unknown> {
  const r = line.result;
  return {
    bench: "gateway",
    runtime,
    runtime_version: version,
    case: "load",
    server: line.server,
    server_runtime: serverRuntime,
    storage: line.storage,
    clients: line.clients,
    seconds,
    runs: r.runs,
    errors: r.errors,
    ...(r.first_error === undefined ? {} : { first_error: r.first_error }),
    runs_per_s: r.runs_per_s,
    frames_per_s: r.frames_per_s,
    frames_per_run_median: r.frames_per_run_median,
    frames_by_event: r.frames_by_event,
    runs_with_end_frame: r.ended_with_end_frame,
    runs_with_unexpected_frames: r.runs_with_unexpected_frames,
    ...(r.first_unexpected_frames === undefined ? {} : { first_unexpected_frames: r.first_unexpected_frames }),
    first_frame_ms_p50: r.first_frame_ms.p50,
    first_frame_ms_p99: r.first_frame_ms.p99,
    first_data_frame_ms_p50: r.first_data_frame_ms.p50,
    first_data_frame_ms_p99: r.first_data_frame_ms.p99,
    run_ms_p50: r.run_ms.p50,
    run_ms_p99: r.run_ms.p99,
    elapsed_s: r.elapsed_s,
  };
}

/** Frames per event of the check run, per server: what every run under load should bring too. */
const expectedFrames: Partial<Record<ServerName, Record<string, number>>> = {};

async function check(server: ServerName, target: Target): Promise<void> {
  const result = await runLoad({ mode: "check", target });
  expectedFrames[server] ??= result.events;
  if (!result.ok) throw new Error(`sanity check failed for ${server} at ${target.apiUrl}: ${result.problem} (events ${JSON.stringify(result.events)}). Refusing to time a broken run.`);
  log(`${server}: SDK check passed (events ${JSON.stringify(result.events)}, onRunCreated ${result.run_created ? "called" : "not called"})`);
}

type Usage = { heap_used: number; rss: number };

interface MemoryProbe {
  readonly server: ChildServer;
  readonly before: Usage;
  readonly hot: Usage;
  idle?: Usage;
}

/** Runs before the memory readings, so first-use costs (code compiled, caches filled) are not per-thread. */
async function warmUp(name: MemoryServer, server: ChildServer): Promise<void> {
  const warm = await runLoad({ mode: "populate", target: server.target, threads: 20, clients: 10 });
  if (warm.errors > 0) throw new Error(`${name}: warm-up runs failed: ${warm.first_error}`);
}

/**
 * A reading, K threads with one finished run each, a second reading. Called once the warm-up
 * runs' replay windows have closed: a reading taken while they were held would put them in
 * "before" but not in "idle", so idle − before would come out short by the warm-up's 20 windows
 * (a tenth of a window per thread at K = 200; below zero at K = 20).
 */
async function fillThreads(name: MemoryServer, server: ChildServer, threads: number): Promise<MemoryProbe> {
  const before = await server.memory();
  const filled = await runLoad({ mode: "populate", target: server.target, threads, clients: 10 });
  if (filled.errors > 0) throw new Error(`${name}: ${filled.errors} of ${threads} runs failed while filling threads: ${filled.first_error}`);
  const hot = await server.memory();
  log(`${name}: ${threads} threads filled in ${filled.elapsed_s} s; heap ${before.heap_used} → ${hot.heap_used}, rss ${before.rss} → ${hot.rss}`);
  return { server, before, hot };
}

const perThread = (from: Usage, to: Usage | undefined, threads: number) =>
  to === undefined
    ? { heap: null, rss: null }
    : { heap: Math.round((to.heap_used - from.heap_used) / threads), rss: Math.round((to.rss - from.rss) / threads) };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const { runtime, version } = runtimeInfo();
  const seconds = envNumber("BENCH_GATEWAY_SECONDS", 10);
  const warmupSeconds = envNumber("BENCH_GATEWAY_WARMUP_SECONDS", 2);
  const counts = clientCounts();
  const memoryClients = envCount("BENCH_GATEWAY_MEMORY_CLIENTS", 10);
  const idleThreads = envCount("BENCH_GATEWAY_IDLE_THREADS", 200);
  const idleAfterS = envNumber("BENCH_GATEWAY_IDLE_AFTER_SECONDS", 65);
  const lgapiWanted = envString("BENCH_GATEWAY_LGAPI") !== "0";
  const fair = envString("BENCH_GATEWAY_FAIR") !== "0";
  const began = performance.now();
  const loadAtStart = loadAverage();

  log(`${runtime} ${version}: ${seconds} s per case (+${warmupSeconds} s warm-up), clients ${counts.join(", ")}, memory storage at ${memoryClients}, ${idleThreads} idle threads read again after ${idleAfterS} s`);

  let lgapiSkipped: string | undefined = lgapiWanted ? ((await ensureLgapiInstalled(log)) ?? undefined) : "BENCH_GATEWAY_LGAPI=0";
  const skipLgapi = (why: string) => {
    lgapiSkipped = why;
    emit({ skipped: "lgapi", bench: "gateway", runtime, reason: why });
    log(`langgraph-api baseline skipped: ${why}`);
  };
  if (lgapiSkipped !== undefined) skipLgapi(lgapiSkipped);
  let leadSkipped: string | undefined;

  // 1. Memory: one server process each that serves nothing else, warmed up now; the readings come
  // after the load cases (section 3), once the warm-up runs' replay windows have closed.
  const probes: Partial<Record<MemoryServer, MemoryProbe>> = {};
  const warmed: Array<[MemoryServer, ChildServer]> = [];
  const closing: ChildServer[] = [];
  const lines: CaseLine[] = [];
  try {
    const oursProcess = await startOursProcess(runtime);
    closing.push(oursProcess);
    log(`deerflow-edge (${runtime}, memory storage) serving on ${oursProcess.target.apiUrl}`);
    await check("deerflow-edge", oursProcess.target);
    if (idleThreads > 0) {
      await warmUp("deerflow-edge", oursProcess);
      warmed.push(["deerflow-edge", oursProcess]);
    }
    if (lgapiSkipped === undefined) {
      try {
        const lgapiProcess = await startLgapi(10);
        closing.push(lgapiProcess);
        await check("langgraph-api", lgapiProcess.target);
        if (idleThreads > 0) {
          await warmUp("langgraph-api", lgapiProcess);
          warmed.push(["langgraph-api", lgapiProcess]);
        }
      } catch (error) {
        skipLgapi(`the official server did not start or failed its check: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    const warmedAt = performance.now();

    // 2. Load: a fresh server per case, so no case inherits the threads of another; every subject
    // at one client count back to back, in an order that rotates per count.
    const inOurRuntime = (server: ServerName) => server === "deerflow-edge" || server === "in-process";
    const runCase = async (server: ServerName, storage: "memory" | "fs", clients: number): Promise<void> => {
      const storageName = server === "langgraph-api" || server === "langgraph-api-lead" ? "langgraph-api in-memory" : storage;
      log(`${server} (${inOurRuntime(server) ? `${runtime}, ${storage} storage` : "node"}): ${clients} client(s), ${seconds} s`);
      let result: LoadResult;
      if (server === "in-process") {
        const fresh = await startInProcess();
        try {
          // The check run: the frames every run under load should bring too.
          expectedFrames[server] ??= (await inProcessRun(fresh.lead)).framesByEvent as Record<string, number>;
          result = await measureLoad(() => inProcessRun(fresh.lead), { clients, seconds, warmupSeconds, expectFrames: expectedFrames[server] });
        } finally {
          await fresh.close();
        }
      } else {
        const fresh: { target: Target; close(): Promise<void> } =
          server === "deerflow-edge" ? await startOurs({ storage, runtime }) : await startLgapi(Math.max(clients, 10), server === "langgraph-api-lead" ? "lead" : "bare");
        try {
          if (expectedFrames[server] === undefined) await check(server, fresh.target);
          result = await runLoad({ mode: "load", target: fresh.target, clients, seconds, warmupSeconds, expectFrames: expectedFrames[server]! });
        } finally {
          await fresh.close();
        }
      }
      {
        const line: CaseLine = { server, storage: storageName, clients, result };
        lines.push(line);
        emit(caseRecord(runtime, version, line, inOurRuntime(server) ? runtime : "node", seconds));
        log(`  ${result.runs_per_s} runs/s, ${result.frames_per_s} frames/s, first frame p50 ${result.first_frame_ms.p50} ms, errors ${result.errors}`);
        if (result.runs_with_unexpected_frames > 0) {
          log(`  WARNING: ${result.runs_with_unexpected_frames} of ${result.runs} runs did not bring the check run's frames, e.g. ${result.first_unexpected_frames}`);
        }
      }
    };
    for (const [index, clients] of counts.entries()) {
      const subjects: ServerName[] = [
        "deerflow-edge",
        ...(lgapiSkipped === undefined ? (["langgraph-api"] as const) : []),
        ...(fair ? (["in-process"] as const) : []),
        ...(fair && lgapiSkipped === undefined ? (["langgraph-api-lead"] as const) : []),
      ];
      const shift = index % subjects.length;
      const order = [...subjects.slice(shift), ...subjects.slice(0, shift)];
      for (const server of order) {
        if (server === "deerflow-edge" || server === "in-process") await runCase(server, "fs", clients);
        else if (server === "langgraph-api-lead" && leadSkipped === undefined && lgapiSkipped === undefined) {
          // Our graph on the official server failing never stops the other cases.
          await runCase(server, "fs", clients).catch((error: unknown) => {
            leadSkipped = `the official server serving our lead agent failed at ${clients} client(s): ${error instanceof Error ? error.message : String(error)}`;
            emit({ skipped: "lgapi-lead", bench: "gateway", runtime, reason: leadSkipped });
            log(`langgraph-api serving our lead agent skipped: ${leadSkipped}`);
          });
        } else if (server === "langgraph-api" && lgapiSkipped === undefined) {
          // The baseline failing mid-way never stops our cases.
          await runCase(server, "fs", clients).catch((error: unknown) =>
            skipLgapi(`the official server failed at ${clients} client(s): ${error instanceof Error ? error.message : String(error)}`),
          );
        }
      }
    }
    if (memoryClients > 0) await runCase("deerflow-edge", "memory", memoryClients);

    // 3. Memory: once the warm-up's replay windows have closed, before / K threads / just finished;
    // BENCH_GATEWAY_IDLE_AFTER_SECONDS later, once theirs have closed too, idle.
    const waitUntil = async (at: number, what: string): Promise<void> => {
      const waitMs = at - performance.now();
      if (waitMs <= 0) return;
      log(`waiting ${(waitMs / 1000).toFixed(1)} s more for ${what}' replay windows to be released`);
      await sleep(waitMs);
    };
    if (warmed.length > 0) await waitUntil(warmedAt + idleAfterS * 1000, "the warm-up runs");
    for (const [name, server] of warmed) {
      try {
        probes[name] = await fillThreads(name, server, idleThreads);
      } catch (error) {
        if (name === "deerflow-edge") throw error;
        skipLgapi(`the official server failed while filling threads: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    const filledAt = performance.now();
    if (warmed.length > 0) await waitUntil(filledAt + idleAfterS * 1000, "the K threads' runs");
    for (const [name, probe] of Object.entries(probes) as Array<[MemoryServer, MemoryProbe]>) {
      probe.idle = await probe.server.memory();
      const hot = perThread(probe.before, probe.hot, idleThreads);
      const idle = perThread(probe.before, probe.idle, idleThreads);
      emit({
        bench: "gateway",
        runtime,
        runtime_version: version,
        case: "idle_thread_memory",
        server: name,
        server_runtime: name === "deerflow-edge" ? runtime : "node",
        storage: name === "deerflow-edge" ? "memory" : "langgraph-api in-memory",
        threads: idleThreads,
        heap_per_thread_bytes: idle.heap,
        rss_per_thread_bytes: idle.rss,
        heap_per_thread_bytes_just_finished: hot.heap,
        rss_per_thread_bytes_just_finished: hot.rss,
        read_after_s: round3((performance.now() - filledAt) / 1000),
      });
    }
  } finally {
    for (const server of closing) await server.close().catch(() => undefined);
  }

  const find = (server: ServerName, storage: string, clients: number) => lines.find((l) => l.server === server && l.storage === storage && l.clients === clients)?.result;
  const ratio = (a: number | null | undefined, b: number | null | undefined) =>
    a === undefined || a === null || b === undefined || b === null || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? null : round3(a / b);
  const byClients: Record<string, unknown> = {};
  for (const clients of counts) {
    const a = find("deerflow-edge", "fs", clients)!;
    const b = find("langgraph-api", "langgraph-api in-memory", clients);
    const lead = find("langgraph-api-lead", "langgraph-api in-memory", clients);
    const floor = find("in-process", "fs", clients);
    byClients[String(clients)] = {
      runs_per_s: a.runs_per_s,
      frames_per_s: a.frames_per_s,
      first_frame_ms_p50: a.first_frame_ms.p50,
      first_frame_ms_p99: a.first_frame_ms.p99,
      ...(b === undefined
        ? {}
        : {
            lgapi_runs_per_s: b.runs_per_s,
            lgapi_frames_per_s: b.frames_per_s,
            lgapi_first_frame_ms_p50: b.first_frame_ms.p50,
            lgapi_first_frame_ms_p99: b.first_frame_ms.p99,
            ratio_runs_per_s: ratio(a.runs_per_s, b.runs_per_s),
            ratio_frames_per_s: ratio(a.frames_per_s, b.frames_per_s),
            ratio_first_frame_ms_p50: ratio(a.first_frame_ms.p50, b.first_frame_ms.p50),
            ratio_first_frame_ms_p99: ratio(a.first_frame_ms.p99, b.first_frame_ms.p99),
            ratio_first_data_frame_ms_p50: ratio(a.first_data_frame_ms.p50, b.first_data_frame_ms.p50),
          }),
      ...(lead === undefined
        ? {}
        : {
            lgapi_lead_runs_per_s: lead.runs_per_s,
            lgapi_lead_first_frame_ms_p99: lead.first_frame_ms.p99,
            ratio_runs_per_s_vs_lgapi_lead: ratio(a.runs_per_s, lead.runs_per_s),
            ratio_first_frame_ms_p99_vs_lgapi_lead: ratio(a.first_frame_ms.p99, lead.first_frame_ms.p99),
          }),
      ...(floor === undefined
        ? {}
        : {
            in_process_runs_per_s: floor.runs_per_s,
            in_process_first_frame_ms_p99: floor.first_frame_ms.p99,
            gateway_overhead_vs_in_process: ratio(floor.runs_per_s, a.runs_per_s),
          }),
    };
  }
  const memoryResult = find("deerflow-edge", "memory", memoryClients);
  const memOf = (name: MemoryServer) => {
    const probe = probes[name];
    return probe === undefined ? undefined : { idle: perThread(probe.before, probe.idle, idleThreads), hot: perThread(probe.before, probe.hot, idleThreads) };
  };
  const memOurs = memOf("deerflow-edge");
  const memLgapi = memOf("langgraph-api");

  emit({
    bench: "gateway",
    summary: true,
    runtime,
    runtime_version: version,
    baseline: lgapiSkipped !== undefined ? { skipped: lgapiSkipped } : { server: "@langchain/langgraph-api 1.5.1 (startServer, in-memory)", runtime: "node" },
    ...(leadSkipped === undefined ? {} : { lgapi_lead_skipped: leadSkipped }),
    by_clients: byClients,
    storage: "fs (memory in memory_storage)",
    memory_storage:
      memoryResult === undefined
        ? null
        : { clients: memoryClients, runs_per_s: memoryResult.runs_per_s, ratio_vs_fs: ratio(memoryResult.runs_per_s, find("deerflow-edge", "fs", memoryClients)?.runs_per_s) },
    idle_thread_memory: {
      threads: idleThreads,
      heap_per_thread_bytes: memOurs?.idle.heap ?? null,
      rss_per_thread_bytes: memOurs?.idle.rss ?? null,
      heap_per_thread_bytes_just_finished: memOurs?.hot.heap ?? null,
      ...(memLgapi === undefined
        ? {}
        : {
            lgapi_heap_per_thread_bytes: memLgapi.idle.heap,
            lgapi_rss_per_thread_bytes: memLgapi.idle.rss,
            lgapi_heap_per_thread_bytes_just_finished: memLgapi.hot.heap,
            ratio_heap_per_thread: ratio(memOurs?.idle.heap, memLgapi.idle.heap),
            ratio_heap_per_thread_just_finished: ratio(memOurs?.hot.heap, memLgapi.hot.heap),
          }),
    },
    errors: lines.reduce((sum, l) => sum + (l.server === "deerflow-edge" ? l.result.errors : 0), 0),
    runs_with_unexpected_frames: lines.reduce((sum, l) => sum + (l.server === "deerflow-edge" ? l.result.runs_with_unexpected_frames : 0), 0),
    definitions: {
      workload:
        "each client loop: POST /threads, POST /threads/{id}/runs/stream with stream_mode [values, messages-tuple] and the same one-line task, read to the end (raw fetch, separate Node load process); every run checked: no error frame, final state holds write_file and bash results and the final answer; a fresh server per case",
      ratios: "ours ÷ langgraph-api at the same client count, run back to back; above 1 is better for runs_per_s and frames_per_s, below 1 is better for the *_ms ratios and memory",
      lgapi_lead: "langgraph-api serving our lead agent (bench/lead-agent.ts: the agent the gateway assembles, memory storage, in one graph node; langgraph-api checkpoints): the same chain on both servers, so ratio_*_vs_lgapi_lead is what the server costs",
      in_process:
        "our lead agent run in the bench's process over fs storage with the gateway's checkpointer, no HTTP, no run manager, no SSE, by as many concurrent loops as clients (same input, stream modes values + messages, same check); gateway_overhead_vs_in_process = in_process_runs_per_s ÷ runs_per_s (time per run through the gateway ÷ in-process; 1 = no overhead)",
      runs_per_s: "completed runs ÷ case wall time (deadline plus the runs in flight)",
      frames_per_s: "SSE frames (events, heartbeat comments excluded) ÷ case wall time; frames per run differ between the servers (frames_per_run_median)",
      first_frame_ms: "request sent → first SSE frame (metadata); first_data_frame_ms → first frame that is not metadata",
      runs_with_unexpected_frames: "runs whose frames per event differ from the server's check run (same input, so the same frames are due)",
      idle_thread_memory: `(heap or RSS − before) ÷ K, K threads with one finished run each, after a full gc, in a server process that served nothing else, 20 warm-up runs before whose replay windows had closed when 'before' was read; read ${idleAfterS} s after the last run (idle) and at once (just_finished: deerflow-edge then still holds each run's replay window for 60 s)`,
      langgraph_api_floor: "its in-memory join waits up to 500 ms for a done message that never comes, so a stream ends about 0.5 s after its run (docs/toolchain.md, The LangGraph API server baseline)",
    },
    total_s: round3((performance.now() - began) / 1000),
    load_avg_1m: { start: loadAtStart, end: loadAverage() },
  });

  const ourErrors = lines.filter((l) => l.server === "deerflow-edge" && l.result.errors > 0);
  if (ourErrors.length > 0) {
    throw new Error(`deerflow-edge runs failed under load: ${ourErrors.map((l) => `${l.storage}@${l.clients}: ${l.result.errors} (${l.result.first_error})`).join("; ")}`);
  }
}

runBench("gateway", main);

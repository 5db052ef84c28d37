/**
 * How long GET /api/ok takes while hostile requests are in flight (issue 12, point 1; goal under
 * 100 ms): worst-case artifact paths (a 4 KB+ path of 2,100 levels, refused by gateway.limits, and
 * one just within the limits that reaches the sandbox lookup), 250 MB bodies streamed chunked to
 * login and to a run route (cut off at their caps), and both together. The gateway runs in a child
 * process of the bench's runtime (bench/gateway-serve.ts: default config, auth disabled on
 * 127.0.0.1), so the hostile clients in this process do not share its event loop.
 *
 * Cases: the hostile traffic alone and together, the bodies either streamed at 1 MiB/s (so one is
 * in flight all along: the measure) or back to back at full speed (a flood). One JSON line
 * per case: ok latency median / p95 / max in ms, the statuses the hostile requests got meanwhile,
 * the server's RSS before and after; then a summary against the goal.
 * Knobs: BENCH_LIMITS_SAMPLES (ok requests per case, default 100), BENCH_LIMITS_GAP_MS (pause
 * between them, default 10).
 */
import { streamedRequest, type StreamedRequest } from "../test/portable/gateway/raw-http.ts";
import { startOursProcess, type ChildServer } from "./gateway-servers.ts";
import { emit, envNumber, loadAverage, median, progressLog, quantile, round3, runBench, runtimeInfo } from "./harness.ts";

const BENCH = "gateway-limits";
const log = progressLog(BENCH);
const GOAL_MS = 100;
const HOSTILE_BODY_BYTES = 250 * 1024 * 1024;
const STREAMED_BYTES_PER_SECOND = 1024 * 1024;
const LOGIN_PATH = "/api/v1/auth/login/local";
const HEADLINE = "deep_path_and_body_250mb_streamed";
const FLOOD = "deep_path_and_body_250mb_flood";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Statuses = Record<string, number>;

/** Hostile traffic kept in flight until stopped. */
interface Hostile {
  stop(): Promise<Statuses>;
}

function merge(counts: readonly Statuses[]): Statuses {
  const total: Statuses = {};
  for (const count of counts) for (const [status, n] of Object.entries(count)) total[status] = (total[status] ?? 0) + n;
  return total;
}

/** One request at a time, the next as soon as one ends; a failed one counts as status -1. */
function keepInFlight(send: () => Promise<number>): Hostile {
  let stopped = false;
  const statuses: Statuses = {};
  const running = (async () => {
    while (!stopped) {
      const status = await send().catch(() => -1);
      statuses[String(status)] = (statuses[String(status)] ?? 0) + 1;
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await running;
      return statuses;
    },
  };
}

function deepPaths(baseUrl: string, threadId: string): Hostile {
  const route = `${baseUrl}/api/threads/${threadId}/artifacts/mnt/user-data/outputs`;
  const overLimit = `${route}/${"a/".repeat(2100)}x`;
  // 55 segments of 60 bytes below the route's 9: within max_path_bytes and max_path_segments.
  const atLimit = `${route}/${Array.from({ length: 55 }, () => "s".repeat(60)).join("/")}`;
  let n = 0;
  return keepInFlight(async () => {
    const response = await fetch(n++ % 2 === 0 ? overLimit : atLimit);
    await response.arrayBuffer();
    return response.status;
  });
}

/** 250 MB bodies to login and to a run route, one of each in flight at a time; `bytesPerSecond` paces them. */
function bigBodies(baseUrl: string, threadId: string, bytesPerSecond?: number): Hostile {
  const open = new Set<StreamedRequest>();
  const lane = (path: string) =>
    keepInFlight(async () => {
      const upload = streamedRequest(baseUrl, {
        method: "POST",
        path,
        headers: { "content-type": "application/json" },
        totalBytes: HOSTILE_BODY_BYTES,
        firstBytes: 0,
        chunkBytes: bytesPerSecond ? 16 * 1024 : 256 * 1024,
        ...(bytesPerSecond ? { bytesPerSecond } : {}),
      });
      upload.release();
      open.add(upload);
      try {
        return (await upload.response).status;
      } finally {
        upload.close();
        open.delete(upload);
      }
    });
  const lanes = [lane(LOGIN_PATH), lane(`/api/threads/${threadId}/runs/stream`)];
  return {
    stop: async () => {
      const stopping = Promise.all(lanes.map((l) => l.stop()));
      // A body still streaming when the case ends is not waited for.
      for (const upload of open) upload.close();
      return merge(await stopping);
    },
  };
}

async function okLatencies(baseUrl: string, samples: number, gapMs: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    const response = await fetch(`${baseUrl}/api/ok`);
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`/api/ok answered ${response.status}`);
    times.push(performance.now() - started);
    await sleep(gapMs);
  }
  return times;
}

async function main(): Promise<void> {
  const { runtime, version } = runtimeInfo();
  const samples = envNumber("BENCH_LIMITS_SAMPLES", 100);
  const gapMs = envNumber("BENCH_LIMITS_GAP_MS", 10);
  const server: ChildServer = await startOursProcess(runtime);
  try {
    const baseUrl = server.target.apiUrl.replace(/\/api$/, "");
    const created = await fetch(`${baseUrl}/api/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    const { thread_id: threadId } = (await created.json()) as { thread_id: string };
    log(`deerflow-edge on ${runtime} serving on ${baseUrl}; ${samples} /api/ok samples per case`);
    await okLatencies(baseUrl, 20, 0);
    const cases: Array<{ name: string; start: () => Hostile[] }> = [
      { name: "idle", start: () => [] },
      { name: "deep_path", start: () => [deepPaths(baseUrl, threadId)] },
      { name: "body_250mb_streamed", start: () => [bigBodies(baseUrl, threadId, STREAMED_BYTES_PER_SECOND)] },
      { name: HEADLINE, start: () => [deepPaths(baseUrl, threadId), bigBodies(baseUrl, threadId, STREAMED_BYTES_PER_SECOND)] },
      { name: "body_250mb_flood", start: () => [bigBodies(baseUrl, threadId)] },
      { name: FLOOD, start: () => [deepPaths(baseUrl, threadId), bigBodies(baseUrl, threadId)] },
    ];
    const p95s: Record<string, number> = {};
    for (const { name, start } of cases) {
      const rssBefore = (await server.memory()).rss;
      const hostile = start();
      // Let the hostile traffic get going before the first sample.
      await sleep(hostile.length > 0 ? 200 : 0);
      const times = await okLatencies(baseUrl, samples, gapMs);
      const statuses = merge(await Promise.all(hostile.map((h) => h.stop())));
      const rssAfter = (await server.memory()).rss;
      const p95 = quantile(times, 0.95);
      p95s[name] = p95;
      log(`${name}: median ${median(times).toFixed(1)} ms, p95 ${p95.toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms; hostile ${JSON.stringify(statuses)}`);
      emit({
        bench: BENCH,
        runtime,
        runtime_version: version,
        case: name,
        samples,
        ok_ms_median: round3(median(times)),
        ok_ms_p95: round3(p95),
        ok_ms_max: round3(Math.max(...times)),
        hostile_statuses: statuses,
        server_rss_before: rssBefore,
        server_rss_after: rssAfter,
        load_average: loadAverage(),
      });
    }
    emit({
      bench: BENCH,
      runtime,
      runtime_version: version,
      summary: true,
      goal_ms: GOAL_MS,
      headline_case: HEADLINE,
      ok_ms_p95: round3(p95s[HEADLINE]!),
      within_goal: p95s[HEADLINE]! < GOAL_MS,
      idle_ok_ms_p95: round3(p95s.idle!),
      flood_ok_ms_p95: round3(p95s[FLOOD]!),
      load_average: loadAverage(),
    });
  } finally {
    await server.close();
  }
}

runBench(BENCH, main);

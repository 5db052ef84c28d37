// What the cluster scenarios do over HTTP besides the SDK calls: raw run requests through the
// proxy (pinned or not) with their status codes, SSE frames with their ids, and polling a run's
// status with the test's clock.
import type { Cluster } from "./harness.ts";
import { sseFrames, type SseFrame } from "../portable/gateway/runs-harness.ts";
import { scriptedInput } from "./scripted-model.ts";

export type Script = Parameters<typeof scriptedInput>[0];

export interface RunRow {
  run_id: string;
  thread_id: string;
  status: string;
  error?: { message?: string } | null;
}

/** A fetch through the proxy (pinned to `worker` when given) to <api><path>. */
export function api(cluster: Cluster, path: string, init: RequestInit & { worker?: number } = {}): Promise<Response> {
  const { worker, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (worker !== undefined) for (const [name, value] of Object.entries(cluster.pin(worker))) headers.set(name, value);
  if (rest.body !== undefined && !headers.has("content-type")) headers.set("content-type", "application/json");
  return fetch(`${cluster.apiUrl}${path}`, { ...rest, headers });
}

export async function createThread(cluster: Cluster, worker?: number): Promise<string> {
  const response = await api(cluster, "/threads", { method: "POST", body: "{}", ...(worker === undefined ? {} : { worker }) });
  if (response.status !== 200) throw new Error(`POST /threads answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { thread_id: string }).thread_id;
}

/** POST /threads/<t>/runs (a background run): the status and the row (or the error body). */
export async function createRun(
  cluster: Cluster,
  threadId: string,
  options: { script?: Script; strategy?: string; worker?: number } = {},
): Promise<{ status: number; row: RunRow; body: unknown }> {
  const response = await api(cluster, `/threads/${threadId}/runs`, {
    method: "POST",
    body: JSON.stringify({ assistant_id: "lead_agent", input: scriptedInput(options.script), ...(options.strategy ? { multitask_strategy: options.strategy } : {}) }),
    ...(options.worker === undefined ? {} : { worker: options.worker }),
  });
  const body = (await response.json()) as unknown;
  return { status: response.status, row: body as RunRow, body };
}

/** Like createRun, but anything other than 200 is an error naming the answer. */
export async function startRun(cluster: Cluster, threadId: string, options: Parameters<typeof createRun>[2] = {}): Promise<RunRow> {
  const { status, row, body } = await createRun(cluster, threadId, options);
  if (status !== 200) throw new Error(`creating a run on ${threadId} answered ${status}: ${JSON.stringify(body)}`);
  return row;
}

export async function getRun(cluster: Cluster, threadId: string, runId: string, worker?: number, headers: Record<string, string> = {}): Promise<RunRow> {
  const response = await api(cluster, `/threads/${threadId}/runs/${runId}`, { headers, ...(worker === undefined ? {} : { worker }) });
  if (response.status !== 200) throw new Error(`GET run ${runId} answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as RunRow;
}

/** Polls until `done(row)` holds (every 50 ms); throws naming the last status after `limitMs`. */
export async function waitForRun(
  cluster: Cluster,
  threadId: string,
  runId: string,
  done: (row: RunRow) => boolean,
  limitMs = 60_000,
  /** Credentials, where auth is on. */
  headers: Record<string, string> = {},
): Promise<RunRow> {
  const start = performance.now();
  let row = await getRun(cluster, threadId, runId, undefined, headers);
  while (!done(row)) {
    if (performance.now() - start > limitMs) throw new Error(`run ${runId} is still ${row.status} after ${limitMs} ms\n${cluster.output().slice(-4000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    row = await getRun(cluster, threadId, runId, undefined, headers);
  }
  return row;
}

export const TERMINAL = new Set(["success", "error", "interrupted", "timeout"]);
export const isTerminal = (row: RunRow) => TERMINAL.has(row.status);

/** Resolves once `condition()` holds (every 20 ms), or throws naming `what`. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, limitMs = 30_000): Promise<void> {
  const start = performance.now();
  while (!(await condition())) {
    if (performance.now() - start > limitMs) throw new Error(`gave up waiting for ${what} after ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The data frames of an SSE response (heartbeat comments left out), as they arrive. */
export async function* dataFrames(response: Response): AsyncGenerator<SseFrame> {
  if (response.status !== 200) throw new Error(`a stream answered ${response.status}: ${await response.text()}`);
  for await (const frame of sseFrames(response.body!)) if (frame.comment === undefined) yield frame;
}

/** GET /threads/<t>/runs/<r>/stream through one worker, from the start or after `lastEventId`. */
export function joinStream(cluster: Cluster, threadId: string, runId: string, worker: number, lastEventId?: string): Promise<Response> {
  return api(cluster, `/threads/${threadId}/runs/${runId}/stream`, { worker, ...(lastEventId === undefined ? {} : { headers: { "Last-Event-ID": lastEventId } }) });
}

export async function collect(frames: AsyncIterable<SseFrame>): Promise<SseFrame[]> {
  const out: SseFrame[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

/** Runs `task` over `items` with at most `limit` in flight; results in item order. */
export async function pool<T, R>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await task(items[index]!, index);
      }
    }),
  );
  return results;
}

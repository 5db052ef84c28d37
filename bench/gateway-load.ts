/**
 * The load process of bench/gateway.ts: a separate Node process (tsx) that drives one LangGraph API
 * server over HTTP on 127.0.0.1 and prints one JSON line with what it measured.
 *
 * `tsx bench/gateway-load.ts '<job JSON>'`, the job being one of
 * - `{"mode":"check", target}`: one run through the official @langchain/langgraph-sdk Client
 *   (threads.create, runs.stream with values + messages-tuple, threads.getState), checked for the
 *   demo conversation: proves the server speaks the API the load then uses raw;
 * - `{"mode":"load", target, clients, seconds, warmupSeconds}`: `clients` loops, each creating a
 *   thread and streaming one run on it, again and again; first `warmupSeconds` unmeasured, then
 *   `seconds` measured; a loop starts no run after the deadline, runs in flight finish and count;
 * - `{"mode":"populate", target, threads, clients}`: `threads` threads with one finished run each.
 */
import { Client } from "@langchain/langgraph-sdk";
import { BENCH_TASK, checkFinalValues, createThread, LoadError, streamRun, type RunOutcome, type Target } from "./gateway-sse.ts";
import { round3 } from "./harness.ts";
import { measureLoad, type LoadResult } from "./load-loop.ts";

const STREAM_MODES = ["values", "messages-tuple"] as const;

export type LoadJob =
  | { mode: "check"; target: Target }
  | {
      mode: "load";
      target: Target;
      clients: number;
      seconds: number;
      warmupSeconds: number;
      /** Frames per event a run should bring (what the check run got): every run is compared. */
      expectFrames?: Record<string, number>;
    }
  | { mode: "populate"; target: Target; threads: number; clients: number };

export interface CheckResult {
  mode: "check";
  ok: boolean;
  problem?: string;
  events: Record<string, number>;
  run_created: boolean;
}

export type { LoadResult } from "./load-loop.ts";

export interface PopulateResult {
  mode: "populate";
  threads: number;
  errors: number;
  first_error?: string;
  elapsed_s: number;
}

const runBody = { input: { messages: [{ role: "user", content: BENCH_TASK }] }, stream_mode: [...STREAM_MODES] };

async function check(target: Target): Promise<CheckResult> {
  const client = new Client({ apiUrl: target.apiUrl, ...(target.headers ? { defaultHeaders: { ...target.headers } } : {}) });
  const thread = await client.threads.create();
  const events: Record<string, number> = {};
  let lastValues: unknown;
  let runCreated = false;
  for await (const part of client.runs.stream(thread.thread_id, target.assistantId, {
    input: runBody.input,
    streamMode: [...STREAM_MODES],
    onRunCreated: () => void (runCreated = true),
  })) {
    events[part.event] = (events[part.event] ?? 0) + 1;
    if (part.event === "values") lastValues = part.data;
    if (part.event === "error") return { mode: "check", ok: false, problem: `error frame ${JSON.stringify(part.data)}`, events, run_created: runCreated };
  }
  const problem = checkFinalValues(lastValues === undefined ? undefined : JSON.stringify(lastValues));
  if (problem !== null) return { mode: "check", ok: false, problem: `stream: ${problem}`, events, run_created: runCreated };
  const state = await client.threads.getState(thread.thread_id);
  const stateProblem = checkFinalValues(JSON.stringify(state.values));
  if (stateProblem !== null) return { mode: "check", ok: false, problem: `threads.getState: ${stateProblem}`, events, run_created: runCreated };
  if (!events["messages"]) return { mode: "check", ok: false, problem: "no messages frame for stream mode messages-tuple", events, run_created: runCreated };
  return { mode: "check", ok: true, events, run_created: runCreated };
}

/** One run over HTTP: a new thread, one streamed run, checked. */
async function httpRun(target: Target): Promise<RunOutcome> {
  const threadId = await createThread(target);
  const outcome = await streamRun(target, threadId, runBody);
  if (outcome.errorFrame !== undefined) throw new LoadError(`error frame ${outcome.errorFrame.slice(0, 300)}`);
  const problem = checkFinalValues(outcome.lastValues);
  if (problem !== null) throw new LoadError(problem);
  return outcome;
}

function load(job: Extract<LoadJob, { mode: "load" }>): Promise<LoadResult> {
  return measureLoad(() => httpRun(job.target), job);
}

async function populate(job: Extract<LoadJob, { mode: "populate" }>): Promise<PopulateResult> {
  const started = performance.now();
  const errors: string[] = [];
  let next = 0;
  let done = 0;
  const worker = async (): Promise<void> => {
    while (next < job.threads) {
      next++;
      try {
        const threadId = await createThread(job.target);
        const outcome = await streamRun(job.target, threadId, runBody);
        const problem = outcome.errorFrame ?? checkFinalValues(outcome.lastValues);
        if (problem !== null && problem !== undefined) throw new LoadError(problem);
        done++;
      } catch (error) {
        errors.push(error instanceof Error ? error.message : String(error));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(job.clients, job.threads) }, worker));
  return {
    mode: "populate",
    threads: done,
    errors: errors.length,
    ...(errors.length > 0 ? { first_error: errors[0] } : {}),
    elapsed_s: round3((performance.now() - started) / 1000),
  };
}

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2] ?? "null") as LoadJob | null;
  if (job === null || typeof job !== "object") throw new Error("usage: tsx bench/gateway-load.ts '<job JSON>' (see the header of this file)");
  const result = job.mode === "check" ? await check(job.target) : job.mode === "load" ? await load(job) : await populate(job);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

// bench/gateway.ts imports only types from here, so running main on import is safe.
main().catch((error) => {
  process.stderr.write(`[gateway-load] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});

/**
 * The client loops of a load case, whatever a run goes through: `clients` loops, each doing one
 * run after another (`runOnce`, which throws on a run that failed its check); first
 * `warmupSeconds` unmeasured, then `seconds` measured; a loop starts no run after the deadline,
 * runs in flight finish and count. bench/gateway-load.ts drives a server over HTTP with it;
 * bench/gateway.ts the lead agent in-process (the floor under the gateway).
 */
import { median, quantile, round3 } from "./harness.ts";
import type { RunOutcome } from "./gateway-sse.ts";

export interface LoadResult {
  mode: "load";
  clients: number;
  runs: number;
  errors: number;
  first_error?: string;
  elapsed_s: number;
  runs_per_s: number;
  frames: number;
  frames_per_s: number;
  frames_per_run_median: number;
  frames_by_event: Record<string, number>;
  /** Runs whose frames per event differ from `expectFrames` (a server that drops or adds frames). */
  runs_with_unexpected_frames: number;
  first_unexpected_frames?: string;
  ended_with_end_frame: number;
  first_frame_ms: { p50: number; p99: number };
  first_data_frame_ms: { p50: number; p99: number };
  run_ms: { p50: number; p99: number };
  loop_ms: { p50: number; p99: number };
}

interface Sample {
  outcome: RunOutcome;
  loopMs: number;
}

/** One client's loop; a failed run counts as an error and the loop goes on. */
async function clientLoop(runOnce: () => Promise<RunOutcome>, deadline: number, samples: Sample[], errors: string[]): Promise<void> {
  while (performance.now() < deadline) {
    const started = performance.now();
    try {
      const outcome = await runOnce();
      samples.push({ outcome, loopMs: performance.now() - started });
    } catch (error) {
      errors.push(error instanceof Error ? error.message : String(error));
      // A server that refuses at once would otherwise spin this loop.
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function phase(runOnce: () => Promise<RunOutcome>, clients: number, seconds: number): Promise<{ samples: Sample[]; errors: string[]; elapsedMs: number }> {
  const samples: Sample[] = [];
  const errors: string[] = [];
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(Array.from({ length: clients }, () => clientLoop(runOnce, deadline, samples, errors)));
  return { samples, errors, elapsedMs: performance.now() - started };
}

const p = (values: number[]) => (values.length === 0 ? { p50: NaN, p99: NaN } : { p50: round3(quantile(values, 0.5)), p99: round3(quantile(values, 0.99)) });

function frameDifference(expected: Record<string, number>, got: Readonly<Record<string, number>>): string | null {
  const events = new Set([...Object.keys(expected), ...Object.keys(got)]);
  const off = [...events].filter((event) => (expected[event] ?? 0) !== (got[event] ?? 0));
  return off.length === 0 ? null : off.map((event) => `${event} ${got[event] ?? 0} (expected ${expected[event] ?? 0})`).join(", ");
}

export async function measureLoad(
  runOnce: () => Promise<RunOutcome>,
  job: { clients: number; seconds: number; warmupSeconds: number; expectFrames?: Record<string, number> },
): Promise<LoadResult> {
  if (job.warmupSeconds > 0) await phase(runOnce, job.clients, job.warmupSeconds);
  const { samples, errors, elapsedMs } = await phase(runOnce, job.clients, job.seconds);
  const frames = samples.reduce((sum, s) => sum + s.outcome.frames, 0);
  const byEvent: Record<string, number> = {};
  const unexpected = job.expectFrames === undefined ? [] : samples.map((s) => frameDifference(job.expectFrames!, s.outcome.framesByEvent)).filter((d) => d !== null);
  for (const s of samples) for (const [event, n] of Object.entries(s.outcome.framesByEvent)) byEvent[event] = (byEvent[event] ?? 0) + n;
  const elapsedS = elapsedMs / 1000;
  return {
    mode: "load",
    clients: job.clients,
    runs: samples.length,
    errors: errors.length,
    ...(errors.length > 0 ? { first_error: errors[0] } : {}),
    elapsed_s: round3(elapsedS),
    runs_per_s: round3(samples.length / elapsedS),
    frames,
    frames_per_s: round3(frames / elapsedS),
    frames_per_run_median: samples.length === 0 ? NaN : median(samples.map((s) => s.outcome.frames)),
    frames_by_event: byEvent,
    runs_with_unexpected_frames: unexpected.length,
    ...(unexpected.length > 0 ? { first_unexpected_frames: unexpected[0]! } : {}),
    ended_with_end_frame: samples.filter((s) => s.outcome.ended).length,
    first_frame_ms: p(samples.map((s) => s.outcome.firstFrameMs)),
    first_data_frame_ms: p(samples.map((s) => s.outcome.firstDataFrameMs)),
    run_ms: p(samples.map((s) => s.outcome.totalMs)),
    loop_ms: p(samples.map((s) => s.loopMs)),
  };
}

/**
 * The harness every bench shares: runtime detection, env knobs, garbage collection outside the timed
 * region, load average, statistics, the per-sample shuffled group loop, JSON lines out and the
 * failure exit. Runs unchanged on Node, Deno and Bun.
 */
// bench/ is not src/: a node:* import is fine here, and node:os exists on Node, Deno and Bun.
import { loadavg } from "node:os";

const g = globalThis as any;

// ---------------------------------------------------------------------------------------------
// Environment

export type Runtime = "node" | "deno" | "bun";

export function runtimeInfo(): { runtime: Runtime; version: string } {
  if (g.Deno?.version?.deno) return { runtime: "deno", version: String(g.Deno.version.deno) };
  if (g.Bun?.version) return { runtime: "bun", version: String(g.Bun.version) };
  return { runtime: "node", version: String(g.process?.versions?.node ?? "unknown") };
}

/** A non-empty string from the environment, or undefined. */
export function envString(name: string): string | undefined {
  const raw = g.process?.env?.[name] ?? (g.Deno ? g.Deno.env.get(name) : undefined);
  return raw === undefined || raw === "" ? undefined : String(raw);
}

/** A positive number from the environment, or `fallback`. */
export function envNumber(name: string, fallback: number): number {
  const raw = g.process?.env?.[name] ?? (g.Deno ? g.Deno.env.get(name) : undefined);
  const value = raw === undefined ? NaN : Number(raw);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

/** A whole number >= 0 from the environment (0 meaning "none of it"), or `fallback`. */
export function envCount(name: string, fallback: number): number {
  const raw = envString(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number >= 0, got ${JSON.stringify(raw)}`);
  return value;
}

/** The command line after the script (Deno.args on Deno, process.argv past the script elsewhere). */
export function benchArgs(): readonly string[] {
  return g.Deno?.args ?? g.process?.argv?.slice(2) ?? [];
}

/** `--runs N` from the command line (a positive integer), or `fallback`. */
export function runsFlag(fallback: number): number {
  const argv = benchArgs();
  const at = argv.indexOf("--runs");
  if (at < 0) return fallback;
  const raw = argv[at + 1];
  const runs = raw === undefined ? NaN : Number(raw);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer, got ${JSON.stringify(raw)}`);
  return runs;
}

/**
 * A full collection ("major"), or only the young generation ("minor": a scavenge, a millisecond
 * where a full collection of a heap with langchain loaded takes tens). Call it outside the timed
 * region, so a block pays mostly for its own garbage. False when the runtime exposes no gc (Node
 * and Deno need --expose-gc).
 */
export function collectGarbage(kind: "major" | "minor" = "major"): boolean {
  if (typeof g.gc === "function") {
    if (kind === "minor") g.gc({ type: "minor" });
    else g.gc();
    return true;
  }
  if (typeof g.Bun?.gc === "function") {
    g.Bun.gc(kind === "major");
    return true;
  }
  return false;
}

/** The 1-minute load average: other processes on the machine show up in every timing. */
export function loadAverage(): number | null {
  try {
    return Math.round(loadavg()[0]! * 100) / 100;
  } catch {
    return null;
  }
}

/** Progress to stderr, prefixed with the bench's name (stdout carries only JSON lines). */
export function progressLog(bench: string): (line: string) => void {
  return (line) => console.error(`[${bench}] ${line}`);
}

/** One JSON line on stdout. */
export function emit(record: Record<string, unknown>): void {
  console.log(JSON.stringify(record));
}

/** Runs a bench's main; on failure reports it on stderr and exits 1. */
export function runBench(bench: string, main: () => Promise<void>): void {
  main().catch((error) => {
    console.error(`[${bench}] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    if (g.process?.exit) g.process.exit(1);
    else if (g.Deno?.exit) g.Deno.exit(1);
    throw error;
  });
}

// ---------------------------------------------------------------------------------------------
// Statistics

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Linear interpolation between the closest ranks. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

export const round3 = (x: number): number => Math.round(x * 1000) / 1000;
export const round4 = (x: number): number => Math.round(x * 10_000) / 10_000;

// ---------------------------------------------------------------------------------------------
// Sampling

/** Deterministic shuffle (mulberry32), so every sample runs the blocks in a different order. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Configurations keyed by group, in first-seen order of the keys. */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    groups.set(k, [...(groups.get(k) ?? []), item]);
  }
  return groups;
}

/**
 * `samples` samples; a sample measures every configuration once. Configurations compared with each
 * other form a group and run back to back, groups and members in an order shuffled per sample, so a
 * burst of machine noise lands on them alike and no configuration always runs first or last.
 */
export async function runSamples<T>(
  groups: ReadonlyMap<string, readonly T[]>,
  samples: number,
  measure: (config: T) => Promise<void>,
  hooks: { beforeGroup?: () => void; afterSample?: (sample: number) => void } = {},
): Promise<void> {
  for (let s = 0; s < samples; s++) {
    for (const [gi, group] of shuffled([...groups.values()], 0x9e3779b9 + s).entries()) {
      hooks.beforeGroup?.();
      for (const config of shuffled(group, 0x85ebca6b + s * 31 + gi)) await measure(config);
    }
    hooks.afterSample?.(s);
  }
}

/**
 * Warms a configuration up for `warmupMs` (at least 3 units), in chunks that double while the
 * estimate so far says there is time for them (so a ~100 ns call is not dominated by reading the
 * clock, and a 50 ms run is not overshot), then returns how many units fill a block of about
 * `blockMs`. `run(n)` performs n units untimed; `time(n)` is the bench's own timed block. Noise
 * only ever slows units down, so the smaller of the two per-unit estimates is the better one.
 */
export async function calibrateBlock(options: {
  readonly warmupMs: number;
  readonly blockMs: number;
  readonly run: (units: number) => Promise<void>;
  readonly time: (units: number) => Promise<number>;
  /** Called once after warming up, before the timed probe (cleanup of what the warm-up left). */
  readonly afterWarmup?: () => Promise<void>;
  /** The smallest per-unit time trusted when sizing the block (ms). */
  readonly minUnitMs?: number;
}): Promise<number> {
  const { warmupMs, blockMs } = options;
  const start = performance.now();
  let units = 0;
  let chunk = 1;
  for (;;) {
    await options.run(chunk);
    units += chunk;
    const elapsed = performance.now() - start;
    if (units >= 3 && elapsed >= warmupMs) break;
    const left = Math.max(0, warmupMs - elapsed);
    chunk = Math.max(1, Math.min(chunk * 2, 1024, Math.ceil(left / (elapsed / units))));
  }
  const warmupPerUnit = (performance.now() - start) / units;
  await options.afterWarmup?.();
  const probeUnits = Math.max(1, Math.round(blockMs / warmupPerUnit));
  const perUnit = Math.min(warmupPerUnit, (await options.time(probeUnits)) / probeUnits);
  return Math.max(1, Math.round(blockMs / Math.max(perUnit, options.minUnitMs ?? 1e-6)));
}

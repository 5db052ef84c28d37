// Env and Clock are declared in core/ (the floor below ports/), beside their plain implementations.
export type { Env } from "../core/env.ts";
export type { Clock } from "../core/clock.ts";

export interface ProcessResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  timedOut: boolean;
}

/** Host processes (opt-in local sandbox only). */
export interface ProcessRunner {
  run(
    command: string,
    args: readonly string[],
    options: { cwd: string; env?: Record<string, string>; timeoutMs?: number; signal?: AbortSignal },
  ): Promise<ProcessResult>;
}

/**
 * Asks the runtime to collect garbage now, because the process just let go of a lot of memory (the
 * last run of a burst finished, or the last replay window closed). A runtime whose collector never
 * runs while the process idles (V8 under Node) otherwise keeps every finished run's garbage, and
 * the RSS it grew to, until the next burst of allocation. Optional: absent where the runtime
 * reclaims idle memory by itself or offers no way to ask.
 */
export type ReclaimMemory = () => void;

/** Environment variables, read through a port so src/ never touches the runtime globals itself. */
export interface Env {
  get(name: string): string | undefined;
}

/** Wall clock and timers; tests swap in a manual clock. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

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

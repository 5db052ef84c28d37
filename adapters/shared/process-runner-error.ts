import { DeerflowError } from "../../src/core/errors.ts";

/** A host process could not be started: the program or working directory is missing, or the runtime forbids it. */
export class ProcessRunnerError extends DeerflowError {
  declare readonly code: "process_spawn_failed" | "process_permission_denied";

  constructor(code: "process_spawn_failed" | "process_permission_denied", message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = "ProcessRunnerError";
  }
}

export function spawnFailed(command: string, cwd: string, cause: unknown): ProcessRunnerError {
  const reason = (cause as Error)?.message ?? String(cause);
  return new ProcessRunnerError(
    "process_spawn_failed",
    `Could not start "${command}" in ${cwd}: ${reason}. Check that the program is installed and on PATH and that the directory exists.`,
    { cause },
  );
}

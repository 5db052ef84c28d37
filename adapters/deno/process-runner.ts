import type { ProcessRunner } from "../../src/ports/runtime-ports.ts";
import { ProcessRunnerError, spawnFailed } from "../shared/process-runner-error.ts";
import { groupKiller, superviseProcess } from "../shared/supervise-process.ts";

// Only what this file uses; the project type-checks with @types/node, not Deno's lib.
interface DenoChildProcess {
  readonly pid: number;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  readonly status: Promise<{ code: number; signal: string | null }>;
  kill(signal?: string): void;
}
declare const Deno: {
  Command: new (
    command: string,
    options: {
      args?: string[];
      cwd?: string;
      env?: Record<string, string>;
      clearEnv?: boolean;
      stdin?: "null";
      stdout?: "piped";
      stderr?: "piped";
      detached?: boolean;
    },
  ) => { spawn(): DenoChildProcess };
  kill(pid: number, signal: string): void;
  build: { os: string };
};

/**
 * Host processes through Deno.Command; needs `--allow-run` for the program. `env`, when given, is
 * the child's whole environment. On timeout or abort the child's process group is killed.
 */
export function createDenoProcessRunner(): ProcessRunner {
  return {
    async run(command, args, options) {
      options.signal?.throwIfAborted();
      const ownGroup = Deno.build.os !== "windows";
      let child: DenoChildProcess;
      try {
        child = new Deno.Command(command, {
          args: [...args],
          cwd: options.cwd,
          ...(options.env ? { env: options.env, clearEnv: true } : {}),
          stdin: "null",
          stdout: "piped",
          stderr: "piped",
          detached: ownGroup,
        }).spawn();
      } catch (error) {
        const name = (error as Error)?.name;
        if (name === "NotCapable" || name === "PermissionDenied") {
          throw new ProcessRunnerError(
            "process_permission_denied",
            `Deno may not run "${command}". Start Deno with --allow-run=${command} (the local sandbox also needs --allow-read and --allow-write for its rootDir).`,
            { cause: error },
          );
        }
        throw spawnFailed(command, options.cwd, error);
      }
      return superviseProcess(
        {
          stdout: child.stdout,
          stderr: child.stderr,
          exited: child.status.then((s) => s.code),
          kill: groupKiller(child, ownGroup, (pid, signal) => Deno.kill(pid, signal)),
        },
        options,
      );
    },
  };
}

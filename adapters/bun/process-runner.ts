import type { ProcessRunner } from "../../src/ports/runtime-ports.ts";
import { spawnFailed } from "../shared/process-runner-error.ts";
import { groupKiller, superviseProcess } from "../shared/supervise-process.ts";

// Only what this file uses; the project type-checks with @types/node, not bun-types.
interface BunSubprocess {
  readonly pid: number;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  readonly exited: Promise<number>;
  kill(signal?: string | number): void;
}
declare const Bun: {
  spawn(
    cmd: string[],
    options: {
      cwd?: string;
      env?: Record<string, string | undefined>;
      stdin?: "ignore";
      stdout?: "pipe";
      stderr?: "pipe";
      detached?: boolean;
    },
  ): BunSubprocess;
};

/**
 * Host processes through Bun.spawn. `env`, when given, is the child's whole environment. On
 * timeout or abort the child's process group is killed.
 */
export function createBunProcessRunner(): ProcessRunner {
  return {
    async run(command, args, options) {
      options.signal?.throwIfAborted();
      const ownGroup = process.platform !== "win32";
      let child: BunSubprocess;
      try {
        child = Bun.spawn([command, ...args], {
          cwd: options.cwd,
          env: options.env ?? { ...process.env },
          stdin: "ignore",
          stdout: "pipe",
          stderr: "pipe",
          detached: ownGroup,
        });
      } catch (error) {
        throw spawnFailed(command, options.cwd, error);
      }
      return superviseProcess(
        {
          stdout: child.stdout,
          stderr: child.stderr,
          exited: child.exited,
          kill: groupKiller(child, ownGroup, (pid, signal) => process.kill(pid, signal)),
        },
        options,
      );
    },
  };
}

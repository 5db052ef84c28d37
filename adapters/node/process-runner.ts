import { spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import type { ProcessResult, ProcessRunner } from "../../src/ports/runtime-ports.ts";
import { spawnFailed } from "../shared/process-runner-error.ts";
import { decodeChunks } from "../shared/supervise-process.ts";

const DRAIN_GRACE_MS = 1_000;
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Host processes through node:child_process. `env`, when given, is the child's whole environment
 * (nothing inherited); without it the child inherits this process's environment. On timeout or
 * abort the child's whole process group is killed, so `bash -c "sleep 100"` does not linger.
 */
export function createNodeProcessRunner(): ProcessRunner {
  return {
    run(command, args, options) {
      return new Promise<ProcessResult>((resolve, reject) => {
        const { signal, timeoutMs } = options;
        if (signal?.aborted) {
          reject(signal.reason);
          return;
        }
        const ownGroup = process.platform !== "win32";
        const child = spawn(command, [...args], {
          cwd: options.cwd,
          env: options.env ?? process.env,
          stdio: ["ignore", "pipe", "pipe"],
          detached: ownGroup,
          windowsHide: true,
        });
        const stdout: Uint8Array[] = [];
        const stderr: Uint8Array[] = [];
        child.stdout.on("data", (chunk: Uint8Array) => stdout.push(chunk));
        child.stderr.on("data", (chunk: Uint8Array) => stderr.push(chunk));
        let timedOut = false;
        let aborted = false;
        let settled = false;
        let grace: ReturnType<typeof setTimeout> | undefined;

        const kill = () => {
          try {
            if (ownGroup && child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
            else child.kill("SIGKILL");
          } catch {
            child.kill("SIGKILL");
          }
        };
        const timer =
          timeoutMs !== undefined && timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS
            ? setTimeout(() => {
                timedOut = true;
                kill();
              }, timeoutMs)
            : undefined;
        const onAbort = () => {
          aborted = true;
          kill();
        };
        signal?.addEventListener("abort", onAbort, { once: true });

        const finish = (code: number | null, exitSignal: NodeJS.Signals | null) => {
          if (settled) return;
          settled = true;
          if (timer !== undefined) clearTimeout(timer);
          if (grace !== undefined) clearTimeout(grace);
          signal?.removeEventListener("abort", onAbort);
          if (aborted) {
            reject(signal?.reason);
            return;
          }
          const exitCode = code ?? 128 + (exitSignal ? (osConstants.signals[exitSignal] ?? 0) : 0);
          resolve({ stdout: decodeChunks(stdout), stderr: decodeChunks(stderr), exitCode, timedOut });
        };
        child.on("error", (error) => {
          if (settled) return;
          settled = true;
          if (timer !== undefined) clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          reject(spawnFailed(command, options.cwd, error));
        });
        child.on("exit", (code, exitSignal) => {
          // A grandchild that left the group may hold the pipes open; after a kill, stop waiting for it.
          if (timedOut || aborted) {
            grace = setTimeout(() => {
              child.stdout.destroy();
              child.stderr.destroy();
              finish(code, exitSignal);
            }, DRAIN_GRACE_MS);
          }
        });
        child.on("close", (code, exitSignal) => finish(code, exitSignal));
      });
    },
  };
}

import type { Bash, InMemoryFs } from "just-bash";
import { SandboxError } from "../ports/sandbox.ts";
import type { ExecResult } from "../ports/sandbox.ts";
import type { SandboxWorkerChannel } from "../ports/sandbox-worker.ts";
import { createShell, diffSnapshots, resolveDefenseInDepth, restoreSnapshot, runShell, takeSnapshot } from "./memory-fs.ts";
import type { FileChanges, VirtualSnapshot } from "./memory-fs.ts";

// The worker half of the virtual sandbox (src/sandbox/virtual-worker.ts holds the other half): it
// runs one command at a time over a copy of the thread's files it is sent with the command, and
// answers with the command's result and what it changed. The thread's files themselves stay on
// the gateway's thread.

export type HostRequest =
  | {
      id: number;
      op: "exec";
      command: string;
      /** Already resolved and checked by the sender. */
      cwd: string;
      timeoutMs: number;
      defenseInDepth: boolean | undefined;
      /**
       * The thread's files under the roots as the command starts (a "copy" snapshot); undefined
       * when they are what the previous command left here (the sender applied its changes and
       * nothing else changed since).
       */
      files: VirtualSnapshot | undefined;
      /** First command for this sandbox: start from a new file system (nothing of an earlier sandbox's outside the roots). */
      fresh: boolean;
    }
  | { id: number; op: "abort"; target: number };

export interface ExecAnswer {
  result: ExecResult;
  changes: FileChanges;
}

/** How an error crosses the channel: SandboxErrors keep their code. */
export interface WireError {
  sandboxCode?: SandboxError["code"];
  message: string;
}

export type HostReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: WireError };

/** Posted once, when the host listens: earlier messages could be lost on a Web Worker. */
export const HOST_READY = { ready: true } as const;

function toWire(error: unknown): WireError {
  if (error instanceof SandboxError) return { sandboxCode: error.code, message: error.message };
  return { message: String((error as Error)?.message ?? error) };
}

/** How long the host waits with no command in flight before it asks its runtime to collect (channel.reclaimMemory). */
export const HOST_RECLAIM_AFTER_IDLE_MS = 2000;

/** Serves one sandbox at a time over `channel` until the worker is terminated. */
export function serveVirtualSandboxHost(channel: SandboxWorkerChannel): void {
  /**
   * The file system and shell of the sandbox this worker serves: kept from one command to the
   * next (so what a command leaves outside the roots, /tmp say, is there for the next, as on the
   * gateway's thread), the roots replaced by each command's copy.
   */
  let current: { fs: InMemoryFs; bash: Bash; defense: boolean; files: VirtualSnapshot } | undefined;
  const running = new Map<number, AbortController>();

  async function exec(request: Extract<HostRequest, { op: "exec" }>): Promise<ExecAnswer> {
    const defense = await resolveDefenseInDepth(request.defenseInDepth);
    const { files } = request;
    // The copy is this worker's own (structured-cloned): its buffers become the files, so the diff
    // afterwards recognises an untouched file by its buffer instead of comparing bytes.
    if (files === undefined) {
      if (request.fresh || !current || current.defense !== defense) {
        throw new SandboxError("sandbox_unavailable", "The sandbox's worker was sent a command without the thread's files. Run it again.");
      }
    } else if (request.fresh || !current || current.defense !== defense) {
      const fs = await restoreSnapshot(files, "(the command's copy)", { adopt: true });
      current = { fs, bash: await createShell(fs, defense), defense, files };
    } else {
      await restoreSnapshot(files, "(the command's copy)", { into: current.fs, replace: true, adopt: true });
      current.files = files;
    }
    const sandbox = current;
    const controller = new AbortController();
    running.set(request.id, controller);
    try {
      const result = await runShell(sandbox.bash, request.command, { cwd: request.cwd, timeoutMs: request.timeoutMs, signal: controller.signal });
      const after = await takeSnapshot(sandbox.fs, "copy");
      const changes = diffSnapshots(sandbox.files, after);
      // What the next command starts from when it comes without a copy.
      sandbox.files = after;
      return { result, changes };
    } finally {
      running.delete(request.id);
    }
  }

  let reclaimTimer: ReturnType<typeof setTimeout> | undefined;
  /** A command settled: once nothing else ran for a while, the worker's garbage goes. */
  const settled = (): void => {
    if (!channel.reclaimMemory || running.size > 0) return;
    clearTimeout(reclaimTimer);
    reclaimTimer = setTimeout(() => {
      try {
        channel.reclaimMemory?.();
      } catch {
        // A hint: a runtime that refuses it changes nothing for the commands.
      }
    }, HOST_RECLAIM_AFTER_IDLE_MS);
  };

  channel.onMessage((message) => {
    const request = message as HostRequest;
    if (request.op === "abort") {
      running.get(request.target)?.abort();
      return;
    }
    clearTimeout(reclaimTimer);
    void exec(request)
      .then(
        (value) => channel.postMessage({ id: request.id, ok: true, value } satisfies HostReply),
        (error: unknown) => channel.postMessage({ id: request.id, ok: false, error: toWire(error) } satisfies HostReply),
      )
      .finally(settled);
  });
  channel.postMessage(HOST_READY);
}

import type { Bash, InMemoryFs } from "just-bash";
import { SandboxError } from "../ports/sandbox.ts";
import type { SandboxWorkerChannel } from "../ports/sandbox-worker.ts";
import { SandboxFileOps } from "./file-ops.ts";
import type { FileBackend } from "./file-ops.ts";
import { createShell, memoryBackend, resolveDefenseInDepth, restoreSnapshot, runShell, takeSnapshot } from "./memory-fs.ts";
import type { VirtualSnapshot } from "./memory-fs.ts";

// The worker half of the virtual sandbox: one thread's InMemoryFs and its just-bash shell, driven
// by messages from the gateway's thread (src/sandbox/virtual-worker.ts holds the other half).

/** The FileBackend calls that cross the channel (the rest are pure and run where they are called). */
export const REMOTE_FILE_CALLS = [
  "realpath",
  "lstat",
  "stat",
  "readdir",
  "readText",
  "readBytes",
  "writeText",
  "appendText",
  "writeBytes",
  "unlink",
  "mkdirp",
] as const;
export type RemoteFileCall = (typeof REMOTE_FILE_CALLS)[number];

export type HostRequest =
  | { id: number; op: "open"; snapshot: unknown; key: string; defenseInDepth: boolean | undefined }
  /** `cwd` as the caller named it: resolved and checked here, saving the round trips. */
  | { id: number; op: "exec"; command: string; cwd: string; timeoutMs: number }
  | { id: number; op: "abort"; target: number }
  | { id: number; op: "file"; call: RemoteFileCall; args: unknown[] }
  | { id: number; op: "snapshot" };

/** How an error crosses the channel: SandboxErrors keep their code, others the backend's errno. */
export interface WireError {
  sandboxCode?: SandboxError["code"];
  errno?: string;
  message: string;
}

export type HostReply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: WireError }
  /** Sent before a command starts: the thread's files as they are, to come back to if it is stopped. */
  | { id: number; checkpoint: VirtualSnapshot };

/** Posted once, when the host listens: earlier messages could be lost on a Web Worker. */
export const HOST_READY = { ready: true } as const;

function toWire(error: unknown, backend: FileBackend | undefined): WireError {
  if (error instanceof SandboxError) return { sandboxCode: error.code, message: error.message };
  const message = String((error as Error)?.message ?? error);
  const errno = backend?.errorCode(error);
  return errno === undefined ? { message } : { errno, message };
}

/** Serves one sandbox over `channel` until the worker is terminated. */
export function serveVirtualSandboxHost(channel: SandboxWorkerChannel): void {
  let fs: InMemoryFs | undefined;
  let bash: Bash | undefined;
  let backend: FileBackend | undefined;
  const running = new Map<number, AbortController>();

  const opened = (): { fs: InMemoryFs; bash: Bash; backend: FileBackend } => {
    if (!fs || !bash || !backend) throw new SandboxError("sandbox_unavailable", "The sandbox worker was asked to work before it was opened.");
    return { fs, bash, backend };
  };

  async function handle(request: HostRequest): Promise<unknown> {
    switch (request.op) {
      case "open": {
        const defense = await resolveDefenseInDepth(request.defenseInDepth);
        fs = await restoreSnapshot(request.snapshot, request.key);
        bash = createShell(fs, defense);
        backend = memoryBackend(fs);
        return null;
      }
      case "exec": {
        const current = opened();
        const { virtual: cwd } = await new SandboxFileOps(current.backend).workingDirectory(request.cwd);
        channel.postMessage({ id: request.id, checkpoint: await takeSnapshot(current.fs, "checkpoint") } satisfies HostReply);
        const controller = new AbortController();
        running.set(request.id, controller);
        try {
          return await runShell(current.bash, request.command, { cwd, timeoutMs: request.timeoutMs, signal: controller.signal });
        } finally {
          running.delete(request.id);
        }
      }
      case "abort":
        running.get(request.target)?.abort();
        return undefined;
      case "file": {
        const current = opened();
        if (!REMOTE_FILE_CALLS.includes(request.call)) throw new Error(`Unknown file call ${String(request.call)}`);
        const call = current.backend[request.call] as (...args: unknown[]) => Promise<unknown>;
        return (await call(...request.args)) ?? null;
      }
      case "snapshot":
        return takeSnapshot(opened().fs);
    }
  }

  channel.onMessage((message) => {
    const request = message as HostRequest;
    void handle(request).then(
      (value) => {
        if (request.op !== "abort") channel.postMessage({ id: request.id, ok: true, value } satisfies HostReply);
      },
      (error: unknown) => {
        if (request.op !== "abort") channel.postMessage({ id: request.id, ok: false, error: toWire(error, backend) } satisfies HostReply);
      },
    );
  });
  channel.postMessage(HOST_READY);
}

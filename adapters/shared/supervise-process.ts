import type { ProcessResult } from "../../src/ports/runtime-ports.ts";

/** A started child, as Deno.Command and Bun.spawn both describe it. */
export interface SpawnedProcess {
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  /** Resolves with the exit code; a child killed by a signal reports 128 + its number. */
  readonly exited: Promise<number>;
  /** Kills the child and everything it started (its process group). Must not throw. */
  kill(): void;
}

/**
 * The `kill` of a SpawnedProcess for a child started `detached` (its own process group): SIGKILL to
 * the whole group through `killPid(-pid)`, else to the child alone; never throws.
 */
export function groupKiller(
  child: { readonly pid: number; kill(signal: "SIGKILL"): void },
  ownGroup: boolean,
  killPid: (pid: number, signal: "SIGKILL") => void,
): () => void {
  return () => {
    try {
      if (ownGroup) killPid(-child.pid, "SIGKILL");
      else child.kill("SIGKILL");
    } catch {
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
    }
  };
}

/** How long the pipes may stay open after a killed child exited (a grandchild that left the group). */
const DRAIN_GRACE_MS = 1_000;
const MAX_TIMER_MS = 2_147_483_647;

function drain(stream: ReadableStream<Uint8Array>): { done: Promise<Uint8Array[]>; cancel(): void } {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  const done = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        chunks.push(value);
      }
    } catch {
      // cancelled or the pipe broke: keep what arrived
    }
    return chunks;
  })();
  return { done, cancel: () => void reader.cancel().catch(() => undefined) };
}

export function decodeChunks(chunks: readonly Uint8Array[]): string {
  const decoder = new TextDecoder();
  let text = "";
  for (const chunk of chunks) text += decoder.decode(chunk, { stream: true });
  return text + decoder.decode();
}

/**
 * Collects a child's output, kills its process group when the timeout passes (result `timedOut`)
 * or the signal aborts (rejects with the signal's reason).
 */
export async function superviseProcess(
  child: SpawnedProcess,
  options: { timeoutMs?: number; signal?: AbortSignal },
): Promise<ProcessResult> {
  let timedOut = false;
  let aborted = false;
  const { timeoutMs, signal } = options;
  const timer =
    timeoutMs !== undefined && timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS
      ? setTimeout(() => {
          timedOut = true;
          child.kill();
        }, timeoutMs)
      : undefined;
  const onAbort = () => {
    aborted = true;
    child.kill();
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) onAbort();
  const out = drain(child.stdout);
  const err = drain(child.stderr);
  try {
    const exitCode = await child.exited;
    if (timedOut || aborted) {
      let grace: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.all([out.done, err.done]),
        new Promise<void>((resolve) => (grace = setTimeout(resolve, DRAIN_GRACE_MS))),
      ]);
      clearTimeout(grace);
      out.cancel();
      err.cancel();
    }
    const [stdout, stderr] = await Promise.all([out.done, err.done]);
    if (aborted) throw signal?.reason ?? new DOMException("The operation was aborted.", "AbortError");
    return { stdout: decodeChunks(stdout), stderr: decodeChunks(stderr), exitCode, timedOut };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

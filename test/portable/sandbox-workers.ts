// This runtime's sandbox workers for portable tests: worker_threads on Node, Web Workers on Deno and Bun.
import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
export const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

export async function runtimeSandboxWorkers(): Promise<SandboxWorkerPort> {
  if (runtime === "node") return (await import("../../adapters/node/sandbox-worker.ts")).createNodeSandboxWorkers();
  return (await import("../../adapters/shared/web-sandbox-worker.ts")).createWebSandboxWorkers();
}

/**
 * A bash loop that never waits on anything: it holds whatever thread runs it. Each turn does some
 * work (a 5,000-line seq) so that the loop meets its timeout long before just-bash's own guard of
 * 100,000 commands (exit 126): a bare `i=$((i+1))` loop reaches that guard in about 0.5 s on Bun,
 * before a 500 ms timeout.
 */
export const RUNAWAY_LOOP = "while true; do seq 1 5000 > /dev/null; done";

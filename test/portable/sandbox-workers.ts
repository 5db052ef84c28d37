// This runtime's sandbox workers for portable tests: worker_threads on Node, Web Workers on Deno and Bun.
import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
export const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

export async function runtimeSandboxWorkers(): Promise<SandboxWorkerPort> {
  if (runtime === "node") return (await import("../../adapters/node/sandbox-worker.ts")).createNodeSandboxWorkers();
  return (await import("../../adapters/shared/web-sandbox-worker.ts")).createWebSandboxWorkers();
}

/** A bash loop that never waits on anything: it holds whatever thread runs it. */
export const RUNAWAY_LOOP = "i=0; while true; do i=$((i+1)); done";

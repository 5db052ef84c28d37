import { createBunProcessRunner } from "../../adapters/bun/process-runner.ts";
import { createDenoProcessRunner } from "../../adapters/deno/process-runner.ts";
import { createNodeProcessRunner } from "../../adapters/node/process-runner.ts";
import type { ProcessRunner } from "../../src/ports/runtime-ports.ts";

/** The runtime this test file runs on. */
export const runtime: "deno" | "bun" | "node" = (() => {
  const g = globalThis as { Deno?: unknown; Bun?: unknown };
  return g.Deno ? "deno" : g.Bun ? "bun" : "node";
})();

/** This runtime's own process runner (constructing one starts nothing). */
export function currentRunner(): ProcessRunner {
  if (runtime === "deno") return createDenoProcessRunner();
  if (runtime === "bun") return createBunProcessRunner();
  return createNodeProcessRunner();
}

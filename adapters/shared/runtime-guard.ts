import { DeerflowError } from "../../src/core/errors.ts";

/*
 * Each adapter entry (deerflow-edge/node, /deno, /bun) is written for one runtime: Deno's serve and
 * process runner need the Deno global, Bun's need Bun, and Node's would run on Bun or Deno with
 * the wrong server underneath. The entry's first import checks, so the mistake is one sentence at
 * import time instead of a TypeError deep inside the first request.
 */

export type RuntimeName = "node" | "deno" | "bun";

const LABEL: Readonly<Record<RuntimeName, string>> = { node: "Node", deno: "Deno", bun: "Bun" };

/** Which of the three runtimes runs this code (Deno and Bun also carry process.versions.node). */
export function currentRuntime(): RuntimeName {
  const scope = globalThis as { Deno?: unknown; Bun?: unknown };
  if (scope.Deno !== undefined) return "deno";
  if (scope.Bun !== undefined) return "bun";
  return "node";
}

/** Throws `wrong_runtime` unless `expected` runs this code, naming the entry to import instead. */
export function requireRuntime(expected: RuntimeName, actual: RuntimeName = currentRuntime()): void {
  if (actual === expected) return;
  throw new DeerflowError(
    "wrong_runtime",
    `deerflow-edge/${expected} runs on ${LABEL[expected]}, but this is ${LABEL[actual]}: import deerflow-edge/${actual} instead.`,
    { details: { expected, actual } },
  );
}

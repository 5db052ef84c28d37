// Each adapter entry (deerflow-edge/node, /deno, /bun) loads on its own runtime and refuses the
// other two at import time with one sentence naming the entry to import instead. Runs under Node,
// Deno and Bun (scripts/test-all.sh); the installed-package test checks the same from the tarball.
import { describe, expect, it } from "vitest";
import { currentRuntime, requireRuntime, type RuntimeName } from "../../adapters/shared/runtime-guard.ts";

const runtime = currentRuntime();
const entries: Record<RuntimeName, () => Promise<Record<string, unknown>>> = {
  node: () => import("../../adapters/node/index.ts"),
  deno: () => import("../../adapters/deno/index.ts"),
  bun: () => import("../../adapters/bun/index.ts"),
};
const LABEL: Record<RuntimeName, string> = { node: "Node", deno: "Deno", bun: "Bun" };
const SERVE: Record<RuntimeName, string> = { node: "serveNode", deno: "serveDeno", bun: "serveBun" };

describe(`the adapter entries on ${runtime}`, () => {
  it("knows which runtime runs it", () => {
    const g = globalThis as { Deno?: unknown; Bun?: unknown };
    expect(runtime).toBe(g.Deno ? "deno" : g.Bun ? "bun" : "node");
  });

  it(`loads deerflow-edge/${runtime} with its server`, async () => {
    expect(typeof (await entries[runtime]())[SERVE[runtime]]).toBe("function");
  });

  for (const other of (["node", "deno", "bun"] as const).filter((name) => name !== runtime)) {
    it(`refuses deerflow-edge/${other} at import time, naming deerflow-edge/${runtime}`, async () => {
      const error = await entries[other]().then(() => undefined, (thrown: unknown) => thrown as { code?: string; message?: string });
      expect(error?.code).toBe("wrong_runtime");
      expect(error?.message).toBe(`deerflow-edge/${other} runs on ${LABEL[other]}, but this is ${LABEL[runtime]}: import deerflow-edge/${runtime} instead.`);
    });
  }

  it("names both runtimes for any pair", () => {
    expect(() => requireRuntime("bun", "deno")).toThrow("deerflow-edge/bun runs on Bun, but this is Deno: import deerflow-edge/deno instead.");
    expect(() => requireRuntime("node", "node")).not.toThrow();
  });
});

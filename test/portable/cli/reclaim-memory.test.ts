// The CLIs' ReclaimMemory (adapters/shared/v8-memory.ts for Node and Deno, adapters/bun/memory.ts
// for Bun): a full collection on demand, in a process started without --expose-gc, as `npm start`
// is. This file runs under each runtime in turn and checks the reclaim that runtime's CLI wires.
// Asserted through a WeakRef, not through timings.
import { describe, expect, it } from "vitest";

/** The reclaim the CLI of the runtime running this file passes as its ReclaimMemory port. */
async function runtimeReclaim(): Promise<{ runtime: string; module: string; reclaim: () => void }> {
  const globals = globalThis as { Deno?: unknown; Bun?: unknown };
  // Imported on demand: the Bun one calls Bun's own global.
  if (globals.Bun) return { runtime: "bun", module: "adapters/bun/memory.ts", reclaim: (await import("../../../adapters/bun/memory.ts")).reclaimBunMemory };
  const { reclaimV8Memory } = await import("../../../adapters/shared/v8-memory.ts");
  return { runtime: globals.Deno ? "deno" : "node", module: "adapters/shared/v8-memory.ts", reclaim: reclaimV8Memory };
}

const { runtime, module, reclaim } = await runtimeReclaim();

/** Lets the WeakRef's target go: a WeakRef keeps it alive until the current job ends. */
const nextTask = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

describe(`the CLI's reclaim on ${runtime} (${module})`, () => {
  it("collects an object nothing references any more, without --expose-gc", async () => {
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe("undefined");
    let ref: WeakRef<object> | undefined;
    (() => {
      ref = new WeakRef({ frames: new Array(10_000).fill("frame") });
    })();
    await nextTask();
    expect(ref!.deref()).toBeDefined();
    // deref() keeps its target alive until the current job ends.
    await nextTask();
    reclaim();
    await nextTask();
    expect(ref!.deref()).toBeUndefined();
  });
});

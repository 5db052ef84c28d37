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
    // The precondition: the object is still there a task later, so what takes it below is the
    // reclaim. A collection the runtime makes on its own may take it first (seen once on Deno);
    // then a fresh object is tried. Holding it strongly until the check is no way out: on Bun,
    // JSC's conservative stack scan then keeps it past the reclaim.
    let ref: WeakRef<object> | undefined;
    let alive = false;
    for (let attempt = 0; attempt < 5 && !alive; attempt++) {
      (() => {
        ref = new WeakRef({ frames: new Array(10_000).fill("frame") });
      })();
      await nextTask();
      alive = ref!.deref() !== undefined;
    }
    expect(alive, "the runtime collected each of 5 fresh objects on its own within one task").toBe(true);
    // deref() keeps its target alive until the current job ends.
    await nextTask();
    reclaim();
    await nextTask();
    expect(ref!.deref()).toBeUndefined();
  });

  // Bun only (registered only there: V8's reclaim keeps compiled code): what stays after a burst on
  // Bun is mostly native, much of it the code JSC compiled for the burst, which a collection keeps.
  if (runtime === "bun") {
    it("drops the code JSC compiled, as Bun.shrink() does, once the current job ends", async () => {
      const jsc = (await import("bun:jsc" as string)) as { numberOfDFGCompiles(fn: Function): number; optimizeNextInvocation(fn: Function): void };
      const hot = (n: number): number => {
        let sum = 0;
        for (let i = 0; i < n; i++) sum += i * 2;
        return sum;
      };
      for (let i = 0; i < 2_000; i++) hot(100);
      jsc.optimizeNextInvocation(hot);
      for (let i = 0; i < 20_000; i++) hot(100);
      expect(jsc.numberOfDFGCompiles(hot)).toBeGreaterThan(0);
      reclaim();
      await nextTask();
      expect(jsc.numberOfDFGCompiles(hot)).toBe(0);
    });
  }
});

// The Node CLI's ReclaimMemory (adapters/node/memory.ts): a full collection on demand, in a process
// started without --expose-gc, as `npm start` is. Asserted through a WeakRef, not through timings.
import { describe, expect, it } from "vitest";
import { reclaimNodeMemory } from "../../adapters/node/memory.ts";

/** Lets the WeakRef's target go: a WeakRef keeps it alive until the current job ends. */
const nextTask = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

describe("adapters/node reclaimNodeMemory", () => {
  it("collects an object nothing references any more, without --expose-gc", async () => {
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe("undefined");
    let ref: WeakRef<object> | undefined;
    (() => {
      ref = new WeakRef({ frames: new Array(10_000).fill("frame") });
    })();
    await nextTask();
    expect(ref!.deref()).toBeDefined();
    reclaimNodeMemory();
    await nextTask();
    reclaimNodeMemory();
    expect(ref!.deref()).toBeUndefined();
  });
});

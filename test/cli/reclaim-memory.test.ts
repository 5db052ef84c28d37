// The CLIs' ReclaimMemory (adapters/node/memory.ts, adapters/bun/memory.ts): a full collection on
// demand, on Node in a process started without --expose-gc, as `npm start` is. Asserted through a
// WeakRef, not through timings.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { reclaimNodeMemory } from "../../adapters/node/memory.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

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

describe("adapters/bun reclaimBunMemory", () => {
  it("collects an object nothing references any more (in a Bun child process)", () => {
    const script = `
      import { reclaimBunMemory } from "./adapters/bun/memory.ts";
      let ref;
      (() => { ref = new WeakRef({ frames: new Array(10000).fill("frame") }); })();
      await new Promise((r) => setTimeout(r, 0));
      const before = ref.deref() !== undefined;
      reclaimBunMemory();
      await new Promise((r) => setTimeout(r, 0));
      console.log(JSON.stringify({ before, after: ref.deref() !== undefined }));
    `;
    const out = execFileSync(`${ROOT}node_modules/.bin/bun`, ["-e", script], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
    expect(JSON.parse(out.trim().split("\n").at(-1)!)).toEqual({ before: true, after: false });
  });
});

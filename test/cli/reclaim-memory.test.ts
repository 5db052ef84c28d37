// The CLIs' ReclaimMemory (adapters/shared/v8-memory.ts for Node and Deno,
// adapters/bun/memory.ts): a full collection on
// demand, on Node in a process started without --expose-gc, as `npm start` is. Asserted through a
// WeakRef, not through timings.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { reclaimV8Memory } from "../../adapters/shared/v8-memory.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Lets the WeakRef's target go: a WeakRef keeps it alive until the current job ends. */
const nextTask = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

describe("adapters/shared reclaimV8Memory (Node)", () => {
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
    reclaimV8Memory();
    await nextTask();
    expect(ref!.deref()).toBeUndefined();
  });
});

/** Runs `reclaim` (exported by `module`) in a child runtime on a WeakRef's target; whether it was alive before and after. */
function inChild(command: string, args: readonly string[], module: string, reclaim: string): unknown {
  const script = `
    import { ${reclaim} } from ${JSON.stringify(new URL(module, `file://${ROOT}`).href)};
    let ref;
    (() => { ref = new WeakRef({ frames: new Array(10000).fill("frame") }); })();
    await new Promise((r) => setTimeout(r, 0));
    const before = ref.deref() !== undefined;
    // deref() keeps its target alive until the current job ends.
    await new Promise((r) => setTimeout(r, 0));
    ${reclaim}();
    await new Promise((r) => setTimeout(r, 0));
    console.log(JSON.stringify({ before, after: ref.deref() !== undefined }));
  `;
  const out = execFileSync(`${ROOT}node_modules/.bin/${command}`, [...args, script], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

describe("the other runtimes' reclaim, each in a child process of its own", () => {
  it("Deno (adapters/shared/v8-memory.ts): collects an object nothing references any more, without --expose-gc", () => {
    expect(inChild("deno", ["eval"], "adapters/shared/v8-memory.ts", "reclaimV8Memory")).toEqual({ before: true, after: false });
  });
  it("Bun (adapters/bun/memory.ts): collects an object nothing references any more", () => {
    expect(inChild("bun", ["-e"], "adapters/bun/memory.ts", "reclaimBunMemory")).toEqual({ before: true, after: false });
  });
});

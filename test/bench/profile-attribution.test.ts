// bench/profile-attribution.ts: how bench/profile.ts puts a CPU profile's samples in categories
// (issue 18 point 2: "per demo run, the CPU in chain hooks, in checkpoint serialisation, in
// storage writes ..., in the sandbox ..., in SSE framing; from a profile ... summarised as JSON fields").
import { describe, expect, it } from "vitest";
import { attributeProfile, categoryOfLocation, scriptLocation, type CpuProfile, type ProfileNode } from "../../bench/profile-attribution.ts";

const ROOT = "file:///repo/";

const frame = (id: number, functionName: string, url: string, children: number[] = []): ProfileNode => ({
  id,
  callFrame: { functionName, url, lineNumber: 9, columnNumber: 0 },
  children,
});

// (root)
// ├─ (garbage collector) 2   ├─ (program) 3   ├─ (idle) 4
// ├─ dispatch hono 5 ─ beforeModel src/middlewares 6 ─ stringify (native) 7
// │                  └─ handler src/gateway/routes 8 ─ formatSseFrame src/gateway/sse.ts 9
// └─ processTicksAndRejections node:internal 10 ─ helper https://cdn 11 ─ (anonymous) (native) 12
//                                                                    └─ hasOwnProperty (native) 13
const nodes: ProfileNode[] = [
  frame(1, "(root)", "", [2, 3, 4, 5, 10]),
  frame(2, "(garbage collector)", ""),
  frame(3, "(program)", ""),
  frame(4, "(idle)", ""),
  frame(5, "dispatch", "file:///elsewhere/node_modules/hono/dist/hono-base.js", [6, 8]),
  frame(6, "beforeModel", "file:///repo/src/middlewares/title.ts", [7]),
  frame(7, "stringify", ""),
  frame(8, "handler", "file:///repo/src/gateway/routes/runs.ts", [9]),
  frame(9, "formatSseFrame", "file:///repo/src/gateway/sse.ts"),
  frame(10, "processTicksAndRejections", "node:internal/process/task_queues", [11]),
  frame(11, "helper", "https://cdn.example/helper.js", [12, 13]),
  frame(12, "", ""),
  frame(13, "hasOwnProperty", ""),
];

function profileOf(samples: Array<[node: number, deltaUs: number]>): CpuProfile {
  return { nodes, startTime: 0, endTime: 1e6, samples: samples.map(([n]) => n), timeDeltas: samples.map(([, d]) => d) };
}

const attribute = (samples: Array<[number, number]>) => attributeProfile(profileOf(samples), { root: ROOT });
/** Samples of the given nodes, 100 µs apart. */
const evenly = (...sampled: number[]) => attribute(sampled.map((n): [number, number] => [n, 100]));

describe("profile attribution (issue 18 point 2)", () => {
  it("a sample goes to the first frame from the leaf toward the root that a rule claims", () => {
    // A native leaf under a middleware hook under Hono: the hook's category, not Hono's.
    const result = evenly(7, 7, 9, 5);
    expect(result.cpu_ms.chain_hooks).toBe(0.2);
    expect(result.cpu_ms.sse).toBe(0.1); // src/gateway/sse.ts before the rest of src/gateway/
    expect(result.cpu_ms.http).toBe(0.1); // Hono itself, through a symlinked node_modules
    expect(result.top.chain_hooks).toEqual([{ self: "stringify (native)", via: "beforeModel src/middlewares/title.ts:10", ms: 0.2 }]);
    expect(result.top.sse).toEqual([{ self: "formatSseFrame src/gateway/sse.ts:10", ms: 0.1 }]);
  });

  it("the special nodes: (garbage collector) and (program) are gc, (idle) is not CPU", () => {
    const result = evenly(2, 3, 3, 4, 4, 4);
    expect(result.cpu_ms.gc).toBe(0.3);
    expect(result.special_ms).toEqual({ garbage_collector: 0.1, program: 0.2, idle: 0.3 });
    expect(Object.values(result.cpu_ms).reduce((a, b) => a + b, 0)).toBeCloseTo(0.3, 9);
  });

  it("a sample no frame of which a rule claims (runtime internals, unknown urls, native code) is other", () => {
    // 13: a native function named like an Object.prototype member is no special node.
    const result = evenly(12, 11, 10, 13);
    expect(result.cpu_ms.other).toBe(0.4);
    expect(result.cpu_ms.gc).toBe(0);
    expect(result.top.other.map((f) => f.self)).toEqual([
      "(anonymous) (native)",
      "helper https://cdn.example/helper.js:10",
      "processTicksAndRejections node:internal/process/task_queues:10",
      "hasOwnProperty (native)",
    ]);
  });

  it("a sample weighs its time delta, at most twice the median (Bun's deltas span idle gaps)", () => {
    const result = attribute([
      [7, 100],
      [7, 100],
      [9, 100],
      [9, 5000],
    ]);
    expect(result.sample_cap_ms).toBe(0.2);
    expect(result.cpu_ms.sse).toBe(0.3);
  });

  it("the sandbox's CPU by phase (\"in the sandbox (start, commands, save)\"): the first frame from the leaf a phase rule claims", () => {
    const JB = "file:///repo/node_modules/just-bash/dist/bundle/index.js";
    const sandboxNodes: ProfileNode[] = [
      frame(1, "(root)", "", [2, 7, 8, 10]),
      frame(2, "runSandboxTool", "file:///repo/src/tools/sandbox/run.ts", [3, 5]),
      frame(3, "createShell", "file:///repo/src/sandbox/memory-fs.ts", [4]),
      frame(4, "writeFileSync", JB),
      frame(5, "exec", "file:///repo/src/sandbox/virtual.ts", [6]),
      frame(6, "writeFileSync", JB), // a command writing a file is still the command
      frame(7, "o", JB), // an async continuation inside just-bash: no caller of ours
      frame(8, "save", "file:///repo/src/sandbox/virtual.ts", [9]),
      frame(9, "takeSnapshot", "file:///repo/src/sandbox/memory-fs.ts"),
      frame(10, "writeFile", "file:///repo/src/sandbox/file-ops.ts"),
    ];
    const profile: CpuProfile = { nodes: sandboxNodes, startTime: 0, endTime: 1, samples: [4, 4, 6, 7, 9, 9, 9, 10], timeDeltas: Array(8).fill(100) };
    const result = attributeProfile(profile, { root: ROOT });
    expect(result.cpu_ms.sandbox).toBe(0.8);
    expect(result.sandbox_ms).toEqual({ start: 0.2, commands: 0.1, files: 0.1, save: 0.3, unattributed: 0.1 });
  });

  it("finds parents through `parent` as well as `children`", () => {
    const flat: CpuProfile = {
      nodes: [
        { id: 1, callFrame: { functionName: "(root)", url: "" } },
        { id: 2, callFrame: { functionName: "put", url: "/repo/src/runtime/kv-checkpointer.ts" }, parent: 1 },
        { id: 3, callFrame: { functionName: "stringify", url: "" }, parent: 2 },
      ],
      startTime: 0,
      endTime: 1,
      samples: [3],
      timeDeltas: [50],
    };
    expect(attributeProfile(flat, { root: "/repo" }).cpu_ms.checkpoint_serde).toBe(0.05);
  });

  it("script locations: file urls, plain paths, the last node_modules, query strings", () => {
    expect(scriptLocation("file:///repo/src/engine/agent.ts?tsx=1", ROOT)).toBe("src/engine/agent.ts");
    expect(scriptLocation("/repo/bench/profile.ts", "/repo")).toBe("bench/profile.ts");
    expect(scriptLocation("file:///main/node_modules/a/node_modules/unstorage/dist/index.mjs", ROOT)).toBe("node_modules/unstorage/dist/index.mjs");
    expect(scriptLocation("node:internal/async_hooks", ROOT)).toBe("node:internal/async_hooks");
    expect(categoryOfLocation("node_modules/@langchain/langgraph-checkpoint/dist/serde/jsonplus.js")).toBe("checkpoint_serde");
    expect(categoryOfLocation("node_modules/@langchain/langgraph/dist/pregel/algo.js")).toBe("engine");
    expect(categoryOfLocation("src/runtime/serialize.ts")).toBe("sse");
    expect(categoryOfLocation("src/runtime/runs/worker.ts")).toBe("runs");
    expect(categoryOfLocation("src/gateway/sse.tsx")).toBe("http");
    expect(categoryOfLocation("node_modules/@langchain/core/dist/messages/ai.js")).toBeUndefined();
  });

  it("bad input: a clear error naming what was wrong", () => {
    expect(() => attributeProfile({ ...profileOf([[7, 1]]), timeDeltas: [] }, { root: ROOT })).toThrow("the profile has 1 samples but 0 timeDeltas");
    expect(() => attribute([[99, 1]])).toThrow("sample 0 names node 99, which the profile does not have");
  });
});

// bench/quick-goals.ts: the goals `npm run bench:quick` prints (issue 18, "Goals" and
// "Regression guard": "a short bench mode ... that prints the ratios above with their goals").
import { describe, expect, it } from "vitest";
import { evaluateGoals, parseLines } from "../../bench/quick-goals.ts";

const load = { start: 0.5, end: 0.7 };

function chain(checkpointer: string, ratio: number) {
  return { bench: "chain-overhead", summary: true, runtime: "node", checkpointer, only: "lead", bare_step_ms: 0.4, lead_chain_step_ms: 0.4 * ratio, lead_chain_step_time_vs_bare: ratio, lead_chain_step_time_vs_bare_paired: ratio, load_avg_1m: load };
}

const storage = (writes: number) => ({ bench: "storage-writes", summary: true, runtime: { runtime: "node", version: "20" }, runs: 5, per_run: { writes, bytes: 12_345 }, load_avg_1m: load });

function gateway(ratio10: number, ratio50: number, p99Ratio: number, heap: number, fair: { lead50?: number; overhead50?: number } = {}) {
  return {
    bench: "gateway",
    summary: true,
    runtime: "node",
    baseline: { server: "@langchain/langgraph-api 1.5.1", runtime: "node" },
    by_clients: {
      "10": { runs_per_s: 20 * ratio10, lgapi_runs_per_s: 20, ratio_runs_per_s: ratio10, first_frame_ms_p99: 50, lgapi_first_frame_ms_p99: 100, ratio_first_frame_ms_p99: 0.5 },
      "50": {
        runs_per_s: 20 * ratio50,
        lgapi_runs_per_s: 20,
        ratio_runs_per_s: ratio50,
        first_frame_ms_p99: 100 * p99Ratio,
        lgapi_first_frame_ms_p99: 100,
        ratio_first_frame_ms_p99: p99Ratio,
        ...(fair.lead50 === undefined ? {} : { lgapi_lead_runs_per_s: 10, ratio_runs_per_s_vs_lgapi_lead: fair.lead50 }),
        ...(fair.overhead50 === undefined ? {} : { in_process_runs_per_s: 20 * ratio50 * fair.overhead50, gateway_overhead_vs_in_process: fair.overhead50 }),
      },
    },
    idle_thread_memory: { threads: 20, heap_per_thread_bytes: heap, heap_per_thread_bytes_just_finished: 3 * heap, lgapi_heap_per_thread_bytes: 27_000, ratio_heap_per_thread: heap / 27_000 },
    load_avg_1m: load,
  };
}

const byName = (records: ReturnType<typeof evaluateGoals>) => Object.fromEntries(records.map((r) => [`${r.name}${r["checkpointer"] ? `/${r["checkpointer"]}` : ""}${r["clients"] ? `@${r["clients"]}` : ""}`, r]));

describe("bench:quick goals (issue 18)", () => {
  it("the full lead chain per model step at most 1.5x the bare engine; storage writes per demo run halved (59 today), with bytes written reported", () => {
    const goals = byName(evaluateGoals([chain("none", 1.4), chain("memory", 1.6), storage(29), gateway(2, 2, 0.5, 27 * 1024)]));
    expect(goals["lead_chain_step_time_vs_bare/none"]).toMatchObject({ value: 1.4, goal: "<= 1.5", met: true, load_avg_1m: load });
    expect(goals["lead_chain_step_time_vs_bare/memory"]).toMatchObject({ value: 1.6, met: false });
    // "at most": the goal itself is met.
    expect(evaluateGoals([chain("none", 1.5)])[0]).toMatchObject({ value: 1.5, met: true });
    expect(goals["storage_writes_per_run"]).toMatchObject({ value: 29, goal: "<= 29.5", baseline: 59, met: true, bytes_per_run: 12_345 });
    expect(byName(evaluateGoals([storage(30)]))["storage_writes_per_run"]).toMatchObject({ met: false });
  });

  it("gateway runs/s at 10 and 50 clients at least 2x langgraph-api serving the same graph, and ahead of it serving its own bare graph; first frame p99 at 50 clients at most half of langgraph-api's", () => {
    const goals = byName(evaluateGoals([gateway(1.1, 0.9, 0.6, 1000, { lead50: 1.9 })]));
    expect(goals["runs_per_s_vs_lgapi@10"]).toMatchObject({ value: 1.1, goal: ">= 1", met: true });
    expect(goals["runs_per_s_vs_lgapi@50"]).toMatchObject({ value: 0.9, met: false });
    expect(goals["runs_per_s_vs_lgapi_lead@50"]).toMatchObject({ value: 1.9, goal: ">= 2", met: false });
    expect(goals["runs_per_s_vs_lgapi_lead@10"]).toMatchObject({ value: null, met: null, missing: "not measured (BENCH_GATEWAY_FAIR=0)" });
    expect(byName(evaluateGoals([gateway(1, 1, 1, 1, { lead50: 2 })]))["runs_per_s_vs_lgapi_lead@50"]).toMatchObject({ met: true });
    expect(goals["first_frame_p99_vs_lgapi@50"]).toMatchObject({ value: 0.6, goal: "<= 0.5", met: false });
  });

  it("the gateway's overhead over the in-process agent at 50 clients at most 1.3x", () => {
    expect(byName(evaluateGoals([gateway(1, 1, 1, 1, { overhead50: 1.3 })]))["gateway_overhead_vs_in_process@50"]).toMatchObject({ value: 1.3, goal: "<= 1.3", met: true });
    expect(byName(evaluateGoals([gateway(1, 1, 1, 1, { overhead50: 1.4 })]))["gateway_overhead_vs_in_process@50"]).toMatchObject({ met: false, in_process_runs_per_s: 28 });
  });

  it("heap per idle thread at most 27 KB with memory storage (at most langgraph-api's), and at most 100 KB just after a run", () => {
    const goals = byName(evaluateGoals([gateway(2, 2, 0.5, 28 * 1024)]));
    expect(goals["heap_per_idle_thread_bytes"]).toMatchObject({ value: 28 * 1024, goal: `<= ${27 * 1024}`, met: false });
    expect(goals["heap_per_thread_just_finished_bytes"]).toMatchObject({ value: 84 * 1024, goal: `<= ${100 * 1024}`, met: true });
    expect(goals["heap_per_idle_thread_vs_lgapi"]).toMatchObject({ met: false });
  });

  it("a figure not measured is met: null and says why, never a pass", () => {
    const skipped = { ...gateway(3, 3, 0.1, 1), baseline: { skipped: "npm ci --prefix bench/lgapi exited 1" }, by_clients: { "10": { runs_per_s: 20 } } };
    const goals = byName(evaluateGoals([skipped], ["node"]));
    expect(goals["runs_per_s_vs_lgapi@10"]).toMatchObject({ value: null, met: null, missing: "langgraph-api baseline skipped: npm ci --prefix bench/lgapi exited 1" });
    expect(goals["runs_per_s_vs_lgapi_lead@10"]).toMatchObject({ value: null, met: null, missing: "langgraph-api baseline skipped: npm ci --prefix bench/lgapi exited 1" });
    const noMemory = byName(evaluateGoals([{ ...gateway(2, 2, 0.5, 1), idle_thread_memory: { threads: 0, heap_per_thread_bytes: null } }]));
    expect(noMemory["heap_per_idle_thread_bytes"]).toMatchObject({ value: null, met: null, missing: expect.stringContaining("BENCH_GATEWAY_IDLE_THREADS=0") });
    const bun = evaluateGoals([], ["bun"]);
    expect(bun.map((r) => [r.name, r.met, r.missing])).toEqual([
      ["lead_chain_step_time_vs_bare", null, "no chain-overhead summary on bun"],
      ["storage_writes_per_run", null, "no storage-writes summary on bun"],
      ["runs_per_s_vs_lgapi_lead", null, "no gateway summary on bun"],
    ]);
  });

  it("reads the JSON lines of a bench output and ignores the rest", () => {
    expect(parseLines('=== progress\n{"a":1}\n{broken\n{"b":2}\n')).toEqual([{ a: 1 }, { b: 2 }]);
  });
});

/**
 * The goals of issue 18 (performance), checked against the summary lines of one `npm run
 * bench:quick` run (scripts/bench.sh --quick: bench/chain-overhead.ts with BENCH_CHAIN_ONLY=lead,
 * bench/storage-writes.ts and bench/gateway.ts with short knobs). Pure: lines in, goal records out;
 * bench/quick.ts prints them.
 *
 * One record per goal and runtime (and per checkpointer or client count where the bench reports
 * several): the figure, its goal, `met` (true/false; null when the figure is missing, with `missing`
 * saying why), the baseline the issue measured where it gave one, and the 1-minute load average
 * of the bench that produced the figure (other processes on the machine show up in every timing).
 */

export type Comparison = "<=" | ">=";

export interface GoalRecord {
  readonly bench: "quick";
  readonly runtime: string;
  /** Which goal: the name of the figure. */
  readonly name: string;
  /** The bench the figure comes from. */
  readonly source: string;
  /** What the figure is, in a few words. */
  readonly what: string;
  readonly value: number | null;
  readonly goal: string;
  readonly met: boolean | null;
  readonly baseline?: number;
  readonly missing?: string;
  readonly load_avg_1m?: unknown;
  readonly [detail: string]: unknown;
}

/** The goals (issue 18, "Goals"), with the figure each is read from. */
export const GOALS = {
  leadChainVsBare: { op: "<=", limit: 1.5 },
  storageWritesPerRun: { op: "<=", limit: 59 / 2, baseline: 59 },
  /** "at least 2× langgraph-api serving the same graph" (our lead agent). */
  runsPerSecondVsLgapiLead: { op: ">=", limit: 2 },
  /** "and ahead of it serving its own bare graph". */
  runsPerSecondVsLgapi: { op: ">=", limit: 1 },
  firstFrameP99VsLgapi: { op: "<=", limit: 0.5 },
  gatewayOverheadVsInProcess: { op: "<=", limit: 1.3 },
  heapPerIdleThreadBytes: { op: "<=", limit: 27 * 1024 },
  heapPerThreadJustFinishedBytes: { op: "<=", limit: 100 * 1024 },
  heapPerIdleThreadVsLgapi: { op: "<=", limit: 1 },
} as const satisfies Record<string, { op: Comparison; limit: number; baseline?: number }>;

type Line = Record<string, any>;

const isNumber = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);

function record(
  runtime: string,
  source: string,
  name: string,
  what: string,
  goal: { op: Comparison; limit: number; baseline?: number },
  value: unknown,
  extra: Record<string, unknown> & { missing?: string } = {},
): GoalRecord {
  const figure = isNumber(value) ? value : null;
  const met = figure === null ? null : goal.op === "<=" ? figure <= goal.limit : figure >= goal.limit;
  return {
    bench: "quick",
    runtime,
    name,
    source,
    what,
    value: figure,
    goal: `${goal.op} ${goal.limit}`,
    met,
    ...(goal.baseline === undefined ? {} : { baseline: goal.baseline }),
    ...(figure === null && extra.missing === undefined ? { missing: `${source} reported no ${name}` } : {}),
    ...extra,
  };
}

const summaries = (lines: readonly Line[], bench: string, runtime: string): Line[] =>
  lines.filter((l) => l["bench"] === bench && l["summary"] === true && runtimeOf(l) === runtime);

/** storage-writes reports its runtime as {runtime, version}; the others as a string. */
function runtimeOf(line: Line): string | undefined {
  const r = line["runtime"];
  return typeof r === "string" ? r : typeof r?.runtime === "string" ? r.runtime : undefined;
}

function chainGoals(lines: readonly Line[], runtime: string): GoalRecord[] {
  const what = "full default lead chain ÷ bare engine, per-run time of one model step (medians)";
  const found = summaries(lines, "chain-overhead", runtime);
  if (found.length === 0) {
    return [record(runtime, "chain-overhead", "lead_chain_step_time_vs_bare", what, GOALS.leadChainVsBare, null, { missing: `no chain-overhead summary on ${runtime}` })];
  }
  return found.map((s) =>
    record(runtime, "chain-overhead", "lead_chain_step_time_vs_bare", what, GOALS.leadChainVsBare, s["lead_chain_step_time_vs_bare"], {
      checkpointer: s["checkpointer"],
      paired: s["lead_chain_step_time_vs_bare_paired"],
      bare_step_ms: s["bare_step_ms"],
      lead_chain_step_ms: s["lead_chain_step_ms"],
      load_avg_1m: s["load_avg_1m"],
    }),
  );
}

function storageGoals(lines: readonly Line[], runtime: string): GoalRecord[] {
  const what = "storage writes per demo run (mean; bytes written alongside)";
  const s = summaries(lines, "storage-writes", runtime).at(-1);
  if (s === undefined) {
    return [record(runtime, "storage-writes", "storage_writes_per_run", what, GOALS.storageWritesPerRun, null, { missing: `no storage-writes summary on ${runtime}` })];
  }
  return [
    record(runtime, "storage-writes", "storage_writes_per_run", what, GOALS.storageWritesPerRun, s["per_run"]?.["writes"], {
      bytes_per_run: s["per_run"]?.["bytes"] ?? null,
      runs: s["runs"],
      load_avg_1m: s["load_avg_1m"],
    }),
  ];
}

function gatewayGoals(lines: readonly Line[], runtime: string): GoalRecord[] {
  const s = summaries(lines, "gateway", runtime).at(-1);
  const runsWhat = (clients: string) => `gateway runs/s ÷ langgraph-api's serving its bare graph, at ${clients} clients`;
  const leadWhat = (clients: string) => `gateway runs/s ÷ langgraph-api's serving our lead agent, at ${clients} clients`;
  if (s === undefined) {
    return [record(runtime, "gateway", "runs_per_s_vs_lgapi_lead", leadWhat("10"), GOALS.runsPerSecondVsLgapiLead, null, { clients: 10, missing: `no gateway summary on ${runtime}` })];
  }
  const fairSkipped = "not measured (BENCH_GATEWAY_FAIR=0)";
  const load = { load_avg_1m: s["load_avg_1m"] };
  const skipped: string | undefined = s["baseline"]?.["skipped"];
  const noBaseline = skipped === undefined ? {} : { missing: `langgraph-api baseline skipped: ${skipped}` };
  const out: GoalRecord[] = [];
  for (const [clients, c] of Object.entries((s["by_clients"] ?? {}) as Record<string, Line>)) {
    if (clients === "1") continue; // the goals are at 10 and 50 clients
    const leadSkipped: string | undefined = s["lgapi_lead_skipped"];
    const leadMissing =
      skipped !== undefined
        ? noBaseline
        : leadSkipped !== undefined
          ? { missing: `langgraph-api serving our lead agent skipped: ${leadSkipped}` }
          : c["lgapi_lead_runs_per_s"] === undefined
            ? { missing: fairSkipped }
            : {};
    out.push(
      record(runtime, "gateway", "runs_per_s_vs_lgapi_lead", leadWhat(clients), GOALS.runsPerSecondVsLgapiLead, c["ratio_runs_per_s_vs_lgapi_lead"], {
        clients: Number(clients),
        runs_per_s: c["runs_per_s"],
        lgapi_lead_runs_per_s: c["lgapi_lead_runs_per_s"] ?? null,
        ...leadMissing,
        ...load,
      }),
      record(runtime, "gateway", "runs_per_s_vs_lgapi", runsWhat(clients), GOALS.runsPerSecondVsLgapi, c["ratio_runs_per_s"], {
        clients: Number(clients),
        runs_per_s: c["runs_per_s"],
        lgapi_runs_per_s: c["lgapi_runs_per_s"] ?? null,
        ...noBaseline,
        ...load,
      }),
    );
    if (clients === "50") {
      out.push(
        record(runtime, "gateway", "first_frame_p99_vs_lgapi", "gateway first-frame p99 ÷ langgraph-api's at 50 clients", GOALS.firstFrameP99VsLgapi, c["ratio_first_frame_ms_p99"], {
          clients: 50,
          first_frame_ms_p99: c["first_frame_ms_p99"],
          lgapi_first_frame_ms_p99: c["lgapi_first_frame_ms_p99"] ?? null,
          ...noBaseline,
          ...load,
        }),
        record(runtime, "gateway", "gateway_overhead_vs_in_process", "time per run through the gateway ÷ the same lead agent in-process (in-process runs/s ÷ gateway runs/s), at 50 clients", GOALS.gatewayOverheadVsInProcess, c["gateway_overhead_vs_in_process"], {
          clients: 50,
          runs_per_s: c["runs_per_s"],
          in_process_runs_per_s: c["in_process_runs_per_s"] ?? null,
          ...(c["in_process_runs_per_s"] === undefined ? { missing: fairSkipped } : {}),
          ...load,
        }),
      );
    }
  }
  const memory = (s["idle_thread_memory"] ?? {}) as Line;
  {
    const threads =
      isNumber(memory["threads"]) && memory["threads"] > 0
        ? { threads: memory["threads"] }
        : { threads: 0, missing: `not measured (BENCH_GATEWAY_IDLE_THREADS=0, the bench:quick default: its two waits for replay windows to close, BENCH_GATEWAY_IDLE_AFTER_SECONDS each, do not fit in 2 minutes); BENCH_GATEWAY_IDLE_THREADS=20 npm run bench:quick measures it` };
    out.push(
      record(runtime, "gateway", "heap_per_idle_thread_bytes", "heap per idle thread, memory storage, after the replay windows closed", GOALS.heapPerIdleThreadBytes, memory["heap_per_thread_bytes"], {
        ...threads,
        lgapi_heap_per_thread_bytes: memory["lgapi_heap_per_thread_bytes"] ?? null,
        ...load,
      }),
      record(runtime, "gateway", "heap_per_thread_just_finished_bytes", "heap per thread just after its run (replay window held)", GOALS.heapPerThreadJustFinishedBytes, memory["heap_per_thread_bytes_just_finished"], {
        ...threads,
        ...load,
      }),
      record(runtime, "gateway", "heap_per_idle_thread_vs_lgapi", "heap per idle thread ÷ langgraph-api's", GOALS.heapPerIdleThreadVsLgapi, memory["ratio_heap_per_thread"], {
        ...threads,
        ...noBaseline,
        ...load,
      }),
    );
  }
  return out;
}

/**
 * Every goal record for each of `runtimes` (default: every runtime that appears in `lines`, in
 * first-seen order); a runtime whose benches printed nothing gets records with `missing`.
 */
export function evaluateGoals(lines: readonly Line[], runtimes: readonly string[] = [...new Set(lines.map(runtimeOf).filter((r): r is string => r !== undefined))]): GoalRecord[] {
  return runtimes.flatMap((runtime) => [...chainGoals(lines, runtime), ...storageGoals(lines, runtime), ...gatewayGoals(lines, runtime)]);
}

/** The JSON lines of a bench output (other lines ignored). */
export function parseLines(text: string): Line[] {
  return text
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Line];
      } catch {
        return [];
      }
    });
}

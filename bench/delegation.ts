/**
 * delegation: the time to dispatch and collect N parallel subagents through the `task` tool.
 *
 * A lead agent (bare createAgent, no middlewares, so no SubagentLimit: all N calls run) on a scripted
 * model whose first response makes N `task` tool calls at once and whose second response is the
 * final answer. Two configurations per N (N = 1, 4, 16), timed back to back in an order shuffled per
 * sample:
 * - subagents: the tool is createTaskTool({ buildAgent }); buildAgent builds, per delegation, a
 *   fresh small createAgent subagent (no middlewares, no tools) on its own scripted model that
 *   answers in one model step. So each call pays runSubagent (thread id, context copy, timeout
 *   timer, progress events, stream loop, verdict, sha256) + createAgent + one subagent graph run.
 * - baseline: the same lead, the same N task calls, but the `task` tool returns at once, without a
 *   subagent, the ToolMessage taskResultMessage builds from a fixed "completed" outcome (the same
 *   text and kwargs shape the real tool returns). Its per-run time is t_0(N).
 *
 * Run: npx tsx --expose-gc bench/delegation.ts | npx deno run -A --v8-flags=--expose-gc
 * bench/delegation.ts | npx bun bench/delegation.ts (or `BENCH_NAMES=delegation npm run bench`).
 * Env knobs: BENCH_SAMPLES (default 13), BENCH_BLOCK_MS (target ms per timed block, default 30;
 * blocks here are twice that), BENCH_WARMUP_MS (per configuration, default 200).
 *
 * Output: one JSON line per configuration on stdout, then one summary line. Progress goes to stderr.
 *
 * Definitions (also in the summary line):
 * - per_run_ms_median: median over samples of (block time / lead runs in block).
 * - per_subagent_ms(N): median over samples of (t_N − t_0(N)) / N, t_N and t_0(N) being the
 *   subagents and baseline per-run times of the same sample (run back to back). The lead's own
 *   two model steps and its fan-out of N tool tasks are in both and cancel out.
 * - ratio_N_vs_baseline: median t_N / median t_0(N).
 * - per_subagent_vs_1: per_subagent_ms(N) / per_subagent_ms(1) (below 1: parallel subagents
 *   overlap or amortise; above 1: they contend).
 */
// Installed first, as in bench/chain-overhead.ts
// (docs/toolchain.md, AsyncLocalStorage before any import).
import "../adapters/shared/als.ts";
import { EventEmitter } from "node:events";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { ChatResult } from "@langchain/core/outputs";
import type { SubagentRunResult } from "../src/agents/subagent-executor.ts";
import { systemClock } from "../src/core/clock.ts";
import { createAgent, type AgentTool } from "../src/engine/index.ts";
import { SUBAGENT_STATUS_KEY } from "../src/tools/subagent-result.ts";
import { createTaskTool } from "../src/agents/delegation-tools.ts";
import { taskResultMessage, TASK_TOOL_NAME } from "../src/tools/task.ts";
import { collectGarbage, emit, envNumber, groupBy, loadAverage, median, progressLog, quantile, round4 as round, runBench, runSamples, runtimeInfo, calibrateBlock } from "./harness.ts";

const log = progressLog("delegation");

// LangGraph's Pregel runner adds one abort listener per parallel task to its run signal, so 16
// parallel tool calls (baseline or subagents alike) trip Node's MaxListenersExceededWarning (limit
// 10) once per lead run and flood stderr. Harmless here (the listeners go when the step ends); raise
// the default for this process only. Node's AbortSignals read it when created.
EventEmitter.defaultMaxListeners = Math.max(EventEmitter.defaultMaxListeners, 64);

const COUNTS = [1, 4, 16] as const;
const BLOCK_FACTOR = 2;
type Variant = "subagents" | "baseline";

// ---------------------------------------------------------------------------------------------
// Scripted models

function lastHumanIndex(messages: readonly BaseMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (HumanMessage.isInstance(messages[i])) return i;
  return -1;
}

/** Overrides bindTools as the harness's ScriptedChatModel does: the tools are only carried along. */
abstract class Scripted extends BaseChatModel {
  constructor() {
    super({});
  }

  _llmType(): string {
    return "scripted";
  }

  override bindTools(tools: any[], kwargs?: Record<string, unknown>): any {
    return this.withConfig({ tools, ...kwargs } as never);
  }

  protected result(message: AIMessage): ChatResult {
    return { generations: [{ text: typeof message.content === "string" ? message.content : "", message }] };
  }
}

/** The lead: N `task` calls at once while none is answered, then a final text. */
class LeadModel extends Scripted {
  readonly calls: number;

  constructor(calls: number) {
    super();
    this.calls = calls;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    let answered = 0;
    for (let i = lastHumanIndex(messages) + 1; i < messages.length; i++) if (ToolMessage.isInstance(messages[i])) answered++;
    if (answered === 0) {
      const tool_calls = Array.from({ length: this.calls }, (_, i) => ({
        name: TASK_TOOL_NAME,
        args: { description: `part ${i}`, prompt: `Do part ${i} of the work and report.`, subagent_type: "general-purpose" },
        id: `call_${i}`,
        type: "tool_call" as const,
      }));
      return this.result(new AIMessage({ content: "", tool_calls }));
    }
    return this.result(new AIMessage({ content: `collected ${answered} reports` }));
  }
}

/** Counts subagent model calls, so the sanity check can prove N subagents really ran. */
let subagentModelCalls = 0;

/** A subagent: answers its prompt in one model step. */
class SubagentModel extends Scripted {
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    subagentModelCalls++;
    const prompt = messages[lastHumanIndex(messages)]?.content;
    return this.result(new AIMessage({ content: `report on: ${String(prompt)}`, usage_metadata: { input_tokens: 10, output_tokens: 5, total_tokens: 15 } }));
  }
}

// ---------------------------------------------------------------------------------------------
// Task tools

const subagentModel = new SubagentModel();
const services = { clock: systemClock };

const realTaskTool: AgentTool = createTaskTool({
  buildAgent: () => createAgent({ model: subagentModel, services, name: "bench-subagent" }),
});

/** What the real tool would return for a completed one-step subagent; built per call, no subagent. */
const stubOutcome = (prompt: string): SubagentRunResult => ({
  status: "completed",
  stop_reason: null,
  result_brief: null,
  result_sha256: null,
  usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
  result: `report on: ${prompt}`,
  error: undefined,
  messages: [],
  thread_id: "stub",
  run_id: "stub",
});

const stubTaskTool: AgentTool = {
  name: TASK_TOOL_NAME,
  description: realTaskTool.description,
  schema: realTaskTool.schema,
  invoke: async (args, context) => taskResultMessage(stubOutcome(String(args["prompt"])), context.toolCall.id ?? ""),
};

// ---------------------------------------------------------------------------------------------
// Configurations

interface Config {
  readonly key: string;
  readonly n: number;
  readonly variant: Variant;
  readonly run: () => Promise<BaseMessage[]>;
  opsPerSample: number;
  readonly perRunMs: number[];
}

function fail(key: string, what: string): never {
  throw new Error(`sanity check failed for ${key}: ${what}. Refusing to time a broken run.`);
}

function config(n: number, variant: Variant): Config {
  const lead = createAgent({
    model: new LeadModel(n),
    tools: [variant === "subagents" ? realTaskTool : stubTaskTool],
    services,
    name: "bench-lead",
    recursionLimit: 10_000,
  });
  let runs = 0;
  return {
    key: `${variant}/${n}`,
    n,
    variant,
    run: async () => (await lead.invoke({ messages: [new HumanMessage("split the work")] }, { threadId: `bench-${variant}-${n}-${runs++}` })).messages,
    opsPerSample: 1,
    perRunMs: [],
  };
}

async function check(config: Config): Promise<void> {
  const before = subagentModelCalls;
  const messages = await config.run();
  const wanted = ["human", "ai", ...Array.from({ length: config.n }, () => "tool"), "ai"];
  const got = messages.map((m) => m.getType());
  if (JSON.stringify(got) !== JSON.stringify(wanted)) fail(config.key, `messages [${got}], expected [${wanted}]`);
  const tools = messages.filter((m) => ToolMessage.isInstance(m)) as ToolMessage[];
  const ids = new Set(tools.map((m) => m.tool_call_id));
  for (let i = 0; i < config.n; i++) if (!ids.has(`call_${i}`)) fail(config.key, `no ToolMessage for call_${i}`);
  for (const message of tools) {
    const status = message.additional_kwargs?.[SUBAGENT_STATUS_KEY];
    if (status !== "completed") fail(config.key, `${message.tool_call_id}: subagent_status ${JSON.stringify(status)}, content ${JSON.stringify(message.content)}`);
    const index = message.tool_call_id.slice("call_".length);
    if (!String(message.content).includes(`report on: Do part ${index} of the work`)) fail(config.key, `${message.tool_call_id}: content ${JSON.stringify(message.content)}`);
  }
  const ran = subagentModelCalls - before;
  const want = config.variant === "subagents" ? config.n : 0;
  if (ran !== want) fail(config.key, `${ran} subagent model calls, expected ${want}`);
  const final = messages.at(-1)!;
  if (final.content !== `collected ${config.n} reports`) fail(config.key, `final answer ${JSON.stringify(final.content)}`);
}

// ---------------------------------------------------------------------------------------------
// Timing

async function timeBlock(config: Config, ops: number): Promise<number> {
  collectGarbage();
  const start = performance.now();
  for (let i = 0; i < ops; i++) await config.run();
  return performance.now() - start;
}

async function warmUpAndCalibrate(config: Config, warmupMs: number, blockMs: number): Promise<void> {
  config.opsPerSample = await calibrateBlock({
    warmupMs,
    blockMs,
    run: async (ops) => {
      for (let i = 0; i < ops; i++) await config.run();
    },
    time: (ops) => timeBlock(config, ops),
  });
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const { runtime, version } = runtimeInfo();
  const samples = Math.round(envNumber("BENCH_SAMPLES", 13));
  const blockMs = envNumber("BENCH_BLOCK_MS", 30) * BLOCK_FACTOR;
  const warmupMs = envNumber("BENCH_WARMUP_MS", 200);
  const began = performance.now();
  const loadAtStart = loadAverage();

  const configs = COUNTS.flatMap((n) => (["baseline", "subagents"] as const).map((variant) => config(n, variant)));

  log(`${runtime} ${version}: sanity check of ${configs.length} configurations`);
  for (const c of configs) await check(c);
  log(`sanity check passed (all ToolMessages subagent_status "completed"); warming up (${warmupMs} ms each), gc between blocks: ${collectGarbage() ? "yes" : "no (run with --expose-gc)"}`);
  for (const c of configs) await warmUpAndCalibrate(c, warmupMs, blockMs);

  // Baseline and subagents at the same N run back to back, groups and members shuffled per sample.
  await runSamples(
    groupBy(configs, (c) => String(c.n)),
    samples,
    async (c) => {
      const elapsed = await timeBlock(c, c.opsPerSample);
      c.perRunMs.push(elapsed / c.opsPerSample);
    },
    { afterSample: (s) => log(`sample ${s + 1}/${samples} done (${((performance.now() - began) / 1000).toFixed(1)} s)`) },
  );

  // Timed runs must still have done what the sanity check saw.
  for (const c of configs) await check(c);

  for (const c of configs) {
    emit({
      bench: "delegation",
      runtime,
      runtime_version: version,
      variant: c.variant,
      subagents: c.n,
      unit: "ms per lead run",
      per_run_ms_median: round(median(c.perRunMs)),
      per_run_ms_p25: round(quantile(c.perRunMs, 0.25)),
      per_run_ms_p75: round(quantile(c.perRunMs, 0.75)),
      samples,
      ops_per_sample: c.opsPerSample,
    });
  }

  const find = (variant: Variant, n: number) => configs.find((c) => c.variant === variant && c.n === n)!.perRunMs;
  const perSubagent = (n: number) => {
    const real = find("subagents", n);
    const base = find("baseline", n);
    return real.map((x, s) => (x - base[s]!) / n);
  };
  const perSubagent1 = median(perSubagent(1));
  const byN: Record<string, unknown> = {};
  for (const n of COUNTS) {
    const diffs = perSubagent(n);
    byN[String(n)] = {
      run_ms: round(median(find("subagents", n))),
      baseline_run_ms: round(median(find("baseline", n))),
      per_subagent_ms: round(median(diffs)),
      per_subagent_ms_p25: round(quantile(diffs, 0.25)),
      per_subagent_ms_p75: round(quantile(diffs, 0.75)),
      ratio_vs_baseline: round(median(find("subagents", n)) / median(find("baseline", n))),
      per_subagent_vs_1: round(median(diffs) / perSubagent1),
    };
  }

  emit({
    bench: "delegation",
    summary: true,
    runtime,
    runtime_version: version,
    by_subagents: byN,
    definitions: {
      workload:
        "bare createAgent lead (no middlewares, so no SubagentLimit), scripted model: 1st step N task calls at once, 2nd step final text; subagents = createTaskTool({ buildAgent }) building per delegation a fresh createAgent subagent (no middlewares, no tools) whose scripted model answers in one step; baseline t_0(N) = same lead and N calls, task tool returns taskResultMessage(fixed completed outcome) at once, no subagent",
      per_run_ms: "median over samples of block time / lead runs",
      per_subagent_ms: "median over samples of (t_N − t_0(N)) / N, same sample, back to back",
      ratio_vs_baseline: "median t_N / median t_0(N)",
      per_subagent_vs_1: "per_subagent_ms(N) / per_subagent_ms(1)",
    },
    total_s: round((performance.now() - began) / 1000),
    load_avg_1m: { start: loadAtStart, end: loadAverage() },
  });
}

runBench("delegation", main);

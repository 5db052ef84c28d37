/**
 * chain-overhead: the time the engine adds per model step and per tool call, over calling the same
 * scripted model and tool in a plain loop, with 0, 10 and 35 pass-through middlewares; for our
 * engine and for LangChain.js createAgent, in one process so both see the same machine state. Also
 * our full default lead chain (buildLeadMiddlewares for code defaults, engine
 * "deerflow-edge-lead-chain") on the same model and tool, against our bare engine (0 middlewares).
 *
 * Run: npx tsx --expose-gc bench/chain-overhead.ts | npx deno run -A --v8-flags=--expose-gc
 * bench/chain-overhead.ts | npx bun bench/chain-overhead.ts (or `npm run bench` for all three).
 * Env knobs: BENCH_SAMPLES (default 13), BENCH_BLOCK_MS (target ms per timed block, default 30),
 * BENCH_WARMUP_MS (per configuration, default 200), BENCH_CHAIN_ONLY=lead (what `npm run
 * bench:quick` runs: workload A only, and only the direct loop, the bare engine and the lead chain,
 * so the summaries hold only the lead_chain_* fields of workload A, marked `"only":"lead"`; the
 * createAgent and middleware-count comparisons are left out).
 *
 * Output: one JSON line per measurement on stdout, then one summary line per checkpointer setting.
 * Progress goes to stderr.
 *
 * Definitions (also in the summary lines):
 * - per_run_ms_median: median over samples of (block time / runs in block).
 * - overhead_per_model_step_ms: median over samples of (engine A per run − direct A per run), where
 *   A is one model step per run; engine and direct blocks of a sample ran back to back.
 * - overhead_per_tool_call_ms: median over samples of ((engine B − direct B) − 5 × (engine A −
 *   direct A)) / 4, B being 5 model steps and 4 tool calls per run. If a run costs F + s·steps +
 *   t·tools over the direct loop (F: graph start, input and output handling), the per-step figure is
 *   s + F and the per-tool-call figure is t − F; a negative tool-call figure means F > t.
 * - lead_chain_vs_bare_per_step_ms: median over samples of (lead chain A − bare engine A per run),
 *   the per-step cost of the default lead chain (its per-run hooks included, as F above);
 *   lead_chain_step_time_vs_bare: lead chain A per run / bare A per run (medians).
 */
// Installed first so both engines run with the same AsyncLocalStorage, whatever imports langchain
// pulls in later (docs/toolchain.md, AsyncLocalStorage before any import).
import "../adapters/shared/als.ts";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph/web";
import { createAgent as createLangchainAgent, createMiddleware, tool } from "langchain";
import { z } from "zod";
import { createAgent, type AgentMiddleware } from "../src/engine/index.ts";
import { systemClock } from "../src/core/clock.ts";
import { validateLeadConfig } from "../src/agents/app-config.ts";
import { buildLeadMiddlewares } from "../src/agents/lead-agent.ts";
import { createMemoryStore, type MemoryStore } from "../src/middlewares/memory/store.ts";
import { createVirtualSandboxProvider } from "../src/sandbox/virtual.ts";
import { createSkillRegistry } from "../src/skills/registry.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import { ScriptedChatModel, TOOL_DESCRIPTION, noopBody, ourNoop } from "./scripted.ts";
import { collectGarbage, emit, envNumber, envString, groupBy, loadAverage, median, progressLog, quantile, round4 as round, runBench, runSamples, runtimeInfo, calibrateBlock } from "./harness.ts";

const log = progressLog("chain-overhead");

// ---------------------------------------------------------------------------------------------
// The scripted model, tool and middlewares (same work for every engine)

const TOOL_ROUNDS_B = 4;
const MIDDLEWARE_COUNTS = [0, 10, 35] as const;

/** Counts every pass-through hook call, so the sanity check can prove the middlewares really ran. */
let hookCalls = 0;

const langchainNoop = tool(noopBody, { name: "noop", description: TOOL_DESCRIPTION, schema: z.object({ i: z.number() }) });

function ourPassThrough(index: number): AgentMiddleware {
  return {
    name: `pass_through_${index}`,
    beforeModel: () => {
      hookCalls++;
      return undefined;
    },
    afterModel: () => {
      hookCalls++;
      return undefined;
    },
    wrapModelCall: (request, handler) => {
      hookCalls++;
      return handler(request);
    },
    wrapToolCall: (request, handler) => {
      hookCalls++;
      return handler(request);
    },
  };
}

function langchainPassThrough(index: number) {
  return createMiddleware({
    name: `pass_through_${index}`,
    beforeModel: () => {
      hookCalls++;
      return undefined;
    },
    afterModel: () => {
      hookCalls++;
      return undefined;
    },
    wrapModelCall: (request, handler) => {
      hookCalls++;
      return handler(request);
    },
    wrapToolCall: (request, handler) => {
      hookCalls++;
      return handler(request);
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Configurations

type EngineName = "deerflow-edge" | "deerflow-edge-lead-chain" | "langchain-createAgent" | "direct";
type Workload = "A" | "B";
type CheckpointerSetting = "none" | "memory";

interface Config {
  readonly key: string;
  readonly engine: EngineName;
  readonly middlewares: number;
  readonly workload: Workload;
  readonly checkpointer: CheckpointerSetting;
  /** One complete run; resolves to the final message list. */
  readonly run: () => Promise<BaseMessage[]>;
  /** Drops what the runs left in the checkpointer (outside the timed region). */
  readonly cleanup: () => Promise<void>;
  /** Releases what outlives the runs (the lead chain's memory store), once, after the last block. */
  readonly close?: () => Promise<void>;
  runsPerSample: number;
  readonly perRunMs: number[];
}

const RECURSION_LIMIT = 10_000;
const models: Record<Workload, ScriptedChatModel> = { A: new ScriptedChatModel(0), B: new ScriptedChatModel(TOOL_ROUNDS_B) };
const toolRounds: Record<Workload, number> = { A: 0, B: TOOL_ROUNDS_B };
const modelSteps: Record<Workload, number> = { A: 1, B: TOOL_ROUNDS_B + 1 };

let threadCounter = 0;
function threadTracker(saver: MemorySaver | undefined) {
  const used: string[] = [];
  return {
    next(): string {
      const id = `bench-thread-${threadCounter++}`;
      used.push(id);
      return id;
    },
    async cleanup(): Promise<void> {
      const ids = used.splice(0);
      if (!saver) return;
      for (const id of ids) await saver.deleteThread(id);
    },
  };
}

function directConfig(workload: Workload, checkpointer: CheckpointerSetting): Config {
  // Bound once, like our engine's per-agent binding; createAgent rebinds per step, which is its cost.
  const bound = models[workload].bindTools([ourNoop]) as { invoke(messages: BaseMessage[]): Promise<BaseMessage> };
  const run = async (): Promise<BaseMessage[]> => {
    const messages: BaseMessage[] = [new HumanMessage("go")];
    for (;;) {
      const reply = (await bound.invoke(messages)) as AIMessage;
      messages.push(reply);
      const calls = reply.tool_calls ?? [];
      if (calls.length === 0) return messages;
      for (const call of calls) {
        messages.push(new ToolMessage({ content: await noopBody(), tool_call_id: call.id ?? "", name: call.name }));
      }
    }
  };
  return {
    key: `direct/${workload}/${checkpointer}`,
    engine: "direct",
    middlewares: 0,
    workload,
    checkpointer,
    run,
    cleanup: async () => {},
    runsPerSample: 1,
    perRunMs: [],
  };
}

function oursConfig(middlewares: number, workload: Workload, checkpointer: CheckpointerSetting): Config {
  const saver = checkpointer === "memory" ? new MemorySaver() : undefined;
  const threads = threadTracker(saver);
  const agent = createAgent({
    model: models[workload],
    tools: [ourNoop],
    middlewares: Array.from({ length: middlewares }, (_, i) => ourPassThrough(i)),
    checkpointer: saver,
    services: { clock: systemClock },
    recursionLimit: RECURSION_LIMIT,
  });
  const run = saver
    ? async () => (await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: threads.next() })).messages
    : async () => (await agent.invoke({ messages: [new HumanMessage("go")] })).messages;
  return {
    key: `deerflow-edge/${middlewares}/${workload}/${checkpointer}`,
    engine: "deerflow-edge",
    middlewares,
    workload,
    checkpointer,
    run,
    cleanup: () => threads.cleanup(),
    runsPerSample: 1,
    perRunMs: [],
  };
}

function langchainConfig(middlewares: number, workload: Workload, checkpointer: CheckpointerSetting): Config {
  const saver = checkpointer === "memory" ? new MemorySaver() : undefined;
  const threads = threadTracker(saver);
  const agent = createLangchainAgent({
    model: models[workload],
    tools: [langchainNoop],
    middleware: Array.from({ length: middlewares }, (_, i) => langchainPassThrough(i)),
    ...(saver ? { checkpointer: saver } : {}),
  });
  const run = async (): Promise<BaseMessage[]> => {
    const config = saver
      ? { recursionLimit: RECURSION_LIMIT, configurable: { thread_id: threads.next() } }
      : { recursionLimit: RECURSION_LIMIT };
    const state = (await agent.invoke({ messages: [new HumanMessage("go")] } as any, config)) as { messages: BaseMessage[] };
    return state.messages;
  };
  return {
    key: `langchain-createAgent/${middlewares}/${workload}/${checkpointer}`,
    engine: "langchain-createAgent",
    middlewares,
    workload,
    checkpointer,
    run,
    cleanup: () => threads.cleanup(),
    runsPerSample: 1,
    perRunMs: [],
  };
}

/**
 * The full default lead chain: what buildLeadMiddlewares returns for code defaults (config `{}`, no
 * plan mode, a model without vision), on the bench's scripted model and noop tool (Clarification
 * adds its ask_clarification tool), no system prompt, so it differs from the bare engine
 * (deerflow-edge with 0 middlewares) by the middlewares only. The services are the lead agent's
 * (memory storage, virtual sandbox, system clock); each run gets a fresh thread id (ThreadData needs
 * one), as a new conversation does, so DynamicContext injects its date reminder and recalls memory
 * on every run and Memory queues every run's conversation. The memory store's debounce timers are
 * real (system clock, as in production): cleanup, outside the timed region, flushes the queued
 * updates before a timer could fire, and `close` closes the store at the end so the process exits.
 */
function leadChainConfig(workload: Workload, checkpointer: CheckpointerSetting): Config {
  const saver = checkpointer === "memory" ? new MemorySaver() : undefined;
  const threads = threadTracker(saver);
  const storage = createMemoryKeyValue();
  const config = validateLeadConfig({}, "bench");
  const memoryStore: MemoryStore = createMemoryStore(storage, systemClock, { config: config.memory ?? {} });
  const middlewares = buildLeadMiddlewares(config, {
    model: models[workload],
    memoryStore,
    skillRegistry: createSkillRegistry(storage, { config: config.skills ?? {} }),
  });
  const agent = createAgent({
    model: models[workload],
    tools: [ourNoop],
    middlewares,
    checkpointer: saver,
    services: { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) },
    recursionLimit: RECURSION_LIMIT,
  });
  leadChainNames = middlewares.map((m) => m.name);
  const run = async () => (await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: threads.next() })).messages;
  return {
    key: `deerflow-edge-lead-chain/${middlewares.length}/${workload}/${checkpointer}`,
    engine: "deerflow-edge-lead-chain",
    middlewares: middlewares.length,
    workload,
    checkpointer,
    run,
    cleanup: async () => {
      await threads.cleanup();
      await memoryStore.flush();
    },
    close: async () => {
      await memoryStore.close();
    },
    runsPerSample: 1,
    perRunMs: [],
  };
}

/** The lead chain's middleware names, as built (reported in the summary; 18 for code defaults). */
let leadChainNames: string[] = [];

// ---------------------------------------------------------------------------------------------
// Sanity check: every engine yields the same message list as the direct loop, and every hook ran.

function projection(messages: readonly BaseMessage[]): unknown[] {
  return messages.map((m) => {
    const base = { type: m.getType(), content: m.content };
    if (AIMessage.isInstance(m)) {
      return { ...base, tool_calls: (m.tool_calls ?? []).map((c) => ({ name: c.name, args: c.args, id: c.id })) };
    }
    if (ToolMessage.isInstance(m)) return { ...base, tool_call_id: m.tool_call_id, name: m.name };
    return base;
  });
}

/**
 * The lead chain adds hidden context to state (DynamicContext's date reminder takes the user
 * message's id and the user's text comes back as `<id>__user`), so its list is compared on what the
 * model and tools produced: the AI/tool sequence must equal the direct loop's, the list must end
 * with the final answer, the user's turn must be there exactly once, and so must the reminder (proof
 * that the chain ran).
 */
function checkLeadChainMessages(config: Config, messages: readonly BaseMessage[], expected: readonly BaseMessage[]): void {
  const fail = (what: string) => {
    throw new Error(`sanity check failed for ${config.key}: ${what}. Refusing to time a broken run.`);
  };
  const aiAndTools = (list: readonly BaseMessage[]) =>
    JSON.stringify(projection(list.filter((m) => AIMessage.isInstance(m) || ToolMessage.isInstance(m))));
  const want = aiAndTools(expected);
  const got = aiAndTools(messages);
  if (got !== want) fail(`its AI/tool messages differ from the direct loop's.\n  expected: ${want}\n  got:      ${got}\n`);
  const last = messages.at(-1);
  const finalAnswer = expected.at(-1)!.content;
  if (!last || !AIMessage.isInstance(last) || last.content !== finalAnswer) {
    fail(`its last message is ${JSON.stringify(last ? projection([last]) : null)}, expected the final answer ${JSON.stringify(finalAnswer)}`);
  }
  const users = messages.filter((m) => HumanMessage.isInstance(m) && m.additional_kwargs?.["hide_from_ui"] !== true);
  if (users.length !== 1 || users[0]!.content !== "go") fail(`expected the user's turn "go" once, got ${JSON.stringify(projection(users))}`);
  const reminders = messages.filter((m) => m.additional_kwargs?.["dynamic_context_reminder"] === true);
  if (reminders.length !== 1) fail(`expected one DynamicContext reminder, got ${reminders.length}`);
}

function expectedHookCalls(middlewares: number, workload: Workload): number {
  // beforeModel + wrapModelCall + afterModel per model step, wrapToolCall per tool call.
  return middlewares * (3 * modelSteps[workload] + toolRounds[workload]);
}

async function sanityCheck(configs: readonly Config[]): Promise<void> {
  const expected = new Map<Workload, string>();
  const expectedMessages = new Map<Workload, BaseMessage[]>();
  for (const workload of new Set(configs.map((c) => c.workload))) {
    const direct = configs.find((c) => c.engine === "direct" && c.workload === workload)!;
    const messages = await direct.run();
    const wanted = ["human", ...Array.from({ length: toolRounds[workload] }, () => ["ai", "tool"]).flat(), "ai"];
    const got = messages.map((m) => m.getType());
    if (JSON.stringify(got) !== JSON.stringify(wanted)) {
      throw new Error(`direct loop for workload ${workload} produced [${got}], expected [${wanted}]; the scripted model is broken.`);
    }
    expected.set(workload, JSON.stringify(projection(messages)));
    expectedMessages.set(workload, messages);
  }
  for (const config of configs) {
    const before = hookCalls;
    const messages = await config.run();
    await config.cleanup();
    const calls = hookCalls - before;
    const got = JSON.stringify(projection(messages));
    if (config.engine === "deerflow-edge-lead-chain") {
      checkLeadChainMessages(config, messages, expectedMessages.get(config.workload)!);
    } else if (got !== expected.get(config.workload)) {
      throw new Error(
        `sanity check failed for ${config.key}: its final message list differs from the direct loop's.\n` +
          `  expected: ${expected.get(config.workload)}\n  got:      ${got}\nRefusing to time a broken run.`,
      );
    }
    const wantCalls = config.engine === "deerflow-edge" || config.engine === "langchain-createAgent" ? expectedHookCalls(config.middlewares, config.workload) : 0;
    if (calls !== wantCalls) {
      throw new Error(`sanity check failed for ${config.key}: ${calls} pass-through hook calls, expected ${wantCalls}. Refusing to time it.`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Timing

async function timeBlock(config: Config, runs: number): Promise<number> {
  collectGarbage();
  const start = performance.now();
  for (let i = 0; i < runs; i++) await config.run();
  const elapsed = performance.now() - start;
  await config.cleanup();
  return elapsed;
}

async function warmUpAndCalibrate(config: Config, warmupMs: number, blockMs: number): Promise<void> {
  let runs = 0;
  config.runsPerSample = await calibrateBlock({
    warmupMs,
    blockMs,
    run: async (count) => {
      for (let i = 0; i < count; i++) {
        await config.run();
        if (++runs % 50 === 0) await config.cleanup();
      }
    },
    afterWarmup: () => config.cleanup(),
    time: (count) => timeBlock(config, count),
    // A configuration slower than the block target gets one run per block: its timing is long
    // enough for performance.now(), and the bench stays within about a minute per runtime.
    minUnitMs: 1e-3,
  });
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const { runtime, version } = runtimeInfo();
  const samples = Math.round(envNumber("BENCH_SAMPLES", 13));
  const blockMs = envNumber("BENCH_BLOCK_MS", 30);
  const warmupMs = envNumber("BENCH_WARMUP_MS", 200);
  const began = performance.now();
  const loadAtStart = loadAverage();

  const only = envString("BENCH_CHAIN_ONLY");
  if (only !== undefined && only !== "lead") throw new Error(`BENCH_CHAIN_ONLY must be "lead" or unset; got ${JSON.stringify(only)}`);
  const leadOnly = only === "lead";
  const configs: Config[] = [];
  for (const checkpointer of ["none", "memory"] as const) {
    for (const workload of leadOnly ? (["A"] as const) : (["A", "B"] as const)) {
      configs.push(directConfig(workload, checkpointer));
      if (leadOnly) configs.push(oursConfig(0, workload, checkpointer));
      else {
        for (const middlewares of MIDDLEWARE_COUNTS) {
          configs.push(oursConfig(middlewares, workload, checkpointer));
          configs.push(langchainConfig(middlewares, workload, checkpointer));
        }
      }
      configs.push(leadChainConfig(workload, checkpointer));
    }
  }

  log(`${runtime} ${version}: sanity check of ${configs.length} configurations`);
  await sanityCheck(configs);
  log(`sanity check passed; warming up (${warmupMs} ms each), gc between blocks: ${collectGarbage() ? "yes" : "no (run with --expose-gc)"}`);
  for (const config of configs) await warmUpAndCalibrate(config, warmupMs, blockMs);

  // A sample times every configuration once. Configurations that are compared with each other
  // (same workload and checkpointer: direct, both engines, every middleware count) run back to back
  // as a group, in an order shuffled per sample, so a burst of machine noise lands on them alike and
  // no configuration always runs first or last.
  const groups = groupBy(configs, (config) => `${config.workload}/${config.checkpointer}`);
  await runSamples(
    groups,
    samples,
    async (config) => {
      const elapsed = await timeBlock(config, config.runsPerSample);
      config.perRunMs.push(elapsed / config.runsPerSample);
    },
    { afterSample: (s) => log(`sample ${s + 1}/${samples} done (${((performance.now() - began) / 1000).toFixed(1)} s)`) },
  );
  for (const config of configs) await config.close?.();

  const find = (engine: EngineName, middlewares: number, workload: Workload, checkpointer: CheckpointerSetting) =>
    configs.find((c) => c.engine === engine && c.middlewares === middlewares && c.workload === workload && c.checkpointer === checkpointer)!;

  /** Per-sample overheads of one engine configuration against the direct loop of the same sample. */
  const overheads = (engine: EngineName, middlewares: number, checkpointer: CheckpointerSetting) => {
    const a = find(engine, middlewares, "A", checkpointer).perRunMs;
    const b = find(engine, middlewares, "B", checkpointer).perRunMs;
    const da = find("direct", 0, "A", checkpointer).perRunMs;
    const db = find("direct", 0, "B", checkpointer).perRunMs;
    const perRunA = a.map((t, s) => t - da[s]!);
    const perRunB = b.map((t, s) => t - db[s]!);
    const perStep = perRunA.map((o) => o / modelSteps.A);
    const perTool = perRunB.map((o, s) => (o - modelSteps.B * perStep[s]!) / TOOL_ROUNDS_B);
    return {
      A: median(perRunA),
      B: median(perRunB),
      perStep: median(perStep),
      perTool: median(perTool),
    };
  };

  for (const config of configs) {
    // BENCH_CHAIN_ONLY=lead has no workload B, which the per-tool-call figure needs.
    const o = config.engine === "direct" || leadOnly ? undefined : overheads(config.engine, config.middlewares, config.checkpointer);
    emit({
      bench: "chain-overhead",
      runtime,
      runtime_version: version,
      engine: config.engine,
      middlewares: config.middlewares,
      workload: config.workload,
      checkpointer: config.checkpointer,
      model_steps_per_run: modelSteps[config.workload],
      tool_calls_per_run: toolRounds[config.workload],
      per_run_ms_median: round(median(config.perRunMs)),
      per_run_ms_p25: round(quantile(config.perRunMs, 0.25)),
      per_run_ms_p75: round(quantile(config.perRunMs, 0.75)),
      overhead_per_run_ms: o ? round(o[config.workload]) : null,
      overhead_per_model_step_ms: o ? round(o.perStep) : null,
      overhead_per_tool_call_ms: o ? round(o.perTool) : null,
      samples,
      runs_per_sample: config.runsPerSample,
    });
  }

  /** The summary's engine-versus-createAgent and middleware-count fields (the full run only). */
  const engineComparison = (checkpointer: CheckpointerSetting): Record<string, unknown> => {
    const ours0 = overheads("deerflow-edge", 0, checkpointer);
    const ours35 = overheads("deerflow-edge", 35, checkpointer);
    const theirs0 = overheads("langchain-createAgent", 0, checkpointer);
    const theirs35 = overheads("langchain-createAgent", 35, checkpointer);
    const oursStep0 = median(find("deerflow-edge", 0, "A", checkpointer).perRunMs);
    const oursStep35 = median(find("deerflow-edge", 35, "A", checkpointer).perRunMs);
    // "Adding them costs less than 50% over 0 middlewares" is judged on the whole per-step time
    // (engine + the scripted model call, i.e. workload A per run), not on the pure overhead ratio:
    // the pure overhead at 0 middlewares is a difference of two small timings, so a ratio over it
    // swings with noise and punishes a leaner core (a faster 0-middleware step makes the same 35
    // middlewares look worse). The whole step is what a caller pays; with our near-free scripted
    // model it is still the strictest fair version of the claim (a real model call would make it
    // trivially true). The pure-overhead ratio is reported alongside as ours_35_vs_0.
    const stepRatio = oursStep35 / oursStep0;
    // The same ratio taken per sample (the two blocks ran in the same group, close in time), then
    // the median: a cross-check that slow swings of machine load did not decide the verdict.
    const a0 = find("deerflow-edge", 0, "A", checkpointer).perRunMs;
    const a35 = find("deerflow-edge", 35, "A", checkpointer).perRunMs;
    const pairedStepRatio = median(a35.map((t, s) => t / a0[s]!));
    return {
      ours_vs_createAgent_at_35: round(ours35.perStep / theirs35.perStep),
      // Whole workload-B runs (5 steps, 4 tool calls): unlike the per-tool-call figure (t − F, see
      // the header), this overhead is always positive, so its ratio is meaningful.
      ours_vs_createAgent_at_35_workload_B: round(ours35.B / theirs35.B),
      ours_35_vs_0: round(ours35.perStep / ours0.perStep),
      createAgent_35_vs_0: round(theirs35.perStep / theirs0.perStep),
      ours_step_time_35_vs_0: round(stepRatio),
      ours_step_ms_0: round(oursStep0),
      ours_step_ms_35: round(oursStep35),
      ours_step_time_35_vs_0_paired: round(pairedStepRatio),
      goal_met: {
        beats_createAgent_at_35: ours35.perStep < theirs35.perStep,
        adding_35_under_50pct: oursStep35 <= 1.5 * oursStep0,
      },
    };
  };

  /** The summary's lead-chain fields on workload B (the full run only). */
  const leadWorkloadB = (checkpointer: CheckpointerSetting): Record<string, unknown> => {
    const a0 = find("deerflow-edge", 0, "A", checkpointer).perRunMs;
    const b0 = find("deerflow-edge", 0, "B", checkpointer).perRunMs;
    const leadA = find("deerflow-edge-lead-chain", leadChainNames.length, "A", checkpointer).perRunMs;
    const leadB = find("deerflow-edge-lead-chain", leadChainNames.length, "B", checkpointer).perRunMs;
    const leadExtraA = leadA.map((t, s) => t - a0[s]!);
    const leadExtraB = leadB.map((t, s) => t - b0[s]!);
    return {
      lead_chain_vs_bare_per_run_ms_workload_B: round(median(leadExtraB)),
      lead_chain_vs_bare_per_tool_call_ms: round(
        median(leadExtraB.map((o, s) => (o - modelSteps.B * leadExtraA[s]!) / TOOL_ROUNDS_B)),
      ),
      lead_chain_run_time_vs_bare_workload_B: round(median(leadB) / median(b0)),
    };
  };

  const loadAtEnd = loadAverage();
  for (const checkpointer of ["none", "memory"] as const) {
    const a0 = find("deerflow-edge", 0, "A", checkpointer).perRunMs;
    const oursStep0 = median(a0);
    // The full default lead chain over the bare engine (0 middlewares), paired per sample like the
    // rest. Workload A is one model step per run, so its per-run difference is the per-step cost,
    // including the chain's once-per-run hooks (beforeAgent/afterAgent), as with the engine's F.
    const leadA = find("deerflow-edge-lead-chain", leadChainNames.length, "A", checkpointer).perRunMs;
    const leadExtraA = leadA.map((t, s) => t - a0[s]!);
    const leadStepMs = median(leadA);
    const lead = {
      lead_chain_middlewares: leadChainNames,
      bare_step_ms: round(oursStep0),
      lead_chain_step_ms: round(leadStepMs),
      lead_chain_vs_bare_per_step_ms: round(median(leadExtraA)),
      lead_chain_step_time_vs_bare: round(leadStepMs / oursStep0),
      lead_chain_step_time_vs_bare_paired: round(median(leadA.map((t, s) => t / a0[s]!))),
    };
    emit({
      bench: "chain-overhead",
      summary: true,
      runtime,
      runtime_version: version,
      checkpointer,
      ...(leadOnly ? { only: "lead", ...lead } : { ...engineComparison(checkpointer), ...lead, ...leadWorkloadB(checkpointer) }),
      definitions: {
        overhead_per_model_step: "median over samples of (engine A − direct A per run); A = 1 model step",
        overhead_per_tool_call:
          "median over samples of ((engine B − direct B) − 5 × (engine A − direct A)) / 4; with run cost F + s·steps + t·tools this is t − F, while the per-step figure is s + F",
        adding_35_under_50pct: "ours workload-A per-run time (model call included) at 35 ≤ 1.5 × at 0",
        lead_chain_vs_bare_per_step_ms:
          "median over samples of (lead chain A − bare A per run), bare = deerflow-edge with 0 middlewares; A = 1 model step, so this includes the chain's per-run hooks",
        lead_chain_step_time_vs_bare: "lead chain workload-A per-run time / bare workload-A per-run time (medians; _paired: median of per-sample ratios)",
        lead_chain_vs_bare_per_tool_call_ms: "median over samples of ((lead B − bare B) − 5 × (lead A − bare A)) / 4: per tool call minus the per-run hooks (t − F)",
      },
      total_s: round((performance.now() - began) / 1000),
      load_avg_1m: { start: loadAtStart, end: loadAtEnd },
    });
  }
}

runBench("chain-overhead", main);

/**
 * tool-side: what the lead chain's tool-side wrappers cost per tool call, and how fast SandboxAudit's
 * classifier gets through its test corpus. Three parts, timed in one process, interleaved per sample:
 *
 * 1. wrapper (direct): one tool call through the real middlewares' wrapToolCall chain, composed the
 *    way the engine's tool node composes it (reduceRight over the wrappers, a fresh request object per
 *    call, one RunScope per block as the engine has one per run), against calling the tool's handler
 *    directly (the engine's base handler: tool.invoke, then a ToolMessage). Each wrapper alone and all
 *    eight together, in lead order: ToolOutputBudget, ToolResultSanitization, Sandbox, ToolReceipt,
 *    SandboxAudit, ReadBeforeWrite, ToolProgress (enabled), ToolErrorHandling. They are the instances
 *    buildLeadMiddlewares makes (code defaults plus `tool_progress: { enabled: true }`), so they carry
 *    the lead agent's deps; the services are the lead agent's (system clock, memory storage, virtual
 *    sandbox). Two tools: `noop`, and a `bash` double (the real bash tool's name, description and
 *    schema, a body that returns "ok" without running a shell or touching the sandbox), because
 *    SandboxAudit only audits `bash`. The bash call sends BASH_COMMAND, which classifies "pass", so
 *    the double runs and SandboxAudit pays validation, classification and one audit event per call.
 * 2. engine: createAgent with a scripted model making N sequential tool calls (workload B; A is one
 *    model step and no tool call), with none of those middlewares, with all eight as built (their
 *    other hooks too: Sandbox beforeAgent/afterAgent, ToolProgress beforeAgent/wrapModelCall,
 *    ToolReceipt and ToolOutputBudget wrapModelCall), with wrapToolCall-only views of them, and with
 *    those views minus ToolReceipt (whose two awaited crypto.subtle digests per call are most of the
 *    chain's cost on Node and Deno, and whose latency depends on what else the event loop does).
 * 3. classify: classifyCommand over test/middlewares/sandbox-audit/corpus.ts (SANDBOX_AUDIT_CORPUS,
 *    rows { group, command, verdict }): throughput over the whole corpus and over its rows of at most
 *    1,000 code points, and every row timed on its own for the per-row distribution and its p99 row.
 *
 * Run: npx tsx --expose-gc bench/tool-side.ts | npx deno run -A --v8-flags=--expose-gc
 * bench/tool-side.ts | npx bun bench/tool-side.ts (or `npm run bench` for all benches on all three).
 * Env knobs: BENCH_SAMPLES (default 13), BENCH_BLOCK_MS (target ms per timed wrapper and classify
 * block, default 10), BENCH_ENGINE_BLOCK_MS (target ms per engine block, default 80: an engine run
 * is milliseconds and noisy), BENCH_WARMUP_MS (per configuration, default 100; engine
 * configurations get twice that, corpus rows 2 ms each), BENCH_ROW_BLOCK_MS (target ms per
 * per-row classify block, default 0.5), BENCH_TOOL_CALLS (N, default 8). About 30 s per runtime.
 * Garbage: a full collection before each group of compared blocks, a scavenge before each block (a
 * full collection of this heap takes tens of ms, and ~40 blocks a sample would double the time).
 *
 * Output: one JSON line per measured configuration on stdout, one `classify` line, then one summary
 * line. Progress goes to stderr.
 *
 * Definitions (also in the summary line):
 * - wrapper overhead_per_call_us: median over samples of (chain block / calls − direct-handler block /
 *   calls) for the same tool; the two blocks ran in the same sample.
 * - engine wrap_only_per_tool_call_us: median over samples of (wrap-only B − bare B) / N (and the
 *   same without ToolReceipt).
 * - engine full_per_tool_round_us: median over samples of ((full B − bare B) − (full A − bare A)) / N:
 *   one tool call plus the middlewares' hooks on the extra model step it causes (B has N + 1 steps).
 * - classify us_per_command: block time / commands classified (a mean over the corpus rows), median
 *   over samples; commands_per_s its inverse. Per row: median over samples of block time / calls;
 *   p99 is the nearest-rank row (rank ⌈0.99 · rows⌉ of the per-row medians, ascending).
 */
// Installed first, as in chain-overhead: every runtime gets the same AsyncLocalStorage.
import "../adapters/shared/als.ts";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { ChatResult } from "@langchain/core/outputs";
import { isCommand } from "@langchain/langgraph/web";
import {
  createAgent,
  RunScope,
  type Agent,
  type AgentMiddleware,
  type AgentRuntime,
  type AgentServices,
  type AgentState,
  type AgentTool,
  type ToolHandler,
  type ToolResult,
} from "../src/engine/index.ts";
import { systemClock } from "../src/core/clock.ts";
import { validateLeadConfig } from "../src/agents/app-config.ts";
import { buildLeadMiddlewares } from "../src/agents/lead-agent.ts";
import { classifyCommand, SANDBOX_AUDIT_EVENT } from "../src/middlewares/sandbox-audit/sandbox-audit.ts";
import { TOOL_RECEIPT_KEY } from "../src/middlewares/tool-receipt/tool-receipt.ts";
import { TOOL_META_KEY } from "../src/middlewares/tool-result-meta.ts";
import { createVirtualSandboxProvider } from "../src/sandbox/virtual.ts";
import { createSkillRegistry } from "../src/skills/registry.ts";
import { emptyThreadState } from "../src/state/thread-state.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import { createSandboxTools } from "../src/tools/sandbox-tools.ts";
import { SANDBOX_AUDIT_CORPUS, type CorpusRow } from "../test/middlewares/sandbox-audit/corpus.ts";
import { collectGarbage, emit, envNumber, groupBy, loadAverage, median, progressLog, quantile, round3 as r3, round4 as r4, runBench, runSamples, runtimeInfo, calibrateBlock } from "./harness.ts";

const log = progressLog("tool-side");

// ---------------------------------------------------------------------------------------------
// Tools, middlewares, services

const TOOL_CALLS = Math.round(envNumber("BENCH_TOOL_CALLS", 8));
const THREAD_ID = "bench-thread";
/** A command SandboxAudit passes (checked before timing), so the bash double really runs. */
const BASH_COMMAND = "ls -la /mnt/user-data/workspace";
const TOOL_SIDE_NAMES = [
  "ToolOutputBudget",
  "ToolResultSanitization",
  "Sandbox",
  "ToolReceipt",
  "SandboxAudit",
  "ReadBeforeWrite",
  "ToolProgress",
  "ToolErrorHandling",
] as const;
type ToolName = "noop" | "bash";
const TOOL_NAMES: readonly ToolName[] = ["noop", "bash"];

const noopTool: AgentTool = {
  name: "noop",
  description: "does nothing and answers ok",
  schema: { type: "object", properties: { i: { type: "number" } }, required: ["i"] },
  invoke: async () => "ok",
};

/** The real bash tool's face (name, description, schema, metadata) on a body that runs nothing. */
const realBash = createSandboxTools().find((t) => t.name === "bash")!;
const bashDouble: AgentTool = {
  name: realBash.name,
  description: realBash.description,
  schema: realBash.schema,
  ...(realBash.metadata ? { metadata: realBash.metadata } : {}),
  invoke: async () => "ok",
};
const tools: Record<ToolName, AgentTool> = { noop: noopTool, bash: bashDouble };

function toolCallFor(tool: ToolName, round: number): ToolCall {
  const args = tool === "bash" ? { description: "list the workspace", command: BASH_COMMAND } : { i: round };
  return { name: tool, args, id: `call_${round}`, type: "tool_call" };
}

const storage = createMemoryKeyValue();
const services: AgentServices = { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) };

/**
 * The eight tool-side middlewares exactly as buildLeadMiddlewares builds them (code defaults, plus
 * ToolProgress enabled; memory off only so the discarded rest of the chain starts no memory store).
 */
function toolSideMiddlewares(): AgentMiddleware[] {
  const config = validateLeadConfig({ tool_progress: { enabled: true }, memory: { enabled: false } }, "bench");
  const lead = buildLeadMiddlewares(config, {
    model: scriptedModel("noop", 0),
    skillRegistry: createSkillRegistry(storage, { config: config.skills ?? {} }),
  });
  const wanted = new Set<string>(TOOL_SIDE_NAMES);
  const picked = lead.filter((m) => wanted.has(m.name));
  const names = picked.map((m) => m.name);
  if (JSON.stringify(names) !== JSON.stringify(TOOL_SIDE_NAMES)) {
    throw new Error(`the lead chain's tool-side middlewares are [${names}], expected [${TOOL_SIDE_NAMES}] in that order; update the bench.`);
  }
  for (const m of picked) if (typeof m.wrapToolCall !== "function") throw new Error(`${m.name} has no wrapToolCall`);
  return picked;
}

/** Only the wrapToolCall of a middleware, so the engine runs none of its other hooks. */
function wrapOnly(m: AgentMiddleware): AgentMiddleware {
  return { name: m.name, wrapToolCall: (request, handler) => m.wrapToolCall!(request, handler) };
}

// ---------------------------------------------------------------------------------------------
// Part 1: the wrapper chain, called directly

/** The engine's base tool handler (runTool in src/engine/agent.ts) for a tool that returns text. */
const baseHandler: ToolHandler = async (request) => {
  const { toolCall, tool } = request;
  const output = await tool!.invoke(toolCall.args ?? {}, { toolCall, state: request.state, runtime: request.runtime });
  return new ToolMessage({ content: output as string, tool_call_id: toolCall.id ?? "", name: tool!.name });
};

/** What an engine run gives hooks, with a writer that counts audit events (for the sanity check). */
let auditEvents = 0;
function makeRuntime(runId: string): AgentRuntime {
  return {
    context: Object.freeze({}),
    scope: new RunScope(runId),
    threadId: THREAD_ID,
    runId,
    signal: undefined,
    writer: (chunk: unknown) => {
      if ((chunk as { type?: unknown } | null)?.type === SANDBOX_AUDIT_EVENT) auditEvents++;
    },
    services,
  };
}

/** The state a tool call sees: the user's turn and the AI message that made the call. */
function stateFor(call: ToolCall): AgentState {
  return { ...emptyThreadState(), messages: [new HumanMessage("go"), new AIMessage({ content: "", tool_calls: [call] })] };
}

interface Timed {
  readonly key: string;
  readonly group: string;
  /** Runs `units` units (calls, runs, passes) back to back. */
  readonly block: (units: number) => Promise<void>;
  /** Work units per block, calibrated after warm-up. */
  unitsPerBlock: number;
  /** Per sample: block ms / units. */
  readonly perUnitMs: number[];
  /** Scavenge the young generation before each block (off for the many tiny per-row classify blocks). */
  readonly gcEachBlock: boolean;
}

interface WrapperConfig extends Timed {
  readonly tool: ToolName;
  /** "none" (the handler directly), one middleware's name, or "all". */
  readonly wrappers: string;
  readonly chain: readonly AgentMiddleware[];
  readonly callOnce: (runtime: AgentRuntime) => Promise<ToolResult>;
}

let runCounter = 0;

function wrapperConfig(tool: ToolName, wrappers: string, chain: readonly AgentMiddleware[]): WrapperConfig {
  const toolCall = toolCallFor(tool, 0);
  const state = stateFor(toolCall);
  const agentTool = tools[tool];
  // Composed per call, as the engine's tool node does.
  const callOnce =
    chain.length === 0
      ? (runtime: AgentRuntime) => baseHandler({ toolCall, tool: agentTool, state, runtime })
      : (runtime: AgentRuntime) =>
          chain.reduceRight<ToolHandler>((next, mw) => (request) => mw.wrapToolCall!(request, next), baseHandler)({
            toolCall,
            tool: agentTool,
            state,
            runtime,
          });
  return {
    key: `wrapper/${tool}/${wrappers}`,
    group: `wrapper/${tool}`,
    tool,
    wrappers,
    chain,
    callOnce,
    block: async (units) => {
      const runtime = makeRuntime(`bench-run-${runCounter++}`);
      for (let i = 0; i < units; i++) await callOnce(runtime);
    },
    unitsPerBlock: 1,
    perUnitMs: [],
    gcEachBlock: true,
  };
}

// ---------------------------------------------------------------------------------------------
// Part 2: through the engine

/** One `tool` call per model step while fewer than `rounds` ToolMessages follow the human turn, then text. */
class ScriptedChatModel extends BaseChatModel {
  readonly toolName: ToolName;
  readonly rounds: number;

  constructor(toolName: ToolName, rounds: number) {
    super({});
    this.toolName = toolName;
    this.rounds = rounds;
  }

  _llmType(): string {
    return "scripted";
  }

  override bindTools(boundTools: any[], kwargs?: Record<string, unknown>): any {
    return this.withConfig({ tools: boundTools, ...kwargs } as never);
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    let lastHuman = -1;
    for (let i = messages.length - 1; i >= 0; i--) {
      if (HumanMessage.isInstance(messages[i]) && messages[i]!.additional_kwargs?.["hide_from_ui"] !== true) {
        lastHuman = i;
        break;
      }
    }
    let answered = 0;
    for (let i = lastHuman + 1; i < messages.length; i++) if (ToolMessage.isInstance(messages[i])) answered++;
    const message =
      answered < this.rounds
        ? new AIMessage({ content: "", tool_calls: [toolCallFor(this.toolName, answered)] })
        : new AIMessage({ content: `done after ${answered} tool calls` });
    return { generations: [{ text: typeof message.content === "string" ? message.content : "", message }] };
  }
}

function scriptedModel(tool: ToolName, rounds: number): ScriptedChatModel {
  return new ScriptedChatModel(tool, rounds);
}

type EngineSet = "none" | "tool_side" | "tool_side_wrap_only" | "tool_side_wrap_only_without_receipt";
type Workload = "A" | "B";

interface EngineConfig extends Timed {
  readonly set: EngineSet;
  readonly workload: Workload;
  readonly tool: ToolName | null;
  readonly agent: Agent;
  readonly run: () => Promise<BaseMessage[]>;
}

const RECURSION_LIMIT = 10_000;

function engineConfig(set: EngineSet, workload: Workload, tool: ToolName | null, middlewares: readonly AgentMiddleware[]): EngineConfig {
  const model = workload === "A" ? scriptedModel("noop", 0) : scriptedModel(tool!, TOOL_CALLS);
  const agent = createAgent({
    model,
    // Both tools on every agent, so every agent binds the same list.
    tools: [noopTool, bashDouble],
    middlewares,
    services,
    recursionLimit: RECURSION_LIMIT,
  });
  const run = async () => (await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: THREAD_ID })).messages;
  const workloadKey = workload === "A" ? "A" : `B/${tool}`;
  return {
    key: `engine/${set}/${workloadKey}`,
    group: `engine/${workloadKey}`,
    set,
    workload,
    tool,
    agent,
    run,
    block: async (units) => {
      for (let i = 0; i < units; i++) await run();
    },
    unitsPerBlock: 1,
    perUnitMs: [],
    gcEachBlock: true,
  };
}

// ---------------------------------------------------------------------------------------------
// Part 3: classifyCommand

const SHORT_ROW_MAX_CODE_POINTS = 1_000;
const codePoints = (text: string) => Array.from(text).length;
let sink = 0;

function classifyPass(rows: readonly CorpusRow[]): void {
  for (const row of rows) sink += classifyCommand(row.command).verdict.length;
}

interface ClassifyConfig extends Timed {
  readonly rows: readonly CorpusRow[];
  readonly rowIndex: number | null;
}

function throughputConfig(name: string, rows: readonly CorpusRow[]): ClassifyConfig {
  return {
    key: `classify/${name}`,
    group: "classify/throughput",
    rows,
    rowIndex: null,
    // A unit is one pass over the rows.
    block: async (units) => {
      for (let i = 0; i < units; i++) classifyPass(rows);
    },
    unitsPerBlock: 1,
    perUnitMs: [],
    gcEachBlock: true,
  };
}

function rowConfig(index: number): ClassifyConfig {
  const command = SANDBOX_AUDIT_CORPUS[index]!.command;
  return {
    key: `classify/row/${index}`,
    group: "classify/rows",
    rows: [SANDBOX_AUDIT_CORPUS[index]!],
    rowIndex: index,
    block: async (units) => {
      for (let i = 0; i < units; i++) sink += classifyCommand(command).verdict.length;
    },
    unitsPerBlock: 1,
    perUnitMs: [],
    gcEachBlock: false,
  };
}

// ---------------------------------------------------------------------------------------------
// Sanity checks: refuse to time anything that does not do what it claims.

function fail(key: string, what: string): never {
  throw new Error(`sanity check failed for ${key}: ${what}. Refusing to time a broken run.`);
}

async function checkWrapper(config: WrapperConfig): Promise<void> {
  const runtime = makeRuntime("bench-sanity");
  const names = new Set(config.chain.map((m) => m.name));
  let baseCalls = 0;
  const counted: ToolHandler = (request) => {
    baseCalls++;
    return baseHandler(request);
  };
  const toolCall = toolCallFor(config.tool, 0);
  const eventsBefore = auditEvents;
  // The timed path, once (what the timed blocks run), then the same chain over a counting base.
  const timed = await config.callOnce(runtime);
  const result = await config.chain.reduceRight<ToolHandler>((next, mw) => (request) => mw.wrapToolCall!(request, next), counted)({
    toolCall,
    tool: tools[config.tool],
    state: stateFor(toolCall),
    runtime,
  });
  const events = auditEvents - eventsBefore;
  for (const r of [timed, result]) {
    if (!ToolMessage.isInstance(r)) fail(config.key, `returned ${isCommand(r) ? "a Command" : typeof r}, expected a ToolMessage`);
    if (r.content !== "ok" || r.tool_call_id !== toolCall.id || r.name !== config.tool || r.status === "error") {
      fail(config.key, `returned ${JSON.stringify({ content: r.content, id: r.tool_call_id, name: r.name, status: r.status })}`);
    }
    const kwargs = r.additional_kwargs ?? {};
    if (names.has("ToolReceipt") !== (TOOL_RECEIPT_KEY in kwargs)) fail(config.key, `receipt stamp present: ${TOOL_RECEIPT_KEY in kwargs}`);
    if (names.has("ToolErrorHandling") !== (TOOL_META_KEY in kwargs)) fail(config.key, `tool meta present: ${TOOL_META_KEY in kwargs}`);
  }
  if (baseCalls !== 1) fail(config.key, `the tool handler ran ${baseCalls} times through the chain, expected once`);
  const wantEvents = names.has("SandboxAudit") && config.tool === "bash" ? 2 : 0;
  if (events !== wantEvents) fail(config.key, `${events} sandbox_audit events for two calls, expected ${wantEvents}`);
  const progress = Object.keys(runtime.scope.snapshot()).some((k) => k.startsWith("ToolProgress"));
  if (names.has("ToolProgress") !== progress) fail(config.key, `ToolProgress run state present: ${progress}`);
  if (runtime.scope.has("sandbox:acquired_id")) fail(config.key, "a sandbox was acquired; the tools must not touch the sandbox");
}

async function checkEngine(config: EngineConfig): Promise<void> {
  const rounds = config.workload === "A" ? 0 : TOOL_CALLS;
  let last: { messages: BaseMessage[] } | undefined;
  let events = 0;
  for await (const chunk of config.agent.stream(
    { messages: [new HumanMessage("go")] },
    { threadId: THREAD_ID, streamMode: ["values", "custom"] },
  )) {
    const [mode, value] = chunk as [string, unknown];
    if (mode === "values") last = value as { messages: BaseMessage[] };
    else if ((value as { type?: unknown } | null)?.type === SANDBOX_AUDIT_EVENT) events++;
  }
  const messages = last?.messages ?? [];
  const types = messages.map((m) => m.getType());
  const wantTypes = ["human", ...Array.from({ length: rounds }, () => ["ai", "tool"]).flat(), "ai"];
  if (JSON.stringify(types) !== JSON.stringify(wantTypes)) fail(config.key, `messages [${types}], expected [${wantTypes}]`);
  const toolMessages = messages.filter((m) => ToolMessage.isInstance(m)) as ToolMessage[];
  const stamped = config.set !== "none";
  const receipts = stamped && config.set !== "tool_side_wrap_only_without_receipt";
  for (const [i, m] of toolMessages.entries()) {
    if (m.content !== "ok" || m.name !== config.tool || m.tool_call_id !== `call_${i}`) {
      fail(config.key, `tool message ${i} is ${JSON.stringify({ content: m.content, name: m.name, id: m.tool_call_id })}`);
    }
    const kwargs = m.additional_kwargs ?? {};
    if (receipts !== TOOL_RECEIPT_KEY in kwargs || stamped !== TOOL_META_KEY in kwargs) fail(config.key, `tool message ${i} stamps: ${Object.keys(kwargs)}`);
  }
  const wantEvents = stamped && config.tool === "bash" ? rounds : 0;
  if (events !== wantEvents) fail(config.key, `${events} sandbox_audit events, expected ${wantEvents}`);
  // The timed path (invoke) must give the same message list as the checked stream.
  const viaInvoke = (await config.run()).map((m) => m.getType());
  if (JSON.stringify(viaInvoke) !== JSON.stringify(wantTypes)) fail(config.key, `invoke gave [${viaInvoke}]`);
}

function checkCorpus(): void {
  const wrong = SANDBOX_AUDIT_CORPUS.map((row, index) => ({ index, row, got: classifyCommand(row.command).verdict })).filter(
    ({ row, got }) => got !== row.verdict,
  );
  if (wrong.length > 0) {
    fail("classify", `${wrong.length} corpus rows classify differently, first #${wrong[0]!.index} ${JSON.stringify(wrong[0]!.row)} → ${wrong[0]!.got}`);
  }
  if (classifyCommand(BASH_COMMAND).verdict !== "pass") fail("classify", `BASH_COMMAND ${JSON.stringify(BASH_COMMAND)} does not pass`);
}

// ---------------------------------------------------------------------------------------------
// Timing

/** Time spent in collectGarbage between blocks (reported on stderr: it is part of the bench's wall time). */
let gcMs = 0;
function timedGc(kind: "major" | "minor"): void {
  const start = performance.now();
  collectGarbage(kind);
  gcMs += performance.now() - start;
}

async function timeBlock(config: Timed, units: number): Promise<number> {
  if (config.gcEachBlock) timedGc("minor");
  const start = performance.now();
  await config.block(units);
  return performance.now() - start;
}

/** Warm up for `warmupMs` (at least 3 units), then size a block to about `blockMs`. */
async function warmUpAndCalibrate(config: Timed, warmupMs: number, blockMs: number): Promise<void> {
  config.unitsPerBlock = await calibrateBlock({ warmupMs, blockMs, run: (units) => config.block(units), time: (units) => timeBlock(config, units) });
}

// ---------------------------------------------------------------------------------------------
// Main

/** [p25, p75] of per-sample figures: how far apart the samples were. */
const iqr = (values: readonly number[]) => [r3(quantile(values, 0.25)), r3(quantile(values, 0.75))];

function preview(command: string): string {
  const cps = Array.from(command);
  return cps.length > 60 ? `${cps.slice(0, 24).join("")}…(${cps.length} code points)` : command;
}

async function main(): Promise<void> {
  const { runtime, version } = runtimeInfo();
  const samples = Math.round(envNumber("BENCH_SAMPLES", 13));
  const blockMs = envNumber("BENCH_BLOCK_MS", 10);
  const engineBlockMs = envNumber("BENCH_ENGINE_BLOCK_MS", 80);
  const warmupMs = envNumber("BENCH_WARMUP_MS", 100);
  const rowBlockMs = envNumber("BENCH_ROW_BLOCK_MS", 0.5);
  const began = performance.now();
  const loadAtStart = loadAverage();

  const toolSide = toolSideMiddlewares();
  const wrappers: WrapperConfig[] = [];
  for (const tool of TOOL_NAMES) {
    wrappers.push(wrapperConfig(tool, "none", []));
    for (const m of toolSide) wrappers.push(wrapperConfig(tool, m.name, [m]));
    wrappers.push(wrapperConfig(tool, "all", toolSide));
  }
  const wrapOnlySide = toolSide.map(wrapOnly);
  const engines: EngineConfig[] = [
    engineConfig("none", "A", null, []),
    engineConfig("tool_side", "A", null, toolSide),
  ];
  for (const tool of TOOL_NAMES) {
    engines.push(engineConfig("none", "B", tool, []));
    engines.push(engineConfig("tool_side", "B", tool, toolSide));
    engines.push(engineConfig("tool_side_wrap_only", "B", tool, wrapOnlySide));
    engines.push(engineConfig("tool_side_wrap_only_without_receipt", "B", tool, wrapOnlySide.filter((m) => m.name !== "ToolReceipt")));
  }
  const shortRows = SANDBOX_AUDIT_CORPUS.filter((row) => codePoints(row.command) <= SHORT_ROW_MAX_CODE_POINTS);
  const throughput = [throughputConfig("all_rows", SANDBOX_AUDIT_CORPUS), throughputConfig("short_rows", shortRows)];
  const rows = SANDBOX_AUDIT_CORPUS.map((_, i) => rowConfig(i));

  log(`${runtime} ${version}: sanity check of ${wrappers.length} wrapper chains, ${engines.length} engine configurations, ${SANDBOX_AUDIT_CORPUS.length} corpus rows`);
  for (const config of wrappers) await checkWrapper(config);
  for (const config of engines) await checkEngine(config);
  checkCorpus();
  log(
    `sanity check passed (${((performance.now() - began) / 1000).toFixed(1)} s); warming up (${warmupMs} ms each), gc between blocks: ${collectGarbage() ? "yes" : "no (run with --expose-gc)"}`,
  );
  for (const config of [...wrappers, ...throughput]) await warmUpAndCalibrate(config, warmupMs, blockMs);
  log(`wrapper and throughput warm-up done (${((performance.now() - began) / 1000).toFixed(1)} s)`);
  for (const config of engines) await warmUpAndCalibrate(config, 2 * warmupMs, engineBlockMs);
  log(`engine warm-up done (${((performance.now() - began) / 1000).toFixed(1)} s)`);
  for (const config of rows) await warmUpAndCalibrate(config, Math.min(warmupMs, 2), rowBlockMs);
  log(`warm-up done (${((performance.now() - began) / 1000).toFixed(1)} s)`);

  // A sample times every configuration once. Configurations compared with each other (a wrapper
  // chain and the direct handler of the same tool; the three middleware sets of one engine workload)
  // run back to back as a group, groups and members in an order shuffled per sample.
  const groups = groupBy([...wrappers, ...engines, ...throughput, ...rows], (config) => config.group);
  await runSamples(
    groups,
    samples,
    async (config) => {
      const elapsed = await timeBlock(config, config.unitsPerBlock);
      config.perUnitMs.push(elapsed / config.unitsPerBlock);
    },
    {
      // A full collection once per group, a scavenge before each block (timeBlock): a block starts
      // with an empty young generation and pays mostly for its own garbage.
      beforeGroup: () => timedGc("major"),
      afterSample: (s) => log(`sample ${s + 1}/${samples} done (${((performance.now() - began) / 1000).toFixed(1)} s, ${(gcMs / 1000).toFixed(1)} s of it in gc)`),
    },
  );

  const base = { bench: "tool-side", runtime, runtime_version: version };

  // Part 1
  const direct = (tool: ToolName, name: string) => wrappers.find((c) => c.tool === tool && c.wrappers === name)!;
  const wrapperOverheadUs = (config: WrapperConfig) => {
    const none = direct(config.tool, "none").perUnitMs;
    return median(config.perUnitMs.map((t, s) => (t - none[s]!) * 1000));
  };
  for (const config of wrappers) {
    emit({
      ...base,
      kind: "wrapper",
      tool: config.tool,
      wrappers: config.wrappers,
      middlewares: config.chain.map((m) => m.name),
      per_call_us_median: r3(median(config.perUnitMs) * 1000),
      per_call_us_p25: r3(quantile(config.perUnitMs, 0.25) * 1000),
      per_call_us_p75: r3(quantile(config.perUnitMs, 0.75) * 1000),
      overhead_per_call_us: config.wrappers === "none" ? null : r3(wrapperOverheadUs(config)),
      samples,
      calls_per_block: config.unitsPerBlock,
    });
  }

  // Part 2
  const engine = (set: EngineSet, workload: Workload, tool: ToolName | null) =>
    engines.find((c) => c.set === set && c.workload === workload && c.tool === tool)!;
  const perRunExtra = (config: EngineConfig) => {
    const bare = engine("none", config.workload, config.tool).perUnitMs;
    return config.perUnitMs.map((t, s) => t - bare[s]!);
  };
  for (const config of engines) {
    emit({
      ...base,
      kind: "engine",
      middlewares: config.set,
      workload: config.workload,
      tool: config.tool,
      model_steps_per_run: config.workload === "A" ? 1 : TOOL_CALLS + 1,
      tool_calls_per_run: config.workload === "A" ? 0 : TOOL_CALLS,
      per_run_ms_median: r4(median(config.perUnitMs)),
      per_run_ms_p25: r4(quantile(config.perUnitMs, 0.25)),
      per_run_ms_p75: r4(quantile(config.perUnitMs, 0.75)),
      overhead_per_run_ms: config.set === "none" ? null : r4(median(perRunExtra(config))),
      samples,
      runs_per_block: config.unitsPerBlock,
    });
  }
  const fullA = perRunExtra(engine("tool_side", "A", null));
  const engineFigures = Object.fromEntries(
    TOOL_NAMES.map((tool) => {
      const wrapB = perRunExtra(engine("tool_side_wrap_only", "B", tool));
      const wrapNoReceiptB = perRunExtra(engine("tool_side_wrap_only_without_receipt", "B", tool));
      const fullB = perRunExtra(engine("tool_side", "B", tool));
      const bareB = median(engine("none", "B", tool).perUnitMs);
      const wrapOnlyUs = wrapB.map((o) => (o / TOOL_CALLS) * 1000);
      const withoutReceiptUs = wrapNoReceiptB.map((o) => (o / TOOL_CALLS) * 1000);
      const fullRoundUs = fullB.map((o, s) => ((o - fullA[s]!) / TOOL_CALLS) * 1000);
      return [
        tool,
        {
          bare_per_run_ms: r4(bareB),
          bare_per_tool_round_us: r3(((bareB - median(engine("none", "A", null).perUnitMs)) / TOOL_CALLS) * 1000),
          wrap_only_per_tool_call_us: r3(median(wrapOnlyUs)),
          wrap_only_per_tool_call_us_iqr: iqr(wrapOnlyUs),
          wrap_only_without_receipt_per_tool_call_us: r3(median(withoutReceiptUs)),
          wrap_only_without_receipt_per_tool_call_us_iqr: iqr(withoutReceiptUs),
          full_per_tool_round_us: r3(median(fullRoundUs)),
          full_per_tool_round_us_iqr: iqr(fullRoundUs),
          full_run_time_vs_bare: r4(median(engine("tool_side", "B", tool).perUnitMs) / bareB),
        },
      ];
    }),
  );

  // Part 3
  const rowUs = rows.map((config) => median(config.perUnitMs) * 1000);
  const ranked = rows.map((config, i) => ({ index: config.rowIndex!, us: rowUs[i]! })).sort((a, b) => a.us - b.us);
  const p99Rank = Math.ceil(0.99 * ranked.length); // 1-based nearest rank
  const describeRow = (entry: { index: number; us: number }) => {
    const row = SANDBOX_AUDIT_CORPUS[entry.index]!;
    return {
      index: entry.index,
      group: row.group,
      verdict: row.verdict,
      code_points: codePoints(row.command),
      command: preview(row.command),
      us: r3(entry.us),
    };
  };
  const passFigures = (config: ClassifyConfig) => {
    const usPerCommand = median(config.perUnitMs.map((ms) => (ms * 1000) / config.rows.length));
    return { rows: config.rows.length, us_per_command: r3(usPerCommand), commands_per_s: Math.round(1e6 / usPerCommand), passes_per_block: config.unitsPerBlock };
  };
  const classify = {
    corpus_rows: SANDBOX_AUDIT_CORPUS.length,
    all_rows: passFigures(throughput[0]!),
    short_rows: { ...passFigures(throughput[1]!), max_code_points: SHORT_ROW_MAX_CODE_POINTS },
    per_row_us: {
      p50: r3(quantile(rowUs, 0.5)),
      p90: r3(quantile(rowUs, 0.9)),
      p99_nearest_rank: r3(ranked[p99Rank - 1]!.us),
      max: r3(ranked.at(-1)!.us),
    },
    p99_row: { rank: p99Rank, ...describeRow(ranked[p99Rank - 1]!) },
    slowest_rows: ranked.slice(-5).reverse().map(describeRow),
  };
  emit({ ...base, kind: "classify", ...classify, samples, sink: sink % 7 });

  // Summary
  const perWrapper = Object.fromEntries(
    TOOL_NAMES.map((tool) => [
      tool,
      {
        direct_handler_per_call_us: r3(median(direct(tool, "none").perUnitMs) * 1000),
        ...Object.fromEntries([...TOOL_SIDE_NAMES, "all"].map((name) => [name, r3(wrapperOverheadUs(direct(tool, name)))])),
      },
    ]),
  );
  emit({
    ...base,
    summary: true,
    tool_side_middlewares: [...TOOL_SIDE_NAMES],
    tool_calls_per_run: TOOL_CALLS,
    bash_command: BASH_COMMAND,
    bash_tool: "double: the real bash tool's name, description and schema, a body that returns \"ok\" without a shell",
    wrapper_overhead_per_call_us: perWrapper,
    engine: engineFigures,
    classify: {
      commands_per_s: classify.all_rows.commands_per_s,
      us_per_command: classify.all_rows.us_per_command,
      short_rows_commands_per_s: classify.short_rows.commands_per_s,
      short_rows_us_per_command: classify.short_rows.us_per_command,
      per_row_us_p50: classify.per_row_us.p50,
      p99_row: classify.p99_row,
      slowest_row: classify.slowest_rows[0],
    },
    definitions: {
      wrapper_overhead_per_call_us:
        "median over samples of (chain − direct handler) per call, same tool, same sample; the chain composed per call as the engine does",
      wrap_only_per_tool_call_us: "median over samples of (wrap-only B − bare B) / N",
      wrap_only_without_receipt_per_tool_call_us: "the same with ToolReceipt left out of the wrap-only chain",
      full_per_tool_round_us:
        "median over samples of ((full B − bare B) − (full A − bare A)) / N: a tool call plus these middlewares' hooks on the model step it adds",
      bare_per_tool_round_us: "(bare B − bare A) / N from the medians: what the engine itself spends per tool call and its extra model step",
      us_per_command: "median over samples of pass time / rows (mean over the corpus rows); commands_per_s = 1e6 / us_per_command",
      p99_row: "nearest rank ⌈0.99 · rows⌉ of the per-row medians (each row timed alone, repeated to ~BENCH_ROW_BLOCK_MS)",
    },
    samples,
    settings: { block_ms: blockMs, engine_block_ms: engineBlockMs, warmup_ms: warmupMs, row_block_ms: rowBlockMs, gc_between_blocks: collectGarbage() },
    total_s: r3((performance.now() - began) / 1000),
    load_avg_1m: { start: loadAtStart, end: loadAverage() },
  });
}

runBench("tool-side", main);

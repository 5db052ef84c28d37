/**
 * extensions: what contributed middlewares cost.
 *
 * 1. Build: assembleLeadAgent (code-default lead config, demo model, shared memory store) with a
 *    LoadedExtensions built in-process through HostExtensionRegistry, holding 0, 10 or 50 middleware
 *    contributors, each contributing one pass-through middleware at Placement.STANDARD. Reported as
 *    ms per build and the ratio to 0 contributed middlewares (same run, interleaved).
 * 2. Isolation wrapper, per call: the wrapModelCall / wrapToolCall of isolateMiddleware(inner, ...)
 *    around a pass-through middleware, called directly with a trivial handler, against the bare
 *    inner middleware's hooks called the same way (and the handler called alone, as the floor).
 * 3. Isolation wrapper through the engine: createAgent with 10 isolated vs 10 bare pass-through
 *    middlewares (and 0, for reference) on a scripted model and a no-op tool; per model step
 *    (workload A: 1 model step per run) and per tool call (workload B: 5 steps, 4 tool calls).
 *
 * Run: npx tsx --expose-gc bench/extensions.ts | npx deno run -A --v8-flags=--expose-gc
 * bench/extensions.ts | npx bun bench/extensions.ts (or `npm run bench` for all benches, all three).
 * Env knobs: BENCH_SAMPLES (default 13), BENCH_BLOCK_MS (target ms per timed block, default 30;
 * build and engine blocks are twice that), BENCH_WARMUP_MS (per configuration, default 200).
 *
 * Output: one JSON line per configuration on stdout, then one summary line. Progress goes to stderr.
 *
 * Definitions (also in the summary line):
 * - per_op_median: median over samples of (block time / operations in block); the unit is in the
 *   line (ms per build, ns per hook call, ms per engine run).
 * - build.ratio_N_vs_0: median ms per build at N contributed middlewares / at 0 (medians);
 *   _paired: median over samples of the per-sample ratio (blocks of a sample ran back to back).
 * - hooks.*.added_ns_per_call: median over samples of (isolated − bare ns per call), same sample.
 * - engine.added_ms_per_model_step: median over samples of (isolated-10 A − bare-10 A per run),
 *   the 10 wrappers together; as in bench/chain-overhead.ts, a per-run difference F lands here
 *   too. engine.added_ms_per_tool_call: median over samples of ((iso B − bare B) − 5 × (iso A −
 *   bare A)) / 4, i.e. t − F. The wrappers add ~µs per step against a step of 0.25–2 ms, so the
 *   engine figures are at the noise floor; _p25/_p75 show it, and direct_estimate_us_per_model_step
 *   (10 × the direct per-call difference) is the figure to compare them with.
 */
// Installed first, as in bench/chain-overhead.ts
// (docs/toolchain.md, AsyncLocalStorage before any import).
import "../adapters/shared/als.ts";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { validateLeadConfig } from "../src/agents/app-config.ts";
import { assembleLeadAgent } from "../src/agents/lead-agent.ts";
import { systemClock } from "../src/core/clock.ts";
import { mapEnv } from "../src/core/env.ts";
import { createAgent, type AgentMiddleware, type ModelRequest, type ToolCallRequest } from "../src/engine/index.ts";
import { Placement, type MiddlewareContributor } from "../src/extension-api/index.ts";
import { isolateMiddleware, type ExtensionDiagnostic } from "../src/extensions/isolation.ts";
import { HostExtensionRegistry, type LoadedExtensions } from "../src/extensions/registry.ts";
import { createMemoryStore } from "../src/middlewares/memory/store.ts";
import { createVirtualSandboxProvider } from "../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import { ScriptedChatModel, ourNoop } from "./scripted.ts";
import { collectGarbage, emit, envNumber, groupBy, loadAverage, median, progressLog, quantile, round4 as round, runBench, runSamples, runtimeInfo, calibrateBlock } from "./harness.ts";

const log = progressLog("extensions");

// ---------------------------------------------------------------------------------------------
// Pass-through middlewares

/** Counts every pass-through hook call, so the sanity check can prove the hooks really ran. */
let hookCalls = 0;

function passThrough(name: string): AgentMiddleware {
  return {
    name,
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

/** Every diagnostic the wrappers report; the sanity check and the summary require none. */
const diagnostics: ExtensionDiagnostic[] = [];
const onDiagnostic = (d: ExtensionDiagnostic) => void diagnostics.push(d);

function isolated(index: number): AgentMiddleware {
  return isolateMiddleware(passThrough(`pass_through_${index}`), { source: `bench-ext-${index}`, name: `extension_bench-ext-${index}_pass_through_${index}_0`, onDiagnostic });
}

// ---------------------------------------------------------------------------------------------
// Configurations

type Kind = "build" | "hook" | "engine";
/**
 * Block length per kind, in BENCH_BLOCK_MS: builds and engine runs take milliseconds each and
 * allocate enough to trigger collections inside a block, so they get longer blocks.
 */
const BLOCK_FACTOR: Record<Kind, number> = { build: 2, hook: 1, engine: 2 };

interface Config {
  readonly key: string;
  readonly kind: Kind;
  readonly fields: Record<string, unknown>;
  /** Unit of one operation's time in the output. */
  readonly unit: "ms" | "ns";
  /** `ops` operations; resolves when done. */
  readonly block: (ops: number) => Promise<void>;
  /** Runs one operation and checks what it did; throws when the configuration is broken. */
  readonly check: () => Promise<void>;
  opsPerSample: number;
  readonly perOpMs: number[];
}

function fail(key: string, what: string): never {
  throw new Error(`sanity check failed for ${key}: ${what}. Refusing to time a broken run.`);
}

// --- 1. Agent build ---------------------------------------------------------------------------

const BUILD_COUNTS = [0, 10, 50] as const;
const storage = createMemoryKeyValue();
const services = { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) };
const memoryStore = createMemoryStore(storage, systemClock);
const leadConfig = validateLeadConfig({}, "bench");
const env = mapEnv({});

function loadedExtensions(count: number): LoadedExtensions {
  const registry = new HostExtensionRegistry();
  for (let i = 0; i < count; i++) {
    const contributor: MiddlewareContributor = {
      // A fresh middleware per build, as a contributor asked once per agent build would return.
      contributeMiddlewares: () => [
        {
          middleware: { name: `pass_through_${i}`, wrapModelCall: (r: ModelRequest, h: (r: ModelRequest) => Promise<AIMessage>) => h(r), wrapToolCall: (r: ToolCallRequest, h: (r: ToolCallRequest) => Promise<unknown>) => h(r) },
          placement: Placement.STANDARD,
        },
      ],
    };
    registry.attributedTo(`bench-ext-${i}`, (view) => view.middlewares(contributor));
  }
  return registry.build();
}

let coreChainLength = -1;

function buildConfig(count: number): Config {
  const extensions = loadedExtensions(count);
  const build = () => assembleLeadAgent({ config: leadConfig, extensions, services, env, memoryStore });
  const key = `build/${count}`;
  return {
    key,
    kind: "build",
    fields: { contributed_middlewares: count },
    unit: "ms",
    block: async (ops) => {
      for (let i = 0; i < ops; i++) await build();
    },
    check: async () => {
      const assembly = await build();
      if (assembly.diagnostics.length > 0) fail(key, `diagnostics ${JSON.stringify(assembly.diagnostics)}`);
      const names = assembly.agent.middlewares.map((m) => m.name);
      const contributed = names.filter((n) => n.startsWith("extension_"));
      if (contributed.length !== count) fail(key, `${contributed.length} contributed middlewares in the chain, expected ${count}: ${JSON.stringify(names)}`);
      if (count === 0) coreChainLength = names.length;
      else if (names.length !== coreChainLength + count) fail(key, `chain of ${names.length}, expected ${coreChainLength} + ${count}`);
      if (assembly.memoryStore !== memoryStore) fail(key, "the build did not use the shared memory store");
    },
    opsPerSample: 1,
    perOpMs: [],
  };
}

// --- 2. Hooks called directly ----------------------------------------------------------------

type HookName = "wrapModelCall" | "wrapToolCall";
type HookVariant = "handler-only" | "bare" | "isolated";
const HOOK_VARIANTS: readonly HookVariant[] = ["handler-only", "bare", "isolated"];

const MODEL_RESULT = new AIMessage({ content: "ok" });
const TOOL_RESULT = new ToolMessage({ content: "ok", tool_call_id: "call_0", name: "noop" });
// Only `runtime` is read by the wrapper (for runtime.signal, on failure); the rest is never touched.
const fakeRuntime = { signal: undefined };
const modelRequest = { messages: [], tools: [], runtime: fakeRuntime } as unknown as ModelRequest;
const toolRequest = { toolCall: { name: "noop", args: {}, id: "call_0" }, runtime: fakeRuntime } as unknown as ToolCallRequest;
const modelHandler = async (_request: ModelRequest): Promise<AIMessage> => MODEL_RESULT;
const toolHandler = async (_request: ToolCallRequest): Promise<ToolMessage> => TOOL_RESULT;

function hookConfig(hook: HookName, variant: HookVariant): Config {
  const bare = passThrough("pass_through_direct");
  const mw: AgentMiddleware =
    variant === "isolated" ? isolateMiddleware(bare, { source: "bench-ext", name: "extension_bench-ext_pass_through_direct_0", onDiagnostic }) : bare;
  const call: () => Promise<unknown> =
    variant === "handler-only"
      ? hook === "wrapModelCall"
        ? () => modelHandler(modelRequest)
        : () => toolHandler(toolRequest)
      : hook === "wrapModelCall"
        ? () => mw.wrapModelCall!(modelRequest, modelHandler)
        : () => mw.wrapToolCall!(toolRequest, toolHandler);
  const expected = hook === "wrapModelCall" ? MODEL_RESULT : TOOL_RESULT;
  const key = `hook/${hook}/${variant}`;
  return {
    key,
    kind: "hook",
    fields: { hook, variant },
    unit: "ns",
    block: async (ops) => {
      for (let i = 0; i < ops; i++) await call();
    },
    check: async () => {
      const before = hookCalls;
      const result = await call();
      if (result !== expected) fail(key, "the hook did not return the handler's result");
      const want = variant === "handler-only" ? 0 : 1;
      if (hookCalls - before !== want) fail(key, `${hookCalls - before} pass-through hook calls, expected ${want}`);
    },
    opsPerSample: 1,
    perOpMs: [],
  };
}

// --- 3. Through the engine -------------------------------------------------------------------

const ENGINE_MIDDLEWARES = 10;
const TOOL_ROUNDS_B = 4;
type Workload = "A" | "B";
type EngineVariant = "none" | "bare" | "isolated";
/** "none" (0 middlewares) only for workload A, as the reference step time. */
const ENGINE_CONFIGS: readonly (readonly [EngineVariant, Workload])[] = [
  ["none", "A"],
  ["bare", "A"],
  ["isolated", "A"],
  ["bare", "B"],
  ["isolated", "B"],
];

const toolRounds: Record<Workload, number> = { A: 0, B: TOOL_ROUNDS_B };
const modelSteps: Record<Workload, number> = { A: 1, B: TOOL_ROUNDS_B + 1 };

function engineConfig(variant: EngineVariant, workload: Workload): Config {
  const count = variant === "none" ? 0 : ENGINE_MIDDLEWARES;
  const agent = createAgent({
    model: new ScriptedChatModel(toolRounds[workload]),
    tools: [ourNoop],
    middlewares: Array.from({ length: count }, (_, i) => (variant === "isolated" ? isolated(i) : passThrough(`pass_through_${i}`))),
    services: { clock: systemClock },
    recursionLimit: 10_000,
  });
  const run = async () => (await agent.invoke({ messages: [new HumanMessage("go")] })).messages;
  const key = `engine/${variant}/${workload}`;
  return {
    key,
    kind: "engine",
    fields: { variant, middlewares: count, workload, model_steps_per_run: modelSteps[workload], tool_calls_per_run: toolRounds[workload] },
    unit: "ms",
    block: async (ops) => {
      for (let i = 0; i < ops; i++) await run();
    },
    check: async () => {
      const before = hookCalls;
      const messages = await run();
      const wanted = ["human", ...Array.from({ length: toolRounds[workload] }, () => ["ai", "tool"]).flat(), "ai"];
      const got = messages.map((m) => m.getType());
      if (JSON.stringify(got) !== JSON.stringify(wanted)) fail(key, `messages [${got}], expected [${wanted}]`);
      const want = count * (modelSteps[workload] + toolRounds[workload]);
      if (hookCalls - before !== want) fail(key, `${hookCalls - before} pass-through hook calls, expected ${want}`);
    },
    opsPerSample: 1,
    perOpMs: [],
  };
}

// ---------------------------------------------------------------------------------------------
// Timing

async function timeBlock(config: Config, ops: number): Promise<number> {
  collectGarbage();
  const start = performance.now();
  await config.block(ops);
  return performance.now() - start;
}

async function warmUpAndCalibrate(config: Config, warmupMs: number, blockMs: number): Promise<void> {
  config.opsPerSample = await calibrateBlock({ warmupMs, blockMs, run: (ops) => config.block(ops), time: (ops) => timeBlock(config, ops) });
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

  const configs: Config[] = [
    ...BUILD_COUNTS.map(buildConfig),
    ...(["wrapModelCall", "wrapToolCall"] as const).flatMap((hook) => HOOK_VARIANTS.map((variant) => hookConfig(hook, variant))),
    ...ENGINE_CONFIGS.map(([variant, workload]) => engineConfig(variant, workload)),
  ];

  log(`${runtime} ${version}: sanity check of ${configs.length} configurations`);
  for (const config of configs) await config.check();
  if (diagnostics.length > 0) throw new Error(`the isolation wrappers reported ${JSON.stringify(diagnostics)}; refusing to time them`);
  log(`sanity check passed; warming up (${warmupMs} ms each), gc between blocks: ${collectGarbage() ? "yes" : "no (run with --expose-gc)"}`);
  for (const config of configs) await warmUpAndCalibrate(config, warmupMs, BLOCK_FACTOR[config.kind] * blockMs);

  // Configurations compared with each other (same kind; for the engine, same workload) run back to
  // back as a group, in an order shuffled per sample.
  const groups = groupBy(configs, (config) =>
    config.kind === "engine" ? `engine/${String(config.fields.workload)}` : config.kind === "hook" ? `hook/${String(config.fields.hook)}` : "build",
  );
  await runSamples(
    groups,
    samples,
    async (config) => {
      const elapsed = await timeBlock(config, config.opsPerSample);
      config.perOpMs.push(elapsed / config.opsPerSample);
    },
    { afterSample: (s) => log(`sample ${s + 1}/${samples} done (${((performance.now() - began) / 1000).toFixed(1)} s)`) },
  );
  const closedCleanly = await memoryStore.close();
  if (diagnostics.length > 0) throw new Error(`the isolation wrappers reported ${diagnostics.length} diagnostics while timed: ${JSON.stringify(diagnostics[0])}`);

  const find = (key: string) => configs.find((c) => c.key === key)!;
  const scale = (config: Config) => (config.unit === "ns" ? 1e6 : 1);
  for (const config of configs) {
    const k = scale(config);
    emit({
      bench: "extensions",
      runtime,
      runtime_version: version,
      measure: config.kind,
      ...config.fields,
      unit: `${config.unit} per ${config.kind === "build" ? "build" : config.kind === "hook" ? "call" : "run"}`,
      per_op_median: round(median(config.perOpMs) * k),
      per_op_p25: round(quantile(config.perOpMs, 0.25) * k),
      per_op_p75: round(quantile(config.perOpMs, 0.75) * k),
      samples,
      ops_per_sample: config.opsPerSample,
    });
  }

  // Build.
  const build0 = find("build/0").perOpMs;
  const build: Record<string, unknown> = {};
  for (const count of BUILD_COUNTS) {
    const t = find(`build/${count}`).perOpMs;
    build[`ms_per_build_${count}`] = round(median(t));
    if (count > 0) {
      build[`ratio_${count}_vs_0`] = round(median(t) / median(build0));
      build[`ratio_${count}_vs_0_paired`] = round(median(t.map((x, s) => x / build0[s]!)));
      build[`added_ms_per_contributed_middleware_${count}`] = round(median(t.map((x, s) => x - build0[s]!)) / count);
    }
  }

  // Hooks called directly.
  const hooks: Record<string, unknown> = {};
  for (const hook of ["wrapModelCall", "wrapToolCall"] as const) {
    const only = find(`hook/${hook}/handler-only`).perOpMs;
    const bare = find(`hook/${hook}/bare`).perOpMs;
    const iso = find(`hook/${hook}/isolated`).perOpMs;
    hooks[hook] = {
      handler_only_ns: round(median(only) * 1e6),
      bare_ns: round(median(bare) * 1e6),
      isolated_ns: round(median(iso) * 1e6),
      added_ns_per_call: round(median(iso.map((x, s) => x - bare[s]!)) * 1e6),
      isolated_vs_bare: round(median(iso) / median(bare)),
    };
  }

  // Through the engine.
  const isoA = find("engine/isolated/A").perOpMs;
  const bareA = find("engine/bare/A").perOpMs;
  const noneA = find("engine/none/A").perOpMs;
  const isoB = find("engine/isolated/B").perOpMs;
  const bareB = find("engine/bare/B").perOpMs;
  const addedA = isoA.map((x, s) => x - bareA[s]!);
  const addedPerTool = isoB.map((x, s) => (x - bareB[s]! - modelSteps.B * addedA[s]!) / TOOL_ROUNDS_B);
  const engine = {
    middlewares: ENGINE_MIDDLEWARES,
    step_ms_none: round(median(noneA)),
    step_ms_bare: round(median(bareA)),
    step_ms_isolated: round(median(isoA)),
    added_ms_per_model_step: round(median(addedA)),
    // The spread of the paired differences: when it straddles 0, the engine run cannot resolve the
    // wrappers' cost from noise, and the direct per-call figure times 10 is the better estimate.
    added_ms_per_model_step_p25: round(quantile(addedA, 0.25)),
    added_ms_per_model_step_p75: round(quantile(addedA, 0.75)),
    direct_estimate_us_per_model_step: round((ENGINE_MIDDLEWARES * (median(find("hook/wrapModelCall/isolated").perOpMs) - median(find("hook/wrapModelCall/bare").perOpMs))) * 1000),
    added_us_per_model_step_per_middleware: round((median(addedA) * 1000) / ENGINE_MIDDLEWARES),
    isolated_vs_bare_step_time: round(median(isoA) / median(bareA)),
    isolated_vs_bare_step_time_paired: round(median(isoA.map((x, s) => x / bareA[s]!))),
    run_ms_bare_workload_B: round(median(bareB)),
    run_ms_isolated_workload_B: round(median(isoB)),
    isolated_vs_bare_workload_B: round(median(isoB) / median(bareB)),
    added_ms_per_tool_call: round(median(addedPerTool)),
  };

  emit({
    bench: "extensions",
    summary: true,
    runtime,
    runtime_version: version,
    build,
    hooks,
    engine,
    memory_store_closed: closedCleanly,
    definitions: {
      build: "assembleLeadAgent with code-default lead config (demo model), one shared memory store; N contributors in a HostExtensionRegistry, each one pass-through middleware at STANDARD; ms_per_build = median over samples of block time / builds; ratio = median_N / median_0; _paired = median of per-sample ratios; added_ms_per_contributed_middleware = median over samples of (N − 0) / N",
      hooks: "await middleware.wrapX(request, trivialAsyncHandler) in a loop; handler_only = await handler(request); added_ns_per_call = median over samples of (isolated − bare)",
      engine: "createAgent (no checkpointer), scripted model, noop tool, 10 pass-through middlewares bare vs isolateMiddleware-wrapped (none = 0 middlewares); workload A = 1 model step per run, B = 5 steps and 4 tool calls; added_ms_per_model_step = median over samples of (isolated A − bare A), all 10 wrappers together; added_ms_per_tool_call = median over samples of ((iso B − bare B) − 5 × (iso A − bare A)) / 4; direct_estimate_us_per_model_step = 10 × (isolated − bare wrapModelCall ns per call, medians) / 1000",
    },
    total_s: round((performance.now() - began) / 1000),
    load_avg_1m: { start: loadAtStart, end: loadAverage() },
  });
}

runBench("extensions", main);

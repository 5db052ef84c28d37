/**
 * Where the CPU of a sampled profile goes, by category (bench/profile.ts, issue 18 point 2): each
 * sample is attributed to the first frame, walking from the leaf toward the root, whose script
 * matches a rule of CATEGORY_RULES; the profile's special nodes ((garbage collector), (program),
 * (idle)) have their own; a sample no frame of which matches is `other`. Pure: a profile in
 * (the DevTools `Profiler.stop` shape Node, Deno and Bun all return), figures out.
 */
import { median } from "./harness.ts";

/** The categories of cpu_ms_per_run, in output order. */
export const CATEGORIES = ["chain_hooks", "engine", "checkpoint_serde", "storage", "sandbox", "sse", "http", "model", "runs", "bench", "gc", "other"] as const;
export type Category = (typeof CATEGORIES)[number];

export interface CategoryRule {
  readonly category: Category;
  /** Script locations (see scriptLocation) the rule claims: a prefix ending in `/` is a folder, else one file. */
  readonly prefixes: readonly string[];
}

/**
 * The one table of which code is which category, most specific first: the first rule with a
 * prefix of a frame's location names its category. A frame no rule claims (runtime internals,
 * native functions, @langchain/core, src/core helpers) passes the sample on to its caller.
 */
export const CATEGORY_RULES: readonly CategoryRule[] = [
  // The checkpoint saver the gateway uses (src/runtime/kv-checkpointer.ts: records, base64, key
  // encoding) and LangGraph's serde it calls (serde/jsonplus.js dumpsTyped/loadsTyped, copyCheckpoint).
  {
    category: "checkpoint_serde",
    prefixes: ["node_modules/@langchain/langgraph-checkpoint/", "src/runtime/kv-checkpointer.ts", "src/runtime/kv-checkpoint-records.ts", "src/runtime/kv-checkpoint-keys.ts"],
  },
  // The KeyValue port and its drivers (the bench's counting decorator on it is the bench's own cost).
  { category: "storage", prefixes: ["src/storage/", "node_modules/unstorage/", "adapters/shared/fs-key-value.ts"] },
  // The virtual sandbox (just-bash in process), its file operations and the sandbox tools.
  { category: "sandbox", prefixes: ["src/sandbox/", "node_modules/just-bash/", "src/tools/sandbox-tools.ts", "src/tools/sandbox/"] },
  // The gateway's SSE encoder, Hono's streaming helper under it, and the state serialiser values frames go through.
  { category: "sse", prefixes: ["src/gateway/sse.ts", "node_modules/hono/dist/helper/streaming/", "node_modules/hono/dist/utils/stream.js", "src/runtime/serialize.ts"] },
  { category: "model", prefixes: ["src/models/"] },
  // The middleware chain: the middlewares' hooks, the agents' chain assembly, the extension stack.
  { category: "chain_hooks", prefixes: ["src/middlewares/", "src/agents/", "src/extensions/"] },
  { category: "engine", prefixes: ["src/engine/", "src/state/", "node_modules/@langchain/langgraph/"] },
  { category: "http", prefixes: ["src/gateway/", "node_modules/hono/"] },
  // The rest of a run's orchestration: runs manager and worker, journal, stream bridge, thread store.
  { category: "runs", prefixes: ["src/runtime/"] },
  // The bench's own client: building requests, reading SSE frames, checking the final state, counting storage calls.
  { category: "bench", prefixes: ["bench/"] },
];

/** The sandbox's CPU split by what it was doing (issue 18 point 2: "in the sandbox (start, commands, save)"). */
export const SANDBOX_PHASES = ["start", "commands", "files", "save", "unattributed"] as const;
export type SandboxPhase = (typeof SANDBOX_PHASES)[number];

export interface PhaseRule {
  readonly phase: Exclude<SandboxPhase, "unattributed">;
  /** A script location (one file). */
  readonly location: string;
  /** The functions of that file the rule claims; absent: all of them. */
  readonly functions?: readonly string[];
}

/**
 * Which frames tell a sandbox sample's phase: the first frame from the leaf toward the root that
 * a rule claims. A sample with none (an async continuation inside just-bash, whose caller is not
 * on the stack) is `unattributed`.
 */
export const SANDBOX_PHASE_RULES: readonly PhaseRule[] = [
  // Acquire: scope checks, the stored snapshot back in memory, just-bash's Bash built over it.
  { phase: "start", location: "src/sandbox/acquire.ts" },
  { phase: "start", location: "src/sandbox/scope.ts", functions: ["acquire"] },
  { phase: "start", location: "src/sandbox/virtual.ts", functions: ["open", "restoreTracked"] },
  { phase: "start", location: "src/sandbox/memory-fs.ts", functions: ["createShell", "restoreSnapshot"] },
  // Commands: the bash tool and the shell running a command.
  { phase: "commands", location: "src/tools/sandbox/bash.ts" },
  { phase: "commands", location: "src/sandbox/virtual.ts", functions: ["exec"] },
  { phase: "commands", location: "src/sandbox/memory-fs.ts", functions: ["runShell"] },
  // The file API (write_file, read_file, ls and the other file tools).
  { phase: "files", location: "src/sandbox/file-ops.ts" },
  { phase: "files", location: "src/tools/sandbox/files.ts" },
  // Release: the snapshot taken, merged if need be, written; changed uploads synced.
  { phase: "save", location: "src/sandbox/virtual.ts", functions: ["save", "persist", "flush", "writeSnapshot", "syncUploads", "bringUpTo"] },
  { phase: "save", location: "src/sandbox/memory-fs.ts", functions: ["takeSnapshot"] },
];

function phaseOf(location: string, functionName: string): SandboxPhase | undefined {
  for (const rule of SANDBOX_PHASE_RULES) {
    if (rule.location === location && (rule.functions === undefined || rule.functions.includes(functionName))) return rule.phase;
  }
  return undefined;
}

/** The profile's special nodes: V8 names them so (Bun's JSC sampler reports none of them). */
const SPECIAL_NODES: ReadonlyMap<string, "garbage_collector" | "program" | "idle"> = new Map([
  ["(garbage collector)", "garbage_collector"],
  ["(program)", "program"],
  ["(idle)", "idle"],
]);

export interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber?: number;
  readonly columnNumber?: number;
}

export interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
  readonly parent?: number;
}

/** A sampled CPU profile (`Profiler.stop`'s `profile`): times in microseconds. */
export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples?: readonly number[];
  readonly timeDeltas?: readonly number[];
}

/**
 * Where a script lives, as the rules name it: `node_modules/<package>/...` for a package (the
 * part after the last node_modules/, so a symlinked or hoisted node_modules reads the same),
 * `src/...`, `bench/...` for the checkout under `root`, else the url itself (`node:internal/...`,
 * `ext:deno_...`, "" for native code). `file://` urls and plain paths (Bun's) both work.
 */
export function scriptLocation(url: string, root: string): string {
  let path = url.replace(/[?#].*$/, "");
  if (path.startsWith("file://")) path = decodeURIComponent(path.slice("file://".length));
  const modules = path.lastIndexOf("/node_modules/");
  if (modules >= 0) return path.slice(modules + 1);
  const base = root.replace(/^file:\/\//, "").replace(/\/?$/, "/");
  return path.startsWith(base) ? path.slice(base.length) : path;
}

/** The category a script location belongs to, or undefined when no rule claims it. */
export function categoryOfLocation(location: string, rules: readonly CategoryRule[] = CATEGORY_RULES): Category | undefined {
  for (const rule of rules) {
    for (const prefix of rule.prefixes) {
      if (prefix.endsWith("/") ? location.startsWith(prefix) : location === prefix) return rule.category;
    }
  }
  return undefined;
}

export interface TopFunction {
  /** The sample's own (leaf) frame: `function location:line` (1-based). */
  readonly self: string;
  /** The frame the sample was attributed by (the one a rule claimed), when not the leaf. */
  readonly via?: string;
  readonly ms: number;
}

export interface Attribution {
  /** Samples in the profile, idle ones included. */
  readonly samples: number;
  /** The weight one sample stands for at most: 2 x the median sampling interval (ms). */
  readonly sample_cap_ms: number;
  /** CPU by category (ms, the whole profile): every sample but idle ones. */
  readonly cpu_ms: Readonly<Record<Category, number>>;
  /** The sandbox's share of cpu_ms by phase (SANDBOX_PHASE_RULES); the phases add up to cpu_ms.sandbox. */
  readonly sandbox_ms: Readonly<Record<SandboxPhase, number>>;
  /** The special nodes apart: gc in cpu_ms is garbage_collector + program; idle is not CPU. */
  readonly special_ms: Readonly<{ garbage_collector: number; program: number; idle: number }>;
  /** Per category, the functions most of its samples ended in (self time), heaviest first. */
  readonly top: Readonly<Record<Category, readonly TopFunction[]>>;
}

interface Decision {
  readonly category: Category | "idle";
  readonly special?: "garbage_collector" | "program" | "idle";
  /** The frame a rule claimed. */
  readonly via?: ProfileNode;
  /** For a sandbox sample: what the sandbox was doing. */
  readonly phase?: SandboxPhase;
}

const frameName = (frame: CallFrame, location: string): string =>
  `${frame.functionName || "(anonymous)"} ${location || "(native)"}${location && frame.lineNumber !== undefined && frame.lineNumber >= 0 ? `:${frame.lineNumber + 1}` : ""}`;

/**
 * Attributes every sample of `profile` to a category. A sample weighs its time delta (the time
 * since the sample before, as V8 records it), capped at twice the median delta: V8 (Node, Deno)
 * samples at a steady interval, idle included, so the cap only trims a sample the sampler thread
 * was late for; Bun's JSC sampler records only while JavaScript runs, so its deltas span idle
 * gaps, which the cap keeps from landing on the frame that ran before the gap.
 */
export function attributeProfile(profile: CpuProfile, options: { readonly root: string; readonly rules?: readonly CategoryRule[]; readonly top?: number }): Attribution {
  const rules = options.rules ?? CATEGORY_RULES;
  const topCount = options.top ?? 15;
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  if (deltas.length !== samples.length) throw new Error(`the profile has ${samples.length} samples but ${deltas.length} timeDeltas`);

  const byId = new Map<number, ProfileNode>();
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    if (node.parent !== undefined) parentOf.set(node.id, node.parent);
    for (const child of node.children ?? []) parentOf.set(child, node.id);
  }

  // Per node: its category and the frame that decided it (memoised: the walk is per node, not per sample).
  const locationOf = new Map<number, string>();
  const location = (node: ProfileNode): string => {
    let at = locationOf.get(node.id);
    if (at === undefined) locationOf.set(node.id, (at = scriptLocation(node.callFrame.url, options.root)));
    return at;
  };
  const parentNode = (node: ProfileNode): ProfileNode | undefined => {
    const parent = parentOf.get(node.id);
    return parent === undefined ? undefined : byId.get(parent);
  };
  const decided = new Map<number, Decision>();
  const decide = (leaf: ProfileNode): Decision => {
    const known = decided.get(leaf.id);
    if (known !== undefined) return known;
    let result: Decision = { category: "other" };
    const special = leaf.callFrame.url === "" ? SPECIAL_NODES.get(leaf.callFrame.functionName) : undefined;
    if (special !== undefined) {
      result = { category: special === "idle" ? "idle" : "gc", special };
    } else {
      for (let node: ProfileNode | undefined = leaf; node !== undefined; node = parentNode(node)) {
        const category = categoryOfLocation(location(node), rules);
        if (category !== undefined) {
          result = { category, via: node };
          break;
        }
      }
    }
    if (result.category === "sandbox") {
      let phase: SandboxPhase | undefined;
      for (let node: ProfileNode | undefined = leaf; node !== undefined && phase === undefined; node = parentNode(node)) {
        phase = phaseOf(location(node), node.callFrame.functionName);
      }
      result = { ...result, phase: phase ?? "unattributed" };
    }
    decided.set(leaf.id, result);
    return result;
  };

  const cap = deltas.length === 0 ? 0 : 2 * median(deltas);
  const cpu = Object.fromEntries(CATEGORIES.map((c) => [c, 0])) as Record<Category, number>;
  const special = { garbage_collector: 0, program: 0, idle: 0 };
  const sandbox = Object.fromEntries(SANDBOX_PHASES.map((p) => [p, 0])) as Record<SandboxPhase, number>;
  const selfTime = new Map<Category, Map<string, { self: string; via?: string; us: number }>>();
  for (let i = 0; i < samples.length; i++) {
    const leaf = byId.get(samples[i]!);
    if (leaf === undefined) throw new Error(`sample ${i} names node ${samples[i]}, which the profile does not have`);
    const weight = Math.min(Math.max(deltas[i]!, 0), cap);
    const { category, special: kind, via, phase } = decide(leaf);
    if (kind !== undefined) special[kind] += weight;
    if (phase !== undefined) sandbox[phase] += weight;
    if (category === "idle") continue;
    cpu[category] += weight;
    const self = frameName(leaf.callFrame, location(leaf));
    const viaName = via === undefined || via === leaf ? undefined : frameName(via.callFrame, location(via));
    const key = `${self}\u0000${viaName ?? ""}`;
    let functions = selfTime.get(category);
    if (functions === undefined) selfTime.set(category, (functions = new Map()));
    const entry = functions.get(key) ?? { self, ...(viaName === undefined ? {} : { via: viaName }), us: 0 };
    entry.us += weight;
    functions.set(key, entry);
  }

  const ms = (us: number): number => Math.round(us) / 1000;
  const top = Object.fromEntries(
    CATEGORIES.map((c) => [
      c,
      [...(selfTime.get(c)?.values() ?? [])]
        .sort((a, b) => b.us - a.us)
        .slice(0, topCount)
        .map(({ us, ...rest }) => ({ ...rest, ms: ms(us) })),
    ]),
  ) as Record<Category, TopFunction[]>;
  return {
    samples: samples.length,
    sample_cap_ms: ms(cap),
    cpu_ms: Object.fromEntries(CATEGORIES.map((c) => [c, ms(cpu[c])])) as Record<Category, number>,
    sandbox_ms: Object.fromEntries(SANDBOX_PHASES.map((p) => [p, ms(sandbox[p])])) as Record<SandboxPhase, number>,
    special_ms: { garbage_collector: ms(special.garbage_collector), program: ms(special.program), idle: ms(special.idle) },
    top,
  };
}

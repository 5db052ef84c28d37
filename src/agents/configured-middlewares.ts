import { isGraphBubbleUp } from "@langchain/langgraph/web";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import type { AgentMiddleware } from "../engine/types.ts";
import type { ModuleLoader } from "../ports/module-loader.ts";

/*
 * Config-declared extension middlewares (`extensions.middlewares` in config.yaml or
 * extensions_config.json). Each entry names a zero-argument middleware class, or a zero-argument
 * factory returning a middleware object, as `module:Export`. The config is trusted operator input —
 * an entry runs arbitrary code — so there is no sandboxing here, but every way an entry can be
 * wrong fails agent creation loudly, naming the entry: a half-built chain that silently lacks a
 * guard the operator configured is worse than no agent.
 */

export const EXTENSION_MIDDLEWARE_INVALID = "extension_middleware_invalid";

export type ExtensionMiddlewareProblem =
  | "bad_entry"
  | "module_not_found"
  | "module_load_failed"
  | "missing_export"
  | "not_constructible"
  | "needs_arguments"
  | "constructor_failed"
  | "not_middleware"
  | "duplicate_name";

/** One configured entry could not become a middleware. `problem` says which step failed. */
export class ExtensionMiddlewareError extends DeerflowError {
  declare readonly code: typeof EXTENSION_MIDDLEWARE_INVALID;
  readonly entry: string;
  readonly problem: ExtensionMiddlewareProblem;

  constructor(entry: string, problem: ExtensionMiddlewareProblem, message: string, options?: { cause?: unknown }) {
    super(EXTENSION_MIDDLEWARE_INVALID, message, { ...options, details: { entry, problem } });
    this.name = "ExtensionMiddlewareError";
    this.entry = entry;
    this.problem = problem;
  }
}

export interface LoadConfiguredMiddlewaresOptions {
  /** Where the entries came from, for messages: `config.yaml: extensions.middlewares`. */
  readonly source?: string;
  /** The assembly's abort signal: a cancelled build rethrows as-is instead of blaming an entry. */
  readonly signal?: AbortSignal;
}

const MIDDLEWARE_NAME = /^[A-Za-z0-9_.-]+$/;
const EXPORT_NAME = /^[A-Za-z_$][\w$]*$/;
const NODE_HOOKS = ["beforeAgent", "beforeModel", "afterModel", "afterAgent"] as const;
const METHODS = ["wrapModelCall", "wrapToolCall", "releasePolicyParameters"] as const;
const JUMP_TARGETS: ReadonlySet<unknown> = new Set(["model", "tools", "end"]);
const ENTRY_EXAMPLE = "./middlewares/audit.ts:AuditMiddleware or @acme/deerflow-guard:GuardMiddleware";

type Dict = Record<string, unknown>;

function isObject(value: unknown): value is Dict {
  return typeof value === "object" && value !== null;
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return `an object (${Object.getPrototypeOf(value)?.constructor?.name ?? "no prototype"})`;
  return `a ${typeof value}`;
}

/** `module:Export`, split at the last colon so `C:\x.ts:Audit` and `npm:pkg:Audit` keep their module part. */
function parseEntry(entry: unknown, label: string): { specifier: string; exportName: string } {
  const text = typeof entry === "string" ? entry.trim() : "";
  const colon = text.lastIndexOf(":");
  const specifier = colon > 0 ? text.slice(0, colon).trim() : "";
  const exportName = colon > 0 ? text.slice(colon + 1).trim() : "";
  if (!specifier || !EXPORT_NAME.test(exportName)) {
    throw new ExtensionMiddlewareError(
      String(entry),
      "bad_entry",
      `${label} ${JSON.stringify(entry)}: expected "module:ExportName", e.g. ${ENTRY_EXAMPLE}.`,
    );
  }
  return { specifier, exportName };
}

function isClass(fn: Function): boolean {
  return /^class[\s{]/.test(Function.prototype.toString.call(fn));
}

/**
 * A plain `function` with methods on its prototype is a constructor (hand-written or compiled
 * from a class); arrow, async and method functions have no prototype and are factories.
 */
function isConstructor(fn: Function): boolean {
  if (isClass(fn)) return true;
  const prototype: unknown = (fn as { prototype?: unknown }).prototype;
  return isObject(prototype) && Object.getOwnPropertyNames(prototype).some((key) => key !== "constructor");
}

/** Why a value is not an AgentMiddleware the engine can run, or null when it is one. */
export function middlewareProblem(value: unknown): string | null {
  if (!isObject(value) || Array.isArray(value)) return `it produced ${describe(value)}, not a middleware object`;
  const name = value["name"];
  if (typeof name !== "string" || !MIDDLEWARE_NAME.test(name)) {
    return `its name is ${name === undefined ? "missing" : JSON.stringify(name) ?? describe(name)}; give it a readonly \`name\` matching ${MIDDLEWARE_NAME} (e.g. "Audit")`;
  }
  for (const hook of NODE_HOOKS) {
    const spec = value[hook];
    if (spec === undefined || typeof spec === "function") continue;
    const valid =
      isObject(spec) &&
      typeof spec["hook"] === "function" &&
      (spec["canJumpTo"] === undefined || (Array.isArray(spec["canJumpTo"]) && spec["canJumpTo"].every((t) => JUMP_TARGETS.has(t))));
    if (!valid) return `${hook} is ${describe(spec)}; it must be a function or { hook, canJumpTo } with targets from model, tools, end`;
  }
  for (const method of METHODS) {
    const fn = value[method];
    if (fn !== undefined && typeof fn !== "function") return `${method} is ${describe(fn)}, not a function`;
  }
  const tools = value["tools"];
  if (tools !== undefined) {
    if (!Array.isArray(tools)) return `tools is ${describe(tools)}; it must be an array of tools`;
    for (const [index, tool] of tools.entries()) {
      const ok =
        isObject(tool) &&
        typeof tool["name"] === "string" &&
        typeof tool["description"] === "string" &&
        isObject(tool["schema"]) &&
        typeof tool["invoke"] === "function";
      if (!ok) return `tools[${index}] is not a tool: it needs a name, a description, a JSON Schema \`schema\` and an invoke function`;
    }
  }
  return null;
}

async function instantiate(exported: unknown, entry: string, label: string, signal: AbortSignal | undefined): Promise<AgentMiddleware> {
  if (typeof exported !== "function") {
    const hint = isObject(exported) && typeof exported["name"] === "string"
      ? " Export the class (or a factory) instead of an instance: an instance would be shared by every agent built from this config."
      : " Export a zero-argument middleware class or a function returning a middleware object.";
    throw new ExtensionMiddlewareError(entry, "not_constructible", `${label} "${entry}": the export is ${describe(exported)}, not a class or factory.${hint}`);
  }
  const asConstructor = isConstructor(exported);
  const kind = asConstructor ? "class" : "factory";
  if (exported.length > 0) {
    throw new ExtensionMiddlewareError(
      entry,
      "needs_arguments",
      `${label} "${entry}": the ${kind} takes ${exported.length} argument(s), but configured middlewares are built with none. ` +
        "Give its parameters defaults, or read settings inside the middleware.",
    );
  }
  let instance: unknown;
  try {
    instance = asConstructor ? new (exported as new () => unknown)() : await (exported as () => unknown)();
  } catch (error) {
    if (isGraphBubbleUp(error) || signal?.aborted) throw error;
    throw new ExtensionMiddlewareError(
      entry,
      "constructor_failed",
      `${label} "${entry}": building the middleware failed: ${errorMessage(error)}. Fix the ${kind}; the agent is not created without it.`,
      { cause: error },
    );
  }
  const problem = middlewareProblem(instance);
  if (problem !== null) {
    throw new ExtensionMiddlewareError(entry, "not_middleware", `${label} "${entry}" is not an agent middleware: ${problem}.`);
  }
  return instance as AgentMiddleware;
}

/**
 * Loads, builds and checks every entry in order; the first broken entry fails the whole load with
 * an ExtensionMiddlewareError (code `extension_middleware_invalid`) naming it and what to do.
 */
export async function loadConfiguredMiddlewares(
  entries: readonly string[],
  loader: ModuleLoader,
  options: LoadConfiguredMiddlewaresOptions = {},
): Promise<AgentMiddleware[]> {
  return loadConfiguredMiddlewareSources([{ source: options.source ?? "extensions.middlewares", entries }], loader, options);
}

/** One file's `extensions.middlewares`, named for messages (`config.yaml: extensions.middlewares`). */
export interface ConfiguredMiddlewareSource {
  readonly source: string;
  readonly entries: readonly string[];
}

/**
 * Every source's entries in order, as one chain: config.yaml's, then extensions_config.json's
 * (spec: "if extensions.middlewares is set in config.yaml or extensions_config.json"). An entry a
 * later file repeats word for word is the same class, loaded once; two entries building middlewares
 * of one name are still refused, whichever files they come from.
 */
export async function loadConfiguredMiddlewareSources(
  sources: readonly ConfiguredMiddlewareSource[],
  loader: ModuleLoader,
  options: Pick<LoadConfiguredMiddlewaresOptions, "signal"> = {},
): Promise<AgentMiddleware[]> {
  const middlewares: AgentMiddleware[] = [];
  const entryByName = new Map<string, string>();
  const inEarlierFile = new Set<string>();
  for (const { source, entries } of sources) {
    for (const [index, entry] of entries.entries()) {
      if (inEarlierFile.has(entry)) continue;
      middlewares.push(await loadEntry(entry, `${source}[${index}]`, loader, options, entryByName));
    }
    for (const entry of entries) inEarlierFile.add(entry);
  }
  return middlewares;
}

async function loadEntry(
  entry: string,
  label: string,
  loader: ModuleLoader,
  options: Pick<LoadConfiguredMiddlewaresOptions, "signal">,
  entryByName: Map<string, string>,
): Promise<AgentMiddleware> {
  const { specifier, exportName } = parseEntry(entry, label);
  let namespace: Record<string, unknown>;
  try {
    namespace = await loader.load(specifier);
  } catch (error) {
    if (isGraphBubbleUp(error) || options.signal?.aborted) throw error;
    const notFound = isObject(error) && error["code"] === "module_not_found";
    throw new ExtensionMiddlewareError(
      entry,
      notFound ? "module_not_found" : "module_load_failed",
      `${label} "${entry}": ${errorMessage(error)}`,
      { cause: error },
    );
  }
  if (!isObject(namespace) || !Object.hasOwn(namespace, exportName)) {
    const available = isObject(namespace) ? Object.keys(namespace).sort() : [];
    const listed = available.length === 0 ? "it has no exports" : `it exports ${available.slice(0, 12).join(", ")}${available.length > 12 ? ", ..." : ""}`;
    throw new ExtensionMiddlewareError(
      entry,
      "missing_export",
      `${label} "${entry}": module "${specifier}" has no export "${exportName}" (${listed}). Fix the name after the colon.`,
    );
  }
  const middleware = await instantiate(namespace[exportName], entry, label, options.signal);
  const earlier = entryByName.get(middleware.name);
  if (earlier !== undefined) {
    throw new ExtensionMiddlewareError(
      entry,
      "duplicate_name",
      `${label} "${entry}": its name "${middleware.name}" is already taken by "${earlier}"; middleware names must be unique in a chain. Remove the duplicate entry or rename one middleware.`,
    );
  }
  entryByName.set(middleware.name, entry);
  return middleware;
}

/** The lead chain's tail: extension middlewares go right before the first of these present. */
export const LEAD_EXTENSION_TAIL: readonly string[] = Object.freeze(["TerminalResponse", "ModelLengthFinishReason", "SafetyFinishReason", "Clarification"]);
/** The subagent chain's tail (safety, then the context and coalescing middlewares that must stay innermost). */
export const SUBAGENT_EXTENSION_TAIL: readonly string[] = Object.freeze([
  "SafetyFinishReason",
  "DurableContext",
  "Summarization",
  "SubagentDateContext",
  "SystemMessageCoalescing",
]);

/**
 * The chain with programmatic (custom) middlewares, then configured ones, inserted after the
 * built-ins and loop/token guards and before the first tail member — so, after hooks running in
 * reverse, safety and clarification see a model response before any extension does.
 */
export function placeExtensionMiddlewares(
  chain: readonly AgentMiddleware[],
  extensions: { readonly custom?: readonly AgentMiddleware[]; readonly configured?: readonly AgentMiddleware[] },
  tail: readonly string[],
): AgentMiddleware[] {
  const inserted = [...(extensions.custom ?? []), ...(extensions.configured ?? [])];
  const tailNames = new Set(tail);
  const at = chain.findIndex((middleware) => tailNames.has(middleware.name));
  const position = at === -1 ? chain.length : at;
  return [...chain.slice(0, position), ...inserted, ...chain.slice(position)];
}

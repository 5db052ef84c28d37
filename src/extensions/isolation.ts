import type { DiagnosticSink, ExtensionDiagnostic } from "./diagnostics.ts";
export type { DiagnosticSink, ExtensionDiagnostic } from "./diagnostics.ts";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import type {
  AgentMiddleware,
  AgentRuntime,
  HookResult,
  HookSpec,
  ModelHandler,
  ModelRequest,
  NodeHook,
  ToolCallRequest,
  ToolHandler,
} from "../engine/types.ts";

/**
 * A problem attributed to one extension. Structural on purpose: the loader, the stack composer
 * and the isolation wrapper all emit it, and a sink only needs these three fields.
 */


export interface IsolateOptions {
  /** The extension the middleware came from; recorded on the wrapper and on every diagnostic. */
  readonly source: string;
  /** The wrapper's graph name, `^[A-Za-z0-9_.-]+$`. */
  readonly name: string;
  readonly onDiagnostic: DiagnosticSink;
}

/** What the stack holds for a contributed middleware: the wrapper plus its provenance. */
export interface IsolatedMiddleware extends AgentMiddleware {
  readonly inner: AgentMiddleware;
  readonly source: string;
}

export const LIFECYCLE_HOOKS = ["beforeAgent", "beforeModel", "afterModel", "afterAgent"] as const;
export type LifecycleHookName = (typeof LIFECYCLE_HOOKS)[number];
export const WRAP_HOOKS = ["wrapModelCall", "wrapToolCall"] as const;
export type WrapHookName = (typeof WRAP_HOOKS)[number];

const GRAPH_NAME = /^[A-Za-z0-9_.-]+$/;

export type ExtensionIsolationErrorCode =
  /** The extension contributed something that is not a middleware. */
  | "invalid_extension_middleware"
  /** The isolated middleware's name is not a graph node name. */
  | "invalid_isolation_name"
  /** isolateMiddleware was called without the contributing extension's source. */
  | "invalid_extension_source"
  /** isolateMiddleware was called without a diagnostics sink. */
  | "invalid_diagnostic_sink"
  /** A wrap hook called the downstream handler more than once. */
  | "extension_handler_reused"
  /** A wrap hook returned without calling the downstream handler (reported as a diagnostic). */
  | "extension_handler_skipped";

export class ExtensionIsolationError extends DeerflowError {
  declare readonly code: ExtensionIsolationErrorCode;

  constructor(code: ExtensionIsolationErrorCode, message: string) {
    super(code, message);
    this.name = "ExtensionIsolationError";
  }
}

/**
 * Why a value cannot be run as a middleware, or null when it can. Checked before wrapping so a
 * malformed contribution is rejected at build time instead of failing inside the engine later.
 */
export function middlewareProblem(value: unknown): string | null {
  if (typeof value !== "object" || value === null) return `expected a middleware object, got ${describeValue(value)}`;
  const candidate = value as Record<string, unknown>;
  if (typeof candidate.name !== "string" || candidate.name === "") return "a middleware needs a non-empty string `name`";
  for (const hook of LIFECYCLE_HOOKS) {
    const raw = candidate[hook];
    if (raw === undefined || typeof raw === "function") continue;
    if (typeof raw === "object" && raw !== null && typeof (raw as HookSpec).hook === "function") continue;
    return `${hook} must be a function or { hook, canJumpTo }`;
  }
  for (const hook of WRAP_HOOKS) {
    const raw = candidate[hook];
    if (raw !== undefined && typeof raw !== "function") return `${hook} must be a function`;
  }
  if (candidate.tools !== undefined && !Array.isArray(candidate.tools)) return "`tools` must be an array";
  return null;
}

export function isAgentMiddleware(value: unknown): value is AgentMiddleware {
  return middlewareProblem(value) === null;
}

/**
 * Wraps a contributed middleware so its failures become diagnostics and the run goes on.
 *
 * Contributions are observers: the wrapper always calls downstream with the request it was given
 * and returns downstream's own result, so an extension can neither rewrite a request after the
 * host's policy layers have run nor substitute a result. Recovery never repeats or skips a model
 * or tool call, because those carry side effects (tokens spent, files written, messages sent).
 */
export function isolateMiddleware(inner: AgentMiddleware, options: IsolateOptions): IsolatedMiddleware {
  const problem = middlewareProblem(inner);
  if (problem !== null) {
    throw new ExtensionIsolationError(
      "invalid_extension_middleware",
      `Extension "${String(options?.source)}" contributed something that is not a middleware: ${problem}. Fix the extension's contribution.`,
    );
  }
  if (typeof options.source !== "string" || options.source === "") {
    throw new ExtensionIsolationError("invalid_extension_source", "isolateMiddleware needs the contributing extension's name as `source`.");
  }
  if (typeof options.name !== "string" || !GRAPH_NAME.test(options.name)) {
    throw new ExtensionIsolationError(
      "invalid_isolation_name",
      `Isolated middleware name ${JSON.stringify(options.name)} must match ${String(GRAPH_NAME)}; replace other characters with "_".`,
    );
  }
  if (typeof options.onDiagnostic !== "function") {
    throw new ExtensionIsolationError("invalid_diagnostic_sink", "isolateMiddleware needs an onDiagnostic function to report extension failures to.");
  }

  const { source, name, onDiagnostic } = options;
  const report = (hook: string, error: unknown): void => {
    try {
      onDiagnostic({ level: "error", source, middleware: name, message: `${inner.name}.${hook} failed and was skipped: ${errorMessage(error)}` });
    } catch {
      // A broken sink must not turn a contained extension failure into a failed run.
    }
  };

  const wrapper: Record<string, unknown> = {};
  Object.defineProperties(wrapper, {
    name: { value: name, enumerable: true },
    inner: { value: inner, enumerable: false },
    source: { value: source, enumerable: true },
  });
  if (inner.tools !== undefined) wrapper.tools = inner.tools;

  for (const hookName of LIFECYCLE_HOOKS) {
    const raw = inner[hookName];
    if (raw === undefined) continue;
    const spec: HookSpec = typeof raw === "function" ? { hook: raw } : raw;
    const isolated: NodeHook = async (state, runtime): Promise<HookResult> => {
      try {
        return await spec.hook.call(inner, state, runtime);
      } catch (error) {
        // Interrupts, parent commands and aborts steer the run; they are not extension failures.
        if (isGraphBubbleUp(error) || isAborted(runtime)) throw error;
        report(hookName, error);
        return undefined;
      }
    };
    // The engine enforces declared jump targets per hook, so the wrapper declares the same ones.
    wrapper[hookName] =
      typeof raw === "function" ? isolated : spec.canJumpTo === undefined ? { hook: isolated } : { hook: isolated, canJumpTo: [...spec.canJumpTo] };
  }

  if (typeof inner.wrapModelCall === "function") {
    const innerHook = inner.wrapModelCall;
    wrapper.wrapModelCall = (request: ModelRequest, handler: ModelHandler) =>
      observeWrapCall("wrapModelCall", (req, next) => innerHook.call(inner, req, next), request, handler, request?.runtime, inner.name, report);
  }
  if (typeof inner.wrapToolCall === "function") {
    const innerHook = inner.wrapToolCall;
    wrapper.wrapToolCall = (request: ToolCallRequest, handler: ToolHandler) =>
      observeWrapCall("wrapToolCall", (req, next) => innerHook.call(inner, req, next), request, handler, request?.runtime, inner.name, report);
  }

  return Object.freeze(wrapper) as unknown as IsolatedMiddleware;
}

type Settled<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/**
 * Runs an observer's wrap hook around exactly one downstream call.
 *
 * Outcomes, in priority order: a downstream failure propagates unchanged (the observer can neither
 * swallow nor replace it); an abort propagates; a graph bubble-up from the observer propagates
 * unless downstream already produced a result; any other observer failure (throwing, never calling,
 * calling twice) is reported and the run continues with downstream's one result.
 */
async function observeWrapCall<Req, Res>(
  hook: WrapHookName,
  innerHook: (request: Req, handler: (request: Req) => Promise<Res>) => unknown,
  request: Req,
  handler: (request: Req) => Promise<Res>,
  runtime: AgentRuntime | undefined,
  innerName: string,
  report: (hook: string, error: unknown) => void,
): Promise<Res> {
  let pending: Promise<Res> | undefined;
  let settled: Settled<Res> | undefined;
  let duplicate: Error | undefined;
  let closed = false;

  const tracked = (_requestFromObserver: Req): Promise<Res> => {
    if (pending !== undefined) {
      const error = new ExtensionIsolationError(
        "extension_handler_reused",
        `${innerName}.${hook} called the downstream handler more than once; an observer may call it once and must not retry.`,
      );
      if (closed) report(hook, error);
      else duplicate ??= error;
      return Promise.reject(error);
    }
    // The observer's request is ignored on purpose: downstream always sees the original.
    pending = (async () => handler(request))().then(
      (value) => {
        settled = { ok: true, value };
        return value;
      },
      (error: unknown) => {
        settled = { ok: false, error };
        throw error;
      },
    );
    // The observer may drop the promise; the wrapper awaits it below, so this is not unhandled.
    pending.catch(() => undefined);
    return pending;
  };

  let innerFailure: { error: unknown } | undefined;
  try {
    await innerHook(request, tracked);
  } catch (error) {
    innerFailure = { error };
  }
  // A downstream call the observer started but did not await still counts as the one call.
  if (pending !== undefined) await pending.catch(() => undefined);
  closed = true;

  if (settled !== undefined && !settled.ok) throw settled.error;
  if (innerFailure !== undefined) {
    if (isAborted(runtime)) throw innerFailure.error;
    if (isGraphBubbleUp(innerFailure.error) && settled === undefined) throw innerFailure.error;
    report(hook, innerFailure.error);
  } else if (duplicate !== undefined) {
    report(hook, duplicate);
  } else if (pending === undefined) {
    report(hook, new ExtensionIsolationError("extension_handler_skipped", `${innerName}.${hook} did not call the downstream handler`));
  }
  if (settled !== undefined) return settled.value;
  return handler(request);
}

function isAborted(runtime: AgentRuntime | undefined): boolean {
  return runtime?.signal?.aborted === true;
}

function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

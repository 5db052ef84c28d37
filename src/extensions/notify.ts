import type { DetachedObservations } from "./detached.ts";
import type { ExtensionDiagnostic } from "./diagnostics.ts";
import type { AgentAssemblyDescriptor } from "../extension-api/assembly.ts";
import type { CompactionEvent, ContextCompactionObserver } from "../extension-api/compaction.ts";
import type { TaskInfo, TaskLifecycleContributor, TaskOutcome } from "../extension-api/lifecycle.ts";
import type { AgentAssemblyObserver } from "../extension-api/registry.ts";
import {
  systemModelRequest,
  type SystemModelCallObserver,
  type SystemModelRequest,
  type SystemModelResult,
  type SystemOperationKind,
} from "../extension-api/system-model.ts";
import { detachedTaskStore, type ExtensionData, taskStoreFrom } from "../extension-api/task-store.ts";
import { systemClock } from "../core/clock.ts";
import { errorMessage, isAbortError } from "../core/errors.ts";
import type { Clock } from "../ports/runtime-ports.ts";

/*
 * Fail-open notification of the extension contribution kinds that are not middlewares: task
 * lifecycle, system-model calls, context compaction and agent assembly. An extension is an
 * observer here, never a participant: whatever it does (throw, hang, abort on its own), the run
 * keeps its outcome and the other extensions still hear about it. The one thing that does stop a
 * pass is the host itself giving up (its AbortSignal firing), because then nobody is waiting.
 */

/** The attribution the registry's `build()` gives every entry. A bare contributor is accepted too. */
export interface Attributed<T> {
  readonly source: string;
  readonly value: T;
}
export type Contribution<T> = Attributed<T> | T;

/** Notification failures are ExtensionDiagnostics. */
export type NotifyDiagnostic = ExtensionDiagnostic;

export interface NotifyOptions {
  /** One budget for the whole pass, shared by every contributor. Default 3000; Infinity = unbounded. */
  readonly budgetMs?: number;
  /**
   * The host abandoning the pass (shutdown, say) — not a run's own abort signal: an aborted run
   * still owes its contributors the `aborted` stop notification. When it fires the pass stops and
   * its reason is thrown; when already aborted the pass throws at once, as fetch does.
   */
  readonly signal?: AbortSignal;
  readonly onDiagnostic?: (diagnostic: NotifyDiagnostic) => void;
  readonly clock?: Clock;
}

export const DEFAULT_NOTIFY_BUDGET_MS = 3000;

const UNATTRIBUTED = "<unattributed>";

function attributed<T>(entry: Contribution<T>): Attributed<T> {
  if (typeof entry === "object" && entry !== null && "source" in entry && "value" in entry && typeof entry.source === "string") {
    return entry as Attributed<T>;
  }
  return { source: UNATTRIBUTED, value: entry as T };
}

function defaultDiagnostic(diagnostic: NotifyDiagnostic): void {
  const line = `[extensions] ${diagnostic.source}: ${diagnostic.message}`;
  if (diagnostic.level === "error") console.error(line);
  else console.warn(line);
}

function report(options: { onDiagnostic?: (d: NotifyDiagnostic) => void }, diagnostic: NotifyDiagnostic): void {
  try {
    (options.onDiagnostic ?? defaultDiagnostic)(diagnostic);
  } catch {
    // A broken diagnostics sink must not turn a contained failure into an uncontained one.
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

function formatBudget(budgetMs: number): string {
  return `${(budgetMs / 1000).toFixed(1)}s`;
}

type Race = { kind: "settled" } | { kind: "failed"; error: unknown } | { kind: "timeout" } | { kind: "host-abort" };

/**
 * Runs `invoke` for each entry in order, fail-open, within one shared budget. Only the host's
 * signal decides whether an abort propagates: a contributor that throws an AbortError of its own
 * (an internal timeout built on AbortController, say) is a failing contributor like any other, and
 * must not skip its successors or turn the host's cleanup into an abort.
 */
async function notifyEach<T>(
  entries: readonly Contribution<T>[],
  hook: string,
  scope: string,
  invoke: (value: T) => unknown,
  options: NotifyOptions,
): Promise<void> {
  const { signal } = options;
  if (signal?.aborted) throw abortReason(signal);
  if (entries.length === 0) return;
  const clock = options.clock ?? systemClock;
  const budgetMs = options.budgetMs ?? DEFAULT_NOTIFY_BUDGET_MS;
  const deadline = Number.isFinite(budgetMs) ? clock.now() + budgetMs : Infinity;

  for (const entry of entries) {
    const { source, value } = attributed(entry);
    if (signal?.aborted) throw abortReason(signal);
    const remaining = deadline - clock.now();
    if (remaining <= 0) {
      report(options, { level: "warning", source, message: `${hook} skipped for ${scope}; the ${formatBudget(budgetMs)} notification budget was spent` });
      continue;
    }

    // An async wrapper turns a synchronous throw into a rejection, so both are contained alike.
    const call = (async () => {
      await invoke(value);
    })();
    const timer = new AbortController();
    const contenders: Promise<Race>[] = [
      call.then(
        (): Race => ({ kind: "settled" }),
        (error: unknown): Race => ({ kind: "failed", error }),
      ),
    ];
    if (Number.isFinite(remaining)) {
      contenders.push(
        clock.sleep(remaining, timer.signal).then(
          (): Race => ({ kind: "timeout" }),
          // Aborted by us once the race is decided: never the winner.
          () => new Promise<Race>(() => {}),
        ),
      );
    }
    let onHostAbort: (() => void) | undefined;
    if (signal) {
      contenders.push(
        new Promise<Race>((resolve) => {
          onHostAbort = () => resolve({ kind: "host-abort" });
          signal.addEventListener("abort", onHostAbort, { once: true });
        }),
      );
    }

    let outcome: Race;
    try {
      outcome = await Promise.race(contenders);
    } finally {
      timer.abort();
      if (signal && onHostAbort) signal.removeEventListener("abort", onHostAbort);
    }

    // Decided by origin, not by the error's class: the host's signal fired, so the host gave up.
    if (signal?.aborted) throw abortReason(signal);
    if (outcome.kind === "timeout") {
      // The hook keeps running in the background; the race's rejection handler already absorbs a late failure.
      report(options, { level: "warning", source, message: `${hook} timed out for ${scope}; the ${formatBudget(budgetMs)} notification budget was spent` });
    } else if (outcome.kind === "failed") {
      const what = isAbortError(outcome.error) ? "raised its own abort" : "failed";
      report(options, { level: "error", source, message: `${hook} ${what} for ${scope} and was skipped: ${errorMessage(outcome.error)}` });
    }
  }
}

/** Tells every task-lifecycle contributor, in registration order, that a task started. Never throws, except the host's own abort. */
export async function notifyTaskStart(
  contributors: readonly Contribution<TaskLifecycleContributor>[],
  appStore: ExtensionData,
  taskStore: ExtensionData,
  info: TaskInfo,
  options: NotifyOptions = {},
): Promise<void> {
  await notifyEach(
    contributors,
    "onTaskStart",
    `task ${info.taskId}`,
    (contributor) => contributor.onTaskStart?.(appStore, taskStore, info),
    options,
  );
}

/** Tells every task-lifecycle contributor, in registration order, how a task ended. Never throws, except the host's own abort. */
export async function notifyTaskStop(
  contributors: readonly Contribution<TaskLifecycleContributor>[],
  appStore: ExtensionData,
  taskStore: ExtensionData,
  info: TaskInfo,
  outcome: TaskOutcome,
  options: NotifyOptions = {},
): Promise<void> {
  await notifyEach(
    contributors,
    "onTaskStop",
    `task ${info.taskId}`,
    (contributor) => contributor.onTaskStop?.(appStore, taskStore, info, outcome),
    options,
  );
}

/** Conservative lead outcome: an abort wins over success, anything else unsuccessful failed. */
export function leadTaskOutcome(state: { aborted: boolean; succeeded: boolean }): TaskOutcome {
  if (state.aborted) return "aborted";
  return state.succeeded ? "completed" : "failed";
}

/** Conservative subagent outcome: cancelled → aborted, completed → completed, else failed. */
export function subagentTaskOutcome(state: { cancelled: boolean; succeeded: boolean }): TaskOutcome {
  if (state.cancelled) return "aborted";
  return state.succeeded ? "completed" : "failed";
}

export interface SystemModelRequestInput {
  /** A message list (copied) or one prompt (a string becomes a one-element list). */
  readonly messages?: unknown;
  readonly modelName?: string;
  readonly invokeConfig?: Readonly<Record<string, unknown>>;
}

/** The live task store a system call site's invoke config carries, if any. */
export function taskStoreFromInvokeConfig(invokeConfig: unknown): ExtensionData | undefined {
  // Same lookup as a runtime's: invoke config carries the run context under `context`. The
  // contract's helper type-checks the value, because that context is caller-mergeable.
  return taskStoreFrom(invokeConfig);
}

export interface SystemCallOptions extends NotifyOptions {
  readonly appStore: ExtensionData;
  /** The active task's store; else the one in `request.invokeConfig.context`; else a detached store. */
  readonly taskStore?: ExtensionData;
  /**
   * Receives the detached observation of a cancelled call, so a host can drain or drop it at
   * shutdown. Without it the observation simply runs in the background.
   */
  readonly detach?: (pending: Promise<void>) => void;
  /** The host's background observations: once it stopped accepting, a cancelled call's report is dropped. */
  readonly detached?: DetachedObservations;
}

/**
 * Runs a DeerFlow-owned model call (goal, memory, title, summarization) and reports how it ended.
 * The caller always sees its own result or error, unchanged: observers are told after the fact
 * and their failures are contained. Success and failure are observed inline (awaited, so the
 * observation happens-before the caller continues). A cancelled call — `signal` aborted by the
 * time it settles, which is routine when a user interrupts a run with the provider tokens already
 * spent — is reported in the background instead, so the cancellation reaches the caller at once.
 * Budget defaults to unbounded, as upstream's call sites pass none.
 */
export async function observeSystemModelCall<R>(
  observers: readonly Contribution<SystemModelCallObserver>[],
  kind: SystemOperationKind,
  request: SystemModelRequestInput,
  invoke: () => Promise<R>,
  options: SystemCallOptions,
): Promise<R> {
  if (observers.length === 0) return invoke();

  const snapshot = systemModelRequest(request);
  const store = options.taskStore ?? taskStoreFromInvokeConfig(snapshot.invokeConfig) ?? detachedTaskStore();
  const clock = options.clock ?? systemClock;
  const passOptions: NotifyOptions = { ...options, budgetMs: options.budgetMs ?? Infinity };
  const observe = (result: SystemModelResult, notifyOptions: NotifyOptions) =>
    notifyEach(
      observers,
      "onSystemModelCall",
      `${store.scopeId} (${kind})`,
      (observer) => observer.onSystemModelCall(options.appStore, store, kind, snapshot, Object.freeze(result)),
      notifyOptions,
    );

  const started = clock.now();
  let response: R;
  try {
    response = await invoke();
  } catch (error) {
    const result: SystemModelResult = { error, durationMs: Math.max(0, clock.now() - started) };
    if (options.signal?.aborted) {
      // The host is already unwinding: observing without the (aborted) signal lets the observers
      // run at all, and not awaiting them means a second cancel cannot interrupt the report.
      const { signal: _aborted, ...detachedOptions } = passOptions;
      const observeCancelled = () =>
        observe(result, detachedOptions).catch((failure: unknown) => {
          report(options, { level: "error", source: UNATTRIBUTED, message: `observing a cancelled ${kind} call failed: ${errorMessage(failure)}` });
        });
      if (options.detached) {
        // Shutting down: the report is dropped, as a host without a notify loop drops it.
        options.detached.submit(observeCancelled);
      } else {
        const pending = observeCancelled();
        options.detach?.(pending);
      }
      throw error;
    }
    await observe(result, passOptions);
    throw error;
  }
  await observe({ response, durationMs: Math.max(0, clock.now() - started) }, passOptions);
  return response;
}

export interface CompactionNotifyOptions {
  readonly onDiagnostic?: (diagnostic: NotifyDiagnostic) => void;
  /** The store the compaction site handed out; default: a new detached one. */
  readonly taskStore?: ExtensionData;
  /** Receives the background pass, so a host (or a test) can wait for it to finish. */
  readonly detach?: (pending: Promise<void>) => void;
  /** The host's background observations: once it stopped accepting, the compaction goes unreported. */
  readonly detached?: DetachedObservations;
}

/**
 * Fire-and-forget: both compaction paths report without waiting, and an observer that throws,
 * rejects or hangs never reaches the run. Observers are told in registration order, each one
 * contained, and all see the same frozen event and the same detached task store.
 */
export function notifyContextCompacted(
  observers: readonly Contribution<ContextCompactionObserver>[],
  event: CompactionEvent,
  options: CompactionNotifyOptions = {},
): void {
  if (observers.length === 0) return;
  const frozen: CompactionEvent = Object.freeze({ ...event, source_content_hashes: Object.freeze([...event.source_content_hashes]) });
  // Spec: "There is no live task to attach at that call site, so observers receive a detached task store".
  const taskStore = options.taskStore ?? detachedTaskStore();
  const pass = () =>
    (async () => {
      // Start after the caller's synchronous work: compaction must not run an observer inline.
      await Promise.resolve();
      await notifyEach(
        observers,
        "onContextCompacted",
        `compaction (${frozen.transform_kind})`,
        (observer) => observer.onContextCompacted(frozen, taskStore),
        { onDiagnostic: options.onDiagnostic, budgetMs: Infinity },
      );
    })().catch((failure: unknown) => {
      report(options, { level: "error", source: UNATTRIBUTED, message: `context compaction notification failed: ${errorMessage(failure)}` });
    });
  if (options.detached) {
    options.detached.submit(pass);
  } else {
    const pending = pass();
    options.detach?.(pending);
  }
}

/**
 * Synchronous, at the end of an agent's construction: every observer sees the descriptor, one
 * failing observer is reported and skipped. A promise returned despite the synchronous contract is
 * not awaited, but its rejection is still reported rather than left unhandled.
 */
export function notifyAgentAssembled(
  observers: readonly Contribution<AgentAssemblyObserver>[],
  descriptor: AgentAssemblyDescriptor,
  options: { readonly onDiagnostic?: (diagnostic: NotifyDiagnostic) => void } = {},
): void {
  for (const entry of observers) {
    const { source, value } = attributed(entry);
    const fail = (error: unknown) =>
      report(options, { level: "error", source, message: `onAgentAssembled failed for agent ${descriptor.agent_name} and was skipped: ${errorMessage(error)}` });
    try {
      const returned: unknown = value.onAgentAssembled(descriptor);
      if (returned instanceof Promise) returned.catch(fail);
    } catch (error) {
      fail(error);
    }
  }
}

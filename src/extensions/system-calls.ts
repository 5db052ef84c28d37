import type { AgentRuntime } from "../engine/types.ts";
import type { SystemOperationKind } from "../extension-api/system-model.ts";
import { taskStoreFrom } from "../extension-api/task-store.ts";
import type { Clock } from "../ports/runtime-ports.ts";
import type { DetachedObservations } from "./detached.ts";
import { observeSystemModelCall, type NotifyDiagnostic, type SystemModelRequestInput } from "./notify.ts";
import type { LoadedExtensions } from "./registry.ts";

/*
 * The host's own model calls (title, summarization, memory extraction, goal evaluation) reported
 * to the extensions' system-model-call observers. Middlewares take the result as their
 * `observeSystemCall` dependency (src/middlewares/system-model-call.ts's SystemModelCallHook).
 * That type is matched structurally rather than imported: the middleware layer sits above this
 * one, so nothing here may depend on it.
 */

/** Structurally the middlewares' SystemModelCallHook. */
export type SystemCallHook = <R>(
  kind: SystemOperationKind,
  request: SystemModelRequestInput,
  invoke: () => Promise<R>,
  runtime?: AgentRuntime,
) => Promise<R>;

/** The hook with nobody listening: the model call and nothing else. */
export const passThroughSystemCall: SystemCallHook = (_kind, _request, invoke) => invoke();

export interface SystemCallHookOptions {
  readonly onDiagnostic?: (diagnostic: NotifyDiagnostic) => void;
  readonly clock?: Clock;
  /** Receives the background observation of a cancelled call, so a host can drain or drop it at shutdown. */
  readonly detach?: (pending: Promise<void>) => void;
  /**
   * The host's background observations. Once it stopped accepting (shutdown, before the memory
   * flush), system work outside any task (the flush's memory extraction) runs unobserved and a
   * cancelled call's report is dropped; a live run's calls are still observed inline.
   */
  readonly detached?: DetachedObservations;
}

/**
 * A hook reporting every call to `extensions.systemModelObservers`, with the app store, the run's
 * task store (a detached one when the call has no run, or the run has none) and the run's signal
 * (a call that fails once the run is cancelled is reported in the background). With no observers
 * it is the pass-through, so an unextended host pays nothing per call.
 */
export function createSystemCallHook(extensions: LoadedExtensions, options: SystemCallHookOptions = {}): SystemCallHook {
  const observers = extensions.systemModelObservers;
  if (observers.length === 0) return passThroughSystemCall;
  return (kind, request, invoke, runtime) => {
    const taskStore = taskStoreFrom(runtime);
    if (taskStore === undefined && options.detached && !options.detached.accepting) return invoke();
    return observeSystemModelCall(observers, kind, request, invoke, {
      appStore: extensions.appStore,
      ...(taskStore ? { taskStore } : {}),
      ...(runtime?.signal ? { signal: runtime.signal } : {}),
      ...(options.onDiagnostic ? { onDiagnostic: options.onDiagnostic } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.detach ? { detach: options.detach } : {}),
      ...(options.detached ? { detached: options.detached } : {}),
    });
  };
}

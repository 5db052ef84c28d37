import { systemClock } from "../core/clock.ts";
import { errorMessage, isAbortError } from "../core/errors.ts";
import { DeerflowError } from "../core/errors.ts";
import type { ExtensionRuntimeDeps, ExtensionService, ExtensionSession, ExtensionSessionFactory } from "../extension-api/index.ts";
import type { DiagnosticSink, ExtensionDiagnostic } from "../extensions/diagnostics.ts";
import type { ExtensionEntry, LoadedExtensions } from "../extensions/registry.ts";
import type { Clock } from "../ports/runtime-ports.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";

/*
 * Extension services live as long as the gateway. Starting fails open per service (the gateway
 * serves without a service that would not start); stopping runs over every service whose start was
 * attempted, newest first, each within its own budget, so one stuck stop cannot keep the others
 * from releasing their resources or hold shutdown hostage.
 */

export const DEFAULT_SERVICE_STOP_TIMEOUT_MS = 30_000;

export interface ExtensionServicesOptions {
  readonly clock?: Clock;
  readonly onDiagnostic?: DiagnosticSink;
  /** Each stop's own budget. */
  readonly stopTimeoutMs?: number;
}

export interface ExtensionServices {
  /**
   * Starts every service in registration order. Resolves once all were tried; a service's own
   * failure is a diagnostic. Rejects only when `signal` (the host's) aborts, after the service being
   * started at that moment was marked attempted, so `stop()` still stops it.
   */
  start(signal?: AbortSignal): Promise<void>;
  /**
   * Stops the attempted services in reverse order. Never throws; idempotent (a second call waits
   * for the first). Calling it while `start()` runs prevents any further service from starting.
   */
  stop(): Promise<void>;
  /** Names of services whose start resolved, in start order. */
  readonly started: readonly string[];
  /** Names of services whose start was attempted, in start order. */
  readonly attempted: readonly string[];
}

type Outcome = { kind: "done" } | { kind: "failed"; error: unknown } | { kind: "timeout" } | { kind: "host-abort" };

function settle(promise: Promise<unknown>): Promise<Outcome> {
  return promise.then(
    (): Outcome => ({ kind: "done" }),
    (error: unknown): Outcome => ({ kind: "failed", error }),
  );
}

function hostAbort(signal: AbortSignal | undefined): { outcome: Promise<Outcome>; dispose(): void } {
  if (signal === undefined) return { outcome: new Promise<Outcome>(() => {}), dispose() {} };
  let onAbort = () => {};
  const outcome = new Promise<Outcome>((resolve) => {
    onAbort = () => resolve({ kind: "host-abort" });
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  return { outcome, dispose: () => signal.removeEventListener("abort", onAbort) };
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/**
 * The services' lifetime, without starting anything yet: register `stop()` in the shutdown
 * sequence first (after the run drain, before storage closes), then await `start()`, so a start
 * interrupted by shutdown still has its cleanup.
 */
export function createExtensionServices(
  services: LoadedExtensions["services"],
  deps: ExtensionRuntimeDeps,
  options: ExtensionServicesOptions = {},
): ExtensionServices {
  const clock = options.clock ?? systemClock;
  const stopTimeoutMs = options.stopTimeoutMs ?? DEFAULT_SERVICE_STOP_TIMEOUT_MS;
  if (!(stopTimeoutMs > 0)) throw new RangeError(`stopTimeoutMs must be a positive number of milliseconds, got ${stopTimeoutMs}`);
  const sharedDeps: ExtensionRuntimeDeps = Object.freeze({ appStore: deps.appStore, policy: deps.policy, sessionFactory: deps.sessionFactory });
  const entries = [...services] as ExtensionEntry<ExtensionService>[];
  const attemptedEntries: ExtensionEntry<ExtensionService>[] = [];
  const started: string[] = [];
  const report = (diagnostic: ExtensionDiagnostic) => options.onDiagnostic?.(diagnostic);
  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;

  async function startAll(signal: AbortSignal | undefined): Promise<void> {
    for (const entry of entries) {
      if (stopping !== undefined) return;
      if (signal?.aborted) throw abortReason(signal);
      const { source, value: service } = entry;
      // Marked before awaiting: a start that acquires something and then fails still owns a stop().
      attemptedEntries.push(entry);
      const abort = hostAbort(signal);
      let outcome: Outcome;
      try {
        outcome = await Promise.race([settle((async () => service.start(sharedDeps))()), abort.outcome]);
      } finally {
        abort.dispose();
      }
      // Decided by origin: only the host's signal stops the batch; a service's own abort is its failure.
      if (outcome.kind === "host-abort") throw abortReason(signal as AbortSignal);
      if (outcome.kind === "failed") {
        const what = isAbortError(outcome.error) ? "raised its own abort" : "failed";
        report({ level: "error", source, message: `service "${service.name}" start() ${what}; the gateway serves without it: ${errorMessage(outcome.error)}` });
        continue;
      }
      started.push(service.name);
    }
  }

  async function stopAll(): Promise<void> {
    for (const { source, value: service } of [...attemptedEntries].reverse()) {
      const timer = new AbortController();
      const timeout = clock.sleep(stopTimeoutMs, timer.signal).then(
        (): Outcome => ({ kind: "timeout" }),
        // Cancelled by us once the stop settled: never the winner.
        () => new Promise<Outcome>(() => {}),
      );
      let outcome: Outcome;
      try {
        outcome = await Promise.race([settle((async () => service.stop())()), timeout]);
      } finally {
        timer.abort();
      }
      if (outcome.kind === "timeout") {
        // The stop keeps running in the background; settle() already absorbs its late failure.
        report({ level: "error", source, message: `service "${service.name}" stop() timed out after ${formatMs(stopTimeoutMs)}; continuing shutdown without waiting for it` });
      } else if (outcome.kind === "failed") {
        report({ level: "error", source, message: `service "${service.name}" stop() failed; continuing shutdown: ${errorMessage(outcome.error)}` });
      }
    }
  }

  return {
    start(signal?: AbortSignal): Promise<void> {
      starting ??= startAll(signal);
      return starting;
    },
    stop(): Promise<void> {
      stopping ??= stopAll();
      return stopping;
    },
    get started() {
      return Object.freeze([...started]);
    },
    get attempted() {
      return Object.freeze(attemptedEntries.map((entry) => entry.value.name));
    },
  };
}

/** Creates the services' lifetime and starts it: the one-call form when shutdown cannot race startup. */
export async function startExtensionServices(
  services: LoadedExtensions["services"],
  deps: ExtensionRuntimeDeps,
  options: ExtensionServicesOptions = {},
): Promise<ExtensionServices> {
  const lifetime = createExtensionServices(services, deps, options);
  await lifetime.start();
  return lifetime;
}

/** Where the records of extension sessions live in the gateway's store: `extensions:<namespace>:<key>`. */
export const EXTENSION_SESSION_PREFIX = "extensions";
const SESSION_NAMESPACE = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * The session factory services receive: compare-and-set sessions over the gateway's versioned
 * store, each confined to its namespace's keys, so no extension can reach the host's own records
 * (users, the JWT secret, threads) through it.
 */
export function extensionSessionFactory(versioned: VersionedKeyValue): ExtensionSessionFactory {
  return (namespace: string): ExtensionSession => {
    if (typeof namespace !== "string" || !SESSION_NAMESPACE.test(namespace)) {
      throw new DeerflowError(
        "extension_session_invalid",
        `sessionFactory(${JSON.stringify(namespace) ?? String(namespace)}): a namespace is 1-128 letters, digits, "_", "." or "-"; pass your extension's name`,
      );
    }
    const keyOf = (key: string): string => {
      if (typeof key !== "string" || key === "") {
        throw new DeerflowError("extension_session_invalid", `session "${namespace}": a key must be a non-empty string, got ${JSON.stringify(key) ?? String(key)}`);
      }
      return `${EXTENSION_SESSION_PREFIX}:${namespace}:${key}`;
    };
    return Object.freeze({
      namespace,
      read: async (key: string) => {
        const { value, version } = await versioned.read(keyOf(key));
        return Object.freeze({ value, version });
      },
      write: async (key: string, value: string | null, expected: string | null) => {
        if (value !== null && typeof value !== "string") {
          throw new DeerflowError("extension_session_invalid", `session "${namespace}": write("${key}") takes a string or null, got ${typeof value}; serialize the value first`);
        }
        return versioned.write(keyOf(key), value, expected);
      },
    });
  };
}

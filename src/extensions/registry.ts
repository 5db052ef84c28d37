import { DeerflowError } from "../core/errors.ts";
import {
  EXTENSION_ROUTE_METHODS,
  ExtensionData,
  REGISTRATION_METHODS,
  type AgentAssemblyObserver,
  type ContextCompactionObserver,
  type ExtensionRegistry,
  type ExtensionRoute,
  type ExtensionService,
  type MiddlewareContributor,
  type SystemModelCallObserver,
  type TaskLifecycleContributor,
} from "../extension-api/index.ts";

/*
 * The host side of the registry: what install() writes into, plus what the host alone may do —
 * attribute every entry to the extension that made it, undo one install positionally, and freeze
 * the result. Extensions only ever hold a write-only view bound to their own source.
 */

/** One registration, attributed: `source` is the plugin's `use` string. */
export interface ExtensionEntry<T> {
  readonly source: string;
  readonly value: T;
}

/** One `routers(routes)` call: the gateway mounts or rejects its routes together. */
export type ExtensionRouter = readonly ExtensionRoute[];

/** The immutable product of loading, read by every hook site. */
export interface LoadedExtensions {
  /** A fresh app-scoped store per build. */
  readonly appStore: ExtensionData;
  readonly middlewareContributors: readonly ExtensionEntry<MiddlewareContributor>[];
  readonly taskLifecycle: readonly ExtensionEntry<TaskLifecycleContributor>[];
  readonly systemModelObservers: readonly ExtensionEntry<SystemModelCallObserver>[];
  readonly agentAssemblyObservers: readonly ExtensionEntry<AgentAssemblyObserver>[];
  readonly contextCompactionObservers: readonly ExtensionEntry<ContextCompactionObserver>[];
  readonly services: readonly ExtensionEntry<ExtensionService>[];
  readonly routers: readonly ExtensionEntry<ExtensionRouter>[];
  /**
   * Whether a run must allocate a task store: only kinds that receive one (middleware contributors
   * through the runtime context, lifecycle hooks, system-model and compaction observers) count.
   * Services and routers never see a task store, so they never cost one per run.
   */
  readonly needsTaskStore: boolean;
}

export type ExtensionRegistrationErrorCode = "extension_registration_unattributed" | "extension_registration_invalid" | "extension_registration_closed";

export class ExtensionRegistrationError extends DeerflowError {
  declare readonly code: ExtensionRegistrationErrorCode;

  constructor(code: ExtensionRegistrationErrorCode, message: string, source?: string) {
    super(code, message, source === undefined ? undefined : { details: { source } });
    this.name = "ExtensionRegistrationError";
  }
}

/** A position in every list, from {@link HostExtensionRegistry.mark}. Opaque to callers. */
export interface RegistryMark {
  readonly lengths: readonly number[];
}

type Kind = (typeof REGISTRATION_METHODS)[number];

const KINDS: readonly Kind[] = REGISTRATION_METHODS;

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return "an array";
  if (typeof value === "function") return "a function";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return (typeof value === "object" || typeof value === "function") && value !== null;
}

function requireMethod(value: unknown, method: string, what: string): string | null {
  if (!isObject(value)) return `expected ${what} object with a ${method}() method, got ${describe(value)}`;
  if (typeof value[method] !== "function") return `${what} has no ${method}() method (found ${describe(value[method])})`;
  return null;
}

const ROUTE_METHODS: ReadonlySet<unknown> = new Set(EXTENSION_ROUTE_METHODS);

/** Why a registered value cannot be run by the host, or null when it can. */
function shapeProblem(kind: Kind, value: unknown): string | null {
  switch (kind) {
    case "middlewares":
      return requireMethod(value, "contributeMiddlewares", "a middleware contributor");
    case "taskLifecycle": {
      if (!isObject(value)) return `expected a task-lifecycle contributor with onTaskStart() and/or onTaskStop(), got ${describe(value)}`;
      for (const hook of ["onTaskStart", "onTaskStop"]) {
        if (value[hook] !== undefined && typeof value[hook] !== "function") return `${hook} is ${describe(value[hook])}, not a function`;
      }
      if (value["onTaskStart"] === undefined && value["onTaskStop"] === undefined) {
        return "a task-lifecycle contributor needs onTaskStart() or onTaskStop(); it has neither";
      }
      return null;
    }
    case "systemModelObserver":
      return requireMethod(value, "onSystemModelCall", "a system-model-call observer");
    case "agentAssemblyObserver":
      return requireMethod(value, "onAgentAssembled", "an agent-assembly observer");
    case "contextCompactionObserver":
      return requireMethod(value, "onContextCompacted", "a context-compaction observer");
    case "service": {
      if (!isObject(value)) return `expected a service with name, start() and stop(), got ${describe(value)}`;
      if (typeof value["name"] !== "string" || value["name"] === "") return "a service needs a non-empty string name";
      return requireMethod(value, "start", "a service") ?? requireMethod(value, "stop", "a service");
    }
    case "routers": {
      if (!Array.isArray(value)) return `routers() takes an array of routes, got ${describe(value)}`;
      if (value.length === 0) return "routers() was given no routes; register at least one or leave the call out";
      // The routes are stored as a copy, so a lifetime attached to the array itself would be dropped
      // silently; refuse it here instead of mounting a router whose hooks never run.
      for (const key of ROUTER_LIFETIME_KEYS) {
        if (Object.hasOwn(value, key)) return `routers() got a router with "${key}"; a router cannot own a lifetime or mounts, register an ExtensionService for that`;
      }
      for (const [index, route] of value.entries()) {
        if (!isObject(route)) return `routes[${index}] is ${describe(route)}, not a route`;
        if (!ROUTE_METHODS.has(route["method"])) {
          return `routes[${index}].method is ${JSON.stringify(route["method"]) ?? describe(route["method"])}; use one of ${EXTENSION_ROUTE_METHODS.join(", ")}`;
        }
        if (typeof route["path"] !== "string" || !route["path"].startsWith("/")) return `routes[${index}].path must be a string starting with "/"`;
        if (typeof route["handler"] !== "function") return `routes[${index}].handler is ${describe(route["handler"])}, not a function`;
      }
      return null;
    }
  }
}

const ROUTER_LIFETIME_KEYS = ["lifespan", "onStartup", "onShutdown", "startup", "shutdown", "mount", "mounts", "websocket"] as const;

/** What a value is stored as: routes are copied and frozen so the extension cannot edit a router after registering it. */
function stored(kind: Kind, value: unknown): unknown {
  if (kind !== "routers") return value;
  return Object.freeze((value as ExtensionRoute[]).map((route) => Object.freeze({ ...route })));
}

export class HostExtensionRegistry implements ExtensionRegistry {
  readonly #lists = new Map<Kind, ExtensionEntry<unknown>[]>(KINDS.map((kind) => [kind, []]));
  #currentSource: string | undefined;

  /**
   * Runs `fn` with every registration attributed to `source`. `fn` gets a view bound to that
   * source; the view is closed once `fn` returns or its promise settles, so an extension that keeps
   * the registry and registers later (after its install finished) is refused rather than having its
   * entry attributed to whichever extension happens to be installing at the time.
   */
  attributedTo<T>(source: string, fn: (registry: ExtensionRegistry) => T): T {
    if (typeof source !== "string" || source === "") {
      throw new ExtensionRegistrationError("extension_registration_unattributed", "attributedTo() needs the extension's source (its plugins[].use)");
    }
    const view = this.#viewFor(source);
    const previous = this.#currentSource;
    this.#currentSource = source;
    let result: T;
    try {
      result = fn(view.registry);
    } catch (error) {
      this.#currentSource = previous;
      view.close();
      throw error;
    }
    if (isPromiseLike(result)) {
      // Async installs keep their attribution until they settle; the loader runs them one at a time.
      return Promise.resolve(result).finally(() => {
        this.#currentSource = previous;
        view.close();
      }) as T;
    }
    this.#currentSource = previous;
    view.close();
    return result;
  }

  middlewares(contributor: MiddlewareContributor): void {
    this.#add("middlewares", this.#requireSource("middlewares"), contributor);
  }
  taskLifecycle(contributor: TaskLifecycleContributor): void {
    this.#add("taskLifecycle", this.#requireSource("taskLifecycle"), contributor);
  }
  systemModelObserver(observer: SystemModelCallObserver): void {
    this.#add("systemModelObserver", this.#requireSource("systemModelObserver"), observer);
  }
  agentAssemblyObserver(observer: AgentAssemblyObserver): void {
    this.#add("agentAssemblyObserver", this.#requireSource("agentAssemblyObserver"), observer);
  }
  contextCompactionObserver(observer: ContextCompactionObserver): void {
    this.#add("contextCompactionObserver", this.#requireSource("contextCompactionObserver"), observer);
  }
  service(service: ExtensionService): void {
    this.#add("service", this.#requireSource("service"), service);
  }
  routers(routes: readonly ExtensionRoute[]): void {
    this.#add("routers", this.#requireSource("routers"), routes);
  }

  /** The current length of every list, to undo one install with {@link rollbackTo}. */
  mark(): RegistryMark {
    return Object.freeze({ lengths: Object.freeze(KINDS.map((kind) => this.#list(kind).length)) });
  }

  /**
   * Drops everything registered since `mark`, in all seven lists. Positional, not by source: two
   * plugins may share a `use` with different config, and undoing by source would also erase the
   * earlier, successful one.
   */
  rollbackTo(mark: RegistryMark): void {
    KINDS.forEach((kind, index) => {
      const length = mark.lengths[index];
      if (length === undefined) throw new TypeError("rollbackTo() needs a mark from this registry's mark()");
      this.#list(kind).length = Math.min(this.#list(kind).length, length);
    });
  }

  /** A frozen snapshot with a fresh app store; later registrations do not change it. */
  build(): LoadedExtensions {
    const frozen = <T>(kind: Kind) =>
      Object.freeze(this.#list(kind).map((entry) => Object.freeze({ ...entry }))) as readonly ExtensionEntry<T>[];
    const middlewareContributors = frozen<MiddlewareContributor>("middlewares");
    const taskLifecycle = frozen<TaskLifecycleContributor>("taskLifecycle");
    const systemModelObservers = frozen<SystemModelCallObserver>("systemModelObserver");
    const contextCompactionObservers = frozen<ContextCompactionObserver>("contextCompactionObserver");
    return Object.freeze({
      appStore: new ExtensionData("app"),
      middlewareContributors,
      taskLifecycle,
      systemModelObservers,
      agentAssemblyObservers: frozen<AgentAssemblyObserver>("agentAssemblyObserver"),
      contextCompactionObservers,
      services: frozen<ExtensionService>("service"),
      routers: frozen<ExtensionRouter>("routers"),
      needsTaskStore:
        middlewareContributors.length > 0 ||
        taskLifecycle.length > 0 ||
        systemModelObservers.length > 0 ||
        contextCompactionObservers.length > 0,
    });
  }

  #list(kind: Kind): ExtensionEntry<unknown>[] {
    return this.#lists.get(kind) as ExtensionEntry<unknown>[];
  }

  #requireSource(kind: Kind): string {
    if (this.#currentSource === undefined) {
      throw new ExtensionRegistrationError(
        "extension_registration_unattributed",
        `registry.${kind}() was called outside attributedTo(source, ...); the host must attribute every registration to an extension`,
      );
    }
    return this.#currentSource;
  }

  #add(kind: Kind, source: string, value: unknown): void {
    const problem = shapeProblem(kind, value);
    if (problem !== null) {
      throw new ExtensionRegistrationError(
        "extension_registration_invalid",
        `extension "${source}": registry.${kind}() rejected the value: ${problem}. Fix the extension's install().`,
        source,
      );
    }
    this.#list(kind).push(Object.freeze({ source, value: stored(kind, value) }));
  }

  #viewFor(source: string): { registry: ExtensionRegistry; close(): void } {
    let open = true;
    const add = (kind: Kind) => (value: unknown) => {
      if (!open) {
        throw new ExtensionRegistrationError(
          "extension_registration_closed",
          `extension "${source}": registry.${kind}() was called after install() finished; register everything before install() returns (or before its promise settles)`,
          source,
        );
      }
      this.#add(kind, source, value);
    };
    const registry = Object.freeze(Object.fromEntries(KINDS.map((kind) => [kind, add(kind)]))) as unknown as ExtensionRegistry;
    return { registry, close: () => void (open = false) };
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return isObject(value) && typeof value["then"] === "function";
}

/** The shared empty set, for hosts that load no extensions. */
export const EMPTY_EXTENSIONS: LoadedExtensions = new HostExtensionRegistry().build();

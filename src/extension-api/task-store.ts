import { ExtensionApiError } from "./errors.ts";

/**
 * A key into an {@link ExtensionData} store. Keys are compared by identity, not by description, so
 * two extensions that both pick the description "state" still never see each other's values: what
 * Python gets from keying by type, TypeScript gets from a token object.
 */
export interface ExtensionDataKey<T> {
  readonly description: string;
  /** Carries T for the type checker only; never set. */
  readonly __type?: (value: T) => T;
}

/** A new, unique key. Create it once at module level and reuse it. */
export function dataKey<T>(description: string): ExtensionDataKey<T> {
  return Object.freeze({ description });
}

/**
 * Extension-private state attached to one host-owned scope: `"app"` for the app store, the run id
 * for a lead task, the subagent's execution id for a subagent, `"detached"` outside any task. The
 * host creates one per scope and drops it when the scope ends, and hands the current one to every
 * callback, so an extension never holds a store past its scope. `undefined` and `null` count as
 * absent.
 */
export class ExtensionData {
  readonly scopeId: string;
  readonly #entries = new Map<object, unknown>();
  readonly #initialising = new Set<object>();

  constructor(scopeId: string) {
    if (typeof scopeId !== "string" || scopeId === "") {
      throw new ExtensionApiError("invalid_scope_id", "ExtensionData needs a non-empty scope id such as \"app\" or a run id");
    }
    this.scopeId = scopeId;
  }

  get<T>(key: ExtensionDataKey<T>): T | undefined {
    const value = this.#entries.get(key);
    return value === null || value === undefined ? undefined : (value as T);
  }

  /**
   * The stored value, created by `init` when absent. `init` may read and write other keys of this
   * store; asking for the key it is initialising is a cycle and throws instead of recursing forever.
   */
  getOrInit<T>(key: ExtensionDataKey<T>, init: () => T): T {
    const existing = this.get(key);
    if (existing !== undefined) return existing;
    if (this.#initialising.has(key)) {
      throw new ExtensionApiError(
        "extension_data_cycle",
        `ExtensionData("${this.scopeId}"): the init for "${key.description}" asked for its own key; build the value without reading it`,
      );
    }
    this.#initialising.add(key);
    try {
      const created = init();
      if (created !== null && created !== undefined) this.#entries.set(key, created);
      return created;
    } finally {
      this.#initialising.delete(key);
    }
  }

  set<T>(key: ExtensionDataKey<T>, value: T): void {
    if (value === null || value === undefined) this.#entries.delete(key);
    else this.#entries.set(key, value);
  }

  /** Removes the value and returns what was stored, if anything. */
  remove<T>(key: ExtensionDataKey<T>): T | undefined {
    const value = this.get(key);
    this.#entries.delete(key);
    return value;
  }
}

/** The scope id of a store handed out where no task is live. */
export const DETACHED_SCOPE_ID = "detached";

/**
 * A fresh, isolated store for work that runs outside any task (a memory extraction after the run,
 * a compaction report): what an extension writes there is seen by that one callback pass only.
 */
export function detachedTaskStore(): ExtensionData {
  return new ExtensionData(DETACHED_SCOPE_ID);
}

/** Host-owned runtime-context key of the task store. Extensions read it through {@link taskStoreFrom}, never write it. */
export const EXTENSION_TASK_STORE_KEY = "__deerflow_extension_task_store";

/**
 * The task-scoped store of the current run, or undefined when there is no live task (the runtime
 * has no context, or the host allocated no store because no extension needs one).
 */
export function taskStoreFrom(runtime: unknown): ExtensionData | undefined {
  if (typeof runtime !== "object" || runtime === null) return undefined;
  const context: unknown = (runtime as { context?: unknown }).context;
  if (typeof context !== "object" || context === null) return undefined;
  const store: unknown =
    context instanceof Map ? context.get(EXTENSION_TASK_STORE_KEY) : (context as Record<string, unknown>)[EXTENSION_TASK_STORE_KEY];
  return store instanceof ExtensionData ? store : undefined;
}

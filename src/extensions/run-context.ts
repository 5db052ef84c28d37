import type { LoadedExtensions } from "./registry.ts";

/**
 * The loaded-extension snapshot a task runs with, bound once per task by the host and read back by
 * code that runs inside the task (the task tool hands it to the subagents it starts). Run context is
 * caller-mergeable, so the value is a host-issued token, not data: a caller can put anything under
 * the key, but only a snapshot this module issued is ever believed.
 */
export const EXTENSION_SNAPSHOT_CONTEXT_KEY = "__deerflow_extension_snapshot";

class ExtensionSnapshot {
  constructor(readonly extensions: LoadedExtensions) {}
}

const issued = new WeakSet<ExtensionSnapshot>();

/** The run-context entry that binds `extensions` to one task. */
export function bindExtensionSnapshot(extensions: LoadedExtensions): Record<string, unknown> {
  const snapshot = new ExtensionSnapshot(extensions);
  issued.add(snapshot);
  return { [EXTENSION_SNAPSHOT_CONTEXT_KEY]: snapshot };
}

/** The snapshot the host bound to this run, or undefined (none bound, or a forged value). */
export function resolveRunExtensions(context: Readonly<Record<string, unknown>>): LoadedExtensions | undefined {
  const value = context[EXTENSION_SNAPSHOT_CONTEXT_KEY];
  return value instanceof ExtensionSnapshot && issued.has(value) ? value.extensions : undefined;
}

import type { LoadedExtensions } from "../../src/extensions/registry.ts";

/** How many entries each of the seven kinds holds, in the contract's order. */
export function kindCounts(loaded: LoadedExtensions): number[] {
  return [
    loaded.middlewareContributors.length,
    loaded.taskLifecycle.length,
    loaded.systemModelObservers.length,
    loaded.agentAssemblyObservers.length,
    loaded.contextCompactionObservers.length,
    loaded.services.length,
    loaded.routers.length,
  ];
}

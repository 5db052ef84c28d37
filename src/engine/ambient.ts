import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";

/**
 * Runs `fn` with no ambient LangChain run context. LangGraph merges the config it finds in
 * AsyncLocalStorage into every graph call, so a run started while some earlier run's context is
 * still current becomes that run's child: it checkpoints under the other run's `checkpoint_ns`
 * and the thread's own state stays empty. A context can be current where nobody asked for it:
 * Deno 2.9 carries the store of a dynamic `import()` made inside a run (just-bash loads each
 * command's module on first use) into the next requests its built-in HTTP server hands out. A top-level run and
 * a request therefore start from an empty context; their config is only what the caller gave.
 */
export function withoutAmbientRun<T>(fn: () => T): T {
  return AsyncLocalStorageProviderSingleton.getInstance().run(undefined, fn);
}

// LangGraph's /web entry does not install AsyncLocalStorage; interrupt() and getConfig() need it.
// node:async_hooks exists on Node, Deno and Bun, so one module serves every adapter's entry.
import { AsyncLocalStorage } from "node:async_hooks";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";

AsyncLocalStorageProviderSingleton.initializeGlobalInstance(new AsyncLocalStorage());

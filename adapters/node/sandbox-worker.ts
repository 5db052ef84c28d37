import { Worker } from "node:worker_threads";
import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";
import { runsFromSources, siblingModule } from "../shared/sibling-module.ts";

/**
 * Virtual sandbox workers on Node: worker_threads running sandbox-worker-entry.js when built (tsc's
 * dist/, or beside the one-file bundle), or from the sources sandbox-worker-entry.mjs, which
 * registers tsx before it loads the TypeScript entry.
 */
export function createNodeSandboxWorkers(): SandboxWorkerPort {
  const entry = runsFromSources(import.meta.url) ? new URL("./sandbox-worker-entry.mjs", import.meta.url) : siblingModule("sandbox-worker-entry", import.meta.url);
  return {
    start() {
      // None of the process's own flags: the entry registers tsx itself, and a preload the
      // process was started with (`--import x.ts`, as bench/soak.ts starts serve) failed the
      // worker with "Unknown file extension .ts" before the entry ran.
      const worker = new Worker(entry, { execArgv: [] });
      let failed = false;
      return {
        postMessage: (message) => worker.postMessage(message),
        onMessage: (listener) => void worker.on("message", listener),
        onFailure(listener) {
          const fail = (error: Error) => {
            if (failed) return;
            failed = true;
            listener(error);
          };
          worker.on("error", fail);
          worker.on("exit", (code) => fail(new Error(`worker exited with code ${code}`)));
        },
        terminate: () => void worker.terminate(),
        keepAlive: (yes) => (yes ? worker.ref() : worker.unref()),
      };
    },
  };
}

import { Worker } from "node:worker_threads";
import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";

/** Virtual sandbox workers on Node: worker_threads running sandbox-worker-entry.mjs. */
export function createNodeSandboxWorkers(): SandboxWorkerPort {
  const entry = new URL("./sandbox-worker-entry.mjs", import.meta.url);
  return {
    start() {
      const worker = new Worker(entry);
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

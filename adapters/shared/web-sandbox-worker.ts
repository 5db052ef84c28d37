import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";
import { siblingModule } from "./sibling-module.ts";

interface WebWorker {
  postMessage(message: unknown): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  addEventListener(type: "error" | "messageerror", listener: (event: { message?: string; preventDefault(): void }) => void): void;
  terminate(): void;
  /** Bun's workers have these; Deno's do not (an idle one keeps the process until terminated). */
  ref?(): void;
  unref?(): void;
}
type WebWorkerConstructor = new (url: string, options: { type: "module" }) => WebWorker;

/** Virtual sandbox workers as module Web Workers (Deno and Bun) running web-sandbox-worker-entry (.ts, or .js built). */
export function createWebSandboxWorkers(): SandboxWorkerPort {
  const entry = siblingModule("web-sandbox-worker-entry", import.meta.url).href;
  const WorkerClass = (globalThis as unknown as { Worker: WebWorkerConstructor }).Worker;
  return {
    start() {
      const worker = new WorkerClass(entry, { type: "module" });
      return {
        postMessage: (message) => worker.postMessage(message),
        onMessage: (listener) => worker.addEventListener("message", (event) => listener(event.data)),
        onFailure(listener) {
          let failed = false;
          const fail = (event: { message?: string; preventDefault(): void }) => {
            // Handled here: unhandled, a worker's error would also be reported as the host's own.
            event.preventDefault();
            if (failed) return;
            failed = true;
            listener(new Error(event.message || "the worker failed"));
          };
          worker.addEventListener("error", fail);
          worker.addEventListener("messageerror", fail);
        },
        terminate: () => worker.terminate(),
        ...(worker.ref && worker.unref ? { keepAlive: (yes: boolean) => (yes ? worker.ref!() : worker.unref!()) } : {}),
      };
    },
  };
}

// A virtual sandbox worker on Node (worker_threads; adapters/node/sandbox-worker.ts starts it).
// Built, this runs as is; from the sources sandbox-worker-entry.mjs registers tsx and loads it.
import { parentPort } from "node:worker_threads";
import { serveVirtualSandboxHost } from "../../src/sandbox/virtual-host.ts";

const port = parentPort;
if (!port) throw new Error("sandbox-worker-entry runs as a worker thread: start it through createNodeSandboxWorkers().");
serveVirtualSandboxHost({
  postMessage: (message) => port.postMessage(message),
  onMessage: (listener) => void port.on("message", listener),
});

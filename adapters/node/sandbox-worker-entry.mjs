// A virtual sandbox worker on Node (adapters/node/sandbox-worker.ts starts it). Node 20 cannot
// strip TypeScript types itself and a worker does not inherit the main thread's loader, so tsx
// registers here. just-bash loads first, natively: through tsx's hooks its bundle takes about
// three times as long.
import { parentPort } from "node:worker_threads";
import "just-bash";
import { register } from "tsx/esm/api";

register();
const { serveVirtualSandboxHost } = await import("../../src/sandbox/virtual-host.ts");
serveVirtualSandboxHost({
  postMessage: (message) => parentPort.postMessage(message),
  onMessage: (listener) => parentPort.on("message", listener),
});

// A virtual sandbox worker as a module Web Worker (Deno and Bun; web-sandbox-worker.ts starts it).
import { serveVirtualSandboxHost } from "../../src/sandbox/virtual-host.ts";

const scope = globalThis as unknown as {
  postMessage(message: unknown): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
};
serveVirtualSandboxHost({
  postMessage: (message) => scope.postMessage(message),
  onMessage: (listener) => scope.addEventListener("message", (event) => listener(event.data)),
});

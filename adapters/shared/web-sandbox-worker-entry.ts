// A virtual sandbox worker as a module Web Worker (Deno and Bun; web-sandbox-worker.ts starts it).
import { serveVirtualSandboxHost } from "../../src/sandbox/virtual-host.ts";
import { reclaimBunMemory } from "../bun/memory.ts";

// In a Deno worker just-bash's defense box cannot patch process.report and process.execPath and
// says so (console.debug) on every command; once per message is enough.
const debug = console.debug.bind(console);
const said = new Set<string>();
console.debug = (...args: unknown[]) => {
  if (typeof args[0] === "string" && args[0].startsWith("[DefenseInDepthBox]")) {
    const line = args.map(String).join(" ");
    if (said.has(line)) return;
    said.add(line);
  }
  debug(...args);
};

const scope = globalThis as unknown as {
  postMessage(message: unknown): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
};
const bun = (globalThis as unknown as { Bun?: unknown }).Bun;
serveVirtualSandboxHost({
  postMessage: (message) => scope.postMessage(message),
  onMessage: (listener) => scope.addEventListener("message", (event) => listener(event.data)),
  // Bun: the worker's own reclaim, as the gateway thread's (it reaches only this worker's thread:
  // its heap and the code it compiled).
  ...(bun ? { reclaimMemory: reclaimBunMemory } : {}),
});

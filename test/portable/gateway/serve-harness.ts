// The runtime's own HTTP server for the real-socket gateway tests: Node @hono/node-server, Deno
// Deno.serve, Bun Bun.serve. The same test file runs under all three and each picks its own.
import type { ServeFetch } from "../../../src/ports/http-server.ts";

export async function runtimeServe(): Promise<{ runtime: string; serve: ServeFetch }> {
  const globals = globalThis as { Deno?: unknown; Bun?: unknown };
  // Imported on demand: each adapter touches its own runtime's globals or packages.
  if (globals.Deno) return { runtime: "deno", serve: (await import("../../../adapters/deno/serve.ts")).serveDeno };
  if (globals.Bun) return { runtime: "bun", serve: (await import("../../../adapters/bun/serve.ts")).serveBun };
  return { runtime: "node", serve: (await import("../../../adapters/node/serve.ts")).serveNode };
}

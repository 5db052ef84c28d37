/**
 * deerflow-edge's gateway for bench/gateway.ts: createGateway with the embedded defaults, served
 * inside this process by the runtime's own serve function on 127.0.0.1 (a free port).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { createFsKeyValue } from "../adapters/shared/fs-key-value.ts";
import type { ServeFetch } from "../src/ports/http-server.ts";
import type { KeyValue } from "../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import type { Target } from "./gateway-sse.ts";
import { collectGarbage, type Runtime } from "./harness.ts";
import { createBenchGateway } from "./gateway-app.ts";

export interface OurServer {
  readonly target: Target;
  /** Where fs storage lives (removed on close); undefined for memory storage. */
  readonly storageDir: string | undefined;
  /** Heap and RSS of this process after a full collection. */
  memory(): Promise<{ heap_used: number; rss: number }>;
  close(): Promise<void>;
}

async function serveFor(runtime: Runtime): Promise<ServeFetch> {
  switch (runtime) {
    case "node":
      return (await import("../adapters/node/serve.ts")).serveNode;
    case "deno":
      return (await import("../adapters/deno/serve.ts")).serveDeno;
    case "bun":
      return (await import("../adapters/bun/serve.ts")).serveBun;
  }
}

export async function startOurs(options: { storage: "memory" | "fs"; runtime: Runtime }): Promise<OurServer> {
  const storageDir = options.storage === "fs" ? mkdtempSync(join(tmpdir(), "deerflow-bench-gateway-")) : undefined;
  const storage: KeyValue = storageDir === undefined ? createMemoryKeyValue() : createFsKeyValue(storageDir);
  const gateway = await createBenchGateway(storage);
  const serve = await serveFor(options.runtime);
  const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
  return {
    target: { apiUrl: `${server.url}/api`, assistantId: gateway.assistantId },
    storageDir,
    memory: async () => {
      // Two passes: the first can leave finalizer-held objects for the second.
      collectGarbage();
      await new Promise((resolve) => setTimeout(resolve, 50));
      collectGarbage();
      const usage = process.memoryUsage();
      return { heap_used: usage.heapUsed, rss: usage.rss };
    },
    close: async () => {
      await server.close();
      await gateway.shutdown();
      if (storageDir !== undefined) {
        rmSync(storageDir, { recursive: true, force: true });
        // A checkpoint write can still land after shutdown() resolved and recreate the folder;
        // a second pass keeps the temp dir from outliving the bench.
        await new Promise((resolve) => setTimeout(resolve, 1000));
        rmSync(storageDir, { recursive: true, force: true });
      }
    },
  };
}

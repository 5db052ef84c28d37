import { configDefaults, defineConfig } from "vitest/config";
import { pool, setupFiles } from "./test/vitest-pool.ts";

// The official checkpoint conformance suite (@langchain/langgraph-checkpoint-validation) calls
// vitest globals, so it gets its own config; the main suite keeps explicit imports.
// CHECKPOINT_STORE=deno-kv (under deno run --unstable-kv) runs it over Deno KV instead of memory and fs,
// with the Deno KV run coordination suite beside it (deno-kv-coordination.test.ts).
const denoKv = process.env.CHECKPOINT_STORE === "deno-kv";
// postgres.test.ts starts a PostgreSQL server, which only the Node pass can spawn: left out of the
// Deno and Bun passes (not skipped there), as deno-kv.test.ts is left out of every pass but its own.
const g = globalThis as { Deno?: unknown; Bun?: unknown };
const onNode = !g.Deno && !g.Bun;
const notHere = [...(denoKv ? [] : ["test/checkpoint/deno-kv*.test.ts"]), ...(onNode ? [] : ["test/checkpoint/postgres.test.ts"])];

export default defineConfig({
  test: {
    include: denoKv ? ["test/checkpoint/deno-kv*.test.ts"] : ["test/checkpoint/**/*.test.ts"],
    exclude: [...configDefaults.exclude, ...notHere],
    globals: true,
    pool,
    setupFiles,
    testTimeout: 20_000,
  },
});

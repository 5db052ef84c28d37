import { configDefaults, defineConfig } from "vitest/config";
import { pool, setupFiles } from "./test/vitest-pool.ts";

// The official checkpoint conformance suite (@langchain/langgraph-checkpoint-validation) calls
// vitest globals, so it gets its own config; the main suite keeps explicit imports.
// CHECKPOINT_STORE=deno-kv (under deno run --unstable-kv) runs it over Deno KV instead of memory and fs,
// with the Deno KV run coordination suite beside it (deno-kv-coordination.test.ts).
const denoKv = process.env.CHECKPOINT_STORE === "deno-kv";

export default defineConfig({
  test: {
    include: denoKv ? ["test/checkpoint/deno-kv*.test.ts"] : ["test/checkpoint/**/*.test.ts"],
    exclude: denoKv ? configDefaults.exclude : [...configDefaults.exclude, "test/checkpoint/deno-kv*.test.ts"],
    globals: true,
    pool,
    setupFiles,
    testTimeout: 20_000,
  },
});

import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";
import { pool, setupFiles } from "./test/vitest-pool.ts";

// The package's exports point at the build (dist/); the tests import the package by name from source.
const SELF: Readonly<Record<string, string>> = {
  "": "./src/index.ts",
  "/extension-api": "./src/extension-api/index.ts",
  "/node": "./adapters/node/index.ts",
  "/deno": "./adapters/deno/index.ts",
  "/bun": "./adapters/bun/index.ts",
};

export default defineConfig({
  resolve: {
    alias: Object.entries(SELF).map(([entry, file]) => ({
      find: new RegExp(`^deerflow-edge${entry}$`),
      replacement: fileURLToPath(new URL(file, import.meta.url)),
    })),
  },
  test: {
    include: ["test/**/*.test.ts"],
    // The checkpoint conformance suite needs vitest globals: vitest.checkpoint.config.ts runs it.
    // The cluster suite starts PostgreSQL and gateway processes: vitest.cluster.config.ts runs it.
    exclude: [...configDefaults.exclude, "test/checkpoint/**", "test/cluster/**"],
    pool,
    setupFiles,
    testTimeout: 20_000,
  },
});

import { configDefaults, defineConfig } from "vitest/config";

// The cluster acceptance suite (test/cluster/): a real PostgreSQL and gateway processes on Node,
// Deno and Bun, started by the test process itself, so it runs on Node only, one file at a time
// (each file's cluster takes the machine's cores), with room for process starts in its hooks.
export default defineConfig({
  test: {
    include: ["test/cluster/**/*.test.ts"],
    exclude: [...configDefaults.exclude],
    // The official checkpoint conformance suite calls vitest globals.
    globals: true,
    pool: "forks",
    fileParallelism: false,
    setupFiles: ["./test/setup.ts"],
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
});

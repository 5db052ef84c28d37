import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The checkpoint conformance suite needs vitest globals: vitest.checkpoint.config.ts runs it.
    exclude: [...configDefaults.exclude, "test/checkpoint/**"],
    pool: "forks",
    setupFiles: ["./test/setup.ts"],
    testTimeout: 20_000,
  },
});

import { defineConfig } from "vitest/config";

// The official checkpoint conformance suite (@langchain/langgraph-checkpoint-validation) calls
// vitest globals, so it gets its own config; the main suite keeps explicit imports.
export default defineConfig({
  test: {
    include: ["test/checkpoint/**/*.test.ts"],
    globals: true,
    pool: "forks",
    setupFiles: ["./test/setup.ts"],
    testTimeout: 20_000,
  },
});

// Spec, middleware-chain.md item 2 (ToolOutputBudgetMiddleware): "Oversized results are
// externalized to tool_output.storage_subdir (default .tool-results, shared constant
// TOOL_RESULTS_DIRNAME)". One constant: a second declaration of the folder name (present_files
// once had its own) could drift from the budget's and let saved tool output pass as a deliverable.
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { TOOL_RESULTS_DIRNAME } from "../../src/core/path.ts";
import { TOOL_RESULTS_DIRNAME as BUDGET_DIRNAME } from "../../src/middlewares/tool-output/index.ts";
import { SRC, sourceFiles } from "../support/import-edges.ts";

const DECLARED_IN = "core/path.ts";

describe("TOOL_RESULTS_DIRNAME", () => {
  it('"default .tool-results, shared constant TOOL_RESULTS_DIRNAME": src/ spells the folder name once, in core/path.ts', () => {
    expect(TOOL_RESULTS_DIRNAME).toBe(".tool-results");
    expect(BUDGET_DIRNAME).toBe(TOOL_RESULTS_DIRNAME);
    const literal = /(["'`])\.tool-results\1/;
    const spelled = sourceFiles(SRC)
      .filter((file) => literal.test(readFileSync(file, "utf8")))
      .map((file) => relative(SRC, file).split("\\").join("/"));
    expect(spelled).toEqual([DECLARED_IN]);
  });
});

import type { AgentTool } from "../engine/types.ts";
import { citingTurnReceipts, parseCitations, verifyCitations, type CitationVerdict } from "../middlewares/tool-receipt/index.ts";
import { createBatchTaskTool as batchTaskToolWith, type BatchTaskToolOptions } from "../tools/batch-task.ts";
import type { LoadedExtensions } from "../extensions/registry.ts";
import type { RunSubagentOptions, SubagentRunResult, SubagentRunner } from "../tools/subagent-run.ts";
import { createTaskTool as taskToolWith, type TaskToolOptions } from "../tools/task.ts";
import { runSubagent } from "./subagent-executor.ts";
import { BUILTIN_SUBAGENT_TYPES } from "./subagent-types.ts";

/*
 * The delegation tools (`task`, `batch_task`) as the agents layer assembles them: the tools live in
 * src/tools/ and are handed the subagent runner here (the executor, the built-in types and the
 * receipt-citation check), so nothing in src/tools/ imports agents/ or middlewares/.
 */

/** The verdict on a report's receipt citations, or undefined when the report cites nothing. */
export function subagentCitationVerdict(outcome: Pick<SubagentRunResult, "status" | "result" | "messages">): CitationVerdict | undefined {
  if (outcome.status !== "completed" || outcome.result === undefined) return undefined;
  if (parseCitations(outcome.result).length === 0) return undefined;
  // No snapshot (or a malformed one) means nothing the report could cite was shown to it.
  return verifyCitations(outcome.result, citingTurnReceipts(outcome.messages) ?? []);
}

/**
 * How the lead's delegation tools run subagents. `extensions` is the executor's fallback: the
 * snapshot the delegating agent was assembled with, used when a run carries none of its own.
 */
export function subagentRunner(extensions?: LoadedExtensions): SubagentRunner {
  return Object.freeze({
    run: (options: RunSubagentOptions) => runSubagent(options, extensions),
    defaultTypes: BUILTIN_SUBAGENT_TYPES,
    citationVerdict: subagentCitationVerdict,
  });
}

/** The runner without a fallback snapshot: only a run's own snapshot brings extensions in. */
export const SUBAGENT_RUNNER: SubagentRunner = subagentRunner();

/** The `task` tool over the given subagent types (default: the built-ins), run by the subagent executor. */
export function createTaskTool(options: TaskToolOptions, extensions?: LoadedExtensions): AgentTool {
  return taskToolWith(options, extensions ? subagentRunner(extensions) : SUBAGENT_RUNNER);
}

/** The `batch_task` tool over the given subagent types (default: the built-ins), run by the subagent executor. */
export function createBatchTaskTool(options: BatchTaskToolOptions, extensions?: LoadedExtensions): AgentTool {
  return batchTaskToolWith(options, extensions ? subagentRunner(extensions) : SUBAGENT_RUNNER);
}

import { ToolMessage } from "@langchain/core/messages";
import type { Agent } from "../engine/agent.ts";
import type { AgentTool, ToolContext } from "../engine/types.ts";
import { SUBAGENT_TOKEN_USAGE_KEY, formatSubagentResultMessage, makeSubagentAdditionalKwargs } from "./subagent-result.ts";
import type { SubagentBuilder, SubagentRunResult, SubagentRunner, SubagentType } from "./subagent-run.ts";

/*
 * `task`: the lead delegates one bounded piece of work to a subagent and gets back a single
 * ToolMessage whose text and structured kwargs are built from the same verdict, so the delegation
 * ledger, token accounting and error handling read facts rather than parse prose.
 */

export const TASK_TOOL_NAME = "task";
/** ToolReceipt defines no verdict key of its own; the parent-side citation check lands here. */
export const SUBAGENT_CITATION_VERDICT_KEY = "subagent_citation_verdict";

export interface TaskToolOptions {
  /** The subagent types the lead may name; a later duplicate name wins. Defaults to the runner's (the built-ins). */
  readonly types?: readonly SubagentType[];
  /** Builds a subagent's own Agent for a type (its chain, filtered tools and model). */
  readonly buildAgent: SubagentBuilder;
}

function describe(types: ReadonlyMap<string, SubagentType>): string {
  const lines = [...types.values()].map((type) => `- ${type.name}: ${type.description.split("\n")[0]}`);
  return [
    "Delegate one bounded, self-contained task to a subagent that works in its own context and returns a single report.",
    "Use it only when delegation clearly helps (specialist tools, genuinely parallel independent work, or isolating a context-heavy investigation).",
    "Available subagent types:",
    ...lines,
  ].join("\n");
}

function argText(args: Record<string, unknown>, key: string): string {
  const value = args[key];
  return typeof value === "string" ? value.trim() : "";
}

/**
 * The ToolMessage a delegation ends in: text and kwargs from one verdict. `citationVerdict` is the
 * runner's verdict on the report's receipt citations (SubagentRunner.citationVerdict), if any.
 */
export function taskResultMessage(outcome: SubagentRunResult, toolCallId: string, citationVerdict?: object): ToolMessage {
  const input = { result: outcome.result, error: outcome.error, stopReason: outcome.stop_reason ?? undefined };
  const { content, error } = formatSubagentResultMessage(outcome.status, input);
  const kwargs: Record<string, unknown> = {
    ...makeSubagentAdditionalKwargs(outcome.status, { ...input, error }),
    [SUBAGENT_TOKEN_USAGE_KEY]: { ...outcome.usage },
  };
  if (citationVerdict) kwargs[SUBAGENT_CITATION_VERDICT_KEY] = citationVerdict;
  return new ToolMessage({ content, tool_call_id: toolCallId, name: TASK_TOOL_NAME, additional_kwargs: kwargs });
}

/** The JSON-schema properties of one delegated task: `task`'s arguments, and each item of `batch_task`. */
export function subagentTaskProperties(typeNames: readonly string[], descriptionHint: string): Record<string, unknown> {
  return {
    description: { type: "string", description: descriptionHint },
    prompt: { type: "string", description: "The task for the subagent: specific and self-contained, since it sees none of this conversation." },
    subagent_type: { type: "string", enum: [...typeNames], description: "Which kind of subagent runs the task." },
  };
}

/** The `task` tool over the given subagent types, running them with `runner` (agents/delegation-tools.ts gives it). */
export function createTaskTool(options: TaskToolOptions, runner: SubagentRunner): AgentTool {
  const types = new Map((options.types ?? runner.defaultTypes).map((type) => [type.name, type] as const));
  const names = [...types.keys()];
  return {
    name: TASK_TOOL_NAME,
    description: describe(types),
    schema: {
      type: "object",
      properties: subagentTaskProperties(names, "A short (3-5 word) description of the task for display. Provide it first."),
      required: ["description", "prompt", "subagent_type"],
      additionalProperties: false,
    },
    async invoke(args: Record<string, unknown>, context: ToolContext) {
      const toolCallId = context.toolCall.id ?? "";
      const typeName = argText(args, "subagent_type");
      const type = types.get(typeName);
      if (!type) {
        return `Error: Unknown subagent type '${typeName}'. Available: ${names.join(", ")}. Call task again with one of these as subagent_type.`;
      }
      const prompt = argText(args, "prompt");
      if (!prompt) return "Error: task needs a non-empty `prompt` telling the subagent what to do. Call task again with one.";
      const { runtime } = context;
      const outcome = await runner.run({
        type,
        prompt,
        description: argText(args, "description") || prompt.slice(0, 60),
        parent: { runtime, runId: runtime.runId, threadId: runtime.threadId, toolCallId },
        buildAgent: options.buildAgent,
        recordLoopDetection: true,
      });
      return taskResultMessage(outcome, toolCallId, runner.citationVerdict(outcome));
    },
  };
}

/*
 * The built-in delegation targets of the `task` tool. Limits follow upstream's built-ins
 * (general-purpose 150 turns, bash 60; 900 s bare timeout) so a delegated run is bounded the same
 * way on every runtime.
 */

import type { SubagentType } from "../tools/subagent-run.ts";

/** One kind of subagent the lead may delegate to (declared beside the delegation tools). */
export type { SubagentType } from "../tools/subagent-run.ts";

export const DEFAULT_SUBAGENT_MAX_TURNS = 50;
export const DEFAULT_SUBAGENT_TIMEOUT_MS = 900_000;

/** Nesting and clarification stay with the lead: a subagent cannot delegate or ask the user. */
export const SUBAGENT_DISALLOWED_TOOLS: readonly string[] = Object.freeze(["task", "batch_task", "ask_clarification", "present_files"]);

const WORKING_DIRECTORY = `<working_directory>
You have access to the same sandbox environment as the parent agent:
- User uploads: \`/mnt/user-data/uploads\`
- User workspace: \`/mnt/user-data/workspace\`
- Output files: \`/mnt/user-data/outputs\`
- Treat \`/mnt/user-data/workspace\` as the default working directory for file IO
- Prefer relative paths from the workspace, such as \`hello.txt\` or \`../outputs/result.md\`
</working_directory>`;

export const GENERAL_PURPOSE_SUBAGENT: SubagentType = Object.freeze({
  name: "general-purpose",
  description: `A capable agent for bounded exploration and action when there is clear delegation benefit.

Use this subagent when:
- Its specialist tools, skills, model, or instructions materially improve the result
- It owns one independent, non-overlapping part of genuinely parallel work
- A bounded, context-heavy investigation should be isolated from the lead context

Do NOT use merely because work is complex or multi-step. Do not use when it would duplicate repository discovery or overlap side effects.`,
  systemPrompt: `You are a general-purpose subagent working on a delegated task. Complete the task autonomously and return a clear, actionable result.

<guidelines>
- Focus on completing the delegated task efficiently
- Use available tools as needed to accomplish the goal
- If you encounter issues, explain them clearly in your response
- Return a concise summary of what you accomplished
- Do NOT ask for clarification - work with the information provided
</guidelines>

<tool_restrictions>
You are a subagent - the \`task\` tool is NOT available to you. Never attempt to dispatch further subagents.
</tool_restrictions>

<output_format>
When you complete the task, provide:
1. A brief summary of what was accomplished
2. Key findings or results
3. Any relevant file paths, data, or artifacts created
4. Issues encountered (if any)
5. Cite the tool receipts your claims rest on, e.g. [r2 write_file]
</output_format>

${WORKING_DIRECTORY}`,
  tools: null,
  disallowedTools: SUBAGENT_DISALLOWED_TOOLS,
  maxTurns: 150,
  timeoutMs: DEFAULT_SUBAGENT_TIMEOUT_MS,
});

export const BASH_SUBAGENT: SubagentType = Object.freeze({
  name: "bash",
  description: `Command execution specialist for bounded shell workflows with clear delegation benefit.

Use this subagent when:
- A multi-command workflow's logs or intermediate state would materially displace lead context
- It owns an independent, non-overlapping shell workload that can run in parallel

Routine git, build, test, or deploy operations are not sufficient reason to delegate.`,
  systemPrompt: `You are a bash command execution specialist. Execute the requested commands carefully and report results clearly.

<guidelines>
- Execute commands one at a time when they depend on each other
- Report both stdout and stderr when relevant
- Handle errors gracefully and explain what went wrong
- Be cautious with destructive operations (rm, overwrite, etc.)
</guidelines>

<output_format>
For each command or group of commands: what was executed, the result, relevant output (summarized if verbose), any errors or warnings. Cite the tool receipts your claims rest on, e.g. [r1 bash].
</output_format>

${WORKING_DIRECTORY}`,
  tools: Object.freeze(["bash", "ls", "read_file", "glob", "grep"]),
  disallowedTools: SUBAGENT_DISALLOWED_TOOLS,
  maxTurns: 60,
  timeoutMs: DEFAULT_SUBAGENT_TIMEOUT_MS,
});

export const BUILTIN_SUBAGENT_TYPES: readonly SubagentType[] = Object.freeze([GENERAL_PURPOSE_SUBAGENT, BASH_SUBAGENT]);

/** The names of `parentTools` a subagent of this type receives: its allowlist (or all), minus the denylist. */
export function filterSubagentTools<T extends { readonly name: string }>(type: SubagentType, parentTools: readonly T[]): T[] {
  const allowed = type.tools === null ? null : new Set(type.tools);
  const denied = new Set(type.disallowedTools);
  return parentTools.filter((tool) => !denied.has(tool.name) && (allowed === null || allowed.has(tool.name)));
}

/** A name → type map; a later duplicate name replaces an earlier one (a configured type overriding a built-in). */
export function subagentTypeMap(types: readonly SubagentType[] = BUILTIN_SUBAGENT_TYPES): ReadonlyMap<string, SubagentType> {
  return new Map(types.map((type) => [type.name, type] as const));
}

import type { AgentTool } from "../engine/types.ts";
import { WEB_FETCH_TOOL_NAME, WEB_SEARCH_TOOL_NAME } from "./web.ts";

/*
 * Tool groups, as upstream DeerFlow names them in config.yaml (`tool_groups:` and each tool's
 * `group:`): what a custom agent's `tool_groups` list chooses from. A grouped built-in tool is bound
 * only when its group is chosen; every other tool (present_files, task, ask_clarification, MCP and
 * an embedder's tools) belongs to no group and stays, as upstream keeps its built-ins and MCP tools.
 */

export const TOOL_GROUPS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  web: Object.freeze([WEB_SEARCH_TOOL_NAME, WEB_FETCH_TOOL_NAME]),
  "file:read": Object.freeze(["ls", "read_file", "glob", "grep"]),
  "file:write": Object.freeze(["write_file", "str_replace"]),
  bash: Object.freeze(["bash"]),
});

export const TOOL_GROUP_NAMES: readonly string[] = Object.freeze(Object.keys(TOOL_GROUPS));

const GROUP_OF_TOOL = new Map(Object.entries(TOOL_GROUPS).flatMap(([group, tools]) => tools.map((tool) => [tool, group] as const)));

/** The group a tool belongs to, or undefined for a tool outside every group. */
export function toolGroupOf(toolName: string): string | undefined {
  return GROUP_OF_TOOL.get(toolName);
}

/** `tools` limited to the chosen groups; null chooses every group (no limit). */
export function filterToolsByGroups<T extends Pick<AgentTool, "name">>(tools: readonly T[], groups: readonly string[] | null): T[] {
  if (groups === null) return [...tools];
  const chosen = new Set(groups);
  return tools.filter((tool) => {
    const group = toolGroupOf(tool.name);
    return group === undefined || chosen.has(group);
  });
}

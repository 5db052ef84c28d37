import { isOneOf } from "./one-of.ts";

/**
 * Where a contributed middleware sits in the chain, named by what it must see rather than by a
 * list index, so host reordering cannot silently move it past the thing it depends on.
 */
export const Placement = Object.freeze({
  MODEL_LOGICAL: "model_logical",
  MODEL_PHYSICAL: "model_physical",
  TOOL_VISIBLE: "tool_visible",
  TOOL_RAW: "tool_raw",
  STANDARD: "standard",
} as const);

export type Placement = (typeof Placement)[keyof typeof Placement];

export const PLACEMENT_VALUES: readonly Placement[] = Object.freeze(Object.values(Placement));

/** Which agents a contribution applies to. */
export const AgentScope = Object.freeze({
  LEAD: "lead",
  SUBAGENT: "subagent",
  BOTH: "both",
} as const);

export type AgentScope = (typeof AgentScope)[keyof typeof AgentScope];

export const AGENT_SCOPE_VALUES: readonly AgentScope[] = Object.freeze(Object.values(AgentScope));

export function isPlacement(value: unknown): value is Placement {
  return isOneOf(PLACEMENT_VALUES, value);
}

export function isAgentScope(value: unknown): value is AgentScope {
  return isOneOf(AGENT_SCOPE_VALUES, value);
}

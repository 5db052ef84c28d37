import type { Skill, SkillRegistry, SkillRegistrySnapshot } from "../skills/registry.ts";

/*
 * A custom agent: a named variant of the lead agent that an administrator defines (the UI's Agents
 * page) and a run picks with `context.agent_name`. Its SOUL joins the system prompt, its model is
 * the run's default, its tool groups limit the grouped built-in tools and its skill list limits
 * the skills it may activate. The record is kept by the runtime's CustomAgentStore.
 */

/** Upstream's rule and the UI's: letters, digits and hyphens; stored lowercased. */
export const CUSTOM_AGENT_NAME_PATTERN: RegExp = /^[A-Za-z0-9-]+$/;
export const CUSTOM_AGENT_NAME_MAX_LENGTH = 64;
export const REASONING_EFFORTS = ["low", "medium", "high"] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

export interface CustomAgentModelSettings {
  readonly temperature?: number;
  readonly max_tokens?: number;
}

export interface CustomAgent {
  /** Lowercase, matching CUSTOM_AGENT_NAME_PATTERN. */
  readonly name: string;
  readonly description: string;
  /** The model a run of this agent uses when the run names none; null: the deployment's default. */
  readonly model: string | null;
  /** The tool groups it may use (src/tools/tool-groups.ts); null: every group. */
  readonly tool_groups: readonly string[] | null;
  /** The skills it may activate; null: every enabled skill, []: none. */
  readonly skills: readonly string[] | null;
  readonly model_settings: CustomAgentModelSettings | null;
  /** Kept and returned for the UI; this harness has no thinking mode, so no run reads them. */
  readonly thinking_enabled: boolean | null;
  readonly reasoning_effort: ReasoningEffort | null;
  /** SOUL.md: the agent's personality and guardrails, part of its system prompt. */
  readonly soul: string;
  readonly created_at: string;
  readonly updated_at: string;
}

/** The name as it is stored and looked up (upstream lowercases it), or undefined when it is not a valid name. */
export function normalizeCustomAgentName(name: string): string | undefined {
  return name.length <= CUSTOM_AGENT_NAME_MAX_LENGTH && CUSTOM_AGENT_NAME_PATTERN.test(name) ? name.toLowerCase() : undefined;
}

/** What the agent adds to the lead prompt: who it is, then its SOUL. */
export function customAgentPromptSection(agent: Pick<CustomAgent, "name" | "description" | "soul">): string {
  const lines = [`<agent name="${agent.name}">`];
  if (agent.description.trim() !== "") lines.push(`<description>\n${agent.description.trim()}\n</description>`);
  if (agent.soul.trim() !== "") lines.push(`<soul>\n${agent.soul.trim()}\n</soul>`);
  lines.push("</agent>");
  return lines.join("\n");
}

/**
 * The registry as the agent sees it: a skill outside `allowed` reads as disabled, so neither
 * activation nor the tool policy (which resolve against the live registry) can reach it.
 */
export function restrictSkillRegistry(registry: SkillRegistry, allowed: readonly string[] | null): SkillRegistry {
  if (allowed === null) return registry;
  const permitted = new Set(allowed);
  const load = async (): Promise<SkillRegistrySnapshot> => {
    const snapshot = await registry.load();
    const skills = Object.freeze(
      snapshot.skills.map((skill) => (skill.enabled && !permitted.has(skill.name) ? Object.freeze({ ...skill, enabled: false }) : skill)),
    );
    const byName = new Map(skills.map((skill) => [skill.name, skill]));
    return Object.freeze({
      skills,
      diagnostics: snapshot.diagnostics,
      byName: (name: string) => byName.get(name),
      byPath: (path: string) => {
        const found = snapshot.byPath(path);
        return found && byName.get(found.name);
      },
    });
  };
  return Object.freeze({
    containerPath: registry.containerPath,
    config: registry.config,
    load,
    list: async () => [...(await load()).skills],
    enabledNames: async () => (await load()).skills.filter((skill) => skill.enabled).map((skill) => skill.name),
    get: async (name: string) => (await load()).byName(name),
    readFile: (skill: Skill, relativePath: string) => registry.readFile(skill, relativePath),
  });
}

import { ToolMessage, type AIMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, isCommand, isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import { contentText } from "../../core/content.ts";
import type {
  AgentMiddleware,
  AgentRuntime,
  AgentState,
  ModelHandler,
  ModelRequest,
  ToolCallRequest,
  ToolHandler,
  ToolResult,
} from "../../engine/types.ts";
import type { SkillRegistry, SkillRegistrySnapshot } from "../../skills/registry.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import {
  POLICY_DECISION_VERSION,
  requireSkillChainBinding,
  type PolicySource,
  type SkillChainBinding,
} from "./chain-binding.ts";
import { isRecord } from "../../core/guards.ts";

/*
 * A skill's `allowed-tools` binds only once the skill is really in use: slash-activated in this
 * run, or loaded by the model (ThreadState.skill_context). Merely enabled skills restrict nothing.
 * An explicit slash activation outranks skill_context, so reading a second skill cannot widen the
 * tools of the one the user asked for. The policy is resolved against the live registry on every
 * model call and the signed decision is reused by that step's tool calls; anything unmatched,
 * forged or from another run falls back to live resolution. This is behavioural scoping, not a
 * sandbox: a skill read through `bash cat` is not seen here.
 */

export const SKILL_TOOL_POLICY_NAME = "SkillToolPolicy";

/**
 * Framework tools that survive every policy: reading skill files and discovering tools or skills.
 * They do not extend a skill's business authority; `task` is deliberately not among them, so a
 * restricted skill cannot delegate around its own policy.
 */
export const FRAMEWORK_SAFE_TOOL_NAMES: readonly string[] = Object.freeze([
  "describe_skill",
  "read_file",
  "review_skill_package",
  "tool_search",
]);

const TOOL_SEARCH_NAME = "tool_search";
const MISSING_TOOL_CALL_ID = "missing_tool_call_id";
const NAMED_TOOL_CHOICES: ReadonlySet<string> = new Set(["auto", "none", "required", "any"]);

export const SkillToolPolicyConfigSchema = v.strictObject({
  /** The agent's skill allowlist (a custom agent's `skills`); null allows every enabled skill. */
  available_skills: v.optional(v.nullable(v.array(v.string())), null),
});
export type SkillToolPolicyConfig = v.InferOutput<typeof SkillToolPolicyConfigSchema>;

export interface SkillToolPolicyDeps {
  readonly registry: SkillRegistry;
  /** Shared with SkillActivation; see createSkillMiddlewares. */
  readonly binding: SkillChainBinding;
}

interface ActivePolicy {
  readonly source: PolicySource;
  readonly paths: readonly string[];
}

/** The error a call outside the active skill policy gets instead of running. */
export function skillPolicyBlockedMessage(toolName: string, toolCallId: string | undefined): ToolMessage {
  return new ToolMessage({
    content: `Error: Tool '${toolName}' is not allowed by the active skill policy.`,
    tool_call_id: toolCallId || MISSING_TOOL_CALL_ID,
    name: toolName,
    status: "error",
  });
}

export function createSkillToolPolicyMiddleware(
  config: Partial<SkillToolPolicyConfig> | undefined,
  deps: SkillToolPolicyDeps,
): AgentMiddleware {
  const { available_skills } = parseMiddlewareConfig(
    SkillToolPolicyConfigSchema,
    config,
    SKILL_TOOL_POLICY_NAME,
    "available_skills takes a list of skill names, or null for every enabled skill.",
  );
  const binding = requireSkillChainBinding(deps?.binding, SKILL_TOOL_POLICY_NAME);
  const registry = deps.registry;
  const available = available_skills === null ? null : new Set(available_skills);

  async function activePolicy(state: AgentState, runtime: AgentRuntime): Promise<ActivePolicy> {
    const slashPath = await binding.readSlashSource(runtime);
    if (slashPath !== undefined) return { source: "slash", paths: [slashPath] };
    const entries: unknown = state?.skill_context;
    const paths: string[] = [];
    if (Array.isArray(entries)) {
      for (const entry of entries as unknown[]) {
        const path = typeof entry === "object" && entry !== null ? (entry as { path?: unknown }).path : undefined;
        if (typeof path === "string" && path !== "") paths.push(path);
      }
    }
    return paths.length > 0 ? { source: "skill_context", paths } : { source: "passive", paths: [] };
  }

  /** null: no active skill restricts tools. */
  async function resolveAllowed(paths: readonly string[], runtime: AgentRuntime): Promise<Set<string> | null> {
    let snapshot: SkillRegistrySnapshot;
    try {
      snapshot = await registry.load();
    } catch (error) {
      if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
      // An active skill exists but cannot be authorised: keep only what no skill needs to grant.
      return new Set(FRAMEWORK_SAFE_TOOL_NAMES);
    }
    const active = new Map<string, readonly string[] | null>();
    for (const path of paths) {
      const skill = snapshot.byPath(path);
      // Stale, disabled or out-of-allowlist references are skipped one by one...
      if (skill === undefined || !skill.enabled) continue;
      if (available !== null && !available.has(skill.name)) continue;
      if (!active.has(skill.name)) active.set(skill.name, skill.allowedTools);
    }
    // ...but when none is left the policy fails closed rather than open.
    if (active.size === 0) return new Set(FRAMEWORK_SAFE_TOOL_NAMES);
    const declared = [...active.values()].filter((tools): tools is readonly string[] => tools !== null);
    // Skills written before allowed-tools existed restrict nothing, unless another active skill does.
    if (declared.length === 0) return null;
    return new Set([...declared.flat(), ...FRAMEWORK_SAFE_TOOL_NAMES]);
  }

  async function allowedForToolCall(policy: ActivePolicy, runtime: AgentRuntime): Promise<Set<string> | null> {
    const decision = await binding.readDecision(runtime);
    if (decision !== undefined && decision.source === policy.source && sameList(decision.activePaths, policy.paths)) {
      return decision.allowedNames === null ? null : new Set(decision.allowedNames);
    }
    return resolveAllowed(policy.paths, runtime);
  }

  return {
    name: SKILL_TOOL_POLICY_NAME,
    async wrapModelCall(request: ModelRequest, handler: ModelHandler): Promise<AIMessage> {
      const { runtime } = request;
      const policy = await activePolicy(request.state, runtime);
      if (policy.paths.length === 0) {
        // Passive: nothing to enforce and no storage read; a decision from an earlier step must not linger.
        binding.clearDecision(runtime);
        return handler(request);
      }
      const allowed = await resolveAllowed(policy.paths, runtime);
      await binding.storeDecision(runtime, {
        source: policy.source,
        activePaths: policy.paths,
        allowedNames: allowed === null ? null : [...allowed],
      });
      if (allowed === null) return handler(request);
      const tools = request.tools.filter((tool) => allowed.has(tool.name));
      const choice = request.toolChoice;
      // A forced choice of a tool the policy removed would make the provider reject the request.
      const toolChoice = choice !== undefined && !NAMED_TOOL_CHOICES.has(choice) && !allowed.has(choice) ? "auto" : choice;
      return handler({ ...request, tools, ...(toolChoice === undefined ? {} : { toolChoice }) });
    },
    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      const { runtime, toolCall } = request;
      const policy = await activePolicy(request.state, runtime);
      if (policy.paths.length === 0) return handler(request);
      const allowed = await allowedForToolCall(policy, runtime);
      const name = toolCall.name;
      if (allowed !== null && name && !allowed.has(name)) return skillPolicyBlockedMessage(name, toolCall.id);
      const result = await handler(request);
      if (name !== TOOL_SEARCH_NAME || allowed === null) return result;
      return filterToolSearchResult(result, allowed, toolCall.id);
    },
    releasePolicyParameters() {
      return {
        available_skills: available_skills === null ? null : [...available_skills].sort(),
        framework_tools: [...FRAMEWORK_SAFE_TOOL_NAMES],
        source_priority: ["slash", "skill_context", "passive"],
        on_unresolvable_policy: "framework_tools_only",
        decision_version: POLICY_DECISION_VERSION,
        container_path: registry.containerPath,
      };
    },
  };
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((item, index) => item === b[index]);
}

function toolSearchPolicyError(toolCallId: string | undefined): ToolMessage {
  return new ToolMessage({
    content: "Error: tool_search returned a result that could not be validated against the active skill policy.",
    tool_call_id: toolCallId || MISSING_TOOL_CALL_ID,
    name: TOOL_SEARCH_NAME,
    status: "error",
  });
}

/** A Command's update as one record; tuple updates that write a channel twice are not understood. */
function updateRecord(update: unknown): Record<string, unknown> | undefined {
  if (isRecord(update)) return update;
  if (!Array.isArray(update)) return undefined;
  const record: Record<string, unknown> = {};
  for (const entry of update as unknown[]) {
    if (!Array.isArray(entry) || entry.length !== 2 || typeof entry[0] !== "string" || entry[0] in record) return undefined;
    record[entry[0]] = entry[1];
  }
  return record;
}

function schemaName(schema: unknown): unknown {
  if (!isRecord(schema)) return undefined;
  if (typeof schema["name"] === "string") return schema["name"];
  const fn = schema["function"];
  return isRecord(fn) ? fn["name"] : undefined;
}

/**
 * tool_search stays usable under a restrictive policy only because it cannot hand out what the
 * policy removed: denied schemas and promotions are cut from its result, and a result whose shape
 * cannot be checked is replaced by an error rather than passed through.
 */
function filterToolSearchResult(result: ToolResult, allowed: ReadonlySet<string>, toolCallId: string | undefined): ToolResult {
  if (!isCommand(result)) return toolSearchPolicyError(toolCallId);
  const command = result as Command;
  const update = updateRecord(command.update);
  const promoted = update?.["promoted"];
  const messages = update?.["messages"];
  if (!update || !isRecord(promoted) || !Array.isArray(messages) || messages.length !== 1) return toolSearchPolicyError(toolCallId);
  const rawNames = promoted["names"];
  if (!Array.isArray(rawNames) || !rawNames.every((item) => typeof item === "string")) return toolSearchPolicyError(toolCallId);
  const permitted = (rawNames as string[]).filter((item) => allowed.has(item));

  const message = messages[0] as BaseMessage;
  if (!ToolMessage.isInstance(message) || message.name !== TOOL_SEARCH_NAME) return toolSearchPolicyError(toolCallId);
  let content: ToolMessage["content"] = message.content;
  if (rawNames.length > 0) {
    let schemas: unknown;
    try {
      schemas = JSON.parse(contentText(message.content));
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error;
      schemas = undefined;
    }
    if (!Array.isArray(schemas)) return toolSearchPolicyError(toolCallId);
    const kept = schemas.filter((schema) => permitted.includes(schemaName(schema) as string));
    content = kept.length > 0 ? JSON.stringify(kept, null, 2) : "No tools found matching the active skill policy.";
  }
  const sanitized = new ToolMessage({
    content,
    tool_call_id: message.tool_call_id,
    name: message.name,
    ...(message.id === undefined ? {} : { id: message.id }),
    ...(message.status === undefined ? {} : { status: message.status }),
    ...(message.artifact === undefined ? {} : { artifact: message.artifact }),
    additional_kwargs: { ...message.additional_kwargs },
    response_metadata: { ...message.response_metadata },
  });
  return new Command({
    update: { ...update, promoted: { ...promoted, names: permitted }, messages: [sanitized] },
    ...(command.goto === undefined || (Array.isArray(command.goto) && command.goto.length === 0) ? {} : { goto: command.goto as never }),
    ...(command.graph === undefined ? {} : { graph: command.graph }),
    ...(command.resume === undefined ? {} : { resume: command.resume }),
  });
}

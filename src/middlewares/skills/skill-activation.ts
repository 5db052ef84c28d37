import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, ModelHandler, ModelRequest } from "../../engine/types.ts";
import { sha256Hex } from "../../extension-api/canonical.ts";
import { ContentKind, ProducerKind, provenanceKwargs } from "../../extension-api/provenance.ts";
import type { Skill, SkillRegistry, SkillRegistrySnapshot } from "../../skills/registry.ts";
import { RESERVED_SLASH_SKILL_NAMES, parseSlashSkillReference } from "../../skills/slash.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { emitEvent } from "../../engine/events.ts";
import { ORIGINAL_USER_CONTENT_KEY } from "../input-sanitization.ts";
import { hiddenHumanMessage, latestRealUserIndex, messageText } from "../messages.ts";
import { requireSkillChainBinding, type SkillChainBinding } from "./chain-binding.ts";

/*
 * `/skill-name task` on the latest real user message puts that skill's whole SKILL.md in front of
 * the model for the request that answers it. The injected message lives in that one request: it is
 * never written to state, and the run scope remembers the activation so the tool loop's later
 * model calls do not pay for it again. The activated path is published, signed, for
 * SkillToolPolicy, which then holds the run to the skill's allowed-tools.
 */

export const SKILL_ACTIVATION_NAME = "SkillActivation";
export const SLASH_SKILL_ACTIVATION_KEY = "slash_skill_activation";
export const SLASH_SKILL_ACTIVATION_TARGET_ID_KEY = "slash_skill_activation_target_id";
export const SKILL_ACTIVATION_MESSAGE_NAME = "slash_skill_activation";
export const SKILL_ACTIVATION_EVENT = "middleware:skill_activation";
/** Run-scope key holding the id (or text digest) of the slash message already activated in this run. */
export const SKILL_ACTIVATION_RUN_KEY = "skill_activation:activated_target";

const MISSING_TASK_TEXT =
  "No additional task text was provided after the slash skill command. Ask the user what they want to do with this skill if the next step is unclear.";

/** The injected block; `{{field}}` slots are filled with escaped values. */
export const SLASH_ACTIVATION_TEMPLATE = `<slash_skill_activation>
The user explicitly activated the \`{{skill_name}}\` skill for this turn.
Treat the task text as:
<user_request>
{{user_request}}
</user_request>

Follow this skill before choosing a general workflow. Load supporting resources from the same skill directory only when needed.

<skill name="{{skill_name}}" category="{{category}}" path="{{path}}" sha256="{{sha256}}" editable="{{editable}}">
<skill_content encoding="xml-escaped">
{{skill_content}}
</skill_content>
</skill>
</slash_skill_activation>`;

/** hashLongText(SLASH_ACTIVATION_TEMPLATE), precomputed because declarations are synchronous (a test pins it). */
export const SLASH_ACTIVATION_TEMPLATE_DIGEST = Object.freeze({
  sha256: "c0426f8d7e8dad798fd3ff1cd1830442a8d7f9d3836925224f5f59bc9b3f0989",
  length: 521,
});

export const SkillActivationConfigSchema = v.strictObject({
  /** The agent's skill allowlist (a custom agent's `skills`); null allows every enabled skill. */
  available_skills: v.optional(v.nullable(v.array(v.string())), null),
});
export interface SkillActivationConfig {
  available_skills: string[] | null;
}
type _SkillActivationConfigMatches = Assert<SameType<SkillActivationConfig, v.InferOutput<typeof SkillActivationConfigSchema>>>;

export interface SkillActivationDeps {
  readonly registry: SkillRegistry;
  /** Shared with SkillToolPolicy; see createSkillMiddlewares. */
  readonly binding: SkillChainBinding;
}

/** The audit event written to the custom stream when a slash command activates a skill. */
export interface SkillActivationEvent {
  type: typeof SKILL_ACTIVATION_EVENT;
  middleware: typeof SKILL_ACTIVATION_NAME;
  hook: "wrapModelCall";
  action: "activate";
  changes: { skill_name: string; category: string; path: string; content_hash: string };
}

export function isSlashSkillActivationMessage(message: BaseMessage): boolean {
  return message.type === "human" && message.additional_kwargs?.[SLASH_SKILL_ACTIVATION_KEY] === true;
}

/** `&`, `<`, `>` (and quotes for attributes), as Python's html.escape does. */
export function escapeXml(text: string, quote = false): string {
  const escaped = text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  return quote ? escaped.replace(/"/g, "&quot;").replace(/'/g, "&#x27;") : escaped;
}

/** The hidden activation block for one skill and the task text after the command. */
export function renderSlashActivation(skill: Skill, taskText: string): string {
  const slots: Record<string, string> = {
    skill_name: escapeXml(skill.name, true),
    user_request: escapeXml(taskText || MISSING_TASK_TEXT),
    category: escapeXml(skill.category, true),
    path: escapeXml(skill.path, true),
    sha256: escapeXml(skill.sha256, true),
    editable: skill.category === "custom" ? "true" : "false",
    skill_content: escapeXml(skill.content),
  };
  // One pass, so a value that happens to contain `{{...}}` is never substituted again.
  return SLASH_ACTIVATION_TEMPLATE.replace(/\{\{(\w+)\}\}/g, (slot, key: string) => slots[key] ?? slot);
}

type Resolution = { skill: Skill } | { failure: string };

export function createSkillActivationMiddleware(
  config: Partial<SkillActivationConfig> | undefined,
  deps: SkillActivationDeps,
): AgentMiddleware {
  const { available_skills } = parseMiddlewareConfig(
    SkillActivationConfigSchema,
    config,
    SKILL_ACTIVATION_NAME,
    "available_skills takes a list of skill names, or null for every enabled skill.",
  );
  const binding = requireSkillChainBinding(deps?.binding, SKILL_ACTIVATION_NAME);
  const registry = deps.registry;
  const available = available_skills === null ? null : new Set(available_skills);

  function resolve(snapshot: SkillRegistrySnapshot, name: string): Resolution {
    const skill = snapshot.byName(name);
    if (skill === undefined) {
      // A SKILL.md that exists but failed to parse is "installed" from the user's point of view.
      if (snapshot.diagnostics.some((d) => d.name === name && d.code !== "duplicate_name")) return { failure: unsafe(name) };
      return { failure: `Skill \`/${name}\` is not installed.` };
    }
    if (!skill.enabled) {
      return { failure: `Skill \`/${name}\` is installed but disabled. Enable it before using slash activation.` };
    }
    if (available !== null && !available.has(name)) return { failure: `Skill \`/${name}\` is not available for this agent.` };
    return { skill };
  }

  async function prepare(request: ModelRequest): Promise<ModelRequest | AIMessage> {
    const { messages, runtime } = request;
    const targetIndex = latestRealUserIndex(messages);
    if (targetIndex < 0) return request;
    const target = messages[targetIndex]!;
    if (hasActivationFor(messages, targetIndex, target)) return request;
    const text = userText(target, request.state);
    const reference = parseSlashSkillReference(text);
    if (reference === null) return request;
    const runKey = target.id ? target.id : `sha256:${await sha256Hex(text)}`;
    if (runtime.scope.get(SKILL_ACTIVATION_RUN_KEY) === runKey) return request;

    let snapshot: SkillRegistrySnapshot;
    try {
      snapshot = await registry.load();
    } catch (error) {
      if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
      return new AIMessage({ content: unsafe(reference.name) });
    }
    const resolution = resolve(snapshot, reference.name);
    if ("failure" in resolution) return new AIMessage({ content: resolution.failure });
    const { skill } = resolution;

    await binding.publishSlashSource(runtime, skill.path);
    runtime.scope.set(SKILL_ACTIVATION_RUN_KEY, runKey);
    emitActivation(runtime, skill);

    const activation = hiddenHumanMessage(
      SKILL_ACTIVATION_MESSAGE_NAME,
      renderSlashActivation(skill, reference.remainingText),
      {
        [SLASH_SKILL_ACTIVATION_KEY]: true,
        ...(target.id ? { [SLASH_SKILL_ACTIVATION_TARGET_ID_KEY]: target.id } : {}),
        ...provenanceKwargs({ contentKind: ContentKind.SKILL_BODY, producerKind: ProducerKind.SKILL_ACTIVATION }),
      },
      `${target.id ?? crypto.randomUUID()}__slash_activation`,
    );
    return { ...request, messages: [...messages.slice(0, targetIndex), activation, ...messages.slice(targetIndex)] };
  }

  return {
    name: SKILL_ACTIVATION_NAME,
    async wrapModelCall(request: ModelRequest, handler: ModelHandler): Promise<AIMessage> {
      const prepared = await prepare(request);
      // An unusable slash command is answered directly: calling the model would only let it guess.
      if (AIMessage.isInstance(prepared)) return prepared;
      return handler(prepared);
    },
    releasePolicyParameters() {
      return {
        available_skills: available_skills === null ? null : [...available_skills].sort(),
        enabled_skills: registry.config.enabled === "all" ? "all" : [...registry.config.enabled].sort(),
        container_path: registry.containerPath,
        reserved_commands: [...RESERVED_SLASH_SKILL_NAMES].sort(),
        activation_template: { ...SLASH_ACTIVATION_TEMPLATE_DIGEST },
        scope: "current_request_once_per_run",
      };
    },
  };
}

function unsafe(name: string): string {
  return `Skill \`/${name}\` could not be loaded safely. Please check the skill installation.`;
}

/**
 * The text the user typed: `original_user_content` when an outer middleware (uploads,
 * sanitization) rewrote the content, else the stored message's own text, since wrappers outside
 * this one may have reframed the request's copy.
 */
function userText(target: BaseMessage, state: AgentState): string {
  const own = target.additional_kwargs?.[ORIGINAL_USER_CONTENT_KEY];
  if (typeof own === "string") return own;
  const stored = target.id === undefined ? undefined : state.messages.find((message) => message.id === target.id);
  if (stored !== undefined) {
    const original = stored.additional_kwargs?.[ORIGINAL_USER_CONTENT_KEY];
    return typeof original === "string" ? original : messageText(stored);
  }
  return messageText(target);
}

/** An activation for this message already sits in the history (checkpoints written by older hosts). */
function hasActivationFor(messages: readonly BaseMessage[], targetIndex: number, target: BaseMessage): boolean {
  if (targetIndex <= 0) return false;
  if (target.id) {
    for (const previous of messages.slice(0, targetIndex)) {
      if (!isSlashSkillActivationMessage(previous)) continue;
      if (previous.additional_kwargs?.[SLASH_SKILL_ACTIVATION_TARGET_ID_KEY] === target.id) return true;
      if (previous.id === `${target.id}__slash_activation`) return true;
    }
  }
  return isSlashSkillActivationMessage(messages[targetIndex - 1]!);
}

function emitActivation(runtime: AgentRuntime, skill: Skill): void {
  const event: SkillActivationEvent = {
    type: SKILL_ACTIVATION_EVENT,
    middleware: SKILL_ACTIVATION_NAME,
    hook: "wrapModelCall",
    action: "activate",
    changes: { skill_name: skill.name, category: skill.category, path: skill.path, content_hash: skill.sha256 },
  };
  emitEvent(runtime, event);
}

import type { AgentMiddleware } from "../../engine/types.ts";
import type { SkillRegistry } from "../../skills/registry.ts";
import { createSkillActivationMiddleware, type SkillActivationConfig } from "./skill-activation.ts";
import { SkillChainBinding } from "./chain-binding.ts";
import { createSkillToolPolicyMiddleware } from "./skill-tool-policy.ts";

export interface SkillMiddlewaresOptions {
  readonly registry: SkillRegistry;
  /** Shared by both middlewares: `available_skills`, the agent's skill allowlist (null: every enabled skill). */
  readonly config?: Partial<SkillActivationConfig>;
}

/**
 * SkillActivation and SkillToolPolicy, sharing a binding drawn fresh for this call, so nothing
 * outside the pair can publish a slash source or a policy decision the pair will trust. Place them
 * adjacent, in this order, immediately before DurableContext; every assembled chain (lead, each
 * subagent run) calls this once for its own pair.
 */
export function createSkillMiddlewares(options: SkillMiddlewaresOptions): readonly [AgentMiddleware, AgentMiddleware] {
  const binding = SkillChainBinding.create();
  const deps = { registry: options.registry, binding };
  return Object.freeze([
    createSkillActivationMiddleware(options.config, deps),
    createSkillToolPolicyMiddleware(options.config, deps),
  ] as const);
}

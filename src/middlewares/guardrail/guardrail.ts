import { GUARDRAILS_DEFAULTS, GuardrailsConfigSchema, type GuardrailsConfig, type GuardrailsConfigInput } from "../../authz/config.ts";
import type { GuardrailProvider } from "../../authz/guardrail-provider.ts";
import { resolveGuardrailProvider } from "../../authz/runtime.ts";
import type { AgentMiddleware, ToolCallRequest, ToolHandler, ToolResult } from "../../engine/types.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { createGuardrailGate } from "./gate.ts";

/*
 * Lead chain position 10: the explicitly configured guardrail provider, inner of Authorization (so
 * an already denied tool never costs an external policy call) and outer of SandboxAudit and
 * ToolErrorHandling. Unlike the authorization adapter it evaluates every call, tool_search included.
 */

export const GUARDRAIL_NAME = "Guardrail";

export { GUARDRAILS_DEFAULTS, GuardrailsConfigSchema, type GuardrailsConfig, type GuardrailsConfigInput };
export { GUARDRAIL_EVENT, deniedText } from "./gate.ts";

export interface GuardrailDeps {
  /** A custom provider object; when given it is used instead of `guardrails.provider`. */
  readonly provider?: GuardrailProvider;
}

/**
 * Evaluates each tool call against the configured guardrail provider before it runs. Disabled
 * (the default) it passes every call through and builds no provider.
 */
export function createGuardrailMiddleware(config?: GuardrailsConfigInput, deps: GuardrailDeps = {}): AgentMiddleware {
  const settings: GuardrailsConfig = parseMiddlewareConfig(
    GuardrailsConfigSchema,
    config,
    GUARDRAIL_NAME,
    "Fix this key under guardrails (enabled, fail_closed, passport, provider, allowed_tools, denied_tools).",
  );
  const provider = resolveGuardrailProvider(settings, deps.provider);
  const gate = provider === null ? null : createGuardrailGate({ gate: GUARDRAIL_NAME, provider, failClosed: settings.fail_closed, passport: settings.passport });

  return {
    name: GUARDRAIL_NAME,

    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      return gate === null ? handler(request) : gate.wrapToolCall(request, handler);
    },

    releasePolicyParameters() {
      if (provider === null) return { enabled: false };
      return {
        enabled: true,
        fail_closed: settings.fail_closed,
        passport: settings.passport,
        provider: provider.name,
        policy: provider.policy ? { id: provider.policy.id, version: provider.policy.version ?? null } : null,
        provider_parameters: provider.releasePolicyParameters?.() ?? null,
      };
    },
  };
}

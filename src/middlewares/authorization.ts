import { GuardrailAuthorizationAdapter, TOOL_SEARCH_TOOL_NAME } from "../authz/adapter.ts";
import {
  AUTHORIZATION_DEFAULTS,
  AuthorizationConfigSchema,
  type AuthorizationConfig,
  type AuthorizationConfigInput,
} from "../authz/config.ts";
import type { AuthorizationProvider } from "../authz/provider.ts";
import { resolveAuthorizationProvider } from "../authz/runtime.ts";
import type { AgentMiddleware, ToolCallRequest, ToolHandler, ToolResult } from "../engine/types.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { createGuardrailGate } from "./guardrail/gate.ts";

/*
 * Lead chain position 9, Layer 2 of authorization: every tool call is checked (resource `tool`,
 * action `call`, target the tool's name) against the SAME provider instance that filtered the
 * tool set at assembly (Layer 1), through the guardrail gate, so deny, fail-closed, audit and the
 * error ToolMessage behave exactly as for an explicit guardrail. It sits outer of Guardrail: an
 * authorization deny never costs an external policy call.
 */

export const AUTHORIZATION_NAME = "Authorization";

export { AUTHORIZATION_DEFAULTS, AuthorizationConfigSchema, type AuthorizationConfig, type AuthorizationConfigInput };

export interface AuthorizationDeps {
  /** The provider Layer 1 used for this build; resolved from config when absent. */
  readonly provider?: AuthorizationProvider;
  /**
   * True only when this build has a concrete deferred-tool setup: its generated tool_search then
   * runs without a second provider call (its catalog was already filtered by Layer 1). Without
   * one, a tool that happens to be named tool_search is checked like any other.
   */
  readonly deferredToolSearch?: boolean;
}

/**
 * Layer 2 authorization. Disabled (the default) it passes every call through and builds no
 * provider; enabled, an unknown `default_role` fails construction.
 */
export function createAuthorizationMiddleware(config?: AuthorizationConfigInput, deps: AuthorizationDeps = {}): AgentMiddleware {
  const settings: AuthorizationConfig = parseMiddlewareConfig(
    AuthorizationConfigSchema,
    config,
    AUTHORIZATION_NAME,
    "Fix this key under authorization (enabled, fail_closed, default_role, roles, provider).",
  );
  const provider = resolveAuthorizationProvider(settings, deps.provider);
  const infrastructureToolNames = deps.deferredToolSearch === true ? [TOOL_SEARCH_TOOL_NAME] : [];
  const adapter =
    provider === null
      ? null
      : new GuardrailAuthorizationAdapter(provider, { defaultRole: settings.default_role, infrastructureToolNames });
  const gate = adapter === null ? null : createGuardrailGate({ gate: AUTHORIZATION_NAME, provider: adapter, failClosed: settings.fail_closed, passport: null });

  return {
    name: AUTHORIZATION_NAME,

    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      return gate === null ? handler(request) : gate.wrapToolCall(request, handler);
    },

    releasePolicyParameters() {
      if (provider === null || adapter === null) return { enabled: false };
      return {
        enabled: true,
        fail_closed: settings.fail_closed,
        default_role: settings.default_role,
        resource: adapter.resource,
        action: adapter.action,
        infrastructure_tools: [...adapter.infrastructureToolNames].sort(),
        provider: provider.name,
        provider_parameters: provider.releasePolicyParameters?.() ?? null,
      };
    },
  };
}

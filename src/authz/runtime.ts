import * as v from "valibot";
import { DeerflowError } from "../core/errors.ts";
import { AllowlistProviderConfigSchema, type AuthorizationConfig, type GuardrailsConfig } from "./config.ts";
import { ALLOWLIST_PROVIDER_USES, AllowlistProvider, isGuardrailProvider, type GuardrailProvider } from "./guardrail-provider.ts";
import { isAuthorizationProvider, type AuthorizationProvider } from "./provider.ts";
import { RBAC_PROVIDER_USES, RbacAuthorizationProvider, configIssue } from "./rbac.ts";

/*
 * Provider resolution: once per agent build, never cached, so Layer 1 and Layer 2 of one build
 * share an instance while a config reload builds a fresh one.
 */

interface RoleValidator {
  validateRole(role: string, field?: string): void;
}

function hasRoleValidator(provider: object): provider is RoleValidator {
  return typeof (provider as Partial<RoleValidator>).validateRole === "function";
}

/**
 * The authorization provider for this build, or null when authorization is disabled (then no
 * provider is built or checked at all). `provided` is a custom provider object; when given it is
 * used as is. A provider that knows its roles checks `default_role` here, so an unknown fallback
 * role fails agent construction instead of quietly leaving every caller with nothing.
 */
export function resolveAuthorizationProvider(config: AuthorizationConfig, provided?: AuthorizationProvider): AuthorizationProvider | null {
  if (config.enabled !== true) return null;
  let provider: AuthorizationProvider;
  if (provided !== undefined) {
    if (!isAuthorizationProvider(provided)) {
      throw new DeerflowError(
        "invalid_authorization_provider",
        "The authorization provider must have a name, authorize() and filterResources(); pass an AuthorizationProvider.",
      );
    }
    provider = provided;
  } else if (config.roles !== null && config.roles !== undefined) {
    provider = new RbacAuthorizationProvider({ roles: config.roles }, { configPath: "authorization" });
  } else if (config.provider !== null && config.provider !== undefined) {
    if (!RBAC_PROVIDER_USES.includes(config.provider.use)) {
      throw new DeerflowError(
        "unknown_authorization_provider",
        `authorization.provider.use ${JSON.stringify(config.provider.use)} is not a built-in provider (built in: rbac); pass a custom provider object to the agent instead.`,
      );
    }
    provider = new RbacAuthorizationProvider(config.provider.config, { configPath: "authorization.provider.config" });
  } else {
    throw new DeerflowError(
      "authorization_provider_missing",
      "authorization.enabled is true but no provider is configured; set authorization.roles (the built-in RBAC) or pass a provider, or set enabled: false.",
    );
  }
  if (hasRoleValidator(provider)) provider.validateRole(config.default_role, "authorization.default_role");
  return provider;
}

/**
 * The explicitly configured guardrail provider, or null when guardrails are disabled. `provided`
 * is a custom provider object; when given it is used as is.
 */
export function resolveGuardrailProvider(config: GuardrailsConfig, provided?: GuardrailProvider): GuardrailProvider | null {
  if (config.enabled !== true) return null;
  if (provided !== undefined) {
    if (!isGuardrailProvider(provided)) {
      throw new DeerflowError("invalid_guardrail_provider", "The guardrail provider must have a name and evaluate(); pass a GuardrailProvider.");
    }
    return provided;
  }
  const spec = config.provider;
  if (spec === null || spec === undefined) {
    throw new DeerflowError(
      "guardrail_provider_missing",
      "guardrails.enabled is true but no provider is configured; set guardrails.provider: allowlist (with allowed_tools / denied_tools) or pass a provider, or set enabled: false.",
    );
  }
  const use = typeof spec === "string" ? spec : spec.use;
  if (!ALLOWLIST_PROVIDER_USES.includes(use)) {
    throw new DeerflowError(
      "unknown_guardrail_provider",
      `guardrails.provider ${JSON.stringify(use)} is not a built-in provider (built in: allowlist); pass a custom provider object to the agent instead.`,
    );
  }
  if (typeof spec === "string") {
    return new AllowlistProvider({ allowed_tools: config.allowed_tools, denied_tools: config.denied_tools });
  }
  const result = v.safeParse(AllowlistProviderConfigSchema, spec.config);
  if (!result.success) {
    throw configIssue("invalid_guardrails_config", "guardrails.provider.config", result.issues[0], "The allowlist provider takes allowed_tools and denied_tools.");
  }
  return new AllowlistProvider(result.output);
}

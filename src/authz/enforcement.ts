import { isGraphBubbleUp } from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import { buildPrincipalFromContext, type Principal, type PrincipalConfig } from "./principal.ts";
import { checkDecision, checkFilterResult, type AuthorizationProvider, type AuthzDecision } from "./provider.ts";

/*
 * The assembly-time and resource checks that share one provider instance with the execution-time
 * adapter: Layer 1 tool filtering, model:use, sandbox:execute and route permissions. A provider
 * failure follows fail_closed (default true): deny when closed, the legacy behaviour when open.
 */

export interface EnforcementOptions {
  /** Deny on a provider failure (default true). */
  readonly failClosed?: boolean;
  /** The run's signal when checked during a run: a cancelled run's error is not a provider failure. */
  readonly signal?: AbortSignal;
}

function rethrowControlFlow(error: unknown, options: EnforcementOptions): void {
  if (isGraphBubbleUp(error)) throw error;
  if (options.signal?.aborted) throw error;
}

/**
 * Layer 1: the tools the principal may see, in their original order, computed before the agent is
 * assembled (and before deferred-tool setup), so the model never sees a denied tool and
 * tool_search can never promote one back. The provider can only remove names: one it invents is
 * ignored. A failing or malformed answer leaves no tools when fail-closed and all of them when open.
 */
export async function filterToolsForPrincipal<T extends { readonly name: string }>(
  tools: readonly T[],
  principal: Principal,
  provider: AuthorizationProvider | null | undefined,
  options: EnforcementOptions = {},
): Promise<T[]> {
  const original = [...tools];
  if (provider === null || provider === undefined) return original;
  let allowed: readonly string[];
  try {
    allowed = checkFilterResult(provider.name, await provider.filterResources(principal, "tool", original.map((tool) => tool.name)));
  } catch (error) {
    rethrowControlFlow(error, options);
    return options.failClosed === false ? original : [];
  }
  const names = new Set(allowed);
  return original.filter((tool) => names.has(tool.name));
}

export class ModelNotAuthorizedError extends DeerflowError {
  constructor(providerError: boolean, options?: { cause?: unknown }) {
    super(
      "model_not_authorized",
      providerError
        ? "No models are authorized for the current role (authorization provider error). Try again later, or ask an administrator to check the authorization provider."
        : "No models are authorized for the current role. Ask an administrator to grant your role a model under authorization roles.<role>.models.",
      options,
    );
    this.name = "ModelNotAuthorizedError";
  }
}

async function mayUseModel(provider: AuthorizationProvider, principal: Principal, model: string): Promise<boolean> {
  return checkDecision(provider.name, await provider.authorize(principal, { resource: "model", action: "use", target: model })).allowed;
}

/**
 * model:use for the model an agent is about to be built with. On deny it falls back to the first
 * other model the principal may both list (filterResources) and use (authorize, checked per
 * candidate, because a provider may list a model it will not let you use). With no usable model
 * it throws when fail-closed and keeps the requested model when open.
 */
export async function authorizeModelName(
  name: string,
  principal: Principal,
  provider: AuthorizationProvider | null | undefined,
  candidates: readonly string[],
  options: EnforcementOptions = {},
): Promise<string> {
  if (provider === null || provider === undefined) return name;
  const failClosed = options.failClosed !== false;
  const onProviderError = (error: unknown): string => {
    rethrowControlFlow(error, options);
    if (failClosed) throw new ModelNotAuthorizedError(true, { cause: error });
    return name;
  };
  try {
    if (await mayUseModel(provider, principal, name)) return name;
  } catch (error) {
    return onProviderError(error);
  }
  let visible: readonly string[];
  try {
    visible = checkFilterResult(provider.name, await provider.filterResources(principal, "model", [...candidates]));
  } catch (error) {
    return onProviderError(error);
  }
  for (const candidate of visible) {
    if (candidate === name || !candidates.includes(candidate)) continue;
    try {
      if (await mayUseModel(provider, principal, candidate)) return candidate;
    } catch (error) {
      return onProviderError(error);
    }
  }
  if (failClosed) throw new ModelNotAuthorizedError(false);
  return name;
}

/** The outcome of a sandbox:execute check; `providerError` says the provider failed and fail_closed decided. */
export interface SandboxDecision extends AuthzDecision {
  readonly providerError: boolean;
}

export interface SandboxAuthorizationOptions extends EnforcementOptions {
  /** What is being executed on; RBAC matches it against `sandbox: { allow, deny }` (default `default`). */
  readonly target?: string;
  readonly context?: Readonly<Record<string, unknown>>;
}

/** sandbox:execute, checked before every sandbox acquisition. */
export async function authorizeSandbox(
  principal: Principal,
  provider: AuthorizationProvider | null | undefined,
  options: SandboxAuthorizationOptions = {},
): Promise<SandboxDecision> {
  if (provider === null || provider === undefined) {
    return { allowed: true, rule: "authz.disabled", reason: null, providerError: false };
  }
  try {
    const decision = checkDecision(
      provider.name,
      await provider.authorize(principal, {
        resource: "sandbox",
        action: "execute",
        target: options.target ?? "default",
        ...(options.context ? { context: options.context } : {}),
      }),
    );
    return { ...decision, providerError: false };
  } catch (error) {
    rethrowControlFlow(error, options);
    const failClosed = options.failClosed !== false;
    return {
      allowed: !failClosed,
      rule: "authz.evaluator_error",
      reason: `authorization provider error (${failClosed ? "fail-closed" : "fail-open"})`,
      providerError: true,
    };
  }
}

/** Decides whether the run whose context this is may acquire a sandbox. */
export type SandboxAuthorizer = (context: Readonly<Record<string, unknown>>) => Promise<boolean>;

export interface SandboxAuthorizerConfig extends PrincipalConfig {
  readonly fail_closed: boolean;
}

/**
 * A {@link SandboxAuthorizer} for the Sandbox middleware's deps, built from the build's provider:
 * the principal comes from the run context through the shared builder on every call, never cached.
 */
export function createSandboxAuthorizer(
  provider: AuthorizationProvider,
  config: SandboxAuthorizerConfig,
  options: { readonly target?: string } = {},
): SandboxAuthorizer {
  return async (context) => {
    const principal = buildPrincipalFromContext(context, config);
    const decision = await authorizeSandbox(principal, provider, {
      failClosed: config.fail_closed,
      ...(options.target === undefined ? {} : { target: options.target }),
    });
    return decision.allowed;
  };
}

/** The gateway's registered route permissions, each checked as resource `route` with the full string as target. */
export const ROUTE_PERMISSIONS = Object.freeze([
  "threads:read",
  "threads:write",
  "threads:delete",
  "runs:create",
  "runs:read",
  "runs:cancel",
] as const);

/**
 * The route permissions the principal holds. Each is evaluated on its own and in parallel, so a
 * provider failure costs only that permission (denied when fail-closed, granted when open).
 * Without a provider (authorization disabled) every permission is granted, as before.
 */
export async function resolveRoutePermissions(
  principal: Principal,
  provider: AuthorizationProvider | null | undefined,
  options: EnforcementOptions & { readonly permissions?: readonly string[] } = {},
): Promise<string[]> {
  const permissions = [...(options.permissions ?? ROUTE_PERMISSIONS)];
  if (provider === null || provider === undefined) return permissions;
  const failClosed = options.failClosed !== false;
  const granted = await Promise.all(
    permissions.map(async (permission) => {
      const action = permission.includes(":") ? permission.slice(permission.indexOf(":") + 1) : permission;
      try {
        const decision = checkDecision(provider.name, await provider.authorize(principal, { resource: "route", action, target: permission }));
        return decision.allowed;
      } catch (error) {
        rethrowControlFlow(error, options);
        return !failClosed;
      }
    }),
  );
  return permissions.filter((_, index) => granted[index]);
}

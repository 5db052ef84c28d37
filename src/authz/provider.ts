import { DeerflowError } from "../core/errors.ts";
import type { Principal } from "./principal.ts";

/**
 * What an authorization check asks. `resource`, `action` and `target` are free-form strings so a
 * new resource type needs no schema change: the built-in ones are `tool`/`call`, `model`/`use`
 * and `model`/`list`, `sandbox`/`execute`, and `route`/<action> with a `threads:read`-style target.
 */
export interface AuthzRequest {
  readonly resource: string;
  readonly action: string;
  /** The resource's identifier: a tool name, a model name, `threads:read` ... */
  readonly target: string;
  /** Facts about the call (thread_id, run_id, tool_call_id, tool_input, is_subagent, agent_id, timestamp). */
  readonly context?: Readonly<Record<string, unknown>>;
}

/** A provider's verdict. `rule` is the stable code a denial is reported under (`authz.denied`). */
export interface AuthzDecision {
  readonly allowed: boolean;
  readonly rule: string;
  /** A sentence for the model and the audit trail. */
  readonly reason?: string | null;
  readonly policyId?: string | null;
  readonly metadata?: Readonly<Record<string, unknown>>;
}

type MaybePromise<T> = T | Promise<T>;

/**
 * Pluggable fine-grained authorization: one instance decides both which capabilities an agent is
 * assembled with (Layer 1, {@link AuthorizationProvider.filterResources}) and whether each call
 * may run (Layer 2, {@link AuthorizationProvider.authorize}). A provider that cannot decide
 * (unknown role, backend down) throws; the caller's `fail_closed` turns that into deny or allow.
 */
export interface AuthorizationProvider {
  readonly name: string;
  authorize(principal: Principal, request: AuthzRequest): MaybePromise<AuthzDecision>;
  /**
   * The subset of `names` the principal may see, in input order. A provider without a static map
   * can call {@link AuthorizationProvider.authorize} per name. Names outside the input are ignored.
   */
  filterResources(principal: Principal, resource: string, names: readonly string[]): MaybePromise<readonly string[]>;
  /** Behaviour-affecting settings, JSON-safe, for the Authorization middleware's declaration. */
  releasePolicyParameters?(): Record<string, unknown>;
}

export function isAuthorizationProvider(value: unknown): value is AuthorizationProvider {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as Partial<AuthorizationProvider>;
  return (
    typeof candidate.name === "string" &&
    typeof candidate.authorize === "function" &&
    typeof candidate.filterResources === "function"
  );
}

/** Thrown when a provider answers with something that is not a decision; callers treat it as a provider failure. */
export class AuthorizationProviderError extends DeerflowError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("authorization_provider_error", message, options);
    this.name = "AuthorizationProviderError";
  }
}

/** Checks a decision's shape, so a malformed answer can never read as "allowed". */
export function checkDecision(providerName: string, value: unknown): AuthzDecision {
  if (typeof value !== "object" || value === null) {
    throw new AuthorizationProviderError(`Authorization provider "${providerName}" returned ${String(value)} instead of a decision { allowed, rule }; fix the provider.`);
  }
  const decision = value as Partial<AuthzDecision>;
  if (typeof decision.allowed !== "boolean") {
    throw new AuthorizationProviderError(`Authorization provider "${providerName}" returned a decision whose "allowed" is not a boolean; fix the provider.`);
  }
  return decision as AuthzDecision;
}

/** Checks a filterResources answer: a list of strings, nothing else. */
export function checkFilterResult(providerName: string, value: unknown): readonly string[] {
  if (!Array.isArray(value) || value.some((name) => typeof name !== "string")) {
    throw new AuthorizationProviderError(`Authorization provider "${providerName}" filterResources must return a list of names; fix the provider.`);
  }
  return value as readonly string[];
}

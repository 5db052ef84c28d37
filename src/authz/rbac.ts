import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { DeerflowError } from "../core/errors.ts";
import { canonicalHashSync } from "../extension-api/sha256-sync.ts";
import type { Principal } from "./principal.ts";
import type { AuthorizationProvider, AuthzDecision, AuthzRequest } from "./provider.ts";
import { isRecord } from "../core/guards.ts";

/*
 * The built-in role-based provider. Each role maps a resource key (`tools`, `models`, `sandbox`,
 * `routes`, ...) to `{ allow, deny }`; deny always wins; a role with no policy for a resource is
 * unrestricted for it. An unknown or missing role throws instead of allowing, so the caller's
 * fail_closed makes the final call. Policies are validated and copied at construction, so
 * editing the config object afterwards changes nothing.
 */

export const RBAC_PROVIDER_NAME = "rbac";
/** The `provider.use` values that name this provider (the second is upstream's class path, so its config.yaml ports verbatim). */
export const RBAC_PROVIDER_USES: readonly string[] = Object.freeze(["rbac", "deerflow.authz.rbac:RbacAuthorizationProvider"]);

/** Request resource (singular) → config key (plural), so `tool` never silently misses `tools`. */
const RESOURCE_POLICY_KEYS: Readonly<Record<string, string>> = Object.freeze({
  tool: "tools",
  model: "models",
  skill: "skills",
  sandbox: "sandbox",
  mcp_server: "mcp_servers",
  route: "routes",
});

function reservedAlias(key: string): string | undefined {
  const mapped = Object.hasOwn(RESOURCE_POLICY_KEYS, key) ? RESOURCE_POLICY_KEYS[key] : undefined;
  return mapped !== undefined && mapped !== key ? mapped : undefined;
}

const name = (what: string) =>
  v.pipe(
    v.string(`${what} must be a non-empty string`),
    v.minLength(1, `${what} must be a non-empty string`),
  );

const ResourcePolicySchema = v.strictObject(
  {
    /** `"*"` or `true`: everything; `false` or `[]`: nothing; a list: exactly those. Missing: everything. */
    allow: v.optional(
      v.union([v.literal("*"), v.boolean(), v.array(name("every allow entry"))], (issue) =>
        issue.input === null
          ? "allow must not be null; leave it out, or use '*', true/false or a list of names"
          : typeof issue.input === "string"
            ? `allow string must be '*', got ${JSON.stringify(issue.input)}`
            : Array.isArray(issue.input)
              ? "every allow entry must be a non-empty string"
              : "allow must be '*', true/false or a list of names",
      ),
    ),
    /** Names this role may never use, whatever allow says. */
    deny: v.optional(
      v.array(name("every deny entry"), (issue) =>
        issue.input === null ? "deny must not be null; leave it out for no deny list" : "deny must be a list of names",
      ),
    ),
  },
  (issue) =>
    issue.expected === "never"
      ? `unknown policy key ${String(issue.received)}; a policy has only allow and deny`
      : "a resource policy must be a mapping { allow, deny }",
);

const ResourceKeySchema = v.pipe(
  name("a resource key"),
  v.check(
    (key) => reservedAlias(key) === undefined,
    (issue) => `resource key '${String(issue.input)}' is a reserved request alias; use '${reservedAlias(String(issue.input))}'`,
  ),
);

// valibot's record accepts a list (its indexes become keys), so a mapping is checked first.
const mappingOf = <TKey extends v.GenericSchema<string, string>, TValue extends v.GenericSchema>(key: TKey, value: TValue, message: string) =>
  v.pipe(v.custom<Record<string, unknown>>(isRecord, message), v.record(key, value, message));

/** `roles: { <role>: { <resource key>: { allow, deny } } }`. */
const rbacRolesSchema = mappingOf(
  name("a role name"),
  mappingOf(ResourceKeySchema, ResourcePolicySchema, "a role must map resource keys (tools, models, ...) to policies"),
  "roles must be a mapping of role names to policies",
);
export type RbacRoles = Record<string, Record<string, { allow?: "*" | boolean | string[]; deny?: string[] }>>;
type _RbacRolesMatches = Assert<SameType<RbacRoles, v.InferOutput<typeof rbacRolesSchema>>>;
type _RbacRolesInputMatches = Assert<SameType<Record<string, unknown>, v.InferInput<typeof rbacRolesSchema>>>;
export const RbacRolesSchema: v.GenericSchema<Record<string, unknown>, RbacRoles> = rbacRolesSchema;

const rbacProviderConfigSchema = v.strictObject(
  { roles: RbacRolesSchema },
  (issue) =>
    issue.expected === "never"
      ? `unknown provider config key ${String(issue.received)}; the rbac provider takes only roles`
      : issue.expected === '"roles"'
        ? "missing required provider config key roles"
        : "the rbac provider config must be a mapping { roles }",
);
export interface RbacProviderConfig {
  roles: RbacRoles;
}
type _RbacProviderConfigMatches = Assert<SameType<RbacProviderConfig, v.InferOutput<typeof rbacProviderConfigSchema>>>;
type _RbacProviderConfigInputMatches = Assert<SameType<{ roles: Record<string, unknown> }, v.InferInput<typeof rbacProviderConfigSchema>>>;
export const RbacProviderConfigSchema: v.GenericSchema<{ roles: Record<string, unknown> }, RbacProviderConfig> = rbacProviderConfigSchema;

const ALL = Symbol("all");

interface CompiledPolicy {
  readonly allowed: ReadonlySet<string> | typeof ALL;
  readonly denied: ReadonlySet<string>;
}

function isAllowed(policy: CompiledPolicy, target: string): boolean {
  if (policy.denied.has(target)) return false;
  return policy.allowed === ALL || policy.allowed.has(target);
}

function compile(policy: v.InferOutput<typeof ResourcePolicySchema>): CompiledPolicy {
  const allow = policy.allow;
  const allowed = allow === undefined || allow === "*" || allow === true ? ALL : allow === false ? new Set<string>() : new Set(allow);
  return { allowed, denied: new Set(policy.deny ?? []) };
}

function requireName(value: unknown, field: string): string {
  if (typeof value !== "string" || value === "") {
    throw new DeerflowError("invalid_authorization_request", `${field} must be a non-empty string, got ${JSON.stringify(value) ?? String(value)}; fix the caller.`);
  }
  return value;
}

/** Validation failure of provider config, with the key's full path. */
export function configIssue(code: string, prefix: string, issue: v.BaseIssue<unknown>, hint: string): DeerflowError {
  const path = v.getDotPath(issue);
  return new DeerflowError(code, `${prefix}${path ? `.${path}` : ""}: ${issue.message}. ${hint}`);
}

export interface RbacOptions {
  /** Where the config sits, for messages (`authorization.roles`, `authorization.provider.config`). */
  readonly configPath?: string;
}

export class RbacAuthorizationProvider implements AuthorizationProvider {
  readonly name = RBAC_PROVIDER_NAME;
  readonly #policies = new Map<string, CompiledPolicy>();
  readonly #knownRoles: ReadonlySet<string>;
  readonly #policyHash: string;

  /** `config` is the provider's config: `{ roles }`. */
  constructor(config: unknown, options: RbacOptions = {}) {
    const result = v.safeParse(RbacProviderConfigSchema, config);
    if (!result.success) {
      // A misspelt key also leaves a required one missing; the misspelling is what the user must fix.
      const issue = result.issues.find((candidate) => candidate.expected === "never") ?? result.issues[0];
      throw configIssue("invalid_authorization_config", options.configPath ?? "authorization.provider.config", issue, "Each role maps tools, models, sandbox or routes to { allow, deny }; allow is '*', true/false or a list of names.");
    }
    const roles = result.output.roles;
    this.#knownRoles = new Set(Object.keys(roles));
    for (const [role, resources] of Object.entries(roles)) {
      for (const [resource, policy] of Object.entries(resources)) this.#policies.set(policyKey(role, resource), compile(policy));
    }
    this.#policyHash = canonicalHashSync(roles);
  }

  get knownRoles(): readonly string[] {
    return [...this.#knownRoles].sort();
  }

  /** Fails fast when an operator-configured role (default_role) is not defined. */
  validateRole(role: string, field = "role"): void {
    requireName(role, field);
    if (!this.#knownRoles.has(role)) {
      throw new DeerflowError(
        "authorization_unknown_role",
        `${field} '${role}' is not defined; known roles: ${JSON.stringify(this.knownRoles)}. Define the role under authorization roles or use one of the known roles.`,
      );
    }
  }

  #policyFor(principal: Principal, resource: unknown, field: string): CompiledPolicy | undefined {
    const role = principal.role;
    if (role === null || role === undefined || role === "") {
      throw new DeerflowError("authorization_missing_role", "The principal has no role, so no RBAC policy applies; set authorization.default_role.");
    }
    if (!this.#knownRoles.has(role)) {
      throw new DeerflowError(
        "authorization_unknown_role",
        `Unknown role '${role}'; known roles: ${JSON.stringify(this.knownRoles)}. Define the role under authorization roles or give the user a known role.`,
      );
    }
    const key = requireName(resource, field);
    const configKey = Object.hasOwn(RESOURCE_POLICY_KEYS, key) ? RESOURCE_POLICY_KEYS[key]! : key;
    return this.#policies.get(policyKey(role, configKey));
  }

  /** `action` is accepted for the contract but is not a rule dimension here: policies are per role, resource and target. */
  authorize(principal: Principal, request: AuthzRequest): AuthzDecision {
    const policy = this.#policyFor(principal, request.resource, "resource");
    const target = requireName(request.target, "target");
    if (policy === undefined) {
      return { allowed: true, rule: "authz.no_policy", reason: "no policy configured", policyId: "rbac:unrestricted" };
    }
    if (isAllowed(policy, target)) return { allowed: true, rule: "authz.allowed", reason: null, policyId: "rbac:allow" };
    return {
      allowed: false,
      rule: "authz.denied",
      reason: `role '${principal.role}' is denied '${target}' on resource '${request.resource}'`,
      policyId: "rbac:deny",
    };
  }

  /** Keeps input order and duplicates, never adds a name, and raises the same errors as authorize. */
  filterResources(principal: Principal, resource: string, names: readonly string[]): string[] {
    const policy = this.#policyFor(principal, resource, "resource type");
    if (!Array.isArray(names)) throw new DeerflowError("invalid_authorization_request", "candidates must be a list of names; fix the caller.");
    const checked = names.map((candidate, index) => requireName(candidate, `candidates[${index}]`));
    return policy === undefined ? checked : checked.filter((candidate) => isAllowed(policy, candidate));
  }

  releasePolicyParameters(): Record<string, unknown> {
    return { known_roles: this.knownRoles, policy_hash: this.#policyHash };
  }
}

function policyKey(role: string, resource: string): string {
  return JSON.stringify([role, resource]);
}

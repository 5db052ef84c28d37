import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { RbacRolesSchema, type RbacRoles } from "./rbac.ts";

/*
 * The `authorization` and `guardrails` sections of config.yaml. Both mirror upstream's shape
 * (`provider: { use, config }`, so an upstream config.yaml ports verbatim) and add shorthands:
 * `authorization.roles` for the built-in RBAC, `guardrails.provider: allowlist` with the lists
 * beside it. Custom providers are objects handed to the middleware factories, not class paths.
 */

const nonEmptyString = v.pipe(v.string(), v.minLength(1, "expected a non-empty string"));

const ProviderSpecSchema = v.strictObject({
  /** A built-in provider's name (or upstream's class path for it). */
  use: nonEmptyString,
  /** The provider's own settings. */
  config: v.optional(v.pipe(v.nullable(v.record(v.string(), v.unknown())), v.transform((value) => value ?? {})), {}),
});
export interface ProviderSpec {
  use: string;
  config: Record<string, unknown>;
}
type _ProviderSpecMatches = Assert<SameType<ProviderSpec, v.InferOutput<typeof ProviderSpecSchema>>>;

const authorizationConfigSchema = v.pipe(
  v.strictObject({
    /** Off by default: every authenticated user may use every tool, model and sandbox. */
    enabled: v.optional(v.boolean(), false),
    /** Deny when the provider fails or identity cannot be resolved. */
    fail_closed: v.optional(v.boolean(), true),
    /** The role of a caller whose context carries none (an unbound IM channel, an internal job). */
    default_role: v.optional(nonEmptyString, "user"),
    /** `{ use: rbac, config: { roles } }`, upstream's form. */
    provider: v.optional(v.nullable(ProviderSpecSchema), null),
    /** Shorthand for the built-in RBAC provider: `{ <role>: { tools: { allow, deny }, models: { allow, deny } } }`. */
    roles: v.optional(v.nullable(RbacRolesSchema), null),
  }),
  v.forward(
    v.partialCheck(
      [["provider"], ["roles"]],
      (input) => input.provider === null || input.provider === undefined || input.roles === null || input.roles === undefined,
      "set either roles (the built-in RBAC) or provider, not both",
    ),
    ["roles"],
  ),
);
export interface AuthorizationConfig {
  enabled: boolean;
  fail_closed: boolean;
  default_role: string;
  provider: ProviderSpec | null;
  roles: RbacRoles | null;
}
type _AuthorizationConfigMatches = Assert<SameType<AuthorizationConfig, v.InferOutput<typeof authorizationConfigSchema>>>;
export interface AuthorizationConfigInput {
  enabled?: boolean;
  fail_closed?: boolean;
  default_role?: string;
  provider?: { use: string; config?: Record<string, unknown> | null } | null;
  /** Checked role by role against the RBAC shape when parsed. */
  roles?: Record<string, unknown> | null;
}
type _AuthorizationConfigInputMatches = Assert<SameType<AuthorizationConfigInput, v.InferInput<typeof authorizationConfigSchema>>>;
export const AuthorizationConfigSchema: v.GenericSchema<AuthorizationConfigInput, AuthorizationConfig> = authorizationConfigSchema;

/** The section as the schema fills it in when nothing is configured. */
export const AUTHORIZATION_DEFAULTS: AuthorizationConfig = Object.freeze(v.parse(AuthorizationConfigSchema, {}));

const toolNames = v.array(nonEmptyString);

/** allowed_tools / denied_tools sit beside `provider` only for a named provider (or none); `{ use, config }` takes them in its config. */
function listBesideProvider(provider: unknown, list: unknown): boolean {
  return typeof provider === "string" || provider === null || provider === undefined || list === null || list === undefined;
}
const LISTS_UNDER_PROVIDER_CONFIG = "with provider { use, config } the lists go under provider.config";

const guardrailsConfigSchema = v.pipe(
  v.strictObject({
    enabled: v.optional(v.boolean(), false),
    /** Deny the call when the provider fails. */
    fail_closed: v.optional(v.boolean(), true),
    /** OAP passport path or hosted agent id, handed to the provider as the agent id. */
    passport: v.optional(v.nullable(v.string()), null),
    /** `allowlist`, or upstream's `{ use, config }`. */
    provider: v.optional(v.nullable(v.union([nonEmptyString, ProviderSpecSchema], "expected a provider name or { use, config }")), null),
    /** With `provider: allowlist`: only these tools may run (absent allows all, `[]` allows none). */
    allowed_tools: v.optional(v.nullable(toolNames), null),
    /** With `provider: allowlist`: these tools never run. */
    denied_tools: v.optional(v.nullable(toolNames), null),
  }),
  v.forward(
    v.partialCheck(
      [["provider"], ["allowed_tools"]],
      (input) => listBesideProvider(input.provider, input.allowed_tools),
      LISTS_UNDER_PROVIDER_CONFIG,
    ),
    ["allowed_tools"],
  ),
  v.forward(
    v.partialCheck(
      [["provider"], ["denied_tools"]],
      (input) => listBesideProvider(input.provider, input.denied_tools),
      LISTS_UNDER_PROVIDER_CONFIG,
    ),
    ["denied_tools"],
  ),
);
export interface GuardrailsConfig {
  enabled: boolean;
  fail_closed: boolean;
  passport: string | null;
  provider: string | ProviderSpec | null;
  allowed_tools: string[] | null;
  denied_tools: string[] | null;
}
type _GuardrailsConfigMatches = Assert<SameType<GuardrailsConfig, v.InferOutput<typeof guardrailsConfigSchema>>>;
export interface GuardrailsConfigInput {
  enabled?: boolean;
  fail_closed?: boolean;
  passport?: string | null;
  provider?: string | { use: string; config?: Record<string, unknown> | null } | null;
  allowed_tools?: string[] | null;
  denied_tools?: string[] | null;
}
type _GuardrailsConfigInputMatches = Assert<SameType<GuardrailsConfigInput, v.InferInput<typeof guardrailsConfigSchema>>>;
export const GuardrailsConfigSchema: v.GenericSchema<GuardrailsConfigInput, GuardrailsConfig> = guardrailsConfigSchema;

/** The section as the schema fills it in when nothing is configured. */
export const GUARDRAILS_DEFAULTS: GuardrailsConfig = Object.freeze(v.parse(GuardrailsConfigSchema, {}));

/** The allowlist provider's `provider.config`. */
const allowlistProviderConfigSchema = v.strictObject({
  allowed_tools: v.optional(v.nullable(toolNames), null),
  denied_tools: v.optional(v.nullable(toolNames), null),
});
export interface AllowlistProviderConfig {
  allowed_tools: string[] | null;
  denied_tools: string[] | null;
}
type _AllowlistProviderConfigMatches = Assert<SameType<AllowlistProviderConfig, v.InferOutput<typeof allowlistProviderConfigSchema>>>;
type _AllowlistProviderConfigInputMatches = Assert<SameType<Partial<AllowlistProviderConfig>, v.InferInput<typeof allowlistProviderConfigSchema>>>;
export const AllowlistProviderConfigSchema: v.GenericSchema<Partial<AllowlistProviderConfig>, AllowlistProviderConfig> = allowlistProviderConfigSchema;

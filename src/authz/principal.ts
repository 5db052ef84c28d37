import { DeerflowError } from "../core/errors.ts";
import { deepFrozenCopy } from "../core/freeze.ts";
import { isPlainObject } from "../extension-api/canonical.ts";

/**
 * The actor an authorization decision is about, resolved from trusted run context. Assembly-time
 * filtering (Layer 1), the execution-time adapter (Layer 2), model, sandbox and route checks all
 * build it through {@link buildPrincipalFromContext}, so one identity means the same thing
 * everywhere. Deeply frozen: a provider can read it but never change what the next check sees.
 */
export interface Principal {
  readonly userId: string | null;
  /** The caller's role, or the configured default role when the context carries none. */
  readonly role: string | null;
  readonly oauthProvider: string | null;
  readonly oauthId: string | null;
  /** The IM sender id; only an internally authenticated channel caller can supply it. */
  readonly channelUserId: string | null;
  /** True only when the server marked the caller internal with the boolean `true`. */
  readonly isInternal: boolean;
  /** A private copy of the context's `authz_attributes`. */
  readonly attributes: Readonly<Record<string, unknown>>;
}

/** The part of the authorization config the builder reads. */
export interface PrincipalConfig {
  readonly default_role: string;
}

/** The run-context keys the builder reads (all server-owned: the gateway strips caller values). */
export const PRINCIPAL_CONTEXT_KEYS = Object.freeze([
  "user_id",
  "user_role",
  "oauth_provider",
  "oauth_id",
  "channel_user_id",
  "is_internal",
  "authz_attributes",
] as const);

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "list";
  return typeof value === "object" ? ((value as object).constructor?.name ?? "object") : typeof value;
}

/**
 * A private, frozen copy of `authz_attributes`. Every consumer goes through here so that a value
 * that is not a mapping fails the same way everywhere instead of being coerced into a grant.
 */
export function normalizeAuthzAttributes(raw: unknown): Readonly<Record<string, unknown>> {
  if (raw === undefined || raw === null) return Object.freeze({});
  if (!isPlainObject(raw)) {
    throw new DeerflowError(
      "invalid_authz_attributes",
      `authz_attributes must be a mapping, got ${typeName(raw)}; the server that starts the run must pass an object of attributes or leave it out.`,
    );
  }
  return deepFrozenCopy(raw);
}

/** A string-valued run-context key, or null when absent; any other type is a server bug and throws. */
export function readContextString(context: Readonly<Record<string, unknown>>, key: string): string | null {
  const value = context[key];
  if (value === undefined || value === null) return null;
  if (typeof value === "string") return value;
  throw new DeerflowError(
    "invalid_principal_context",
    `Run context key ${key} must be a string, got ${typeName(value)}; the server that starts the run must pass a string or leave it out.`,
  );
}

/**
 * Builds the {@link Principal} from a run context. A missing or empty `user_role` becomes
 * `default_role`; an unknown but non-empty role is kept, so the provider (not this builder)
 * decides what an unknown role may do. `is_internal` counts only as the boolean `true`: "true",
 * 1 or a truthy object must never turn a caller internal. Pure: reads nothing global, caches
 * nothing and never changes its input.
 */
export function buildPrincipalFromContext(context: Readonly<Record<string, unknown>>, config: PrincipalConfig): Principal {
  const role = readContextString(context, "user_role");
  return Object.freeze({
    userId: readContextString(context, "user_id"),
    role: role === null || role === "" ? config.default_role : role,
    oauthProvider: readContextString(context, "oauth_provider"),
    oauthId: readContextString(context, "oauth_id"),
    channelUserId: readContextString(context, "channel_user_id"),
    isInternal: context["is_internal"] === true,
    attributes: normalizeAuthzAttributes(context["authz_attributes"]),
  });
}

import { AUTHORIZATION_DEFAULTS, type AuthorizationConfig } from "../../authz/config.ts";
import { resolveRoutePermissions } from "../../authz/enforcement.ts";
import { buildPrincipalFromContext, type Principal } from "../../authz/principal.ts";
import { checkDecision, checkFilterResult, type AuthorizationProvider } from "../../authz/provider.ts";
import { resolveAuthorizationProvider } from "../../authz/runtime.ts";
import { errorMessage } from "../../core/errors.ts";
import { ROUTE_PERMISSIONS, type GatewayUser, type RoutePermission } from "../types.ts";

/*
 * The gateway's questions to the AuthorizationProvider: which of the six route permissions a
 * caller holds (asked once per request, by the auth middleware) and which models it may list or
 * use. One provider instance serves the whole gateway. When it cannot be built, or a check throws,
 * the answer follows fail_closed: nothing when closed (the default), everything when open.
 */

/** Who the caller is, before permissions are decided. */
export type GatewayIdentity = Omit<GatewayUser, "permissions">;

export interface GatewayAuthorizer {
  readonly enabled: boolean;
  readonly failClosed: boolean;
  /** Why the configured provider could not be built; null when it was (or authorization is off). */
  readonly providerError: string | null;
  principalOf(identity: GatewayIdentity): Principal;
  routePermissions(identity: GatewayIdentity): Promise<ReadonlySet<RoutePermission>>;
  /** The subset of `names` the caller may see, in input order. */
  visibleModels(identity: GatewayIdentity, names: readonly string[]): Promise<string[]>;
  mayUseModel(identity: GatewayIdentity, name: string): Promise<boolean>;
}

export interface GatewayAuthorizerOptions {
  /** The `authorization:` section of config.yaml (defaults: off). */
  readonly config?: AuthorizationConfig | null;
  /** A custom provider object; replaces the configured one. */
  readonly provider?: AuthorizationProvider;
}

const ALL_PERMISSIONS: ReadonlySet<RoutePermission> = Object.freeze(new Set(ROUTE_PERMISSIONS)) as ReadonlySet<RoutePermission>;
const NO_PERMISSIONS: ReadonlySet<RoutePermission> = Object.freeze(new Set<RoutePermission>()) as ReadonlySet<RoutePermission>;

export function createGatewayAuthorizer(options: GatewayAuthorizerOptions = {}): GatewayAuthorizer {
  const config = options.config ?? AUTHORIZATION_DEFAULTS;
  const enabled = config.enabled === true;
  const failClosed = config.fail_closed !== false;
  let provider: AuthorizationProvider | null = null;
  let providerError: string | null = null;
  if (enabled) {
    try {
      provider = resolveAuthorizationProvider(config, options.provider);
    } catch (error) {
      providerError = errorMessage(error);
    }
  }

  const principalOf = (identity: GatewayIdentity): Principal =>
    buildPrincipalFromContext(
      {
        user_id: identity.id,
        // "internal" is a transport fact, not a role a policy knows: default_role applies instead.
        user_role: identity.systemRole === "internal" ? null : identity.systemRole,
        oauth_provider: identity.oauthProvider ?? null,
        oauth_id: identity.oauthId ?? null,
        is_internal: identity.isInternal === true,
        authz_attributes: identity.authzAttributes ?? null,
      },
      { default_role: config.default_role },
    );

  return {
    enabled,
    failClosed,
    providerError,
    principalOf,
    async routePermissions(identity) {
      if (!enabled) return ALL_PERMISSIONS;
      if (provider === null) return failClosed ? NO_PERMISSIONS : ALL_PERMISSIONS;
      const granted = await resolveRoutePermissions(principalOf(identity), provider, { failClosed, permissions: ROUTE_PERMISSIONS });
      return Object.freeze(new Set(granted as RoutePermission[])) as ReadonlySet<RoutePermission>;
    },
    async visibleModels(identity, names) {
      const all = [...names];
      if (!enabled) return all;
      if (provider === null) return failClosed ? [] : all;
      try {
        const allowed = new Set(checkFilterResult(provider.name, await provider.filterResources(principalOf(identity), "model", all)));
        return all.filter((name) => allowed.has(name));
      } catch {
        return failClosed ? [] : all;
      }
    },
    async mayUseModel(identity, name) {
      if (!enabled) return true;
      if (provider === null) return !failClosed;
      try {
        return checkDecision(provider.name, await provider.authorize(principalOf(identity), { resource: "model", action: "use", target: name })).allowed;
      } catch {
        return !failClosed;
      }
    },
  };
}

import type { ExtensionPrincipal } from "../../extension-api/principal.ts";
import type { GatewayUser } from "../types.ts";

/**
 * What an extension route learns about its caller: a frozen projection, never the host's user
 * object, so an extension cannot come to depend on (or change) the host's auth internals. Internal
 * callers act for a user but are never administrators.
 */
export function principalOf(user: GatewayUser): ExtensionPrincipal {
  return Object.freeze({
    userId: user.id,
    isAdmin: user.systemRole === "admin" && !user.isInternal,
    isInternal: user.isInternal,
    roles: Object.freeze([user.systemRole]),
  });
}

import { ExtensionApiError } from "./errors.ts";

/**
 * Who is calling a contributed route, as the host projects it: never the host's own auth context,
 * so an extension cannot come to depend on host internals.
 */
export interface ExtensionPrincipal {
  readonly userId: string;
  readonly isAdmin: boolean;
  /** True for the host's own internal callers (scheduler, channels) acting for a user. */
  readonly isInternal: boolean;
  readonly roles: readonly string[];
}

/** What a contributed route handler receives next to the Request. */
export interface ExtensionRouteContext {
  /** Null when the host could not determine an identity; the helpers below then refuse. */
  readonly principal: ExtensionPrincipal | null;
}

/** A refused caller. `code` is always "forbidden"; the gateway answers it with 403. */
export class ExtensionPermissionError extends ExtensionApiError {
  declare readonly code: "forbidden";

  constructor(message: string) {
    super("forbidden", message);
  }
}

function projectPrincipal(value: unknown): ExtensionPrincipal | null {
  if (typeof value !== "object" || value === null) return null;
  const { userId, isAdmin, isInternal, roles } = value as Record<string, unknown>;
  if (typeof userId !== "string" || userId === "") return null;
  if (!Array.isArray(roles) || !roles.every((role) => typeof role === "string")) return null;
  // Strict booleans: a truthy "false" string must never grant admin.
  return Object.freeze({
    userId,
    isAdmin: isAdmin === true,
    isInternal: isInternal === true,
    roles: Object.freeze([...(roles as string[])]),
  });
}

/**
 * The caller of the current request. Fails closed: a missing or malformed identity throws
 * rather than returning an anonymous principal that a handler might forget to check.
 */
export function resolvePrincipal(ctx: ExtensionRouteContext | null | undefined): ExtensionPrincipal {
  const principal = projectPrincipal(ctx?.principal);
  if (principal === null) {
    throw new ExtensionPermissionError(
      "the caller's identity could not be determined; this route needs an authenticated session (sign in and retry)",
    );
  }
  return principal;
}

/** The caller, if and only if it is an administrator; anyone else (or no one) is refused. */
export function requireAdmin(ctx: ExtensionRouteContext | null | undefined): ExtensionPrincipal {
  const principal = resolvePrincipal(ctx);
  if (!principal.isAdmin) {
    throw new ExtensionPermissionError(`user "${principal.userId}" is not an administrator; ask an administrator to perform this action`);
  }
  return principal;
}

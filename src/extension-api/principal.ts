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

/** The host's projection of a request's caller; null when the request carries no identity it knows. */
export type PrincipalResolver = (request: Request) => ExtensionPrincipal | null;

/*
 * A registered symbol on globalThis rather than a module variable: an extension may bundle its own
 * copy of this contract, and that copy must still find the resolver the host installed.
 */
const PRINCIPAL_RESOLVER_KEY = Symbol.for("deerflow.extension.principalResolver");

const resolverSlot = globalThis as unknown as Record<symbol, PrincipalResolver | undefined>;

/**
 * Host-only: makes `resolvePrincipal(request)` answer for requests the host has seen. The host
 * installs it before mounting contributed routers, because routers are built during install(), long
 * before any request exists. Returns an undo that restores the previous resolver, unless another
 * one has been installed since.
 */
export function installPrincipalResolver(resolver: PrincipalResolver | null): () => void {
  if (resolver !== null && typeof resolver !== "function") {
    throw new TypeError("installPrincipalResolver() takes a function (request) => principal | null, or null to remove it");
  }
  const previous = resolverSlot[PRINCIPAL_RESOLVER_KEY];
  const installed = resolver ?? undefined;
  setResolver(installed);
  return () => {
    if (resolverSlot[PRINCIPAL_RESOLVER_KEY] === installed) setResolver(previous);
  };
}

function setResolver(resolver: PrincipalResolver | undefined): void {
  if (resolver === undefined) delete resolverSlot[PRINCIPAL_RESOLVER_KEY];
  else resolverSlot[PRINCIPAL_RESOLVER_KEY] = resolver;
}

/** What a helper was handed: the route context, or the Request the handler received. */
export type PrincipalSource = Request | ExtensionRouteContext | null | undefined;

function isRequestLike(value: object): value is Request {
  if (typeof Request === "function" && value instanceof Request) return true;
  // Another realm's Request (a runtime adapter's subclass, a polyfill) fails instanceof but keeps this shape.
  const { url, method, headers } = value as Record<string, unknown>;
  return typeof url === "string" && typeof method === "string" && typeof headers === "object" && headers !== null;
}

function fromRequest(request: Request): ExtensionPrincipal | null {
  const resolver = resolverSlot[PRINCIPAL_RESOLVER_KEY];
  if (typeof resolver !== "function") return null;
  try {
    return projectPrincipal(resolver(request));
  } catch {
    // A resolver that cannot decide has not identified anyone.
    return null;
  }
}

function principalOf(source: PrincipalSource): ExtensionPrincipal | null {
  if (typeof source !== "object" || source === null) return null;
  if ("principal" in source) return projectPrincipal(source.principal);
  if (isRequestLike(source)) return fromRequest(source);
  return null;
}

/**
 * The caller of the current request, from the route context or from the Request itself (pass the
 * very Request the handler received: a clone is a different request the host has never seen).
 * Fails closed: a missing or malformed identity throws rather than returning an anonymous
 * principal that a handler might forget to check.
 */
export function resolvePrincipal(source: PrincipalSource): ExtensionPrincipal {
  const principal = principalOf(source);
  if (principal === null) {
    throw new ExtensionPermissionError(
      "the caller's identity could not be determined; this route needs an authenticated session (sign in and retry)",
    );
  }
  return principal;
}

/** The caller, if and only if it is an administrator; anyone else (or no one) is refused. */
export function requireAdmin(source: PrincipalSource): ExtensionPrincipal {
  const principal = resolvePrincipal(source);
  if (!principal.isAdmin) {
    throw new ExtensionPermissionError(`user "${principal.userId}" is not an administrator; ask an administrator to perform this action`);
  }
  return principal;
}

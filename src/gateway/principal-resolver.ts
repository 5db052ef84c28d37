import { principalOf } from "./auth/principal.ts";
import { installPrincipalResolver, type ExtensionPrincipal } from "../extension-api/index.ts";
import type { GatewayUser } from "./types.ts";

/*
 * The host half of `resolvePrincipal(request)`. Contributed routes receive the very Request object
 * the gateway matched, so the caller is remembered against that object's identity: nothing an
 * extension can write (a header, a cookie, a clone) can make a request resolve to someone else.
 * One map for every gateway in the process: Request objects are never shared between apps, and the
 * contract has one resolver slot per process anyway.
 */
const callers = new WeakMap<Request, GatewayUser>();

/** Called by the contributed-route wrapper before the extension's handler runs. */
export function bindRequestCaller(request: Request, user: GatewayUser): void {
  callers.set(request, user);
}

/** The projection of the caller the gateway bound to this exact Request, or null when it bound none. */
export function resolveGatewayPrincipal(request: Request): ExtensionPrincipal | null {
  const user = callers.get(request);
  return user === undefined ? null : principalOf(user);
}

/**
 * Points the contract's request-based helpers at this gateway. Install before contributed routers
 * mount. Idempotent; returns the undo from the contract (tests use it to leave the slot as found).
 */
export function installGatewayPrincipalResolver(): () => void {
  return installPrincipalResolver(resolveGatewayPrincipal);
}

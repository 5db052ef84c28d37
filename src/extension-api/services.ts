import type { HostPolicySnapshot } from "./policy.ts";
import type { ExtensionRouteContext } from "./principal.ts";
import type { ExtensionData } from "./task-store.ts";

/** What the host hands every service at start. */
export interface ExtensionRuntimeDeps {
  readonly appStore: ExtensionData;
  readonly policy: HostPolicySnapshot;
}

/**
 * Something that lives as long as the gateway: started once after the host's stores are ready,
 * stopped in reverse order at shutdown. A start that fails is reported and the gateway serves
 * without it; stop is still called, so stop must cope with a partial start.
 */
export interface ExtensionService {
  readonly name: string;
  start(deps: ExtensionRuntimeDeps): Promise<void>;
  stop(): Promise<void>;
}

export type ExtensionRouteMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS";

export const EXTENSION_ROUTE_METHODS: readonly ExtensionRouteMethod[] = Object.freeze([
  "GET",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "HEAD",
  "OPTIONS",
]);

/**
 * One HTTP route, as plain data with Web Request/Response, so an extension needs no web framework.
 * Contributed routes sit behind the host's session auth and CSRF checks and cannot opt out.
 */
export interface ExtensionRoute {
  readonly method: ExtensionRouteMethod;
  /** A path template such as `/api/ext/audit/{id}`; the host decides what else it may not shadow. */
  readonly path: string;
  handler(request: Request, ctx: ExtensionRouteContext): Response | Promise<Response>;
}

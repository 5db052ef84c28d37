import type { Context, Handler, Hono, Next } from "hono";
import { inspectRoutes } from "hono/dev";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { EXTENSION_ROUTE_METHODS, ExtensionPermissionError, type ExtensionRoute } from "../extension-api/index.ts";
import type { DiagnosticSink, ExtensionDiagnostic } from "../extensions/diagnostics.ts";
import type { ExtensionEntry, ExtensionRouter, LoadedExtensions } from "../extensions/registry.ts";
import { CSRF_EXEMPT_EXACT_PATHS, PUBLIC_EXACT_PATHS } from "./auth/request.ts";
import { principalOf } from "./auth/principal.ts";
import { bindRequestCaller } from "./principal-resolver.ts";
import {
  canEnterExact,
  canStartWith,
  findShadow,
  honoClaims,
  honoPathFor,
  methodsOverlap,
  parseTemplate,
  projectConverters,
  routeMethods,
  templateClaim,
  type ClaimOwner,
  type ConverterRegistry,
  type RouteClaim,
} from "./route-matcher.ts";
import type { GatewayEnv, GatewayUser } from "./types.ts";

/*
 * Contributed routers join the gateway after every host route, so a host handler always wins; a
 * router that would be partly dead (shadowed), or that would reach a path the host serves without
 * authentication or CSRF checks, is refused whole with a diagnostic, and the next router is still
 * tried. Contributed routes sit behind the same auth and CSRF middleware as host routes because
 * those are registered on the app before any route.
 */

/*
 * Paths served without authentication (or, for the unsafe list, without a CSRF check): no extension
 * may reach them. The exact lists are the auth layer's own, so the two cannot drift; the prefixes
 * keep whole host namespaces (auth, webhooks, health probes) out of reach even where today's auth
 * layer only exempts a few exact paths in them.
 */
export const DEFAULT_RESERVED_PREFIXES: readonly string[] = Object.freeze(["/health", "/api/v1/auth/", "/api/webhooks/"]);
export const DEFAULT_RESERVED_EXACT: readonly string[] = Object.freeze([...new Set([...PUBLIC_EXACT_PATHS, "/api/ok", "/api/info"])]);
/** Exact paths reserved only for POST/PUT/PATCH/DELETE (CSRF-exempt but not public). */
export const DEFAULT_RESERVED_UNSAFE_EXACT: readonly string[] = Object.freeze([...CSRF_EXEMPT_EXACT_PATHS]);

const UNSAFE_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"]);
const ROUTE_METHODS: ReadonlySet<string> = new Set(EXTENSION_ROUTE_METHODS);
const LIFECYCLE_KEYS = ["lifespan", "onStartup", "onShutdown", "startup", "shutdown", "on_startup", "on_shutdown"] as const;
const MOUNT_KEYS = ["mount", "mounts", "app", "routes", "router"] as const;

/** A contributed route as the gateway serves it. */
export interface ContributedRoute {
  /** The extension's `use` string. */
  readonly source: string;
  readonly method: string;
  /** The template the extension wrote (`/api/ext/{id}`). */
  readonly path: string;
  /** The Hono path it is served under (`/api/ext/:id`). */
  readonly honoPath: string;
}

export interface MountExtensionRoutersOptions {
  /**
   * Host routes served in front of this app but not registered on it (an outer layer, a proxy).
   * Routes registered on `app` are read from the app itself, so that list cannot drift.
   */
  readonly hostRoutes?: readonly { readonly method: string; readonly path: string }[];
  /** Paths no contributed route may start with, for any method. */
  readonly reservedPrefixes?: readonly string[];
  /** Paths (plus trailing slashes) no contributed route may produce, for any method. */
  readonly reservedExact?: readonly string[];
  /** Like `reservedExact`, but only for POST/PUT/PATCH/DELETE. */
  readonly reservedUnsafeExact?: readonly string[];
  /**
   * Nonstandard path converters the host serves, name → one-segment regex (`{code:isbn}`), read once
   * per mount call. A route using one shadows, or is shadowed by, only an identical matcher, and is
   * refused if anything it could match reaches a reserved path.
   */
  readonly converters?: Readonly<Record<string, string>>;
  readonly onDiagnostic?: DiagnosticSink;
  /** Wraps each contributed route's Hono handler (tracing, per-route limits); called once per route at mount. */
  readonly wrap?: (handler: Handler<GatewayEnv>, route: ContributedRoute) => Handler<GatewayEnv>;
}

export interface MountedExtensionRouters {
  readonly mounted: readonly ContributedRoute[];
  readonly diagnostics: readonly ExtensionDiagnostic[];
}

/** Contributed claims per app, so a later mount call treats earlier contributions as owners too. */
const contributedOwners = new WeakMap<object, ClaimOwner[]>();

function hostOwners(app: Hono<GatewayEnv>, extra: MountExtensionRoutersOptions["hostRoutes"]): ClaimOwner[] {
  // Middleware (`app.use`) only passes requests on; only handlers serve a path.
  const registered = inspectRoutes(app).filter((route) => !route.isMiddleware);
  return [...registered, ...(extra ?? [])].flatMap(({ method, path }) => honoClaims(method, path).map((claim) => ({ claim, holder: "host" })));
}

class RouterRejection extends DeerflowError {
  constructor(message: string) {
    super("extension_router_rejected", message);
    this.name = "RouterRejection";
  }
}

function present(value: object, key: string): boolean {
  return key in value && (value as Record<string, unknown>)[key] !== undefined && (value as Record<string, unknown>)[key] !== false;
}

function routeLabel(route: Record<string, unknown>, index: number): string {
  const method = typeof route["method"] === "string" ? route["method"] : "?";
  const path = typeof route["path"] === "string" ? route["path"] : "?";
  return `route ${index} (${method} ${path})`;
}

interface PreparedRoute {
  readonly route: ExtensionRoute;
  readonly claim: RouteClaim;
  readonly honoPath: string;
}

interface Reserved {
  readonly prefixes: readonly string[];
  readonly exact: readonly string[];
  readonly unsafeExact: readonly string[];
}

/** The router's routes ready to mount, or a RouterRejection saying why none of them may be. */
function prepare(router: unknown, reserved: Reserved, converters: ConverterRegistry): PreparedRoute[] {
  if (!Array.isArray(router)) throw new RouterRejection("router is not a list of routes");
  for (const key of LIFECYCLE_KEYS) {
    if (present(router, key)) {
      throw new RouterRejection(`router has a ${key} hook; startup/shutdown hooks and lifespans are not supported on routers, register an ExtensionService instead`);
    }
  }
  for (const key of MOUNT_KEYS) {
    if (present(router, key)) throw new RouterRejection(`router carries a mount ("${key}"); contribute plain routes instead`);
  }
  if (router.length === 0) throw new RouterRejection("router has no routes");

  return router.map((item: unknown, index): PreparedRoute => {
    if (typeof item !== "object" || item === null) throw new RouterRejection(`route ${index} is not a route object`);
    const route = item as Record<string, unknown>;
    const label = routeLabel(route, index);
    const method = typeof route["method"] === "string" ? route["method"].toUpperCase() : "";
    if (present(route, "websocket") || method === "WS" || method === "WEBSOCKET") {
      throw new RouterRejection(`${label} is a WebSocket route; contributed WebSocket routes are not supported until the host can apply authentication and Origin checks`);
    }
    for (const key of MOUNT_KEYS) {
      if (present(route, key)) throw new RouterRejection(`${label} is a mount ("${key}"); contribute plain routes instead`);
    }
    for (const key of LIFECYCLE_KEYS) {
      if (present(route, key)) {
        throw new RouterRejection(`${label} has a ${key} hook; startup/shutdown hooks are not supported on routes, register an ExtensionService instead`);
      }
    }
    if (!ROUTE_METHODS.has(route["method"] as string)) {
      throw new RouterRejection(`${label} has the unsupported method ${JSON.stringify(route["method"])}; use one of ${EXTENSION_ROUTE_METHODS.join(", ")}`);
    }
    if (typeof route["handler"] !== "function") throw new RouterRejection(`${label} has no handler function`);
    const parsed = parseTemplate(route["path"] as string, converters);
    if (!parsed.ok) throw new RouterRejection(`${label}: ${parsed.problem}`);
    const claim = templateClaim(method, route["path"] as string, parsed.segments);

    for (const prefix of reserved.prefixes) {
      if (canStartWith(parsed.segments, prefix)) {
        throw new RouterRejection(`router path ${claim.path} can reach the host-reserved namespace ${prefix} (served without authentication or CSRF checks)`);
      }
    }
    const exacts = [...reserved.exact, ...(methodsOverlap(claim.methods, UNSAFE_METHODS) ? reserved.unsafeExact : [])];
    for (const exact of exacts) {
      if (canEnterExact(parsed.segments, exact)) {
        throw new RouterRejection(`router path ${claim.path} can reach the host-reserved path ${exact} (served without authentication or CSRF checks)`);
      }
    }
    return { route: item as ExtensionRoute, claim, honoPath: honoPathFor(parsed) };
  });
}

function isPermissionError(error: unknown): error is Error {
  if (error instanceof ExtensionPermissionError) return true;
  // A second copy of the contract (bundled into an extension) has its own class with the same shape.
  return error instanceof Error && error.name === "ExtensionPermissionError" && (error as { code?: unknown }).code === "forbidden";
}

function contributedHandler(
  entry: { readonly source: string; readonly route: ExtensionRoute; readonly label: string },
  isActive: () => boolean,
  report: (diagnostic: ExtensionDiagnostic) => void,
): Handler<GatewayEnv> {
  return async (c: Context<GatewayEnv>, next: Next) => {
    // A router whose mounting failed part-way stays registered in Hono (routes cannot be removed), inert.
    if (!isActive()) return next();
    const user = c.var.user as GatewayUser | undefined;
    if (user !== undefined) bindRequestCaller(c.req.raw, user);
    const principal = user === undefined ? null : principalOf(user);
    let response: unknown;
    try {
      response = await entry.route.handler(c.req.raw, Object.freeze({ principal }));
    } catch (error) {
      if (isPermissionError(error)) return c.json({ detail: error.message }, 403);
      report({ level: "error", source: entry.source, message: `${entry.label} failed and was answered with 500: ${errorMessage(error)}` });
      return c.json({ detail: `the extension route ${entry.label} failed; the gateway diagnostics name the cause` }, 500);
    }
    if (!(response instanceof Response)) {
      report({ level: "error", source: entry.source, message: `${entry.label} returned ${response === null ? "null" : typeof response}, not a Response; answered with 500` });
      return c.json({ detail: `the extension route ${entry.label} returned no response; the gateway diagnostics name the cause` }, 500);
    }
    return response;
  };
}

/**
 * Mounts each contributed router, in order, after every host route. Call it once the host's routes
 * are all registered (and the principal resolver installed): a host route added later would sit
 * behind contributed ones.
 */
export function mountExtensionRouters(
  app: Hono<GatewayEnv>,
  routers: LoadedExtensions["routers"],
  options: MountExtensionRoutersOptions = {},
): MountedExtensionRouters {
  const diagnostics: ExtensionDiagnostic[] = [];
  const report = (diagnostic: ExtensionDiagnostic) => {
    diagnostics.push(diagnostic);
    options.onDiagnostic?.(diagnostic);
  };
  const reserved: Reserved = {
    prefixes: options.reservedPrefixes ?? DEFAULT_RESERVED_PREFIXES,
    exact: options.reservedExact ?? DEFAULT_RESERVED_EXACT,
    unsafeExact: options.reservedUnsafeExact ?? DEFAULT_RESERVED_UNSAFE_EXACT,
  };
  // Projected now: a converter registered after this call does not change what was checked.
  const converters = projectConverters(options.converters);
  if (typeof converters === "string") throw new DeerflowError("invalid_route_converter", `mountExtensionRouters: ${converters}`);
  const contributed = contributedOwners.get(app) ?? [];
  contributedOwners.set(app, contributed);
  const owners: ClaimOwner[] = [...hostOwners(app, options.hostRoutes), ...contributed];
  const mounted: ContributedRoute[] = [];

  for (const { source, value } of routers as readonly ExtensionEntry<ExtensionRouter>[]) {
    let prepared: PreparedRoute[];
    try {
      prepared = prepare(value, reserved, converters);
      const clash = findShadow(
        prepared.map((p) => p.claim),
        owners,
        source,
      );
      if (clash !== null) throw new RouterRejection(`router path ${clash.path} is already served by ${clash.holder}`);
    } catch (error) {
      const reason = error instanceof RouterRejection ? error.message : `router could not be checked: ${errorMessage(error)}`;
      report({ level: "error", source, message: `${reason}; this router was not mounted` });
      continue;
    }

    let active = true;
    const added: ContributedRoute[] = [];
    try {
      for (const { route, honoPath } of prepared) {
        const info: ContributedRoute = Object.freeze({ source, method: route.method, path: route.path, honoPath });
        // Request-time failures go to the live sink only; the returned list describes mounting.
        const handler = contributedHandler({ source, route, label: `${route.method} ${route.path}` }, () => active, (d) => options.onDiagnostic?.(d));
        app.on(route.method, honoPath, options.wrap ? options.wrap(handler, info) : handler);
        added.push(info);
      }
    } catch (error) {
      active = false;
      report({ level: "error", source, message: `router could not be mounted; continuing without it: ${errorMessage(error)}` });
      continue;
    }
    for (const { claim } of prepared) {
      const owner = { claim, holder: source };
      owners.push(owner);
      contributed.push(owner);
    }
    mounted.push(...added);
  }
  return Object.freeze({ mounted: Object.freeze([...mounted]), diagnostics: Object.freeze([...diagnostics]) });
}

import type { Context, Hono, NotFoundHandler } from "hono";
import { TrieRouter } from "hono/router/trie-router";
import type { GatewayEnv } from "./types.ts";

/*
 * Hono answers a known path asked with a method it does not serve like an unknown path (404). This
 * tells the two apart in one place for the whole app: when nothing answered a request, the path is
 * matched against every registered route of another method, and a path some route serves gets a
 * 405 with `Allow` listing its methods. Middleware (registered for every method) is not a route and
 * is left out; an unknown path stays a 404.
 */

const METHOD_ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/** The methods some route of `app` serves for a path (GET implies HEAD, as Hono serves HEAD through GET). */
export function routeMethodLookup(app: Hono<GatewayEnv>): (path: string) => string[] {
  let built: { count: number; router: TrieRouter<string>; methods: string[] } | undefined;
  const build = () => {
    const router = new TrieRouter<string>();
    const methods = new Set<string>();
    for (const route of app.routes) {
      const method = route.method.toUpperCase();
      if (method === "ALL") continue;
      router.add(method, route.path, method);
      methods.add(method);
    }
    return { count: app.routes.length, router, methods: [...methods] };
  };
  return (path) => {
    // Rebuilt only if routes were added since (every route exists once createGateway returned).
    if (built === undefined || built.count !== app.routes.length) built = build();
    const { router } = built;
    const allowed = new Set(built.methods.filter((method) => router.match(method, path)[0].length > 0));
    if (allowed.has("GET")) allowed.add("HEAD");
    return [...allowed].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  };
}

function rank(method: string): number {
  const index = METHOD_ORDER.indexOf(method);
  return index < 0 ? METHOD_ORDER.length : index;
}

/** `notFound`, except that a path served for other methods is a 405 naming them in `Allow`. */
export function methodNotAllowedOr(app: Hono<GatewayEnv>, notFound: NotFoundHandler<GatewayEnv>): NotFoundHandler<GatewayEnv> {
  const methodsFor = routeMethodLookup(app);
  return (c: Context<GatewayEnv>) => {
    const allowed = methodsFor(c.req.path);
    if (allowed.length === 0 || allowed.includes(c.req.method.toUpperCase())) return notFound(c);
    const list = allowed.join(", ");
    return c.json({ detail: `Method ${c.req.method} is not allowed on this path; it answers ${list}.` }, 405, { Allow: list });
  };
}

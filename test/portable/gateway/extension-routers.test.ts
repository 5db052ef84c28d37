import { Hono, type MiddlewareHandler } from "hono";
import { getCookie } from "hono/cookie";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  requireAdmin,
  resolvePrincipal,
  ExtensionPermissionError,
  type ExtensionRegistry,
  type ExtensionRoute,
  type ExtensionRouteContext,
} from "../../../src/extension-api/index.ts";
import type { ExtensionDiagnostic } from "../../../src/extensions/diagnostics.ts";
import { HostExtensionRegistry, type ExtensionEntry, type ExtensionRouter, type LoadedExtensions } from "../../../src/extensions/registry.ts";
import { mountExtensionRouters, type MountExtensionRoutersOptions } from "../../../src/gateway/extension-routers.ts";
import { installGatewayPrincipalResolver } from "../../../src/gateway/principal-resolver.ts";
import { ROUTE_PERMISSIONS, type GatewayEnv, type GatewayUser } from "../../../src/gateway/types.ts";

/*
 * Contributed routers on a Hono app shaped like the gateway: host routes first (health, models,
 * threads), then the extension routers. Everything goes through app.fetch, so it runs unchanged
 * under Node, Deno and Bun.
 */

const HEALTH_BODY = { status: "healthy", service: "deerflow-edge-gateway" };

function user(id: string, systemRole: GatewayUser["systemRole"] = "user"): GatewayUser {
  return { id, systemRole, authSource: "session", isInternal: systemRole === "internal", permissions: new Set(ROUTE_PERMISSIONS) };
}

/** Stamps a fixed user, the way the auth layer does, so handlers see a principal. */
function stampUser(caller: GatewayUser | null): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    if (caller !== null) c.set("user", caller);
    await next();
  };
}

function hostApp(caller: GatewayUser | null = user("u1")): Hono<GatewayEnv> {
  const app = new Hono<GatewayEnv>();
  app.use("*", stampUser(caller));
  app.get("/api/models", (c) => c.json({ models: ["host"] }));
  app.get("/api/threads/:thread_id", (c) => c.json({ thread_id: c.req.param("thread_id"), from: "host" }));
  app.post("/api/threads/:thread_id/runs", (c) => c.json({ from: "host" }));
  app.get("/health", (c) => c.json(HEALTH_BODY));
  return app;
}

const text = (body: string): ExtensionRoute["handler"] => () => new Response(body);

function route(method: ExtensionRoute["method"], path: string, handler: ExtensionRoute["handler"] = text(`${method} ${path}`)): ExtensionRoute {
  return { method, path, handler };
}

/** Routers registered through the real registry, each by its own extension, in order. */
function loadedRouters(...routers: [source: string, routes: readonly ExtensionRoute[]][]): LoadedExtensions["routers"] {
  const registry = new HostExtensionRegistry();
  for (const [source, routes] of routers) registry.attributedTo(source, (r: ExtensionRegistry) => r.routers(routes));
  return registry.build().routers;
}

function mount(app: Hono<GatewayEnv>, routers: LoadedExtensions["routers"], options: MountExtensionRoutersOptions = {}) {
  const live: ExtensionDiagnostic[] = [];
  const result = mountExtensionRouters(app, routers, { ...options, onDiagnostic: (d) => live.push(d) });
  return { ...result, live };
}

async function get(app: Hono<GatewayEnv>, path: string, init: RequestInit = {}): Promise<{ status: number; body: string }> {
  const response = await app.fetch(new Request(`http://gateway.test${path}`, init));
  return { status: response.status, body: await response.text() };
}

let uninstall: () => void = () => {};
beforeAll(() => {
  uninstall = installGatewayPrincipalResolver();
});
afterAll(() => uninstall());

describe("mounting contributed routers", () => {
  it("mounts a valid router after the host routes and serves it", async () => {
    const app = hostApp();
    const { mounted, diagnostics } = mount(app, loadedRouters(["acme-audit", [route("GET", "/api/ext/audit/{id}"), route("POST", "/api/ext/audit")]]));
    expect(diagnostics).toEqual([]);
    expect(mounted.map((m) => `${m.method} ${m.path} -> ${m.honoPath}`)).toEqual([
      "GET /api/ext/audit/{id} -> /api/ext/audit/:id",
      "POST /api/ext/audit -> /api/ext/audit",
    ]);
    expect(await get(app, "/api/ext/audit/42")).toEqual({ status: 200, body: "GET /api/ext/audit/{id}" });
    expect(await get(app, "/api/ext/audit", { method: "POST" })).toEqual({ status: 200, body: "POST /api/ext/audit" });
  });

  it("scenario G32: an extension router with GET /health is refused; /health still returns the host body and the diagnostic names the extension", async () => {
    const app = hostApp();
    const healthHandler = text("extension health");
    const { mounted, live } = mount(app, loadedRouters(["acme-health", [route("GET", "/health", healthHandler)]]));
    expect(mounted).toEqual([]);
    expect(live).toHaveLength(1);
    expect(live[0]).toMatchObject({ level: "error", source: "acme-health" });
    expect(live[0]?.message).toMatch(/\/health.*this router was not mounted/);
    const response = await get(app, "/health");
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual(HEALTH_BODY);
  });

  it("scenario G33: a router with GET /api/ext/a and GET /api/models is rejected whole; /api/ext/a is 404 and the diagnostic says host", async () => {
    const app = hostApp();
    const { mounted, diagnostics } = mount(app, loadedRouters(["acme-models", [route("GET", "/api/ext/a"), route("GET", "/api/models")]]));
    expect(mounted).toEqual([]);
    expect(diagnostics).toEqual([
      { level: "error", source: "acme-models", message: "router path /api/models is already served by host; this router was not mounted" },
    ]);
    expect((await get(app, "/api/ext/a")).status).toBe(404);
    expect(JSON.parse((await get(app, "/api/models")).body)).toEqual({ models: ["host"] });
  });

  it("scenario G34: POST /api/models mounts (the host serves GET only); GET /api/threads/{n:int} is rejected as shadowed by the host's GET /api/threads/:thread_id", async () => {
    const app = hostApp();
    const { mounted, diagnostics } = mount(
      app,
      loadedRouters(["acme-models-write", [route("POST", "/api/models")]], ["acme-thread-numbers", [route("GET", "/api/threads/{n:int}")]]),
    );
    expect(mounted.map((m) => `${m.source}: ${m.method} ${m.path}`)).toEqual(["acme-models-write: POST /api/models"]);
    expect(diagnostics).toEqual([
      {
        level: "error",
        source: "acme-thread-numbers",
        message: "router path /api/threads/{n:int} is already served by host; this router was not mounted",
      },
    ]);
    expect(await get(app, "/api/models", { method: "POST" })).toEqual({ status: 200, body: "POST /api/models" });
    expect(JSON.parse((await get(app, "/api/threads/7")).body)).toEqual({ thread_id: "7", from: "host" });
  });

  it("scenario G35: [WebSocket router, startup-hook router, valid router] → the first two are rejected with diagnostics, the third is mounted and reachable", async () => {
    const app = hostApp();
    const websocket = { ...route("GET", "/api/ext/live"), websocket: true } as ExtensionRoute;
    // The registry keeps route objects' own fields, so a hook declared on a route reaches the gateway.
    const withStartupHook = { ...route("GET", "/api/ext/warm"), onStartup: () => {} } as ExtensionRoute;
    const { mounted, diagnostics } = mount(
      app,
      loadedRouters(["acme-live", [websocket]], ["acme-warm", [withStartupHook]], ["acme-ok", [route("GET", "/api/ext/ok")]]),
    );
    expect(diagnostics.map((d) => d.source)).toEqual(["acme-live", "acme-warm"]);
    expect(diagnostics[0]?.message).toMatch(/WebSocket/);
    expect(diagnostics[1]?.message).toMatch(/onStartup hook.*ExtensionService/);
    expect(mounted.map((m) => m.source)).toEqual(["acme-ok"]);
    expect((await get(app, "/api/ext/live")).status).toBe(404);
    expect((await get(app, "/api/ext/warm")).status).toBe(404);
    expect(await get(app, "/api/ext/ok")).toEqual({ status: 200, body: "GET /api/ext/ok" });
  });

  it("refuses routers built outside the registry that carry a lifespan, a mount, a WS method or no routes", () => {
    const app = hostApp();
    const withLifespan = Object.assign([route("GET", "/api/ext/one")], { lifespan: async () => {} });
    const entries: ExtensionEntry<ExtensionRouter>[] = [
      { source: "lifespan", value: withLifespan },
      { source: "mount", value: [{ ...route("GET", "/api/ext/sub"), mount: new Hono() } as ExtensionRoute] },
      { source: "ws", value: [{ ...route("GET", "/api/ext/ws"), method: "WS" } as unknown as ExtensionRoute] },
      { source: "empty", value: [] },
      { source: "not-a-list", value: { routes: [] } as unknown as ExtensionRouter },
      { source: "fine", value: [route("GET", "/api/ext/fine")] },
    ];
    const { mounted, diagnostics } = mount(app, entries);
    expect(diagnostics.map((d) => [d.source, d.message])).toEqual([
      ["lifespan", expect.stringMatching(/lifespan hook/)],
      ["mount", expect.stringMatching(/mount/)],
      ["ws", expect.stringMatching(/WebSocket/)],
      ["empty", expect.stringMatching(/no routes/)],
      ["not-a-list", expect.stringMatching(/not a list of routes/)],
    ]);
    expect(mounted.map((m) => m.source)).toEqual(["fine"]);
  });

  it("rejects templates the host cannot serve exactly, naming the problem", () => {
    const app = hostApp();
    const cases: [string, RegExp][] = [
      ["/api/ext/{id:slug}", /unknown parameter type "slug"/],
      ["/api/ext/{rest:path}/tail", /must be the last segment/],
      ["/api/ext/file-{rest:path}", /must be a whole segment/],
      ["/api/ext/file-{id", /unbalanced/],
      ["/api/ext/v{n:slug}", /unknown parameter type "slug"/],
      ["/api/ext/{a}-{a}", /twice/],
      ["/api/ext/:id", /character the router treats specially/],
      ["/api/ext/", /trailing slash/],
      ["/api//ext", /empty segment/],
      ["/api/ext/{a}/{a}", /twice/],
    ];
    const { diagnostics, mounted } = mount(
      app,
      cases.map(([path], index) => ({ source: `bad-${index}`, value: [route("GET", path)] })),
    );
    expect(mounted).toEqual([]);
    expect(diagnostics.map((d) => d.message)).toEqual(cases.map(([, message]) => expect.stringMatching(message)));
  });

  it("refuses routes that can reach a host path served without auth or CSRF", () => {
    const app = hostApp();
    const reachable = [
      "/healthz",
      "/{anything}",
      "/api/v1/auth/login/local",
      "/api/v1/{section}/login/local",
      "/api/{rest:path}",
      "/api/ok",
      // Public for every method in the auth layer, though the host itself serves only GET there.
      "/api/info",
      "/api/webhooks/acme",
    ];
    const { diagnostics, mounted } = mount(
      app,
      reachable.map((path, index) => ({ source: `reserved-${index}`, value: [route("POST", path)] })),
    );
    expect(mounted).toEqual([]);
    expect(diagnostics).toHaveLength(reachable.length);
    for (const diagnostic of diagnostics) expect(diagnostic.message).toMatch(/host-reserved .*this router was not mounted/);
  });

  it("reserves an unsafe-only exact path for POST but lets GET through", () => {
    const app = hostApp();
    const { mounted, diagnostics } = mount(
      app,
      [
        { source: "me-post", value: [route("POST", "/api/profile/me")] },
        { source: "me-get", value: [route("GET", "/api/profile/me")] },
      ],
      { reservedUnsafeExact: ["/api/profile/me"] },
    );
    expect(diagnostics.map((d) => d.source)).toEqual(["me-post"]);
    expect(mounted.map((m) => m.source)).toEqual(["me-get"]);
  });

  it("lets a later router use a path an earlier accepted router does not provably cover, and rejects one it does", async () => {
    const app = hostApp();
    const { mounted, diagnostics } = mount(
      app,
      loadedRouters(
        ["ints", [route("GET", "/api/ext/items/{n:int}", () => new Response("int"))]],
        ["strs", [route("GET", "/api/ext/items/{name}", () => new Response("str"))]],
        ["dup", [route("GET", "/api/ext/items/{count:int}")]],
        ["self-shadow", [route("GET", "/api/ext/x/{id}"), route("GET", "/api/ext/x/latest")]],
      ),
    );
    expect(mounted.map((m) => m.source)).toEqual(["ints", "strs"]);
    expect(diagnostics.map((d) => d.message)).toEqual([
      "router path /api/ext/items/{count:int} is already served by ints; this router was not mounted",
      "router path /api/ext/x/latest is already served by self-shadow; this router was not mounted",
    ]);
    expect((await get(app, "/api/ext/items/12")).body).toBe("int");
    expect((await get(app, "/api/ext/items/twelve")).body).toBe("str");
  });

  it("treats routes contributed by an earlier mount call on the same app as owners", () => {
    const app = hostApp();
    mount(app, [{ source: "first", value: [route("GET", "/api/ext/once")] }]);
    const { diagnostics } = mount(app, [{ source: "second", value: [route("GET", "/api/ext/once")] }]);
    expect(diagnostics[0]?.message).toBe("router path /api/ext/once is already served by first; this router was not mounted");
  });

  // Spec (extension-system.md): "The conservative matcher proves common shadows through ...
  // supported compound segments ... Relationships requiring general regex-language inclusion are
  // allowed rather than guessed." A compound segment is served, not refused.
  it("supported compound segments: a compound route is mounted, served with its exact language, and shadowed only where provable", async () => {
    const app = hostApp();
    app.get("/api/host/:name", (c) => c.text("host"));
    const { mounted, diagnostics } = mount(
      app,
      loadedRouters(
        ["versions", [route("GET", "/api/ext/v{n:int}", () => new Response("version")), route("GET", "/api/ext/files/{name}.{ext}", () => new Response("file"))]],
        // Under the host's /api/host/:name: a plain parameter holds every compound value.
        ["under-host", [route("GET", "/api/host/report-{id:int}")]],
        // Same shape, narrower converters: every value splits into pieces the earlier route accepts.
        ["same-shape", [route("GET", "/api/ext/files/{stem:int}.{kind}")]],
        // A different shape would need regex inclusion: allowed.
        ["other-shape", [route("GET", "/api/ext/files/{name}-{part}.{ext}", () => new Response("part"))]],
        // A literal the earlier compound matches is provably shadowed.
        ["literal", [route("GET", "/api/ext/v2")]],
      ),
    );
    expect(mounted.map((m) => m.source)).toEqual(["versions", "versions", "other-shape"]);
    expect(diagnostics.map((d) => d.message)).toEqual([
      "router path /api/host/report-{id:int} is already served by host; this router was not mounted",
      "router path /api/ext/files/{stem:int}.{kind} is already served by versions; this router was not mounted",
      "router path /api/ext/v2 is already served by versions; this router was not mounted",
    ]);
    expect((await get(app, "/api/ext/v12")).body).toBe("version");
    expect((await get(app, "/api/ext/v")).status).toBe(404);
    expect((await get(app, "/api/ext/vx")).status).toBe(404);
    expect((await get(app, "/api/ext/files/a.txt")).body).toBe("file");
    expect((await get(app, "/api/ext/files/readme")).status).toBe(404);
  });

  it("a compound route that can reach a reserved path is refused (fail closed)", () => {
    const app = hostApp();
    const { mounted, diagnostics } = mount(app, loadedRouters(["sneaky", [route("GET", "/heal{rest}")]], ["login", [route("POST", "/api/v1/auth/{x}-{y}")]]));
    expect(mounted).toEqual([]);
    expect(diagnostics.map((d) => d.message)).toEqual([
      expect.stringMatching(/can reach the host-reserved namespace \/health/),
      expect.stringMatching(/can reach the host-reserved namespace \/api\/v1\/auth\//),
    ]);
  });

  // Spec (extension-system.md): "Because include_router() recompiles contributed routes, preflight
  // projects the converter registry at include time. Nonstandard converters fail closed against
  // reserved security paths but otherwise prove a shadow only when their normalized matchers are identical."
  describe("nonstandard converters the host registers", () => {
    const converters = { sku: "[A-Z]+-[0-9]+" };

    it("prove a shadow only when their normalized matchers are identical (or the owner's regex matches a static path)", async () => {
      const app = hostApp();
      app.get("/api/host/:code{[A-Z]+-[0-9]+}", (c) => c.text("host"));
      const { mounted, diagnostics } = mount(
        app,
        loadedRouters(
          ["skus", [route("GET", "/api/ext/items/{code:sku}", () => new Response("sku"))]],
          ["same-matcher", [route("GET", "/api/ext/items/{other:sku}")]],
          ["static", [route("GET", "/api/ext/items/AB-7")]],
          ["host-same", [route("GET", "/api/host/{c:sku}")]],
          // A plain parameter is not provably inside or around an unknown language: allowed both ways.
          ["plain", [route("GET", "/api/ext/items/{name}", () => new Response("plain")), route("GET", "/api/ext/more/{name}")]],
          ["under-plain", [route("GET", "/api/ext/more/{code:sku}")]],
        ),
        { converters },
      );
      expect(mounted.map((m) => m.source)).toEqual(["skus", "plain", "plain", "under-plain"]);
      expect(diagnostics.map((d) => d.message)).toEqual([
        "router path /api/ext/items/{other:sku} is already served by skus; this router was not mounted",
        "router path /api/ext/items/AB-7 is already served by skus; this router was not mounted",
        "router path /api/host/{c:sku} is already served by host; this router was not mounted",
      ]);
      expect((await get(app, "/api/ext/items/AB-12")).body).toBe("sku");
      expect((await get(app, "/api/ext/items/ab")).body).toBe("plain");
    });

    it("fail closed against reserved security paths, are refused inside a compound segment, and an unregistered one is still unknown", () => {
      const app = hostApp();
      const { mounted, diagnostics } = mount(
        app,
        loadedRouters(
          ["root", [route("GET", "/{code:sku}")]],
          ["auth", [route("POST", "/api/v1/{code:sku}/login/local")]],
          ["compound", [route("GET", "/api/ext/v{code:sku}")]],
          ["unknown", [route("GET", "/api/ext/{code:isbn}")]],
        ),
        { converters },
      );
      expect(mounted).toEqual([]);
      expect(diagnostics.map((d) => d.message)).toEqual([
        expect.stringMatching(/router path \/\{code:sku\} can reach the host-reserved namespace \/health/),
        expect.stringMatching(/can reach the host-reserved namespace \/api\/v1\/auth\//),
        expect.stringMatching(/nonstandard converter in \{code:sku\} must be a whole segment/),
        expect.stringMatching(/unknown parameter type "isbn"; use str, int, float, uuid, path or sku/),
      ]);
    });

    it("are projected when routers are mounted: a bad registration is an error naming the converter", () => {
      const app = hostApp();
      const routers = loadedRouters(["a", [route("GET", "/api/ext/a")]]);
      expect(() => mount(app, routers, { converters: { int: "[0-9]" } })).toThrow(/converter "int": int is a standard converter/);
      expect(() => mount(app, routers, { converters: { pair: "([a-z])-\\1" } })).toThrow(/converter "pair": its pattern may not contain a capturing group/);
      expect(() => mount(app, routers, { converters: { year: "[0-9]{4}" } })).toThrow(/converter "year": its pattern may not contain "\}"/);
      expect(() => mount(app, routers, { converters: { broken: "[a-" } })).toThrow(/converter "broken": its pattern is not a valid regex/);
    });
  });

  it("serves typed parameters with their converter's language only", async () => {
    const app = hostApp();
    const uuid = "123e4567-e89b-12d3-a456-426614174000";
    mount(app, [
      {
        source: "typed",
        value: [route("GET", "/api/ext/n/{n:int}"), route("GET", "/api/ext/f/{f:float}"), route("GET", "/api/ext/u/{u:uuid}"), route("GET", "/api/ext/p/{rest:path}")],
      },
    ]);
    expect((await get(app, "/api/ext/n/12")).status).toBe(200);
    expect((await get(app, "/api/ext/n/twelve")).status).toBe(404);
    expect((await get(app, "/api/ext/f/1.5")).status).toBe(200);
    expect((await get(app, "/api/ext/f/1.")).status).toBe(404);
    expect((await get(app, `/api/ext/u/${uuid}`)).status).toBe(200);
    expect((await get(app, "/api/ext/u/not-a-uuid")).status).toBe(404);
    expect((await get(app, "/api/ext/p/a/b/c")).status).toBe(200);
  });

  it("reads host routes from the app itself, and takes extra ones served in front of it", () => {
    const app = hostApp();
    app.put("/api/late-host-route", (c) => c.text("host"));
    const { diagnostics } = mount(
      app,
      [
        { source: "late", value: [route("PUT", "/api/late-host-route")] },
        { source: "outer", value: [route("GET", "/api/proxied/thing")] },
      ],
      { hostRoutes: [{ method: "ALL", path: "/api/proxied/*" }] },
    );
    expect(diagnostics.map((d) => [d.source, d.message])).toEqual([
      ["late", "router path /api/late-host-route is already served by host; this router was not mounted"],
      ["outer", "router path /api/proxied/thing is already served by host; this router was not mounted"],
    ]);
  });

  it("ignores host middleware: app.use on a path does not serve it", () => {
    const app = hostApp();
    app.use("/api/ext/*", async (_c, next) => next());
    const { mounted } = mount(app, [{ source: "ok", value: [route("GET", "/api/ext/a")] }]);
    expect(mounted).toHaveLength(1);
  });

  it("a host HEAD is answered through GET: a contributed HEAD under a host GET is shadowed", () => {
    const app = hostApp();
    const { diagnostics } = mount(app, [{ source: "head", value: [route("HEAD", "/api/models")] }]);
    expect(diagnostics[0]?.message).toBe("router path /api/models is already served by host; this router was not mounted");
  });

  // Spec (extension-system.md): "Any preflight, conflict, or include failure rolls back the whole
  // router without preventing later routers from mounting."
  it('"Any preflight, conflict, or include failure rolls back the whole router without preventing later routers from mounting": a mount failure on the second route leaves the first inert (active=false) and unclaimed', async () => {
    const app = hostApp();
    const { mounted, diagnostics } = mount(
      app,
      [
        { source: "half", value: [route("GET", "/api/ext/half/a", text("half a")), route("GET", "/api/ext/half/b", text("half b"))] },
        { source: "after", value: [route("GET", "/api/ext/half/a", text("after a")), route("GET", "/api/ext/after", text("after"))] },
      ],
      {
        wrap: (handler, info) => {
          if (info.source === "half" && info.path === "/api/ext/half/b") throw new Error("include failed");
          return handler;
        },
      },
    );
    expect(diagnostics).toEqual([{ level: "error", source: "half", message: "router could not be mounted; continuing without it: include failed" }]);
    expect(mounted.map((m) => `${m.source}: ${m.path}`)).toEqual(["after: /api/ext/half/a", "after: /api/ext/after"]);
    // The first route of "half" stays registered in Hono but inert: the request falls through to "after".
    expect(await get(app, "/api/ext/half/a")).toEqual({ status: 200, body: "after a" });
    expect((await get(app, "/api/ext/half/b")).status).toBe(404);
    expect((await get(app, "/api/ext/after")).body).toBe("after");
  });

  it("a router whose mount failed part-way serves nothing, even with no later router behind it", async () => {
    const app = hostApp();
    let calls = 0;
    mount(app, [{ source: "half", value: [route("GET", "/api/ext/solo", () => (calls++, new Response("solo"))), route("GET", "/api/ext/solo/b")] }], {
      wrap: (handler, info) => {
        if (info.path === "/api/ext/solo/b") throw new Error("include failed");
        return handler;
      },
    });
    expect((await get(app, "/api/ext/solo")).status).toBe(404);
    expect(calls).toBe(0);
  });

  it("wraps each contributed handler when asked", async () => {
    const app = hostApp();
    const seen: string[] = [];
    mount(app, [{ source: "wrapped", value: [route("GET", "/api/ext/w")] }], {
      wrap: (handler, info) => async (c, next) => {
        seen.push(`${info.source} ${info.method} ${info.honoPath}`);
        return handler(c, next);
      },
    });
    expect((await get(app, "/api/ext/w")).status).toBe(200);
    expect(seen).toEqual(["wrapped GET /api/ext/w"]);
  });
});

describe("contributed route handlers", () => {
  it("get the Request and a principal projected from the gateway user, never the user itself", async () => {
    const app = hostApp(user("alice"));
    let received: { request: Request; ctx: ExtensionRouteContext } | undefined;
    mount(app, [
      {
        source: "probe",
        value: [
          route("GET", "/api/ext/probe", (request, ctx) => {
            received = { request, ctx };
            return Response.json(resolvePrincipal(ctx));
          }),
        ],
      },
    ]);
    const response = await get(app, "/api/ext/probe?x=1");
    expect(JSON.parse(response.body)).toEqual({ userId: "alice", isAdmin: false, isInternal: false, roles: ["user"] });
    expect(new URL(received!.request.url).searchParams.get("x")).toBe("1");
    expect(Object.keys(received!.ctx)).toEqual(["principal"]);
    expect(Object.isFrozen(received!.ctx)).toBe(true);
  });

  it("resolvePrincipal(request) and requireAdmin(request) read the caller the gateway bound to that very Request", async () => {
    const routes = [
      route("GET", "/api/ext/me", (request) => Response.json(resolvePrincipal(request))),
      route("GET", "/api/ext/admin", (request) => Response.json({ admin: requireAdmin(request).userId })),
      route("GET", "/api/ext/clone", (request) => Response.json(resolvePrincipal(request.clone()))),
    ];
    const asUser = hostApp(user("bob"));
    mount(asUser, [{ source: "who", value: routes }]);
    expect(JSON.parse((await get(asUser, "/api/ext/me")).body)).toMatchObject({ userId: "bob", isAdmin: false });
    const forbidden = await get(asUser, "/api/ext/admin");
    expect(forbidden.status).toBe(403);
    expect(JSON.parse(forbidden.body)).toEqual({ detail: expect.stringContaining('user "bob" is not an administrator') });
    // A clone is a request the gateway never saw: fail closed.
    expect((await get(asUser, "/api/ext/clone")).status).toBe(403);

    const asAdmin = hostApp(user("root", "admin"));
    mount(asAdmin, [{ source: "who", value: routes }]);
    expect(JSON.parse((await get(asAdmin, "/api/ext/admin")).body)).toEqual({ admin: "root" });
  });

  it("an internal caller is never an administrator, whatever its role", async () => {
    const app = hostApp({ ...user("svc", "admin"), isInternal: true, authSource: "internal" });
    mount(app, [{ source: "who", value: [route("GET", "/api/ext/admin", (request) => Response.json(requireAdmin(request)))] }]);
    expect((await get(app, "/api/ext/admin")).status).toBe(403);
  });

  it("without a stamped user the principal is null and the helpers refuse with 403", async () => {
    const app = hostApp(null);
    mount(app, [{ source: "who", value: [route("GET", "/api/ext/me", (_request, ctx) => Response.json(resolvePrincipal(ctx)))] }]);
    const response = await get(app, "/api/ext/me");
    expect(response.status).toBe(403);
    expect(JSON.parse(response.body).detail).toMatch(/identity could not be determined/);
  });

  it("maps a permission error from another copy of the contract to 403 as well", async () => {
    const app = hostApp();
    class ForeignPermissionError extends Error {
      readonly code = "forbidden";
      override readonly name = "ExtensionPermissionError";
    }
    mount(app, [
      {
        source: "bundled",
        value: [
          route("GET", "/api/ext/foreign", () => {
            throw new ForeignPermissionError("bundled contract says no");
          }),
          route("GET", "/api/ext/ours", () => {
            throw new ExtensionPermissionError("host contract says no");
          }),
        ],
      },
    ]);
    expect(await get(app, "/api/ext/foreign")).toEqual({ status: 403, body: JSON.stringify({ detail: "bundled contract says no" }) });
    expect(await get(app, "/api/ext/ours")).toEqual({ status: 403, body: JSON.stringify({ detail: "host contract says no" }) });
  });

  it("a throwing handler is a 500 with a JSON detail and an attributed diagnostic, without leaking the error text", async () => {
    const app = hostApp();
    const { live } = mount(app, [
      {
        source: "buggy",
        value: [
          route("POST", "/api/ext/boom", () => {
            throw new Error("secret connection string in here");
          }),
          route("GET", "/api/ext/nothing", () => undefined as unknown as Response),
        ],
      },
    ]);
    const boom = await get(app, "/api/ext/boom", { method: "POST" });
    expect(boom.status).toBe(500);
    expect(JSON.parse(boom.body).detail).toContain("POST /api/ext/boom");
    expect(boom.body).not.toContain("secret");
    const nothing = await get(app, "/api/ext/nothing");
    expect(nothing.status).toBe(500);
    expect(live.map((d) => [d.source, d.message])).toEqual([
      ["buggy", expect.stringMatching(/POST \/api\/ext\/boom failed.*secret connection string/)],
      ["buggy", expect.stringMatching(/GET \/api\/ext\/nothing returned undefined, not a Response/)],
    ]);
  });
});

describe("contributed routes behind the gateway's auth and CSRF", () => {
  /*
   * Stand-ins for the real layers, registered in the gateway's order (CSRF, then auth, then every
   * route): CSRF checks unsafe methods by double submit, auth turns a session cookie into a user.
   * Both classify c.req.path, the path the router matches.
   */
  const csrf: MiddlewareHandler<GatewayEnv> = async (c, next) => {
    if (["POST", "PUT", "PATCH", "DELETE"].includes(c.req.method)) {
      const cookie = getCookie(c, "csrf_token");
      const header = c.req.header("x-csrf-token");
      if (!cookie || !header) return c.json({ detail: "CSRF token missing" }, 403);
      if (cookie !== header) return c.json({ detail: "CSRF token mismatch" }, 403);
    }
    await next();
  };
  const auth: MiddlewareHandler<GatewayEnv> = async (c, next) => {
    if (c.req.path === "/health") return next();
    if (getCookie(c, "access_token") !== "valid-session") {
      return c.json({ detail: { code: "not_authenticated", message: "sign in first" } }, 401);
    }
    c.set("user", user("carol"));
    await next();
  };

  function securedApp(): Hono<GatewayEnv> {
    const app = new Hono<GatewayEnv>();
    app.use("*", csrf);
    app.use("*", auth);
    app.get("/health", (c) => c.json(HEALTH_BODY));
    app.get("/api/models", (c) => c.json({ models: [] }));
    mountExtensionRouters(app, [
      {
        source: "acme-ping",
        value: [
          route("GET", "/api/ext/ping", (request) => Response.json({ pong: resolvePrincipal(request).userId })),
          route("POST", "/api/ext/ping", (request) => Response.json({ posted: resolvePrincipal(request).userId })),
        ],
      },
    ]);
    return app;
  }

  it("scenario G36: GET /api/ext/ping without a session is 401, with a session 200, and a POST with a session but no CSRF header 403", async () => {
    const app = securedApp();
    const anonymous = await get(app, "/api/ext/ping");
    expect(anonymous.status).toBe(401);
    expect(JSON.parse(anonymous.body)).toEqual({ detail: { code: "not_authenticated", message: "sign in first" } });

    const session = { cookie: "access_token=valid-session; csrf_token=t0k3n" };
    expect(await get(app, "/api/ext/ping", { headers: session })).toEqual({ status: 200, body: JSON.stringify({ pong: "carol" }) });

    const noCsrf = await get(app, "/api/ext/ping", { method: "POST", headers: session });
    expect(noCsrf.status).toBe(403);
    expect(JSON.parse(noCsrf.body).detail).toMatch(/CSRF/);

    const withCsrf = await get(app, "/api/ext/ping", { method: "POST", headers: { ...session, "x-csrf-token": "t0k3n" } });
    expect(withCsrf).toEqual({ status: 200, body: JSON.stringify({ posted: "carol" }) });
  });
});

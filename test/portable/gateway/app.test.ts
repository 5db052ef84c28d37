import { describe, expect, it } from "vitest";
import { DeerflowError } from "../../../src/core/errors.ts";
import { createGateway, type GatewayAuthLayer } from "../../../src/gateway/app.ts";
import type { GatewayLogger } from "../../../src/gateway/errors.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { BASE, call, config, testGateway } from "./threads-fixtures.ts";

function capturingLogger() {
  const lines: { level: string; message: string; fields?: Readonly<Record<string, unknown>> }[] = [];
  const logger: GatewayLogger = {
    error: (message, fields) => lines.push({ level: "error", message, ...(fields ? { fields } : {}) }),
    warn: (message, fields) => lines.push({ level: "warn", message, ...(fields ? { fields } : {}) }),
    info: (message, fields) => lines.push({ level: "info", message, ...(fields ? { fields } : {}) }),
  };
  return { lines, logger };
}

describe("system routes", () => {
  it("answers /health, /api/ok and /api/info", async () => {
    const gateway = await testGateway();
    expect((await call(gateway, "GET", "/health")).body).toEqual({ status: "healthy", service: "deerflow-edge" });
    expect((await call(gateway, "GET", "/api/ok")).body).toEqual({ ok: true });
    const info = await call(gateway, "GET", "/api/info");
    expect(info.body).toMatchObject({ version: expect.stringMatching(/^\d+\.\d+\.\d+/), context: "js", flags: { assistants: true, crons: false } });
  });

  it("answers an unknown path with a JSON 404", async () => {
    const gateway = await testGateway();
    const res = await call(gateway, "GET", "/api/nowhere");
    expect(res).toMatchObject({ status: 404, body: { detail: "Not found" } });
    expect(res.headers.get("content-type")).toContain("application/json");
  });
});

describe("errors", () => {
  it("answers an unplanned failure with a fixed 500 and logs the stack with the request id", async () => {
    const { lines, logger } = capturingLogger();
    const gateway = await testGateway({
      logger,
      registerExtraRoutes: (api) => {
        api.get("/boom", () => {
          throw new Error("database password is hunter2");
        });
      },
    });
    const res = await call(gateway, "GET", "/api/boom", undefined, { headers: { "x-request-id": "req-42" } });
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ detail: "internal error; see the gateway log" });
    expect(res.headers.get("x-request-id")).toBe("req-42");
    expect(lines).toEqual([
      {
        level: "error",
        message: "unhandled error: database password is hunter2",
        fields: expect.objectContaining({ request_id: "req-42", method: "GET", path: "/api/boom", stack: expect.stringContaining("Error") }),
      },
    ]);
  });

  it("answers a DeerflowError with its own status, message and code", async () => {
    const gateway = await testGateway({
      registerExtraRoutes: (api) => {
        api.get("/busy", () => {
          throw new DeerflowError("thread_busy", "Thread t is busy; wait for its run.");
        });
        api.get("/teapot", () => {
          throw new DeerflowError("custom", "short and stout", { details: { status: 418 } });
        });
        api.get("/own-status", () => {
          throw Object.assign(new DeerflowError("run_not_found", "Run r not found"), { status: 404 });
        });
      },
    });
    expect(await call(gateway, "GET", "/api/busy")).toMatchObject({ status: 409, body: { detail: "Thread t is busy; wait for its run.", code: "thread_busy" } });
    expect(await call(gateway, "GET", "/api/teapot")).toMatchObject({ status: 418, body: { detail: "short and stout" } });
    expect(await call(gateway, "GET", "/api/own-status")).toMatchObject({ status: 404, body: { detail: "Run r not found", code: "run_not_found" } });
  });
});

describe("middleware", () => {
  it("gives every response a request id: the caller's when it is well-formed, a fresh one otherwise", async () => {
    const gateway = await testGateway();
    expect((await call(gateway, "GET", "/health", undefined, { headers: { "x-request-id": "abc-1" } })).headers.get("x-request-id")).toBe("abc-1");
    const fresh = (await call(gateway, "GET", "/health", undefined, { headers: { "x-request-id": "bad id\u0001" } })).headers.get("x-request-id");
    expect(fresh).toMatch(/^[0-9a-f-]{36}$/);
    expect((await call(gateway, "GET", "/nope")).headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("runs CSRF before auth, both inside the request id", async () => {
    const seen: string[] = [];
    const authLayer: GatewayAuthLayer = {
      csrf: async (c, next) => {
        seen.push("csrf");
        if (c.req.method === "POST" && !c.req.header("x-csrf-token")) return c.json({ detail: "CSRF token missing" }, 403);
        await next();
      },
      authenticate: async (c, next) => {
        seen.push("auth");
        return c.json({ detail: { code: "not_authenticated", message: "no" } }, 401);
      },
    };
    const gateway = await createGateway({ config, storage: createMemoryKeyValue(), authLayer });
    const post = await gateway.fetch(new Request(`${BASE}/api/threads`, { method: "POST", body: "{}" }));
    expect(post.status).toBe(403);
    expect(post.headers.get("x-request-id")).toBeTruthy();
    expect(seen).toEqual(["csrf"]);
    const get = await gateway.fetch(new Request(`${BASE}/api/threads/t`));
    expect(get.status).toBe(401);
    expect(seen).toEqual(["csrf", "csrf", "auth"]);
  });

  it("lets the auth layer register its routes ahead of everything else", async () => {
    const gateway = await createGateway({
      config,
      storage: createMemoryKeyValue(),
      authLayer: {
        csrf: async (_c, next) => next(),
        authenticate: async (_c, next) => next(),
        register: (app) => app.post("/api/v1/auth/login/local", (c) => c.json({ ok: "login" })),
      },
    });
    const res = await gateway.fetch(new Request(`${BASE}/api/v1/auth/login/local`, { method: "POST" }));
    expect(await res.json()).toEqual({ ok: "login" });
  });

  it("answers CORS only for configured origins and exposes Content-Location to them", async () => {
    const gateway = await testGateway({ corsOrigins: ["https://ui.example"] });
    const preflight = await gateway.fetch(
      new Request(`${BASE}/api/threads`, {
        method: "OPTIONS",
        headers: { origin: "https://ui.example", "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-api-key" },
      }),
    );
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("https://ui.example");
    expect(preflight.headers.get("access-control-allow-credentials")).toBe("true");
    const get = await call(gateway, "GET", "/api/ok", undefined, { headers: { origin: "https://ui.example" } });
    expect(get.headers.get("access-control-expose-headers")?.toLowerCase()).toContain("content-location");
    const foreign = await call(gateway, "GET", "/api/ok", undefined, { headers: { origin: "https://evil.example" } });
    expect(foreign.headers.get("access-control-allow-origin")).toBeNull();

    const closed = await testGateway();
    expect((await call(closed, "GET", "/api/ok", undefined, { headers: { origin: "https://ui.example" } })).headers.get("access-control-allow-origin")).toBeNull();
  });

  it("reads CORS origins from GATEWAY_CORS_ORIGINS when none are passed", async () => {
    const gateway = await testGateway({ env: { get: (name) => (name === "GATEWAY_CORS_ORIGINS" ? " https://a.example , https://b.example " : undefined) } });
    const res = await call(gateway, "GET", "/api/ok", undefined, { headers: { origin: "https://b.example" } });
    expect(res.headers.get("access-control-allow-origin")).toBe("https://b.example");
  });
});

describe("auth disabled (the default layer)", () => {
  // Auth off answers only requests addressed to a loopback name.
  const BASE = "http://127.0.0.1:2026";
  async function defaultGateway(corsOrigins?: string[]) {
    return createGateway({ config, storage: createMemoryKeyValue(), ...(corsOrigins ? { corsOrigins } : {}) });
  }
  const post = (gateway: Awaited<ReturnType<typeof defaultGateway>>, origin?: string) =>
    gateway.fetch(
      new Request(`${BASE}/api/threads`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(origin ? { origin } : {}) },
        body: JSON.stringify({ metadata: {} }),
      }),
    );

  it("acts as the admin `default` with every permission", async () => {
    const gateway = await defaultGateway();
    const res = await post(gateway);
    expect(res.status).toBe(200);
    const { thread_id } = (await res.json()) as { thread_id: string };
    expect((await gateway.deps.threads.get(thread_id))?.owner_id).toBe("default");
  });

  it("refuses an unsafe request from a foreign Origin, so no web page can drive the local sandbox", async () => {
    const gateway = await defaultGateway(["https://ui.example"]);
    const refused = await post(gateway, "https://evil.example");
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { detail: string }).detail).toContain("Cross-origin request refused");
    const elsewhere = await gateway.fetch(new Request("http://gateway.example/api/ok"));
    expect(elsewhere.status).toBe(403);
    expect((await post(gateway, "null")).status).toBe(403);
    expect(await gateway.deps.threads.search({ limit: 10, offset: 0 })).toEqual([]);
    expect((await post(gateway, BASE)).status).toBe(200);
    expect((await post(gateway, "https://ui.example")).status).toBe(200);
    const read = await gateway.fetch(new Request(`${BASE}/api/ok`, { headers: { origin: "https://evil.example" } }));
    expect(read.status).toBe(200);
  });
});

describe("route order", () => {
  it("scenario G32 (host precedence): a later router's GET /health and GET /api/ok never shadow the host's", async () => {
    const gateway = await testGateway({
      mountExtensionRouters: (app) => {
        app.get("/health", (c) => c.json({ status: "extension" }));
        app.get("/api/ok", (c) => c.json({ ok: "extension" }));
        app.get("/api/ext/ping", (c) => c.json({ pong: true, user: c.get("user")?.id ?? null }));
      },
    });
    expect((await call(gateway, "GET", "/health")).body).toEqual({ status: "healthy", service: "deerflow-edge" });
    expect((await call(gateway, "GET", "/api/ok")).body).toEqual({ ok: true });
    // Behind the same auth layer as every host route.
    expect((await call(gateway, "GET", "/api/ext/ping")).body).toEqual({ pong: true, user: "alice" });
    expect((await call(gateway, "GET", "/api/ext/ping", undefined, { user: null })).body).toEqual({ pong: true, user: null });
  });

  it("mounts extra routes under /api after the host's, with the shared thread store and guard", async () => {
    const gateway = await testGateway({
      registerExtraRoutes: (api, deps) => {
        api.get("/threads/:thread_id/runs", async (c) => {
          const row = await deps.guard.thread(c, "runs:read", c.req.param("thread_id"), { requireExisting: true });
          return c.json({ owner: row?.owner_id });
        });
        api.get("/threads/search", (c) => c.json({ shadow: true }));
      },
    });
    await call(gateway, "POST", "/api/threads", { thread_id: "t" });
    expect((await call(gateway, "GET", "/api/threads/t/runs")).body).toEqual({ owner: "alice" });
    expect((await call(gateway, "GET", "/api/threads/t/runs", undefined, { user: "bob" })).status).toBe(404);
    // The host's GET /threads/{thread_id} already serves this path ("search" is a valid, unknown id).
    expect((await call(gateway, "GET", "/api/threads/search")).status).toBe(404);
  });
});

describe("startup and shutdown", () => {
  it("starts services before the run routes exist, and hands both the same deps", async () => {
    const order: string[] = [];
    let servicesDeps: unknown;
    const gateway = await testGateway({
      startServices: async (deps) => {
        order.push("services");
        servicesDeps = deps;
        return { stop: async () => {} };
      },
      registerExtraRoutes: (_api, deps) => {
        order.push("routes");
        expect(deps).toBe(servicesDeps);
      },
      mountExtensionRouters: () => {
        order.push("routers");
      },
    });
    expect(order).toEqual(["services", "routes", "routers"]);
    expect(gateway.deps).toBe(servicesDeps);
  });

  it("scenario G31 (gateway sequencing): drains runs, then stops services, then closes the runs part and storage, once", async () => {
    const order: string[] = [];
    const storage = createMemoryKeyValue();
    const dispose = storage.dispose.bind(storage);
    storage.dispose = async () => {
      order.push("storage");
      await dispose();
    };
    let releaseDrain!: () => void;
    const drained = new Promise<void>((resolve) => (releaseDrain = resolve));
    const gateway = await testGateway({
      storage,
      startServices: async () => ({
        stop: async () => {
          order.push("services");
        },
      }),
      registerExtraRoutes: () => ({
        drain: async (timeoutMs) => {
          order.push(`drain ${timeoutMs}`);
          await drained;
          order.push("drained");
        },
        close: async () => {
          order.push("runs closed");
        },
      }),
    });
    const first = gateway.shutdown();
    const second = gateway.shutdown();
    await Promise.resolve();
    expect(order).toEqual(["drain 5000"]);
    releaseDrain();
    await Promise.all([first, second]);
    expect(order).toEqual(["drain 5000", "drained", "services", "runs closed", "storage"]);
  });

  it('"Shutdown stops accepting detached observations before the memory shutdown flush": after the run drain, and the accepted ones finish before services stop', async () => {
    const order: string[] = [];
    let releaseObservation!: () => void;
    const observation = new Promise<void>((resolve) => (releaseObservation = resolve));
    const gateway = await testGateway({
      startServices: async () => ({ stop: async () => void order.push("services") }),
      registerExtraRoutes: () => ({
        drain: async () => {
          // A run interrupted by the drain may still report its cancelled system call.
          order.push(`drain (accepting ${detached.accepting})`);
        },
      }),
    });
    const detached = gateway.deps.detachedObservations!;
    expect(detached.submit(async () => {
      await observation;
      order.push("observation done");
    })).toBe(true);
    const shutdown = gateway.shutdown();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(detached.accepting).toBe(false);
    expect(detached.submit(async () => void order.push("late observation"))).toBe(false);
    // Services (and the memory flush after them) wait for the observation accepted before.
    expect(order).toEqual(["drain (accepting true)"]);
    releaseObservation();
    await shutdown;
    expect(order).toEqual(["drain (accepting true)", "observation done", "services"]);
  });

  it("keeps shutting down when a step fails, and logs the failure", async () => {
    const { lines, logger } = capturingLogger();
    const order: string[] = [];
    const storage = createMemoryKeyValue();
    storage.dispose = async () => {
      order.push("storage");
    };
    const gateway = await testGateway({
      storage,
      logger,
      startServices: async () => ({
        stop: async () => {
          throw new Error("service stuck");
        },
      }),
    });
    await gateway.shutdown();
    expect(order).toEqual(["storage"]);
    expect(lines.map((l) => l.message)).toContain("shutdown: stopping services failed: service stuck");
  });
});

import { Hono, type Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { AuthorizationConfigInput } from "../../../src/authz/config.ts";
import { AuthorizationConfigSchema } from "../../../src/authz/config.ts";
import type { AuthorizationProvider } from "../../../src/authz/provider.ts";
import { mapEnv } from "../../../src/core/env.ts";
import type { Clock } from "../../../src/ports/runtime-ports.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { parseGatewayConfig, type GatewayConfigInput } from "../../../src/config/gateway.ts";
import { authenticatedUser, createAuthLayer, type AuthLayer } from "../../../src/gateway/auth/index.ts";
import { rememberConnection } from "../../../src/gateway/auth/client-address.ts";
import { hashPassword } from "../../../src/gateway/auth/password.ts";
import { registerModelRoutes } from "../../../src/gateway/routes/models.ts";
import type { GatewayEnv, GatewayUser, RoutePermission } from "../../../src/gateway/types.ts";
import * as v from "valibot";

/*
 * A small gateway for the auth tests: the auth layer in the order the real gateway installs it
 * (CSRF, then authentication), the auth and model routes, and a few dummy routes standing in for
 * threads and runs. Threads have owners so that "acts as u1" is visible as a 404 on u2's thread.
 */

export const BASE = "http://localhost";
/** Fast hashes for tests; the default iteration count is checked on its own. */
export const TEST_ITERATIONS = 1_000;

export const API_KEY = "k-0123456789abcdef-admin";
export const USER_API_KEY = "k-0123456789abcdef-user1";
export const INTERNAL_TOKEN = "internal-token-0123456789abcdef0123456789";
export const JWT_SECRET = "jwt-secret-0123456789abcdef0123456789abcdef";

export interface TestGateway {
  readonly app: Hono<GatewayEnv>;
  readonly layer: AuthLayer;
  /** thread id -> owner id */
  readonly threads: Map<string, string>;
}

export interface TestGatewayOptions {
  readonly gateway?: GatewayConfigInput;
  readonly authorization?: AuthorizationConfigInput;
  readonly provider?: AuthorizationProvider;
  readonly env?: Record<string, string>;
  readonly clock?: Clock;
  readonly storage?: KeyValue;
  readonly models?: Array<{ name: string; use: "openai-compatible" | "demo"; model?: string; display_name?: string }>;
}

/** What the real RouteGuard does first: the permission `authenticate` decided, else 403. */
function assertPermission(c: Context<GatewayEnv>, permission: RoutePermission): GatewayUser {
  const user = authenticatedUser(c);
  if (!user.permissions.has(permission)) throw new HTTPException(403, { res: Response.json({ detail: `Permission denied: ${permission}` }, { status: 403 }) });
  return user;
}

export async function passwordHash(password: string): Promise<string> {
  return hashPassword(password, { iterations: TEST_ITERATIONS });
}

export function buildTestGateway(options: TestGatewayOptions = {}): TestGateway {
  const layer = createAuthLayer({
    config: parseGatewayConfig(options.gateway ?? {}),
    authorization: options.authorization === undefined ? null : v.parse(AuthorizationConfigSchema, options.authorization),
    ...(options.provider === undefined ? {} : { authorizationProvider: options.provider }),
    env: mapEnv({ AUTH_JWT_SECRET: JWT_SECRET, DEER_FLOW_INTERNAL_AUTH_TOKEN: INTERNAL_TOKEN, ADMIN_KEY: API_KEY, USER_KEY: USER_API_KEY, ...options.env }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.storage === undefined ? {} : { storage: options.storage }),
  });
  const threads = new Map<string, string>();
  const app = new Hono<GatewayEnv>();
  app.use("*", layer.csrf);
  app.use("*", layer.authenticate);
  layer.register(app);
  registerModelRoutes(app, {
    config: { models: (options.models ?? []).map((model) => ({ base_url: "https://api.openai.com/v1", timeout_ms: 1000, ...model })) },
    authorizer: layer.authorizer,
  });
  app.get("/health", (c) => c.json({ status: "healthy" }));
  app.get("/api/ok", (c) => c.json({ ok: true }));
  app.get("/api/whoami", (c) => {
    const user = authenticatedUser(c);
    return c.json({ id: user.id, role: user.systemRole, source: user.authSource, internal: user.isInternal, permissions: [...user.permissions].sort() });
  });
  app.post("/api/echo", (c) => c.json({ ok: true, user: authenticatedUser(c).id }));
  app.post("/api/threads", async (c) => {
    const user = assertPermission(c, "threads:write");
    const { thread_id } = (await c.req.json()) as { thread_id: string };
    threads.set(thread_id, user.id);
    return c.json({ thread_id, owner_id: user.id });
  });
  app.get("/api/threads/:id", (c) => {
    const user = assertPermission(c, "threads:read");
    const owner = threads.get(c.req.param("id"));
    if (owner === undefined || owner !== user.id) return c.json({ detail: `Thread ${c.req.param("id")} not found` }, 404);
    return c.json({ thread_id: c.req.param("id"), owner_id: owner });
  });
  app.post("/api/threads/:id/runs", (c) => {
    const user = assertPermission(c, "runs:create");
    const owner = threads.get(c.req.param("id"));
    if (owner === undefined || owner !== user.id) return c.json({ detail: `Thread ${c.req.param("id")} not found` }, 404);
    return c.json({ run_id: "r1", thread_id: c.req.param("id") });
  });
  return { app, layer, threads };
}

/** `from`: the client address the server adapter would have reported (absent: an in-process call). */
export function request(app: Hono<GatewayEnv>, path: string, init: RequestInit & { cookies?: Record<string, string>; from?: string } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (init.cookies !== undefined) {
    headers.set("cookie", Object.entries(init.cookies).map(([name, value]) => `${name}=${value}`).join("; "));
  }
  if (typeof init.body === "string" && !headers.has("content-type")) headers.set("content-type", "application/json");
  const { cookies: _cookies, from, ...rest } = init;
  const req = new Request(`${BASE}${path}`, { ...rest, headers });
  rememberConnection(req, from);
  return Promise.resolve(app.fetch(req));
}

/** name -> { value, attributes (lower-cased) } from a response's Set-Cookie headers. */
export function setCookies(response: Response): Map<string, { value: string; attributes: string[] }> {
  const out = new Map<string, { value: string; attributes: string[] }>();
  for (const line of response.headers.getSetCookie()) {
    const [pair, ...attributes] = line.split(";").map((part) => part.trim());
    const index = pair!.indexOf("=");
    out.set(pair!.slice(0, index), { value: decodeURIComponent(pair!.slice(index + 1)), attributes: attributes.map((a) => a.toLowerCase()) });
  }
  return out;
}

/** Logs in and returns the two cookies a browser would now hold. */
export async function login(app: Hono<GatewayEnv>, username: string, password: string, from?: string): Promise<{ access_token: string; csrf_token: string }> {
  const response = await request(app, "/api/v1/auth/login/local", { method: "POST", body: JSON.stringify({ username, password }), ...(from === undefined ? {} : { from }) });
  if (response.status !== 200) throw new Error(`login failed: ${response.status} ${await response.text()}`);
  const cookies = setCookies(response);
  return { access_token: cookies.get("access_token")!.value, csrf_token: cookies.get("csrf_token")!.value };
}

/** An authorization provider whose backend is down: every decision throws. */
export function unreachableProvider(): AuthorizationProvider {
  return {
    name: "down",
    authorize() {
      throw new Error("policy backend unreachable");
    },
    filterResources() {
      throw new Error("policy backend unreachable");
    },
  };
}

import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import { hashPassword } from "../../../src/gateway/auth/password.ts";
import { acceptanceGateways, call, cookiesOf, human, send } from "../../fixtures/plugins/gateway-harness.ts";
import { unreachableProvider } from "./auth-fixtures.ts";

/*
 * Authentication and route authorization as a deployment configures them: the `gateway.auth` and
 * `authorization` sections of config.yaml, through createGateway's own auth layer, against the real
 * thread and run routes.
 */

const U1_KEY = "u1-key-0123456789abcdef";
const U2_KEY = "u2-key-0123456789abcdef";
const OPS_KEY = "ops-key-0123456789abcdef";
const INTERNAL_TOKEN = "internal-token-0123456789abcdef0123456789";
const ENV = { U1_KEY, U2_KEY, OPS_KEY, DEER_FLOW_INTERNAL_AUTH_TOKEN: INTERNAL_TOKEN };
const API_KEYS = [
  { key_env: "U1_KEY", user_id: "u1", role: "user" },
  { key_env: "U2_KEY", user_id: "u2", role: "user" },
  { key_env: "OPS_KEY", user_id: "ops", role: "admin" },
];
const as = (key: string) => ({ headers: { "x-api-key": key } });
const internalFor = (owner: string) => ({ headers: { "X-DeerFlow-Internal-Token": INTERNAL_TOKEN, "X-DeerFlow-Owner-User-Id": owner } });

const gatewayWith = acceptanceGateways(() => ({ env: ENV }));

describe("authentication from config (scenario G48)", () => {
  it("scenario G48: no credentials is 401 not_authenticated; an expired session cookie is 401 token_expired", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const { gateway } = await gatewayWith(
      { gateway: { auth: { mode: "session", users: [{ id: "u1", password_hash: await hashPassword("pw-u1-secret", { iterations: 1_000 }) }], token_expiry_days: 1 } } },
      { clock },
    );
    const anonymous = await call(gateway, "GET", "/api/threads/any");
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.detail.code).toBe("not_authenticated");

    const login = await send(gateway, "POST", "/api/v1/auth/login/local", { body: { username: "u1", password: "pw-u1-secret" } });
    const cookies = cookiesOf(login);
    expect((await call(gateway, "GET", "/api/v1/auth/me", { cookies })).body).toMatchObject({ id: "u1", auth_source: "session" });
    await clock.advance(24 * 3600 * 1000 + 1000);
    const expired = await call(gateway, "GET", "/api/v1/auth/me", { cookies });
    expect(expired.status).toBe(401);
    expect(expired.body.detail.code).toBe("token_expired");
  });

  it("scenario G48: the internal token with X-DeerFlow-Owner-User-Id u1 acts as u1 (not admin) and gets 404 on u2's thread", async () => {
    const { gateway } = await gatewayWith({ gateway: { auth: { mode: "api_key", api_keys: API_KEYS } } });
    expect((await call(gateway, "POST", "/api/threads", { body: { thread_id: "t-u2" }, ...as(U2_KEY) })).status).toBe(200);

    const me = await call(gateway, "GET", "/api/v1/auth/me", internalFor("u1"));
    expect(me.body).toMatchObject({ id: "u1", system_role: "internal", is_internal: true, auth_source: "internal" });
    expect(me.body.system_role).not.toBe("admin");

    expect((await call(gateway, "GET", "/api/threads/t-u2", internalFor("u1"))).status).toBe(404);
    expect((await call(gateway, "GET", "/api/threads/t-u2/state", internalFor("u1"))).status).toBe(404);
    expect((await call(gateway, "POST", "/api/threads/t-u2/runs", { body: { input: human("hi") }, ...internalFor("u1") })).status).toBe(404);
    expect((await call(gateway, "DELETE", "/api/threads/t-u2", internalFor("u1"))).status).toBe(404);
    // The thread is still u2's, untouched.
    expect((await call(gateway, "GET", "/api/threads/t-u2", as(U2_KEY))).status).toBe(200);

    // Acting as u1 it owns what it creates, and u2 in turn cannot see it; a wrong token is no one.
    expect((await call(gateway, "POST", "/api/threads", { body: { thread_id: "t-u1" }, ...internalFor("u1") })).status).toBe(200);
    expect((await call(gateway, "GET", "/api/threads/t-u1", as(U1_KEY))).status).toBe(200);
    expect((await call(gateway, "GET", "/api/threads/t-u1", as(U2_KEY))).status).toBe(404);
    const wrong = await call(gateway, "GET", "/api/threads/t-u1", { headers: { "X-DeerFlow-Internal-Token": "x".repeat(40), "X-DeerFlow-Owner-User-Id": "u1" } });
    expect(wrong.status).toBe(401);
  });
});

describe("route and model authorization from config (scenario G50)", () => {
  const models = [{ name: "gpt", use: "openai-compatible", model: "gpt-4o-mini", api_key_env: "OPENAI_API_KEY" }];
  const authorization = {
    enabled: true,
    roles: { user: { routes: { deny: ["runs:create"] }, models: { allow: ["demo"] } }, admin: {} },
  };

  it("scenario G50: role user is denied runs:create (403 Permission denied: runs:create) while GET thread is 200; GET /api/models is filtered", async () => {
    const { gateway } = await gatewayWith({ gateway: { auth: { mode: "api_key", api_keys: API_KEYS } }, authorization, models });
    expect((await call(gateway, "POST", "/api/threads", { body: { thread_id: "t1" }, ...as(U1_KEY) })).status).toBe(200);

    for (const path of ["/api/threads/t1/runs", "/api/threads/t1/runs/stream", "/api/threads/t1/runs/wait"]) {
      const denied = await call(gateway, "POST", path, { body: { input: human("hi") }, ...as(U1_KEY) });
      expect(denied.status, path).toBe(403);
      expect(denied.body).toEqual({ detail: "Permission denied: runs:create" });
    }
    expect((await call(gateway, "GET", "/api/threads/t1", as(U1_KEY))).status).toBe(200);
    // Denied before anything was created.
    expect((await call(gateway, "GET", "/api/threads/t1/runs", as(U1_KEY))).body).toEqual([]);

    const userModels = await call(gateway, "GET", "/api/models", as(U1_KEY));
    expect(userModels.body.models.map((m: { name: string }) => m.name)).toEqual(["demo"]);
    expect(userModels.body.default_model).toBe("demo");
    expect((await call(gateway, "GET", "/api/models/gpt", as(U1_KEY))).status).toBe(403);
    const adminModels = await call(gateway, "GET", "/api/models", as(OPS_KEY));
    expect(adminModels.body.models.map((m: { name: string }) => m.name)).toEqual(["gpt", "demo"]);

    // The admin role has no route policy: it may start runs.
    expect((await call(gateway, "POST", "/api/threads", { body: { thread_id: "t-ops" }, ...as(OPS_KEY) })).status).toBe(200);
    const run = await call(gateway, "POST", "/api/threads/t-ops/runs/wait", { body: { input: human("hi"), context: { model_name: "demo" } }, ...as(OPS_KEY) });
    expect(run.status).toBe(200);
  });

  it("scenario G50: a throwing provider follows fail_closed (deny by default)", async () => {
    const throwing = unreachableProvider();
    const { gateway } = await gatewayWith(
      { gateway: { auth: { mode: "api_key", api_keys: API_KEYS } }, authorization: { enabled: true }, models },
      { authorizationProvider: throwing },
    );
    const read = await call(gateway, "GET", "/api/threads/t1", as(U1_KEY));
    expect(read).toMatchObject({ status: 403, body: { detail: "Permission denied: threads:read" } });
    expect((await call(gateway, "GET", "/api/models", as(U1_KEY))).body.models).toEqual([]);
  });
});

import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import { DeerflowError } from "../../../src/core/errors.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { parseGatewayConfig } from "../../../src/config/gateway.ts";
import {
  JWT_SECRET_STORAGE_KEY,
  assertAuthSafeToServe,
  createAuthLayer,
  makeSafeUserId,
  principalOf,
} from "../../../src/gateway/auth/index.ts";
import { API_KEY, INTERNAL_TOKEN, USER_API_KEY, buildTestGateway, login, passwordHash, request, setCookies } from "./auth-fixtures.ts";

const DAY_MS = 24 * 3600 * 1000;

// One hash per password for the whole file, as a config.yaml would hold across restarts.
const hashes = new Map<string, Promise<string>>();
function hashOnce(password: string): Promise<string> {
  if (!hashes.has(password)) hashes.set(password, passwordHash(password));
  return hashes.get(password)!;
}

async function sessionGateway(extra: { clock?: ManualClock; tokenVersion?: number; storage?: ReturnType<typeof createMemoryKeyValue>; env?: Record<string, string> } = {}) {
  return buildTestGateway({
    gateway: {
      auth: {
        mode: "session",
        users: [
          { id: "u1", password_hash: await hashOnce("correct horse 1"), role: "user", token_version: extra.tokenVersion ?? 0 },
          { id: "u2", password_hash: await hashOnce("correct horse 2"), role: "user" },
          { id: "boss", password_hash: await hashOnce("correct horse 3"), role: "admin" },
        ],
        api_keys: [
          { key_env: "ADMIN_KEY", user_id: "ops", role: "admin" },
          { key_env: "USER_KEY", user_id: "u1", role: "user" },
        ],
      },
    },
    ...(extra.clock === undefined ? {} : { clock: extra.clock }),
    ...(extra.storage === undefined ? {} : { storage: extra.storage }),
    ...(extra.env === undefined ? {} : { env: extra.env }),
  });
}

async function detail(response: Response): Promise<unknown> {
  return ((await response.json()) as { detail: unknown }).detail;
}

describe("authentication (scenario G48)", () => {
  it("scenario G48: a non-public GET without a cookie is 401 not_authenticated", async () => {
    const { app } = await sessionGateway();
    const response = await request(app, "/api/whoami");
    expect(response.status).toBe(401);
    expect(await detail(response)).toMatchObject({ code: "not_authenticated" });
  });

  it("scenario G48: an expired session cookie is 401 token_expired", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const { app } = await sessionGateway({ clock });
    const cookies = await login(app, "u1", "correct horse 1");
    expect((await request(app, "/api/whoami", { cookies })).status).toBe(200);
    await clock.advance(7 * DAY_MS + 1000);
    const response = await request(app, "/api/whoami", { cookies });
    expect(response.status).toBe(401);
    expect(await detail(response)).toMatchObject({ code: "token_expired" });
  });

  it("scenario G48: the internal token with X-DeerFlow-Owner-User-Id u1 acts as u1, not admin, and gets 404 on u2's thread", async () => {
    const { app, threads, layer } = await sessionGateway();
    threads.set("t-u1", "u1");
    threads.set("t-u2", "u2");
    const headers = { "X-DeerFlow-Internal-Token": INTERNAL_TOKEN, "X-DeerFlow-Owner-User-Id": "u1" };
    const me = await request(app, "/api/whoami", { headers });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ id: "u1", role: "internal", source: "internal", internal: true });
    expect((await request(app, "/api/threads/t-u1", { headers })).status).toBe(200);
    const foreign = await request(app, "/api/threads/t-u2", { headers });
    expect(foreign.status).toBe(404);
    expect(await detail(foreign)).toBe("Thread t-u2 not found");
    // The extension projection of the same caller: internal, never an administrator.
    const user = await layer.resolveUser(new Request("http://localhost/api/x", { headers }));
    expect(principalOf(user!)).toEqual({ userId: "u1", isAdmin: false, isInternal: true, roles: ["internal"] });
  });

  it("a wrong internal token is not an identity, and an owner header alone grants nothing", async () => {
    const { app } = await sessionGateway();
    const wrong = await request(app, "/api/whoami", { headers: { "X-DeerFlow-Internal-Token": `${INTERNAL_TOKEN}x`, "X-DeerFlow-Owner-User-Id": "u1" } });
    expect(wrong.status).toBe(401);
    expect(await detail(wrong)).toMatchObject({ code: "not_authenticated" });
  });

  it("an unsafe owner id is made safe (no path characters, a digest keeps distinct owners apart); no owner means default", async () => {
    const { app } = await sessionGateway();
    const me = async (owner?: string) => {
      const headers: Record<string, string> = { "X-DeerFlow-Internal-Token": INTERNAL_TOKEN };
      if (owner !== undefined) headers["X-DeerFlow-Owner-User-Id"] = owner;
      return ((await (await request(app, "/api/whoami", { headers })).json()) as { id: string }).id;
    };
    const traversal = await me("ou_abc/../../etc/passwd");
    expect(traversal).toMatch(/^[A-Za-z0-9_-]{1,128}$/);
    expect(traversal).toBe(await makeSafeUserId("ou_abc/../../etc/passwd"));
    expect(await me("a:b")).not.toBe(await me("a/b"));
    expect(await me("alice_42")).toBe("alice_42");
    expect(await me()).toBe("default");
    expect(await me("x".repeat(300))).toMatch(/^[A-Za-z0-9_-]{1,128}$/);
  });

  it("a junk cookie is token_invalid, a cookie of a removed user is user_not_found, a raised token_version revokes", async () => {
    const storage = createMemoryKeyValue();
    const before = await sessionGateway({ storage });
    const cookies = await login(before.app, "u1", "correct horse 1");

    const junk = await request(before.app, "/api/whoami", { cookies: { access_token: "not.a.jwt" } });
    expect(junk.status).toBe(401);
    expect(await detail(junk)).toMatchObject({ code: "token_invalid" });

    const forged = cookies.access_token.slice(0, -2) + (cookies.access_token.endsWith("A") ? "BB" : "AA");
    expect(await detail(await request(before.app, "/api/whoami", { cookies: { access_token: forged } }))).toMatchObject({ code: "token_invalid" });

    const removed = buildTestGateway({
      gateway: { auth: { mode: "session", users: [{ id: "u2", password_hash: await passwordHash("x") }] } },
    });
    expect(await detail(await request(removed.app, "/api/whoami", { cookies }))).toMatchObject({ code: "user_not_found" });

    const bumped = await sessionGateway({ tokenVersion: 1 });
    const revoked = await request(bumped.app, "/api/whoami", { cookies });
    expect(revoked.status).toBe(401);
    expect(await detail(revoked)).toMatchObject({ code: "token_invalid" });
  });

  it("public paths answer without credentials; percent-encoded and doubled-slash paths do not bypass", async () => {
    const { app } = await sessionGateway();
    expect((await request(app, "/health")).status).toBe(200);
    expect((await request(app, "/api/ok")).status).toBe(200);
    // Hono decodes %77 and routes this to /api/whoami, so it must be classified as /api/whoami.
    for (const path of ["/api/%77hoami", "//api/whoami", "/health/../api/whoami", "/health/%2e%2e/api/whoami", "/health%2F..%2Fapi%2Fwhoami", "/api/ok/../whoami"]) {
      const response = await request(app, path);
      expect(response.status, path).toBe(401);
    }
  });
});

describe("API keys", () => {
  it("x-api-key acts as the key's user and role; a wrong key is 401 invalid_api_key", async () => {
    const { app } = await sessionGateway();
    const admin = await request(app, "/api/whoami", { headers: { "x-api-key": API_KEY } });
    expect(await admin.json()).toMatchObject({ id: "ops", role: "admin", source: "api_key", internal: false });
    const user = await request(app, "/api/whoami", { headers: { "x-api-key": USER_API_KEY } });
    expect(await user.json()).toMatchObject({ id: "u1", role: "user", source: "api_key" });
    const wrong = await request(app, "/api/whoami", { headers: { "x-api-key": `${API_KEY}-nope` } });
    expect(wrong.status).toBe(401);
    expect(await detail(wrong)).toMatchObject({ code: "invalid_api_key" });
  });

  it("an API-key caller is not a browser: its POST needs no CSRF pair", async () => {
    const { app } = await sessionGateway();
    const response = await request(app, "/api/echo", { method: "POST", headers: { "x-api-key": API_KEY }, body: "{}" });
    expect(response.status).toBe(200);
  });

  it("a key named in config but missing from the environment stops startup, naming the variable", () => {
    expect(() =>
      createAuthLayer({
        config: parseGatewayConfig({ auth: { mode: "api_key", api_keys: [{ key_env: "MISSING_KEY", user_id: "ops" }] } }),
        env: mapEnv({}),
      }),
    ).toThrow(expect.objectContaining({ code: "auth_api_key_missing", message: expect.stringContaining("MISSING_KEY") }));
    expect(() =>
      createAuthLayer({
        config: parseGatewayConfig({ auth: { mode: "api_key", api_keys: [{ key_env: "SHORT_KEY", user_id: "ops" }] } }),
        env: mapEnv({ SHORT_KEY: "short" }),
      }),
    ).toThrow(expect.objectContaining({ code: "auth_api_key_too_short" }));
  });
});

describe("password login", () => {
  it("a PBKDF2-hashed password logs in: HttpOnly Lax session cookie, JS-readable Strict CSRF cookie, then authenticated GET works", async () => {
    const { app } = await sessionGateway();
    const response = await request(app, "/api/v1/auth/login/local", { method: "POST", body: JSON.stringify({ username: "boss", password: "correct horse 3" }) });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ expires_in: 7 * 24 * 3600, user: { id: "boss", system_role: "admin" } });
    const cookies = setCookies(response);
    const access = cookies.get("access_token")!;
    const csrf = cookies.get("csrf_token")!;
    expect(access.attributes).toEqual(expect.arrayContaining(["httponly", "samesite=lax", "path=/", `max-age=${7 * 24 * 3600}`]));
    expect(access.attributes).not.toContain("secure");
    expect(csrf.attributes).toEqual(expect.arrayContaining(["samesite=strict", "path=/"]));
    expect(csrf.attributes).not.toContain("httponly");
    expect(csrf.value.length).toBeGreaterThanOrEqual(32);

    const me = await request(app, "/api/v1/auth/me", { cookies: { access_token: access.value } });
    expect(await me.json()).toMatchObject({ id: "boss", system_role: "admin", auth_source: "session" });
  });

  it("a wrong password and an unknown user get the same 401, which does not say which part was wrong", async () => {
    const { app } = await sessionGateway();
    const wrongPassword = await request(app, "/api/v1/auth/login/local", { method: "POST", body: JSON.stringify({ username: "u1", password: "nope" }) });
    const unknownUser = await request(app, "/api/v1/auth/login/local", { method: "POST", body: JSON.stringify({ username: "ghost", password: "nope" }) });
    expect(wrongPassword.status).toBe(401);
    expect(unknownUser.status).toBe(401);
    const a = await wrongPassword.json();
    expect(a).toEqual(await unknownUser.json());
    expect(a).toEqual({ detail: { code: "invalid_credentials", message: "Incorrect username or password." } });
    expect(wrongPassword.headers.getSetCookie()).toEqual([]);
  });

  it("accepts an OAuth2-style form body, refuses an unknown JSON field with 422", async () => {
    const { app } = await sessionGateway();
    const form = await request(app, "/api/v1/auth/login/local", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=password&username=u2&password=correct+horse+2&remember_me=false",
    });
    expect(form.status).toBe(200);
    // remember_me=false: session cookies, no Max-Age.
    expect(setCookies(form).get("access_token")!.attributes.some((a) => a.startsWith("max-age"))).toBe(false);
    const unknown = await request(app, "/api/v1/auth/login/local", { method: "POST", body: JSON.stringify({ username: "u2", password: "x", admin: true }) });
    expect(unknown.status).toBe(422);
    expect(await detail(unknown)).toMatch(/unknown field "admin"/);
  });

  it("over HTTPS (X-Forwarded-Proto) both cookies are Secure", async () => {
    const { app } = await sessionGateway();
    const response = await request(app, "/api/v1/auth/login/local", {
      method: "POST",
      headers: { "x-forwarded-proto": "https" },
      body: JSON.stringify({ username: "u1", password: "correct horse 1" }),
    });
    const cookies = setCookies(response);
    expect(cookies.get("access_token")!.attributes).toContain("secure");
    expect(cookies.get("csrf_token")!.attributes).toContain("secure");
  });

  it("logout clears both cookies and sets no new CSRF token", async () => {
    const { app } = await sessionGateway();
    const response = await request(app, "/api/v1/auth/logout", { method: "POST" });
    expect(response.status).toBe(200);
    const cookies = setCookies(response);
    expect(cookies.get("access_token")).toMatchObject({ value: "", attributes: expect.arrayContaining(["max-age=0"]) });
    expect(cookies.get("csrf_token")).toMatchObject({ value: "", attributes: expect.arrayContaining(["max-age=0"]) });
  });

  it("without AUTH_JWT_SECRET the generated secret is kept in storage, so a restarted gateway honours old sessions", async () => {
    const storage = createMemoryKeyValue();
    const first = await sessionGateway({ storage, env: { AUTH_JWT_SECRET: "" } });
    const cookies = await login(first.app, "u1", "correct horse 1");
    expect(typeof (await storage.getItem(JWT_SECRET_STORAGE_KEY))).toBe("string");
    const restarted = await sessionGateway({ storage, env: { AUTH_JWT_SECRET: "" } });
    expect((await request(restarted.app, "/api/whoami", { cookies })).status).toBe(200);
    const otherInstall = await sessionGateway({ storage: createMemoryKeyValue(), env: { AUTH_JWT_SECRET: "" } });
    expect((await request(otherInstall.app, "/api/whoami", { cookies })).status).toBe(401);
  });

  it("a too-short JWT secret stops startup", () => {
    expect(() => createAuthLayer({ config: parseGatewayConfig({}), env: mapEnv({ AUTH_JWT_SECRET: "short" }) })).toThrow(
      expect.objectContaining({ code: "auth_jwt_secret_too_short" }),
    );
  });
});

describe("auth disabled (loopback only)", () => {
  it("every caller is the local admin 'default'", async () => {
    const { app } = buildTestGateway();
    const me = await request(app, "/api/whoami");
    expect(await me.json()).toMatchObject({ id: "default", role: "admin", source: "auth_disabled" });
  });

  it("a Host that is not a loopback name (DNS rebinding, or a proxy exposing it) is refused 403", async () => {
    const { app } = buildTestGateway();
    const rebound = await app.fetch(new Request("http://evil.example:2026/api/whoami"));
    expect(rebound.status).toBe(403);
    expect(await detail(rebound)).toMatch(/configure gateway.auth/);
    for (const host of ["http://127.0.0.1:2026", "http://[::1]:2026", "http://app.localhost:2026"]) {
      expect((await app.fetch(new Request(`${host}/api/whoami`))).status, host).toBe(200);
    }
  });

  it("assertAuthSafeToServe refuses a non-loopback address with auth disabled, and allows it with auth configured", () => {
    const disabled = parseGatewayConfig({});
    for (const host of ["127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"]) expect(() => assertAuthSafeToServe(disabled, host), host).not.toThrow();
    for (const host of ["0.0.0.0", "::", "192.168.1.10", "example.com"]) {
      let caught: unknown;
      try {
        assertAuthSafeToServe(disabled, host);
      } catch (error) {
        caught = error;
      }
      expect(caught, host).toBeInstanceOf(DeerflowError);
      expect((caught as DeerflowError).code).toBe("auth_required_off_loopback");
      expect((caught as DeerflowError).message).toMatch(/gateway\.auth\.mode/);
    }
    const withKeys = parseGatewayConfig({ auth: { mode: "api_key", api_keys: [{ key_env: "K", user_id: "ops" }] } });
    expect(() => assertAuthSafeToServe(withKeys, "0.0.0.0")).not.toThrow();
    expect(() => createAuthLayer({ config: disabled, env: mapEnv({}), listening: { host: "0.0.0.0" } })).toThrow(
      expect.objectContaining({ code: "auth_required_off_loopback" }),
    );
  });
});

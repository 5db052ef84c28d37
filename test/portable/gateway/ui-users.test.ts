import { describe, expect, it } from "vitest";
import { hashPassword } from "../../../src/gateway/auth/password.ts";
import { USER_RECORDS_KEY } from "../../../src/gateway/auth/user-store.ts";
import { acceptanceGateways, call, cookiesOf, send } from "../../fixtures/plugins/gateway-harness.ts";

/*
 * The account routes DeerFlow's web UI calls, through createGateway's own auth layer in session
 * mode with no config users: setup-status, initialize (once), register (only when enabled), the
 * UI's form-encoded login, /me with the UI's user fields, change-password ending old sessions.
 */

const JWT = { AUTH_JWT_SECRET: "jwt-secret-0123456789abcdef0123456789abcdef" };
const gatewayWith = acceptanceGateways(() => ({ env: JWT }));
const session = (registration: boolean) => ({ gateway: { auth: { mode: "session", allow_registration: registration } } });

type Cookies = Record<string, string>;
const writeHeaders = (cookies: Cookies) => ({ cookies, headers: { "X-CSRF-Token": cookies.csrf_token! } });

async function formLogin(gateway: Parameters<typeof send>[0], username: string, password: string): Promise<Response> {
  return gateway.fetch(
    new Request("http://localhost/api/v1/auth/login/local", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ password, remember_me: "true", username }),
    }),
  );
}

describe("the web UI's account routes", () => {
  it("initialize creates the first administrator once, signs it in, and answers 409 after", async () => {
    const { gateway, storage } = await gatewayWith(session(false));
    expect((await call(gateway, "GET", "/api/v1/auth/setup-status")).body).toEqual({ needs_setup: true, registration_enabled: false });
    expect((await call(gateway, "GET", "/api/v1/auth/providers")).body).toEqual({ providers: [] });

    const first = await send(gateway, "POST", "/api/v1/auth/initialize", { body: { email: "Admin@Example.com", password: "correct-horse-9" } });
    expect(first.status).toBe(201);
    const admin = (await first.json()) as Record<string, unknown>;
    expect(admin).toMatchObject({ email: "Admin@Example.com", system_role: "admin", needs_setup: false, oauth_provider: null });
    const cookies = cookiesOf(first);
    expect(cookies.access_token).toBeTruthy();
    expect(cookies.csrf_token).toBeTruthy();
    const me = await call(gateway, "GET", "/api/v1/auth/me", { cookies });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: admin.id, email: "Admin@Example.com", system_role: "admin", needs_setup: false, oauth_provider: null, auth_source: "session" });

    // The record keeps a hash, never the password.
    const record = JSON.stringify(await storage.getItem(USER_RECORDS_KEY));
    expect(record).toContain("pbkdf2-sha256$");
    expect(record).not.toContain("correct-horse-9");

    const again = await call(gateway, "POST", "/api/v1/auth/initialize", { body: { email: "other@example.com", password: "another-pass-9" } });
    expect(again.status).toBe(409);
    expect(again.body.detail.code).toBe("system_already_initialized");
    expect((await call(gateway, "GET", "/api/v1/auth/setup-status")).body.needs_setup).toBe(false);
  });

  it("two initializations at once create one administrator", async () => {
    const { gateway } = await gatewayWith(session(false));
    const results = await Promise.all(
      ["a@example.com", "b@example.com"].map((email) => call(gateway, "POST", "/api/v1/auth/initialize", { body: { email, password: "correct-horse-9" } })),
    );
    expect(results.map((result) => result.status).sort()).toEqual([201, 409]);
  });

  it("a config admin means no setup: initialize is 409 at once", async () => {
    const { gateway } = await gatewayWith({
      gateway: { auth: { mode: "session", users: [{ id: "boss", role: "admin", password_hash: await hashPassword("pw-boss-secret", { iterations: 1_000 }) }] } },
    });
    expect((await call(gateway, "GET", "/api/v1/auth/setup-status")).body).toEqual({ needs_setup: false, registration_enabled: false });
    expect((await call(gateway, "POST", "/api/v1/auth/initialize", { body: { email: "x@example.com", password: "correct-horse-9" } })).status).toBe(409);
    // A config user's email defaults to a non-routable address the UI's schema accepts.
    const login = await formLogin(gateway, "boss", "pw-boss-secret");
    expect(login.status).toBe(200);
    const me = await call(gateway, "GET", "/api/v1/auth/me", { cookies: cookiesOf(login) });
    expect(me.body).toMatchObject({ id: "boss", email: "boss@localhost.localdomain", system_role: "admin" });
    // A config user's password lives in config.yaml.
    const change = await call(gateway, "POST", "/api/v1/auth/change-password", { ...writeHeaders(cookiesOf(login)), body: { current_password: "pw-boss-secret", new_password: "new-password-9" } });
    expect(change.status).toBe(409);
    expect(change.body.detail).toContain("config.yaml");
  });

  it("register is 403 while gateway.auth.allow_registration is off", async () => {
    const { gateway } = await gatewayWith(session(false));
    const refused = await call(gateway, "POST", "/api/v1/auth/register", { body: { email: "u@example.com", password: "correct-horse-9" } });
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toContain("gateway.auth.allow_registration");
  });

  it("register creates a user (unique email, any case), who logs in with the UI's form body", async () => {
    const { gateway } = await gatewayWith(session(true));
    expect((await call(gateway, "GET", "/api/v1/auth/setup-status")).body.registration_enabled).toBe(true);
    const created = await send(gateway, "POST", "/api/v1/auth/register", { body: { email: "user@example.com", password: "very-strong-password-123" } });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ email: "user@example.com", system_role: "user" });
    expect(cookiesOf(created).csrf_token).toBeTruthy();

    const duplicate = await call(gateway, "POST", "/api/v1/auth/register", { body: { email: "USER@example.com", password: "very-strong-password-123" } });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.detail.code).toBe("email_already_exists");

    const wrong = await formLogin(gateway, "user@example.com", "not-the-password");
    expect(wrong.status).toBe(401);
    const login = await formLogin(gateway, "user@example.com", "very-strong-password-123");
    expect(login.status).toBe(200);
    const me = await call(gateway, "GET", "/api/v1/auth/me", { cookies: cookiesOf(login) });
    expect(me.body).toMatchObject({ email: "user@example.com", system_role: "user", needs_setup: false, oauth_provider: null });
  });

  it("bad bodies are 422 naming the field", async () => {
    const { gateway } = await gatewayWith(session(true));
    const badEmail = await call(gateway, "POST", "/api/v1/auth/register", { body: { email: "not-an-email", password: "very-strong-password-123" } });
    expect(badEmail.status).toBe(422);
    expect(badEmail.body.detail).toMatch(/^Invalid request body: email: /);
    const short = await call(gateway, "POST", "/api/v1/auth/initialize", { body: { email: "a@example.com", password: "short" } });
    expect(short.status).toBe(422);
    expect(short.body.detail).toContain("password: the password needs at least 8 characters");
    const extra = await call(gateway, "POST", "/api/v1/auth/register", { body: { email: "a@example.com", password: "very-strong-password-123", role: "admin" } });
    expect(extra.status).toBe(422);
    expect(extra.body.detail).toContain("role: unknown field");
  });

  it("change-password ends every earlier session: the old cookie is 401, the new one works, the new password logs in", async () => {
    const { gateway } = await gatewayWith(session(true));
    const created = await send(gateway, "POST", "/api/v1/auth/register", { body: { email: "c@example.com", password: "first-password-1" } });
    const old = cookiesOf(created);
    const other = cookiesOf(await formLogin(gateway, "c@example.com", "first-password-1"));

    const wrong = await call(gateway, "POST", "/api/v1/auth/change-password", { ...writeHeaders(old), body: { current_password: "nope-nope", new_password: "second-password-2" } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.detail.code).toBe("invalid_credentials");
    const noCsrf = await call(gateway, "POST", "/api/v1/auth/change-password", { cookies: old, body: { current_password: "first-password-1", new_password: "second-password-2" } });
    expect(noCsrf.status).toBe(403);

    const changed = await send(gateway, "POST", "/api/v1/auth/change-password", { ...writeHeaders(old), body: { current_password: "first-password-1", new_password: "second-password-2" } });
    expect(changed.status).toBe(200);
    const fresh = cookiesOf(changed);
    expect((await call(gateway, "GET", "/api/v1/auth/me", { cookies: old })).status).toBe(401);
    expect((await call(gateway, "GET", "/api/v1/auth/me", { cookies: other })).status).toBe(401);
    expect((await call(gateway, "GET", "/api/v1/auth/me", { cookies: fresh })).status).toBe(200);
    expect((await formLogin(gateway, "c@example.com", "first-password-1")).status).toBe(401);
    expect((await formLogin(gateway, "c@example.com", "second-password-2")).status).toBe(200);
  });

  it("with auth disabled /me is exactly the web UI's synthetic user", async () => {
    const { gateway } = await gatewayWith({});
    const me = await call(gateway, "GET", "/api/v1/auth/me");
    expect(me.body).toEqual({ id: "default", email: "default@test.local", system_role: "admin", needs_setup: false, oauth_provider: null });
    expect((await call(gateway, "GET", "/api/v1/auth/setup-status")).body).toEqual({ needs_setup: false, registration_enabled: false });
  });
});

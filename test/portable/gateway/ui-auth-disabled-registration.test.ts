import { describe, expect, it } from "vitest";
import { acceptanceGateways, call, cookiesOf, send } from "../../fixtures/plugins/gateway-harness.ts";

/*
 * DeerFlow's own real-backend browser specs run its UI against a gateway with auth disabled and
 * still register a throwaway account, then work as that account. With auth disabled and
 * gateway.auth.allow_registration, /register does that here too; without a cookie every caller is
 * still the UI's synthetic local user.
 */

const gatewayWith = acceptanceGateways(() => ({ env: {} }));
const disabled = (registration: boolean) => ({ gateway: { auth: { mode: "disabled", allow_registration: registration } } });

describe("registration while auth is disabled", () => {
  it("registers an account whose cookie names it, while a caller without one stays the local user", async () => {
    const { gateway } = await gatewayWith(disabled(true));
    const response = await send(gateway, "POST", "/api/v1/auth/register", { body: { email: "e2e@example.com", password: "very-strong-password-123" } });
    expect(response.status).toBe(201);
    const account = (await response.json()) as { id: string };
    expect(account).toMatchObject({ email: "e2e@example.com", system_role: "user" });
    const cookies = cookiesOf(response);
    expect(cookies.csrf_token).toBeTruthy();

    const me = await call(gateway, "GET", "/api/v1/auth/me", { cookies });
    expect(me.body).toMatchObject({ id: account.id, email: "e2e@example.com", auth_source: "session" });
    const anonymous = await call(gateway, "GET", "/api/v1/auth/me");
    expect(anonymous.body).toEqual({ id: "default", email: "default@test.local", system_role: "admin", needs_setup: false, oauth_provider: null });

    // The account's threads are its own: the local user does not see them.
    const thread = await call(gateway, "POST", "/api/threads", { cookies, headers: { "X-CSRF-Token": cookies.csrf_token! }, body: {} });
    expect(thread.status).toBe(200);
    expect((await call(gateway, "GET", `/api/threads/${thread.body.thread_id}`, { cookies })).status).toBe(200);
    expect((await call(gateway, "GET", `/api/threads/${thread.body.thread_id}`)).status).toBe(404);
  });

  it("stays closed unless allow_registration says otherwise, and initialize stays a session-mode route", async () => {
    const { gateway } = await gatewayWith(disabled(false));
    const refused = await call(gateway, "POST", "/api/v1/auth/register", { body: { email: "e2e@example.com", password: "very-strong-password-123" } });
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toContain("allow_registration");
    const { gateway: open } = await gatewayWith(disabled(true));
    expect((await call(open, "GET", "/api/v1/auth/setup-status")).body).toEqual({ needs_setup: false, registration_enabled: true });
    expect((await call(open, "POST", "/api/v1/auth/initialize", { body: { email: "x@example.com", password: "correct-horse-9" } })).status).toBe(404);
  });
});

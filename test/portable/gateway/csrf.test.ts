import { describe, expect, it } from "vitest";
import { BASE, USER_API_KEY, buildTestGateway, login, passwordHash, request, setCookies } from "./auth-fixtures.ts";

async function sessionGateway(corsOrigins: string[] = []) {
  return buildTestGateway({
    gateway: {
      cors_origins: corsOrigins,
      auth: { mode: "session", users: [{ id: "u1", password_hash: await passwordHash("pw-u1"), role: "user" }] },
    },
  });
}

async function detail(response: Response): Promise<unknown> {
  return ((await response.json()) as { detail: unknown }).detail;
}

const loginBody = JSON.stringify({ username: "u1", password: "pw-u1" });

describe("CSRF double submit (scenario G49)", () => {
  it("scenario G49: a logged-in browser's POST without X-CSRF-Token is 403", async () => {
    const { app } = await sessionGateway();
    const cookies = await login(app, "u1", "pw-u1");
    const response = await request(app, "/api/echo", { method: "POST", cookies, body: "{}" });
    expect(response.status).toBe(403);
    expect(await detail(response)).toMatch(/^CSRF token missing/);
  });

  it("scenario G49: a header different from the csrf_token cookie is 403 mismatch; the matching pair passes", async () => {
    const { app } = await sessionGateway();
    const cookies = await login(app, "u1", "pw-u1");
    const mismatch = await request(app, "/api/echo", { method: "POST", cookies, headers: { "X-CSRF-Token": `${cookies.csrf_token}x` }, body: "{}" });
    expect(mismatch.status).toBe(403);
    expect(await detail(mismatch)).toMatch(/^CSRF token mismatch/);
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      const bare = await request(app, "/api/echo", { method, cookies, body: "{}" });
      expect(bare.status, method).toBe(403);
    }
    const ok = await request(app, "/api/echo", { method: "POST", cookies, headers: { "X-CSRF-Token": cookies.csrf_token }, body: "{}" });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true, user: "u1" });
  });

  it("scenario G49: GET is never checked", async () => {
    const { app } = await sessionGateway();
    const { access_token } = await login(app, "u1", "pw-u1");
    const response = await request(app, "/api/whoami", { cookies: { access_token } });
    expect(response.status).toBe(200);
  });

  it("scenario G49: a login POST with a foreign Origin is 403; same origin, a configured origin, or no Origin pass", async () => {
    const { app } = await sessionGateway(["http://localhost:3000", "*"]);
    const attempt = (origin?: string) =>
      request(app, "/api/v1/auth/login/local", { method: "POST", body: loginBody, ...(origin === undefined ? {} : { headers: { origin } }) });
    const foreign = await attempt("https://evil.example");
    expect(foreign.status).toBe(403);
    expect(await detail(foreign)).toBe('Cross-site auth request denied: Origin "https://evil.example" is neither this gateway\'s own origin nor one of gateway.cors_origins.');
    expect(setCookies(foreign).size).toBe(0);
    // "*" in cors_origins never means "any page may log you in".
    expect((await attempt("http://localhost:8080")).status).toBe(403);
    expect((await attempt("http://localhost/path")).status).toBe(403);
    expect((await attempt(BASE)).status).toBe(200);
    expect((await attempt("http://localhost:80")).status).toBe(200);
    expect((await attempt("http://LOCALHOST:3000")).status).toBe(200);
    expect((await attempt()).status).toBe(200);
    const logout = await request(app, "/api/v1/auth/logout", { method: "POST", headers: { origin: "https://evil.example" } });
    expect(logout.status).toBe(403);
  });

  it("a valid CSRF pair from a foreign Origin is 403 naming why; this gateway's origin and a configured origin pass", async () => {
    const { app } = await sessionGateway(["http://localhost:3000"]);
    const cookies = await login(app, "u1", "pw-u1");
    const post = (headers: Record<string, string>) =>
      request(app, "/api/echo", { method: "POST", cookies, headers: { "X-CSRF-Token": cookies.csrf_token, ...headers }, body: "{}" });
    for (const origin of ["https://evil.example", "http://localhost:8080", "null"]) {
      const response = await post({ origin });
      expect(response.status, origin).toBe(403);
      expect(await detail(response)).toBe(
        `Cross-origin request refused: Origin ${JSON.stringify(origin)} is neither this gateway's own origin nor one of gateway.cors_origins, so a change made with this browser's session cookie from there could be forged. Add the page's origin to gateway.cors_origins if it is yours.`,
      );
    }
    for (const method of ["PUT", "PATCH", "DELETE"]) {
      const response = await request(app, "/api/echo", { method, cookies, headers: { "X-CSRF-Token": cookies.csrf_token, origin: "https://evil.example" }, body: "{}" });
      expect(response.status, method).toBe(403);
    }
    expect((await post({ origin: BASE })).status).toBe(200);
    expect((await post({ origin: "http://localhost:3000" })).status).toBe(200);
    expect((await post({})).status).toBe(200);
    // A request authenticated by a header it carries (x-api-key) cannot be forged by a page, whatever its Origin.
    const keyed = buildTestGateway({ gateway: { auth: { mode: "api_key", api_keys: [{ key_env: "USER_KEY", user_id: "u1", role: "user" }] } } });
    const withKey = await request(keyed.app, "/api/echo", { method: "POST", headers: { "x-api-key": USER_API_KEY, origin: "https://tool.example" }, body: "{}" });
    expect(withKey.status).toBe(200);
  });

  it("a valid CSRF pair with Sec-Fetch-Site: cross-site and no Origin is 403; same-origin passes", async () => {
    const { app } = await sessionGateway();
    const cookies = await login(app, "u1", "pw-u1");
    const post = (site: string) =>
      request(app, "/api/echo", { method: "POST", cookies, headers: { "X-CSRF-Token": cookies.csrf_token, "sec-fetch-site": site }, body: "{}" });
    const refused = await post("cross-site");
    expect(refused.status).toBe(403);
    expect(await detail(refused)).toMatch(/^Cross-origin request refused: the browser sent Sec-Fetch-Site: cross-site and no Origin/);
    expect((await post("same-origin")).status).toBe(200);
    expect((await post("none")).status).toBe(200);
    const login2 = await request(app, "/api/v1/auth/login/local", { method: "POST", body: loginBody, headers: { "sec-fetch-site": "cross-site" } });
    expect(login2.status).toBe(403);
  });

  it("the origin of a proxied login is rebuilt from X-Forwarded-Proto/Host", async () => {
    const { app } = await sessionGateway();
    const response = await request(app, "/api/v1/auth/login/local", {
      method: "POST",
      body: loginBody,
      headers: { origin: "https://deerflow.example", "x-forwarded-proto": "https", "x-forwarded-host": "deerflow.example" },
    });
    expect(response.status).toBe(200);
  });

  it("CSRF runs before authentication: an anonymous POST without a pair is 403, not 401", async () => {
    const { app } = await sessionGateway();
    const response = await request(app, "/api/echo", { method: "POST", body: "{}" });
    expect(response.status).toBe(403);
  });

  it("the checks classify the path Hono routes on: an encoded login path gets the login rules, an encoded slash gets none of them", async () => {
    const { app } = await sessionGateway();
    // Hono decodes %6C and routes this to the login handler, so the Origin rule must apply.
    const encodedLogin = await request(app, "/api/v1/auth/%6Cogin/local", { method: "POST", body: loginBody, headers: { origin: "https://evil.example" } });
    expect(encodedLogin.status).toBe(403);
    expect(await detail(encodedLogin)).toMatch(/^Cross-site auth request denied: Origin "https:\/\/evil.example"/);
    // %2F stays encoded for the router, so this is not the login path and needs a CSRF pair.
    const cookies = await login(app, "u1", "pw-u1");
    const notLogin = await request(app, "/api/v1/auth/login%2Flocal", { method: "POST", cookies, body: loginBody });
    expect(notLogin.status).toBe(403);
    expect(await detail(notLogin)).toMatch(/^CSRF token missing/);
  });
});

describe("auth disabled: no CSRF token, but no foreign page either (scenario G49)", () => {
  it("scenario G49: with auth disabled CSRF is skipped, but a POST with a foreign Origin is 403", async () => {
    const { app } = buildTestGateway({ gateway: { cors_origins: ["http://localhost:3000"] } });
    expect((await request(app, "/api/echo", { method: "POST", body: "{}" })).status).toBe(200);
    expect((await request(app, "/api/echo", { method: "POST", body: "{}", headers: { origin: BASE } })).status).toBe(200);
    expect((await request(app, "/api/echo", { method: "POST", body: "{}", headers: { origin: "http://localhost:3000" } })).status).toBe(200);
    for (const origin of ["https://evil.example", "http://localhost:8080", "null"]) {
      const response = await request(app, "/api/echo", { method: "DELETE", body: "{}", headers: { origin } });
      expect(response.status, origin).toBe(403);
      expect(await detail(response)).toMatch(/^Cross-origin request refused/);
    }
    // Reads stay open to the local user's tools; a page cannot read them cross-origin anyway.
    expect((await request(app, "/api/whoami", { headers: { origin: "https://evil.example" } })).status).toBe(200);
  });

  it("a browser that omits Origin but says Sec-Fetch-Site: cross-site is refused as well", async () => {
    const { app } = buildTestGateway();
    const response = await request(app, "/api/echo", { method: "POST", body: "{}", headers: { "sec-fetch-site": "cross-site" } });
    expect(response.status).toBe(403);
    expect((await request(app, "/api/echo", { method: "POST", body: "{}", headers: { "sec-fetch-site": "same-origin" } })).status).toBe(200);
  });

  it("the login route is guarded the same way", async () => {
    const { app } = buildTestGateway({ gateway: { auth: { users: [{ id: "u1", password_hash: await passwordHash("pw-u1") }] } } });
    const response = await request(app, "/api/v1/auth/login/local", { method: "POST", body: loginBody, headers: { origin: "https://evil.example" } });
    expect(response.status).toBe(403);
    expect((await request(app, "/api/v1/auth/login/local", { method: "POST", body: loginBody })).status).toBe(200);
  });
});

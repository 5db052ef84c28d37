import type { Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import * as v from "valibot";
import { randomToken } from "../auth/crypto.ts";
import { authErrorResponse } from "../auth/errors.ts";
import { ACCESS_TOKEN_COOKIE, CSRF_COOKIE, authenticatedUser } from "../auth/context.ts";
import type { SessionService } from "../auth/session-service.ts";
import { LOGIN_PATH, LOGOUT_PATH, ME_PATH, directHost, isLoopbackHostHeader, isSecureRequest } from "../auth/request.ts";
import { JsonBodyError, readJsonBody } from "../request-limits.ts";
import type { GatewayEnv } from "../types.ts";

/*
 * Sign-in for browsers: a password login that sets the HttpOnly session cookie and the JS-readable
 * CSRF cookie a UI echoes in X-CSRF-Token, sign-out, and "who am I". The CSRF middleware checks
 * the Origin of the two POSTs; these handlers only deal with credentials and cookies. A login is
 * throttled (429 with Retry-After, see login-throttle.ts) and a logout ends the session server-side.
 */

export interface AuthRouteDeps {
  readonly sessions: SessionService;
  /** False when gateway.auth.users is empty: a login can then never succeed, and says why. */
  readonly sessionsConfigured: boolean;
}

const LoginBodySchema = v.strictObject(
  {
    username: v.pipe(v.string("username must be a string"), v.minLength(1, "username is empty"), v.maxLength(256, "username is longer than 256 characters")),
    password: v.pipe(v.string("password must be a string"), v.minLength(1, "password is empty"), v.maxLength(1024, "password is longer than 1024 characters")),
    /** False: the cookies end with the browser session instead of lasting token_expiry_days. */
    remember_me: v.optional(v.boolean("remember_me must be true or false"), true),
  },
  (issue) => (issue.expected === "never" ? `unknown field ${String(issue.received)}; a login takes username, password and remember_me` : "the body must be an object { username, password }"),
);

// OAuth2 password-form clients send these next to the credentials; they carry nothing we use.
const IGNORED_FORM_FIELDS = new Set(["grant_type", "scope", "client_id", "client_secret"]);

async function readLoginBody(c: Context<GatewayEnv>): Promise<unknown> {
  const type = c.req.header("content-type") ?? "";
  if (type.includes("application/x-www-form-urlencoded") || type.includes("multipart/form-data")) {
    const form = await c.req.parseBody();
    const body: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(form)) {
      if (IGNORED_FORM_FIELDS.has(key)) continue;
      body[key] = key === "remember_me" && typeof value === "string" ? value === "true" || value === "1" || value === "on" : value;
    }
    return body;
  }
  return readJsonBody(c);
}

interface CookiePolicy {
  readonly secure: boolean;
  /** Undefined: a session cookie, gone when the browser closes. */
  readonly maxAge: number | undefined;
}

/**
 * Persistent cookies only where they cannot be sniffed: over HTTPS, or on this machine. A plain-HTTP
 * public address gets session cookies, so a stolen laptop's browser does not hold a week of access.
 */
function cookiePolicy(c: Context<GatewayEnv>, remember: boolean, lifetimeSeconds: number): CookiePolicy {
  const secure = isSecureRequest(c.req.raw);
  const persistent = remember && (secure || isLoopbackHostHeader(directHost(c.req.raw)));
  return { secure, maxAge: persistent ? lifetimeSeconds : undefined };
}

export function registerAuthRoutes(app: Hono<GatewayEnv>, deps: AuthRouteDeps): void {
  const { sessions } = deps;

  app.post(LOGIN_PATH, async (c) => {
    if (!deps.sessionsConfigured) {
      return c.json({ detail: "Password sign-in is not configured on this gateway: add users under gateway.auth.users, or use an API key." }, 404);
    }
    let raw: unknown;
    try {
      raw = await readLoginBody(c);
    } catch (error) {
      if (error instanceof JsonBodyError && error.code === "json_too_deep") return c.json({ detail: error.message, code: error.code }, 422);
      return c.json({ detail: "The login body is not valid JSON or form data; send { username, password }." }, 422);
    }
    const parsed = v.safeParse(LoginBodySchema, raw);
    if (!parsed.success) return c.json({ detail: parsed.issues[0].message }, 422);
    const { username, password, remember_me } = parsed.output;

    const decision = await sessions.beginLogin(username, c.req.raw);
    if (!decision.allowed) {
      const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
      c.header("Retry-After", String(seconds));
      const from = decision.scope === "address" ? "from this address" : "for this account from this address";
      return authErrorResponse(c, {
        status: 429,
        code: "too_many_attempts",
        message: `Too many failed sign-ins ${from}; try again in ${seconds} second(s), after ${new Date(decision.retryAtMs).toISOString()}.`,
      });
    }
    const user = await sessions.checkPassword(username, password);
    if (user !== null) await decision.attempt.succeeded();
    if (user === null) {
      // One message for an unknown user and a wrong password, so accounts cannot be enumerated.
      return authErrorResponse(c, { status: 401, code: "invalid_credentials", message: "Incorrect username or password." });
    }

    const token = await sessions.issueToken(user);
    const policy = cookiePolicy(c, remember_me, sessions.tokenLifetimeSeconds);
    const lifetime = policy.maxAge === undefined ? {} : { maxAge: policy.maxAge };
    setCookie(c, ACCESS_TOKEN_COOKIE, token, { path: "/", httpOnly: true, secure: policy.secure, sameSite: "Lax", ...lifetime });
    // Same lifetime as the session, or a browser could keep a session it can no longer use for writes.
    setCookie(c, CSRF_COOKIE, randomToken(32), { path: "/", httpOnly: false, secure: policy.secure, sameSite: "Strict", ...lifetime });
    return c.json({ expires_in: sessions.tokenLifetimeSeconds, needs_setup: false, user: { id: user.id, system_role: user.role } });
  });

  app.post(LOGOUT_PATH, async (c) => {
    // Ended in storage before the answer: the old cookie is refused from now on, wherever it is kept.
    const token = getCookie(c, ACCESS_TOKEN_COOKIE);
    if (token !== undefined && token !== "") await sessions.endSession(token);
    const secure = isSecureRequest(c.req.raw);
    deleteCookie(c, ACCESS_TOKEN_COOKIE, { path: "/", secure, httpOnly: true, sameSite: "Lax" });
    deleteCookie(c, CSRF_COOKIE, { path: "/", secure, sameSite: "Strict" });
    return c.json({ message: "Successfully logged out" });
  });

  app.get(ME_PATH, (c) => {
    const user = authenticatedUser(c);
    return c.json({
      id: user.id,
      system_role: user.systemRole,
      auth_source: user.authSource,
      is_internal: user.isInternal,
      permissions: [...user.permissions],
    });
  });
}

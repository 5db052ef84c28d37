import type { Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import * as v from "valibot";
import { DEFAULT_USER_ID } from "../../engine/run-identity.ts";
import { randomToken } from "../auth/crypto.ts";
import { authErrorResponse } from "../auth/errors.ts";
import { ACCESS_TOKEN_COOKIE, CSRF_COOKIE, authenticatedUser } from "../auth/context.ts";
import type { LoginDecision } from "../auth/login-throttle.ts";
import { hashPassword, verifyPassword } from "../auth/password.ts";
import type { SessionService } from "../auth/session-service.ts";
import { SYNTHETIC_EMAIL_DOMAIN, type PasswordAccount, type UserStoreRefusal } from "../auth/user-store.ts";
import {
  CHANGE_PASSWORD_PATH,
  INITIALIZE_PATH,
  LOGIN_PATH,
  LOGOUT_PATH,
  ME_PATH,
  PROVIDERS_PATH,
  REGISTER_PATH,
  SETUP_STATUS_PATH,
  directHost,
  isLoopbackHostHeader,
  isSecureRequest,
} from "../auth/request.ts";
import { httpError, parseJsonObjectBody } from "../errors.ts";
import { JsonBodyError, readJsonBody } from "../request-limits.ts";
import type { GatewayEnv, GatewayUser } from "../types.ts";

/*
 * Sign-in for browsers: a password login that sets the HttpOnly session cookie and the JS-readable
 * CSRF cookie a UI echoes in X-CSRF-Token, sign-out, and "who am I"; and the account routes
 * DeerFlow's web UI calls: setup-status, the first administrator (initialize), self-registration
 * (when gateway.auth.allow_registration), change-password, and the sign-in providers. The CSRF
 * middleware checks the Origin of the unauthenticated POSTs; these handlers only deal with
 * credentials and cookies. A login (and a change-password's current password) is throttled (429
 * with Retry-After, see login-throttle.ts) and a logout ends the session server-side.
 */

export interface AuthRouteDeps {
  readonly sessions: SessionService;
  /** Auth mode disabled: /me answers the web UI's synthetic local user. */
  readonly disabled: boolean;
}

/** Who /me says the caller is while auth is disabled: exactly the web UI's own synthetic user. */
export const AUTH_DISABLED_ME: Readonly<Record<string, unknown>> = Object.freeze({
  id: DEFAULT_USER_ID,
  email: "default@test.local",
  system_role: "admin",
  needs_setup: false,
  oauth_provider: null,
});

const email = v.pipe(
  v.string("email must be a string"),
  v.trim(),
  v.maxLength(254, "email is longer than 254 characters"),
  v.email((issue) => `expected an email address, got ${JSON.stringify(String(issue.input).slice(0, 80))}`),
);
/** At least 8 characters, as upstream; at most what a login accepts, so every password set can sign in. */
const newPassword = v.pipe(
  v.string("the password must be a string"),
  v.minLength(8, "the password needs at least 8 characters"),
  v.maxLength(1024, "the password is longer than 1024 characters"),
);
const rememberMe = v.optional(v.boolean("remember_me must be true or false"), true);

const NewAccountSchema = v.strictObject({ email, password: newPassword, remember_me: rememberMe });

const ChangePasswordSchema = v.strictObject({
  current_password: v.pipe(v.string("current_password must be a string"), v.minLength(1, "current_password is empty"), v.maxLength(1024, "current_password is longer than 1024 characters")),
  new_password: newPassword,
  /** The web UI's setup page sends it to replace the account's email at the same time. */
  new_email: v.optional(email),
  remember_me: v.optional(v.boolean("remember_me must be true or false")),
});

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

/** Signs `account` in on this response: the session cookie and a fresh CSRF cookie. */
async function startSession(c: Context<GatewayEnv>, sessions: SessionService, account: PasswordAccount, remember: boolean): Promise<void> {
  const token = await sessions.issueToken(account);
  const policy = cookiePolicy(c, remember, sessions.tokenLifetimeSeconds);
  const lifetime = policy.maxAge === undefined ? {} : { maxAge: policy.maxAge };
  setCookie(c, ACCESS_TOKEN_COOKIE, token, { path: "/", httpOnly: true, secure: policy.secure, sameSite: "Lax", ...lifetime });
  // Same lifetime as the session, or a browser could keep a session it can no longer use for writes.
  setCookie(c, CSRF_COOKIE, randomToken(32), { path: "/", httpOnly: false, secure: policy.secure, sameSite: "Strict", ...lifetime });
}

/** The web UI's user: id, email, role, no pending setup, no OAuth provider (none is served). */
function userView(account: Pick<PasswordAccount, "id" | "email" | "role">): Record<string, unknown> {
  return { id: account.id, email: account.email, system_role: account.role, needs_setup: false, oauth_provider: null };
}

function tooManyAttempts(c: Context<GatewayEnv>, decision: Extract<LoginDecision, { allowed: false }>, what: string): Response {
  const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
  c.header("Retry-After", String(seconds));
  const from = decision.scope === "address" ? "from this address" : "for this account from this address";
  return authErrorResponse(c, {
    status: 429,
    code: "too_many_attempts",
    message: `Too many failed ${what} ${from}; try again in ${seconds} second(s), after ${new Date(decision.retryAtMs).toISOString()}.`,
  });
}

function refusalResponse(c: Context<GatewayEnv>, refusal: UserStoreRefusal): Response {
  switch (refusal) {
    case "admin_exists":
      return authErrorResponse(c, { status: 409, code: "system_already_initialized", message: "This gateway already has an administrator; sign in instead." });
    case "email_taken":
      return authErrorResponse(c, { status: 409, code: "email_already_exists", message: "An account with this email already exists; sign in, or choose another email." });
    case "password_changed":
      return c.json({ detail: "The password was changed by another request in the meantime; sign in again with the new password." }, 409);
    case "not_found":
      return c.json({ detail: "This account no longer exists; sign in again." }, 404);
  }
}

/** Why an account of `user` cannot change its password here, or null when it can try. */
function passwordChangeRefusal(user: GatewayUser, account: PasswordAccount | undefined): string | null {
  if (user.authSource === "auth_disabled") return "Authentication is disabled on this gateway, so there is no password to change.";
  if (user.authSource !== "session") return "Only a user signed in with a password can change it; an API key or internal caller has none.";
  if (account?.source === "config") {
    return `User ${user.id} is declared in config.yaml (gateway.auth.users): set a new password_hash there (deerflow-edge hash-password) and raise its token_version to end its sessions.`;
  }
  return null;
}

export function registerAuthRoutes(app: Hono<GatewayEnv>, deps: AuthRouteDeps): void {
  const { sessions } = deps;

  app.post(LOGIN_PATH, async (c) => {
    if (!sessions.passwordLoginAvailable) {
      return c.json({ detail: "Password sign-in is not configured on this gateway: add users under gateway.auth.users, set gateway.auth.mode to session, or use an API key." }, 404);
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
    if (!decision.allowed) return tooManyAttempts(c, decision, "sign-ins");
    const user = await sessions.checkPassword(username, password);
    if (user !== null) await decision.attempt.succeeded();
    if (user === null) {
      // One message for an unknown user and a wrong password, so accounts cannot be enumerated.
      return authErrorResponse(c, { status: 401, code: "invalid_credentials", message: "Incorrect username or password." });
    }

    await startSession(c, sessions, user, remember_me);
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

  app.get(ME_PATH, async (c) => {
    const user = authenticatedUser(c);
    if (deps.disabled && user.authSource === "auth_disabled") return c.json(AUTH_DISABLED_ME);
    const account = user.authSource === "session" ? await sessions.accounts.findById(user.id) : undefined;
    return c.json({
      ...userView({ id: user.id, email: account?.email ?? `${user.id}@${SYNTHETIC_EMAIL_DOMAIN}`, role: user.systemRole === "admin" ? "admin" : "user" }),
      // The gateway's own view: internal callers keep their role here.
      system_role: user.systemRole,
      auth_source: user.authSource,
      is_internal: user.isInternal,
      permissions: [...user.permissions],
    });
  });

  app.get(SETUP_STATUS_PATH, async (c) => {
    const needsSetup = sessions.accountsCanBeCreated && !(await sessions.accounts.hasAdministrator());
    return c.json({ needs_setup: needsSetup, registration_enabled: sessions.registrationEnabled });
  });

  // Local passwords only: no OAuth/OIDC provider is configurable on this gateway yet.
  app.get(PROVIDERS_PATH, (c) => c.json({ providers: [] }));

  app.post(INITIALIZE_PATH, async (c) => {
    if (!sessions.accountsCanBeCreated) {
      return c.json({ detail: "Accounts are created through the API only in gateway.auth.mode session (with storage); declare users under gateway.auth.users instead." }, 404);
    }
    // Refused before the body is even hashed: the common case once the gateway is set up.
    if (await sessions.accounts.hasAdministrator()) return refusalResponse(c, "admin_exists");
    const body = await parseJsonObjectBody(c, NewAccountSchema);
    const created = await sessions.accounts.create({ email: body.email, passwordHash: await hashPassword(body.password), role: "admin", firstAdministrator: true });
    if ("refusal" in created) return refusalResponse(c, created.refusal);
    await startSession(c, sessions, created.account, body.remember_me);
    return c.json(userView(created.account), 201);
  });

  app.post(REGISTER_PATH, async (c) => {
    if (!sessions.registrationEnabled) {
      return c.json(
        {
          detail: sessions.accountsCanBeCreated
            ? "Self-registration is disabled on this gateway; an administrator can enable it with gateway.auth.allow_registration: true."
            : "Self-registration needs gateway.auth.allow_registration: true (in gateway.auth.mode session, or disabled).",
        },
        403,
      );
    }
    const body = await parseJsonObjectBody(c, NewAccountSchema);
    const created = await sessions.accounts.create({ email: body.email, passwordHash: await hashPassword(body.password), role: "user" });
    if ("refusal" in created) return refusalResponse(c, created.refusal);
    await startSession(c, sessions, created.account, body.remember_me);
    return c.json(userView(created.account), 201);
  });

  app.post(CHANGE_PASSWORD_PATH, async (c) => {
    const user = authenticatedUser(c);
    const account = user.authSource === "session" ? await sessions.accounts.findById(user.id) : undefined;
    const refusal = passwordChangeRefusal(user, account);
    if (refusal !== null) throw httpError(user.authSource === "session" ? 409 : 400, refusal);
    if (account === undefined) return refusalResponse(c, "not_found");
    const body = await parseJsonObjectBody(c, ChangePasswordSchema);
    // Guessing the current password through this route is throttled like a login.
    const decision = await sessions.beginLogin(account.id, c.req.raw);
    if (!decision.allowed) return tooManyAttempts(c, decision, "password checks");
    if (!(await verifyPassword(body.current_password, account.password_hash))) {
      return authErrorResponse(c, { status: 400, code: "invalid_credentials", message: "The current password is incorrect." });
    }
    await decision.attempt.succeeded();
    const changed = await sessions.accounts.changePassword(account.id, {
      expectedHash: account.password_hash,
      passwordHash: await hashPassword(body.new_password),
      ...(body.new_email === undefined ? {} : { email: body.new_email }),
    });
    if ("refusal" in changed) return refusalResponse(c, changed.refusal);
    // Every earlier session (this browser's old cookie too) is refused from now on; this one goes on.
    await startSession(c, sessions, changed.account, body.remember_me ?? true);
    return c.json({ message: "Password changed successfully" });
  });
}

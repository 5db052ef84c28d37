import type { Context, Hono, MiddlewareHandler } from "hono";
import { parse as parseCookies } from "hono/utils/cookie";
import type { AuthorizationConfig } from "../../authz/config.ts";
import type { AuthorizationProvider } from "../../authz/provider.ts";
import { systemClock } from "../../core/clock.ts";
import { DeerflowError } from "../../core/errors.ts";
import { bytesToHex, sha256Bytes } from "../../core/hex.ts";
import { SCOPE_ID_MAX, toIdAlphabet } from "../../core/ids.ts";
import { DEFAULT_USER_ID } from "../../engine/run-identity.ts";
import type { KeyValue } from "../../ports/key-value.ts";
import type { VersionedKeyValue } from "../../ports/versioned-key-value.ts";
import { versionedOver } from "../../storage/versioned.ts";
import type { Clock, Env } from "../../ports/runtime-ports.ts";
import { registerAuthRoutes } from "../routes/auth.ts";
import { USER_ID_PATTERN, type AuthMode, type GatewayConfig } from "../../config/gateway.ts";
import type { GatewayEnv, GatewayUser, RoutePermission } from "../types.ts";
import { createGatewayAuthorizer, type GatewayAuthorizer, type GatewayIdentity } from "./authorizer.ts";
import { constantTimeEqual, randomToken, secretsEqual } from "./crypto.ts";
import {
  ACCESS_TOKEN_COOKIE,
  API_KEY_HEADER,
  CSRF_COOKIE,
  CSRF_HEADER,
  INTERNAL_OWNER_HEADER,
  INTERNAL_TOKEN_HEADER,
  NOT_AUTHENTICATED,
} from "./context.ts";
import { clientAddress, normalizeIpAddresses } from "./client-address.ts";
import { authErrorResponse, forbiddenResponse, type AuthFailure } from "./errors.ts";
import { signSessionToken, verifySessionToken } from "./jwt.ts";
import { createLoginThrottle } from "./login-throttle.ts";
import { sharedSecret } from "./jwt.ts";
import type { SessionService } from "./session-service.ts";
import { createSessionRevocations } from "./revocations.ts";
import { createUserStore, type PasswordAccount } from "./user-store.ts";
import { DEFAULT_PASSWORD_ITERATIONS, isUsablePasswordHash, verifyPassword } from "./password.ts";
import {
  UNSAFE_METHODS,
  directHost,
  isAuthPostPath,
  isCsrfExemptPath,
  isLoopbackAddress,
  isLoopbackHostHeader,
  isPublicPath,
  normalizeOrigin,
  normalizeOrigins,
  requestOrigin,
} from "./request.ts";

/** Who every caller is while authentication is disabled (a loopback-only local install). */
export const AUTH_DISABLED_USER_ID = DEFAULT_USER_ID;
/** Where a generated JWT secret is kept, so sessions survive a restart. */
export const JWT_SECRET_STORAGE_KEY = "gateway:auth:jwt-secret";

const MIN_SECRET_LENGTH = 32;
const MIN_API_KEY_LENGTH = 16;
/** How much of a caller-chosen Origin a refusal repeats. */
const MAX_ECHOED_ORIGIN = 200;

export interface AuthLayerOptions {
  /** The `gateway:` section (auth, cors_origins). */
  readonly config: GatewayConfig;
  /** The `authorization:` section; route and model permissions come from its provider. */
  readonly authorization?: AuthorizationConfig | null;
  /** A custom AuthorizationProvider object; replaces the configured one. */
  readonly authorizationProvider?: AuthorizationProvider;
  readonly env: Env;
  readonly clock?: Clock;
  /**
   * Keeps the generated JWT secret, ended sessions and login throttling across restarts; without it
   * they live as long as the process.
   */
  readonly storage?: KeyValue;
  /**
   * Compare-and-set over `storage`'s keys, shared by every worker of a deployment: the generated
   * JWT secret is written once by a create-if-absent write and read by all, and the login counters
   * count every worker's failures. Default: the in-process one over `storage`.
   */
  readonly versioned?: VersionedKeyValue;
  /**
   * Several gateway processes serve this deployment and no shared `versioned` store was given: a
   * generated secret would differ per process, so one from `jwt_secret_env` is required.
   */
  readonly severalProcesses?: boolean;
  /** Where the server will listen; given, an unsafe combination (auth disabled off loopback) throws here. */
  readonly listening?: { readonly host: string };
}

export interface AuthLayer {
  readonly mode: AuthMode;
  /** Stamps `c.get("user")` (with its permissions) on every non-public path, or answers 401. */
  readonly authenticate: MiddlewareHandler<GatewayEnv>;
  /** Double-submit CSRF and Origin checks for unsafe methods; install it before `authenticate`. */
  readonly csrf: MiddlewareHandler<GatewayEnv>;
  /** Adds the /api/v1/auth routes: login, logout, me, setup-status, providers, initialize, register, change-password. */
  register(app: Hono<GatewayEnv>): void;
  /** The caller of `request`, by the same rules as `authenticate`, or null when it would get a 401. */
  resolveUser(request: Request): Promise<GatewayUser | null>;
  readonly authorizer: GatewayAuthorizer;
  /** Headers that make an in-process request act for `ownerUserId` (scheduler, channels). */
  internalHeaders(ownerUserId?: string): Record<string, string>;
}

/**
 * Refuses to serve without authentication anywhere but a loopback address: with auth disabled
 * every caller is an administrator of the sandbox, so only this machine may be able to connect.
 */
export function assertAuthSafeToServe(config: Pick<GatewayConfig, "auth">, host: string): void {
  if (config.auth.mode === "disabled" && !isLoopbackAddress(host)) {
    throw new DeerflowError(
      "auth_required_off_loopback",
      `Refusing to listen on ${host} with authentication disabled: anyone who can reach it would control the sandbox. ` +
        "Listen on 127.0.0.1 (the default), or set gateway.auth.mode to api_key (with api_keys: [{ key_env, user_id }]) or session (with users: [{ id, password_hash }]).",
    );
  }
}

/**
 * A user id safe as a storage key: ids already in the alphabet pass unchanged; any other gets its
 * unsafe characters replaced and a digest of the original appended, so two owners never share one.
 */
export async function makeSafeUserId(raw: string): Promise<string> {
  if (USER_ID_PATTERN.test(raw)) return raw;
  const digest = bytesToHex(await sha256Bytes(raw)).slice(0, 16);
  return `${toIdAlphabet(raw, "-").slice(0, SCOPE_ID_MAX - digest.length - 1)}-${digest}`;
}

type Resolution = { readonly identity: GatewayIdentity } | { readonly failure: AuthFailure };

function freezeUser(identity: GatewayIdentity, permissions: ReadonlySet<RoutePermission>): GatewayUser {
  return Object.freeze({ ...identity, permissions });
}

export function createAuthLayer(options: AuthLayerOptions): AuthLayer {
  const { config, env } = options;
  const auth = config.auth;
  const clock = options.clock ?? systemClock;
  if (options.listening !== undefined) assertAuthSafeToServe(config, options.listening.host);
  const disabled = auth.mode === "disabled";
  const corsOrigins = normalizeOrigins(config.cors_origins);
  const trustedProxies = normalizeIpAddresses(config.trusted_proxies);
  const revocations = createSessionRevocations({ clock, ...(options.storage === undefined ? {} : { storage: options.storage }) });
  const throttle = createLoginThrottle({
    clock,
    ...(options.storage === undefined ? {} : { storage: options.storage }),
    ...(options.versioned === undefined ? {} : { versioned: options.versioned }),
  });
  const authorizer = createGatewayAuthorizer({
    config: options.authorization ?? null,
    ...(options.authorizationProvider === undefined ? {} : { provider: options.authorizationProvider }),
  });

  const apiKeys = auth.api_keys.map((entry, index) => {
    const value = env.get(entry.key_env)?.trim();
    if (value === undefined || value === "") {
      throw new DeerflowError(
        "auth_api_key_missing",
        `gateway.auth.api_keys[${index}].key_env names ${entry.key_env}, which is not set; set ${entry.key_env} to the key (at least ${MIN_API_KEY_LENGTH} characters) or remove the entry.`,
      );
    }
    if (value.length < MIN_API_KEY_LENGTH) {
      throw new DeerflowError(
        "auth_api_key_too_short",
        `The API key in ${entry.key_env} has ${value.length} characters; use at least ${MIN_API_KEY_LENGTH} random characters.`,
      );
    }
    return { ...entry, value };
  });

  auth.users.forEach((user, index) => {
    if (!isUsablePasswordHash(user.password_hash)) {
      throw new DeerflowError(
        "auth_password_hash_invalid",
        `gateway.auth.users[${index}].password_hash cannot be checked (iterations out of range or salt/hash too short); make a new one with hashPassword().`,
      );
    }
  });
  // Unknown usernames are checked against this, so a failed login costs the same either way.
  const decoyHash = `pbkdf2-sha256$${auth.users[0]?.password_hash.split("$")[1] ?? DEFAULT_PASSWORD_ITERATIONS}$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=`;

  const envSecret = env.get(auth.jwt_secret_env)?.trim();
  if (envSecret !== undefined && envSecret !== "" && envSecret.length < MIN_SECRET_LENGTH) {
    throw new DeerflowError(
      "auth_jwt_secret_too_short",
      `The JWT secret in ${auth.jwt_secret_env} has ${envSecret.length} characters; use at least ${MIN_SECRET_LENGTH} random characters, or unset it to let the gateway generate one.`,
    );
  }
  const hasEnvSecret = envSecret !== undefined && envSecret !== "";
  if (auth.mode === "session" && !hasEnvSecret && options.severalProcesses === true && options.versioned === undefined) {
    throw new DeerflowError(
      "auth_jwt_secret_not_shared",
      `Several gateway processes serve this deployment, but their store cannot compare-and-set, so each would generate its own JWT secret and a session from one would fail on the others. ` +
        `Set ${auth.jwt_secret_env} to one secret of at least ${MIN_SECRET_LENGTH} random characters for every worker, or use a storage driver that coordinates workers (postgres).`,
    );
  }
  const versioned = options.versioned ?? (options.storage === undefined ? undefined : versionedOver(options.storage));
  // Accounts created through the API exist in session mode only, and only with a store to keep them.
  const accountsCanBeCreated = auth.mode === "session" && versioned !== undefined;
  if (auth.mode === "session" && auth.users.length === 0 && !accountsCanBeCreated) {
    throw new DeerflowError(
      "auth_session_users_missing",
      "gateway.auth.mode is session, but gateway.auth.users is empty and no storage keeps accounts created by /api/v1/auth/initialize; declare a user ({ id, password_hash, role: admin }) or give the gateway storage.",
    );
  }
  // Disabled mode keeps its one local user for requests without a session, but with
  // allow_registration a client may still register accounts (DeerFlow's own browser specs do, in
  // its auth-disabled mode), whose session cookies then name them, as a valid cookie always does.
  const registrationEnabled = auth.allow_registration && versioned !== undefined && (auth.mode === "session" || disabled);
  const accounts = createUserStore({ configUsers: auth.users, versioned: accountsCanBeCreated || registrationEnabled ? versioned : undefined, clock });
  let jwtSecret: Promise<Uint8Array> | undefined;
  const secret = (): Promise<Uint8Array> => {
    jwtSecret ??= (async () => {
      if (hasEnvSecret) return new TextEncoder().encode(envSecret);
      if (versioned === undefined) return new TextEncoder().encode(randomToken(48));
      return new TextEncoder().encode(await sharedSecret(versioned, JWT_SECRET_STORAGE_KEY, MIN_SECRET_LENGTH, () => randomToken(48)));
    })();
    // A failed storage read must not poison every later login.
    jwtSecret.catch(() => {
      jwtSecret = undefined;
    });
    return jwtSecret;
  };

  // A new password or token_version changes it, so every session issued before is refused.
  const sessionVersion = async (user: PasswordAccount): Promise<string> =>
    bytesToHex(await sha256Bytes(`${user.token_version}:${user.password_hash}`)).slice(0, 16);

  const envInternal = env.get(auth.internal_token_env)?.trim();
  if (envInternal !== undefined && envInternal !== "" && envInternal.length < MIN_SECRET_LENGTH) {
    throw new DeerflowError(
      "auth_internal_token_too_short",
      `The internal token in ${auth.internal_token_env} has ${envInternal.length} characters; use at least ${MIN_SECRET_LENGTH} random characters, or unset it.`,
    );
  }
  // Unset: a per-process token, so only in-process callers (scheduler, channels) can hold it.
  const internalToken = envInternal !== undefined && envInternal !== "" ? envInternal : randomToken(32);

  const disabledIdentity: GatewayIdentity = Object.freeze({
    id: AUTH_DISABLED_USER_ID,
    systemRole: "admin",
    authSource: "auth_disabled",
    isInternal: false,
  });

  async function fromSessionCookie(token: string): Promise<Resolution> {
    const claims = await verifySessionToken(await secret(), token, clock.now());
    if (claims === "token_expired") return { failure: { status: 401, code: "token_expired", message: "Your session has expired; sign in again." } };
    if (claims === "token_invalid") return { failure: { status: 401, code: "token_invalid", message: "The session token is not valid; sign in again." } };
    const user = await accounts.findById(claims.sub);
    if (user === undefined) return { failure: { status: 401, code: "user_not_found", message: "The user of this session no longer exists; sign in again." } };
    if (!constantTimeEqual(claims.ver, await sessionVersion(user))) {
      return { failure: { status: 401, code: "token_invalid", message: "This session was revoked (password or token_version changed); sign in again." } };
    }
    if (await revocations.isRevoked(claims.jti)) {
      return { failure: { status: 401, code: "token_invalid", message: "This session was ended by a logout; sign in again." } };
    }
    return { identity: Object.freeze({ id: user.id, systemRole: user.role, authSource: "session", isInternal: false }) };
  }

  async function resolveIdentity(request: Request): Promise<Resolution> {
    const presentedInternal = request.headers.get(INTERNAL_TOKEN_HEADER);
    if (presentedInternal !== null && presentedInternal !== "" && (await secretsEqual(presentedInternal, internalToken))) {
      const owner = request.headers.get(INTERNAL_OWNER_HEADER)?.trim();
      return {
        identity: Object.freeze({
          id: owner === undefined || owner === "" ? AUTH_DISABLED_USER_ID : await makeSafeUserId(owner),
          systemRole: "internal",
          authSource: "internal",
          isInternal: true,
        }),
      };
    }
    const presentedKey = request.headers.get(API_KEY_HEADER);
    if (presentedKey !== null && presentedKey !== "" && apiKeys.length > 0) {
      // Every key is compared, so which entry matched (or none) does not show in the timing.
      const matches = await Promise.all(apiKeys.map((key) => secretsEqual(presentedKey.trim(), key.value)));
      const key = apiKeys[matches.indexOf(true)];
      if (key !== undefined) {
        return { identity: Object.freeze({ id: key.user_id, systemRole: key.role, authSource: "api_key", isInternal: false }) };
      }
      if (!disabled) return { failure: { status: 401, code: "invalid_api_key", message: "The API key in x-api-key is not valid; check the key or ask an administrator for one." } };
    }
    const cookie = request.headers.get("cookie");
    const token = cookie === null ? undefined : parseCookies(cookie, ACCESS_TOKEN_COOKIE)[ACCESS_TOKEN_COOKIE];
    if (token !== undefined && token !== "") {
      const resolution = await fromSessionCookie(token);
      // A stale cookie must not lock the only (local) user out of a gateway that needs no sign-in.
      if ("identity" in resolution || !disabled) return resolution;
    }
    if (disabled) return { identity: disabledIdentity };
    return { failure: NOT_AUTHENTICATED };
  }

  // authenticate, csrf and resolveUser may all ask about one request: decide it once.
  const resolutions = new WeakMap<Request, Promise<Resolution>>();
  const resolve = (request: Request): Promise<Resolution> => {
    let resolution = resolutions.get(request);
    if (resolution === undefined) {
      resolution = resolveIdentity(request);
      resolutions.set(request, resolution);
    }
    return resolution;
  };

  const isAllowedOrigin = (request: Request, origin: string): boolean => {
    const normalized = normalizeOrigin(origin);
    if (normalized === null) return false;
    return corsOrigins.has(normalized) || normalized === requestOrigin(request);
  };

  /**
   * What marks `request` as sent by a page of a foreign site, or null when nothing does: an Origin
   * that is neither the request's own origin nor one of gateway.cors_origins, or, with no Origin, a
   * browser's `Sec-Fetch-Site: cross-site` (or `same-site`: a sibling host, which can also plant cookies).
   */
  const foreignSource = (request: Request): string | null => {
    const origin = request.headers.get("origin");
    if (origin !== null) {
      return isAllowedOrigin(request, origin) ? null : `Origin ${JSON.stringify(origin.slice(0, MAX_ECHOED_ORIGIN))} is neither this gateway's own origin nor one of gateway.cors_origins`;
    }
    const fetchSite = request.headers.get("sec-fetch-site");
    return fetchSite === "cross-site" || fetchSite === "same-site" ? `the browser sent Sec-Fetch-Site: ${fetchSite} and no Origin` : null;
  };

  /**
   * While auth is disabled the gateway trusts whoever reaches it, so it must make sure that is a
   * local program and not a web page: a Host that is not a loopback name is DNS rebinding (or a
   * proxy exposing the unauthenticated gateway), and an unsafe request from a foreign origin is a
   * page trying to drive the sandbox.
   */
  const disabledModeRefusal = (c: Context): string | null => {
    const request = c.req.raw;
    const host = directHost(request);
    if (!isLoopbackHostHeader(host)) {
      return `This gateway runs without authentication, so it answers only requests addressed to localhost, 127.0.0.1 or [::1] (got Host ${host}); configure gateway.auth to serve other names.`;
    }
    if (!UNSAFE_METHODS.has(request.method)) return null;
    const foreign = foreignSource(request);
    if (foreign !== null) {
      return `Cross-origin request refused: ${foreign}. Authentication is disabled, so only pages served from this gateway's own origin${corsOrigins.size > 0 ? " or gateway.cors_origins" : ""} may change anything. Add the page's origin to gateway.cors_origins if it is yours.`;
    }
    return null;
  };

  const csrf: MiddlewareHandler<GatewayEnv> = async (c, next) => {
    if (disabled) {
      const refusal = disabledModeRefusal(c);
      if (refusal !== null) return forbiddenResponse(c, refusal);
      return next();
    }
    const request = c.req.raw;
    if (!UNSAFE_METHODS.has(request.method)) return next();
    const path = c.req.path;
    if (isCsrfExemptPath(path)) return next();
    if (isAuthPostPath(path)) {
      // A first login has no token yet; refusing foreign origins stops login CSRF (session fixation).
      const foreign = foreignSource(request);
      if (foreign !== null) return forbiddenResponse(c, `Cross-site auth request denied: ${foreign}.`);
      return next();
    }
    // A request authenticated by a header it carries (not by an ambient cookie) cannot be forged by a page.
    const resolution = await resolve(request);
    if ("identity" in resolution && (resolution.identity.authSource === "api_key" || resolution.identity.authSource === "internal")) return next();
    // A page elsewhere may have read or planted the CSRF cookie (a sibling host, a leaked value):
    // a cookie-authenticated change must also come from this gateway's origin or a configured one.
    const foreign = foreignSource(request);
    if (foreign !== null) {
      return forbiddenResponse(
        c,
        `Cross-origin request refused: ${foreign}, so a change made with this browser's session cookie from there could be forged. Add the page's origin to gateway.cors_origins if it is yours.`,
      );
    }
    const cookie = request.headers.get("cookie");
    const cookieToken = cookie === null ? undefined : parseCookies(cookie, CSRF_COOKIE)[CSRF_COOKIE];
    const headerToken = request.headers.get(CSRF_HEADER);
    if (cookieToken === undefined || cookieToken === "" || headerToken === null || headerToken === "") {
      return forbiddenResponse(c, `CSRF token missing. Include the ${CSRF_HEADER} header with the value of the ${CSRF_COOKIE} cookie.`);
    }
    if (!constantTimeEqual(cookieToken, headerToken)) {
      return forbiddenResponse(c, `CSRF token mismatch. Send the current value of the ${CSRF_COOKIE} cookie in ${CSRF_HEADER} (sign in again if it changed).`);
    }
    return next();
  };

  const authenticate: MiddlewareHandler<GatewayEnv> = async (c, next) => {
    if (disabled) {
      const refusal = disabledModeRefusal(c);
      if (refusal !== null) return forbiddenResponse(c, refusal);
    }
    if (isPublicPath(c.req.path)) return next();
    const resolution = await resolve(c.req.raw);
    if ("failure" in resolution) return authErrorResponse(c, resolution.failure);
    c.set("user", freezeUser(resolution.identity, await authorizer.routePermissions(resolution.identity)));
    return next();
  };

  const sessions: SessionService = {
    tokenLifetimeSeconds: auth.token_expiry_days * 24 * 3600,
    accounts,
    accountsCanBeCreated,
    registrationEnabled,
    passwordLoginAvailable: auth.users.length > 0 || accountsCanBeCreated || registrationEnabled,
    async checkPassword(username, password) {
      const user = await accounts.findByLoginName(username);
      const matches = await verifyPassword(password, user?.password_hash ?? decoyHash);
      return user !== undefined && matches ? user : null;
    },
    beginLogin(username, request) {
      return throttle.begin(username, clientAddress(request, trustedProxies));
    },
    async endSession(token) {
      const claims = await verifySessionToken(await secret(), token, clock.now());
      // An invalid or expired token opens nothing, so there is nothing to end.
      if (typeof claims === "string") return;
      await revocations.revoke(claims.jti, claims.exp * 1000);
    },
    async issueToken(user) {
      return signSessionToken(await secret(), { sub: user.id, ver: await sessionVersion(user) }, clock.now(), sessions.tokenLifetimeSeconds);
    },
  };

  return {
    mode: auth.mode,
    authenticate,
    csrf,
    authorizer,
    register(app) {
      registerAuthRoutes(app, { sessions, disabled });
    },
    async resolveUser(request) {
      const resolution = await resolve(request);
      if ("failure" in resolution) return null;
      return freezeUser(resolution.identity, await authorizer.routePermissions(resolution.identity));
    },
    internalHeaders(ownerUserId) {
      const headers: Record<string, string> = { [INTERNAL_TOKEN_HEADER]: internalToken };
      if (ownerUserId !== undefined && ownerUserId !== "") headers[INTERNAL_OWNER_HEADER] = ownerUserId;
      return headers;
    },
  };
}

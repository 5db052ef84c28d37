import * as v from "valibot";
import { SCOPE_ID_MAX, SCOPE_ID_PATTERN, idFormatHint } from "../core/ids.ts";
import type { Assert, SameType } from "../core/types.ts";
import { mapping } from "./schema.ts";

/*
 * The `gateway:` section of config.yaml: where the server listens, who may call it, and how much a
 * caller may upload. Secrets never sit in the file: API keys, the JWT secret and the internal token
 * are named by environment variable, and passwords are stored only as PBKDF2 hashes (make one with
 * `hashPassword` from src/gateway/auth).
 */

export const DEFAULT_GATEWAY_HOST = "127.0.0.1";
export const DEFAULT_GATEWAY_PORT = 2026;
export const DEFAULT_JWT_SECRET_ENV = "AUTH_JWT_SECRET";
export const DEFAULT_INTERNAL_TOKEN_ENV = "DEER_FLOW_INTERNAL_AUTH_TOKEN";
export const DEFAULT_TOKEN_EXPIRY_DAYS = 7;
export const AUTH_MODES = ["disabled", "api_key", "session"] as const;
export type AuthMode = (typeof AUTH_MODES)[number];
export const GATEWAY_USER_ROLES = ["admin", "user"] as const;

/** User ids are scope ids (core/ids.ts), as thread data and sandboxes accept them, so an id is also a safe storage key. */
export const USER_ID_PATTERN = SCOPE_ID_PATTERN;
const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** `pbkdf2-sha256$<iterations>$<salt base64>$<hash base64>`, as `hashPassword` writes it. */
export const PASSWORD_HASH_PATTERN = /^pbkdf2-sha256\$[1-9][0-9]{0,8}\$[A-Za-z0-9+/]+={0,2}\$[A-Za-z0-9+/]+={0,2}$/;

const MiB = 1024 * 1024;

const envName = (example: string) =>
  v.pipe(
    v.string(),
    v.regex(ENV_NAME_PATTERN, (issue) => `expected an environment variable name such as ${example}, got ${issue.received}`),
  );

const userId = v.pipe(
  v.string(),
  v.regex(USER_ID_PATTERN, (issue) => `expected a user id of ${idFormatHint(SCOPE_ID_MAX)}, got ${issue.received}`),
);

const role = v.picklist(GATEWAY_USER_ROLES, (issue) => `expected admin or user, got ${issue.received}`);

const positiveInteger = v.pipe(
  v.number(),
  v.integer((issue) => `expected a whole number, got ${issue.received}`),
  v.minValue(1, (issue) => `expected a number >= 1, got ${issue.received}`),
);

const daysUpTo30 = v.pipe(
  positiveInteger,
  v.maxValue(30, (issue) => `expected a number of days from 1 to 30, got ${issue.received}`),
);

export const ApiKeyConfigSchema = mapping({
  /** The environment variable holding the key; the key itself never goes in the file. */
  key_env: envName("DEERFLOW_API_KEY"),
  /** Who a caller presenting this key acts as. */
  user_id: userId,
  role: v.optional(role, "user"),
});

export const GatewayUserConfigSchema = mapping({
  id: userId,
  password_hash: v.pipe(
    v.string(),
    v.regex(
      PASSWORD_HASH_PATTERN,
      () => 'expected "pbkdf2-sha256$<iterations>$<salt>$<hash>"; make one with `deerflow-edge hash-password` or hashPassword() and never store a plain password',
    ),
  ),
  role: v.optional(role, "user"),
  /** Raise it to sign this user out everywhere (every earlier session cookie stops working). */
  token_version: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0, "expected a number >= 0")), 0),
  /** Shown by /api/v1/auth/me and accepted as a login name next to the id; default `<id>@localhost.localdomain`. */
  email: v.optional(v.pipe(v.string(), v.email((issue) => `expected an email address, got ${issue.received}`))),
});

export const GatewayAuthConfigSchema = v.pipe(
  mapping({
    /**
     * `disabled`: every caller is the local admin `default` (allowed only on a loopback address).
     * `api_key`: callers present `x-api-key`. `session`: browsers log in with a user's password.
     * Every credential kind that is configured is accepted in every mode; the mode names what the
     * deployment is built around and what must therefore be configured.
     */
    mode: v.optional(v.picklist(AUTH_MODES, (issue) => `expected disabled, api_key or session, got ${issue.received}`), "disabled"),
    api_keys: v.optional(v.array(ApiKeyConfigSchema), []),
    users: v.optional(v.array(GatewayUserConfigSchema), []),
    /** Unset in the environment: a secret generated once and kept in storage (per process without storage). */
    jwt_secret_env: v.optional(envName(DEFAULT_JWT_SECRET_ENV), DEFAULT_JWT_SECRET_ENV),
    token_expiry_days: v.optional(daysUpTo30, DEFAULT_TOKEN_EXPIRY_DAYS),
    /** Unset in the environment: a random token per process (only in-process callers can know it). */
    internal_token_env: v.optional(envName(DEFAULT_INTERNAL_TOKEN_ENV), DEFAULT_INTERNAL_TOKEN_ENV),
    /** Mode session: anyone who can reach the gateway may create a (non-admin) account at /api/v1/auth/register. */
    allow_registration: v.optional(v.boolean("expected true or false"), false),
  }),
  v.forward(
    v.check((auth) => auth.mode !== "api_key" || auth.api_keys.length > 0, "mode api_key needs at least one entry here: { key_env, user_id, role }"),
    ["api_keys"],
  ),
  v.forward(
    v.check((auth) => new Set(auth.users.map((user) => user.id)).size === auth.users.length, "every user id must be unique"),
    ["users"],
  ),
  v.forward(
    // Ids and emails are both login names: one name must not open two accounts.
    v.check(
      (auth) =>
        auth.users.every(
          (user) => user.email === undefined || auth.users.every((other) => other === user || (other.id.toLowerCase() !== user.email!.toLowerCase() && other.email?.toLowerCase() !== user.email!.toLowerCase())),
        ),
      "every email must be unique and differ from every other user's id, ignoring case",
    ),
    ["users"],
  ),
  v.forward(
    v.check((auth) => new Set(auth.api_keys.map((key) => key.key_env)).size === auth.api_keys.length, "every key_env must be unique"),
    ["api_keys"],
  ),
);

export const GatewayUploadsConfigSchema = mapping({
  max_files: v.optional(positiveInteger, 10),
  max_file_bytes: v.optional(positiveInteger, 50 * MiB),
  max_total_bytes: v.optional(positiveInteger, 100 * MiB),
});

const KiB = 1024;

/**
 * What one request may cost before a route sees it. Paths are checked before any storage or
 * sandbox call (414); bodies while they arrive, before they are read whole (413); JSON nesting on
 * the raw text before it is parsed (422). Upload requests keep their own caps (`uploads`).
 */
export const GatewayLimitsConfigSchema = mapping({
  /** Bytes of a request's path as sent (percent-encoded), as PATH_MAX. */
  max_path_bytes: v.optional(positiveInteger, 4096),
  /** Segments of a request's path ("/" and an encoded "%2F" both separate). */
  max_path_segments: v.optional(positiveInteger, 64),
  /** Bytes of one segment (an id, a file name: 255 bytes of UTF-8 percent-encoded fit). */
  max_path_segment_bytes: v.optional(positiveInteger, 1024),
  /** Body of a route served without authentication: login, logout, health and info. */
  max_unauthenticated_body_bytes: v.optional(positiveInteger, 16 * KiB),
  /** Body of a run request (thread runs, stateless runs): input, command, context, config. */
  max_run_body_bytes: v.optional(positiveInteger, 4 * MiB),
  /** Body of every other route: threads, state, history, search, assistants, extension routes. */
  max_body_bytes: v.optional(positiveInteger, MiB),
  /** Levels of objects and arrays in a JSON body (the body itself is level 1). */
  max_json_depth: v.optional(positiveInteger, 64),
});

const origin = v.pipe(
  v.string(),
  v.check(
    (value) => value === "*" || /^https?:\/\/[^/?#@\s]+$/.test(value),
    (issue) => `expected an origin such as http://localhost:3000 (scheme and host only), got ${issue.received}`,
  ),
);

const ipAddress = v.pipe(
  v.string(),
  v.regex(/^(?:\d{1,3}(?:\.\d{1,3}){3}|\[?[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\]?)$/, (issue) => `expected an IP address such as 127.0.0.1 or ::1 (no names, no ranges), got ${issue.received}`),
);

export const GatewayConfigSchema = mapping({
  host: v.optional(v.pipe(v.string(), v.minLength(1, "expected a host name or address")), DEFAULT_GATEWAY_HOST),
  port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0, "expected a port from 0 to 65535"), v.maxValue(65535, "expected a port from 0 to 65535")), DEFAULT_GATEWAY_PORT),
  /** Browser origins of a separately served UI; they may call the API and post to the login route. */
  cors_origins: v.optional(v.array(origin), []),
  /**
   * Reverse proxies in front of the gateway, by IP address. A request whose connection comes from one
   * of them is throttled by the client X-Forwarded-For names; from any other peer X-Forwarded-For is
   * ignored (anyone can write it), so the peer itself is the client.
   */
  trusted_proxies: v.optional(v.array(ipAddress), []),
  auth: v.optional(GatewayAuthConfigSchema, {}),
  uploads: v.optional(GatewayUploadsConfigSchema, {}),
  limits: v.optional(GatewayLimitsConfigSchema, {}),
  /**
   * Snapshot the thread's workspace and outputs before and after every run, for
   * `GET .../runs/{id}/workspace-changes`. Off saves two sandbox listings (and the hashing of small
   * files) per run, which a remote sandbox pays for over the network; the route then answers
   * `available: false`.
   */
  workspace_changes: v.optional(v.boolean("expected true or false"), true),
});

export type GatewayUserRole = (typeof GATEWAY_USER_ROLES)[number];

export interface ApiKeyConfig {
  /** The environment variable holding the key; the key itself never goes in the file. */
  key_env: string;
  /** Who a caller presenting this key acts as. */
  user_id: string;
  role: GatewayUserRole;
}
export interface GatewayUserConfig {
  id: string;
  /** `pbkdf2-sha256$<iterations>$<salt>$<hash>`, as `hashPassword` writes it. */
  password_hash: string;
  role: GatewayUserRole;
  /** Raise it to sign this user out everywhere (every earlier session cookie stops working). */
  token_version: number;
  email?: string;
}
export interface GatewayAuthConfig {
  mode: AuthMode;
  api_keys: ApiKeyConfig[];
  users: GatewayUserConfig[];
  jwt_secret_env: string;
  token_expiry_days: number;
  internal_token_env: string;
  allow_registration: boolean;
}
export interface GatewayUploadsConfig {
  max_files: number;
  max_file_bytes: number;
  max_total_bytes: number;
}
export interface GatewayLimitsConfig {
  max_path_bytes: number;
  max_path_segments: number;
  max_path_segment_bytes: number;
  max_unauthenticated_body_bytes: number;
  max_run_body_bytes: number;
  max_body_bytes: number;
  max_json_depth: number;
}
/** The `gateway:` section after validation, every default filled in. */
export interface GatewayConfig {
  host: string;
  port: number;
  cors_origins: string[];
  trusted_proxies: string[];
  auth: GatewayAuthConfig;
  uploads: GatewayUploadsConfig;
  limits: GatewayLimitsConfig;
  workspace_changes: boolean;
}
/** The `gateway:` section as written: every key optional. */
export interface GatewayConfigInput {
  host?: string;
  port?: number;
  cors_origins?: string[];
  trusted_proxies?: string[];
  auth?: {
    mode?: AuthMode;
    api_keys?: { key_env: string; user_id: string; role?: GatewayUserRole }[];
    users?: { id: string; password_hash: string; role?: GatewayUserRole; token_version?: number; email?: string }[];
    jwt_secret_env?: string;
    token_expiry_days?: number;
    internal_token_env?: string;
    allow_registration?: boolean;
  };
  uploads?: Partial<GatewayUploadsConfig>;
  limits?: Partial<GatewayLimitsConfig>;
  workspace_changes?: boolean;
}
type _GatewayConfigMatches = Assert<SameType<GatewayConfig, v.InferOutput<typeof GatewayConfigSchema>>>;
type _GatewayConfigInputMatches = Assert<SameType<GatewayConfigInput, v.InferInput<typeof GatewayConfigSchema>>>;

export const GATEWAY_DEFAULTS: GatewayConfig = Object.freeze(v.parse(GatewayConfigSchema, {}));

/** Parses a `gateway:` section (tests and embedders; config.yaml goes through the lead schema). */
export function parseGatewayConfig(input: unknown): GatewayConfig {
  return v.parse(GatewayConfigSchema, input ?? {});
}

/*
 * Facts about a request that the security checks share: which paths are public, which origin the
 * browser was talking to, whether the connection was HTTPS. Paths are classified on exactly the
 * string Hono routes on (`c.req.path`, which Hono computes with its own getPath before any
 * middleware runs), never on a reconstruction such as `new URL(request.url).pathname`: the two
 * disagree on percent-encoding, and a disagreement at this boundary is a bypass.
 */

export const UNSAFE_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export const LOGIN_PATH = "/api/v1/auth/login/local";
export const LOGOUT_PATH = "/api/v1/auth/logout";
export const ME_PATH = "/api/v1/auth/me";
export const SETUP_STATUS_PATH = "/api/v1/auth/setup-status";
export const PROVIDERS_PATH = "/api/v1/auth/providers";
export const INITIALIZE_PATH = "/api/v1/auth/initialize";
export const REGISTER_PATH = "/api/v1/auth/register";
export const CHANGE_PASSWORD_PATH = "/api/v1/auth/change-password";

/**
 * Served without authentication. `/api/info` stays public as on the LangGraph Platform, so it
 * must never carry per-user data; extension routers may not claim any of these.
 */
export const PUBLIC_EXACT_PATHS: readonly string[] = Object.freeze([
  "/health",
  "/api/ok",
  "/api/info",
  LOGIN_PATH,
  LOGOUT_PATH,
  SETUP_STATUS_PATH,
  PROVIDERS_PATH,
  INITIALIZE_PATH,
  REGISTER_PATH,
]);
/** Auth POSTs that need no CSRF token (a first login or a new account has none) but refuse a foreign Origin. */
export const AUTH_POST_PATHS: readonly string[] = Object.freeze([LOGIN_PATH, LOGOUT_PATH, INITIALIZE_PATH, REGISTER_PATH]);
/** Unsafe methods here skip the double-submit check; GET /me is how a browser learns it is signed in. */
export const CSRF_EXEMPT_EXACT_PATHS: readonly string[] = Object.freeze([ME_PATH]);

/** Without one trailing slash, so `/api/ok/` and `/api/ok` classify alike. */
function stripTrailingSlash(path: string): string {
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

export function isPublicPath(path: string): boolean {
  return PUBLIC_EXACT_PATHS.includes(stripTrailingSlash(path));
}

export function isAuthPostPath(path: string): boolean {
  return AUTH_POST_PATHS.includes(stripTrailingSlash(path));
}

export function isCsrfExemptPath(path: string): boolean {
  return CSRF_EXEMPT_EXACT_PATHS.includes(stripTrailingSlash(path));
}

function hostWithPort(hostname: string, port: string, scheme: string): string {
  let host = hostname.toLowerCase();
  if (host.includes(":") && !host.startsWith("[")) host = `[${host}]`;
  if (port === "" || (scheme === "http" && port === "80") || (scheme === "https" && port === "443")) return host;
  return `${host}:${port}`;
}

/** `scheme://host[:port]` with default ports dropped, or null when the value is not a bare origin. */
export function normalizeOrigin(value: string): string | null {
  const text = value.trim();
  if (!/^https?:\/\/[^/?#\s]+$/i.test(text)) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (url.username !== "" || url.password !== "" || url.hostname === "") return null;
  const scheme = url.protocol.slice(0, -1).toLowerCase();
  return `${scheme}://${hostWithPort(url.hostname, url.port, scheme)}`;
}

/** The configured browser origins, normalised; `*` is never treated as "every origin may log in". */
export function normalizeOrigins(origins: readonly string[]): ReadonlySet<string> {
  const out = new Set<string>();
  for (const origin of origins) {
    if (origin.trim() === "*") continue;
    const normalized = normalizeOrigin(origin);
    if (normalized !== null) out.add(normalized);
  }
  return out;
}

function firstValue(value: string | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  const first = value.split(",", 1)[0]!.trim();
  return first === "" ? undefined : first;
}

function forwardedParam(request: Request, name: string): string | undefined {
  const entry = firstValue(request.headers.get("forwarded"));
  if (entry === undefined) return undefined;
  for (const part of entry.split(";")) {
    const index = part.indexOf("=");
    if (index < 0) continue;
    if (part.slice(0, index).trim().toLowerCase() === name) {
      const raw = part.slice(index + 1).trim().replace(/^"|"$/g, "");
      return raw === "" ? undefined : raw;
    }
  }
  return undefined;
}

/**
 * The scheme the browser used. Proxy headers are honoured because a browser cannot set them on a
 * cross-site request without a CORS preflight, and a caller lying about them only changes the
 * cookie flags it receives itself.
 */
export function requestScheme(request: Request): string {
  const forwarded = forwardedParam(request, "proto") ?? firstValue(request.headers.get("x-forwarded-proto"));
  if (forwarded !== undefined) return forwarded.toLowerCase();
  return new URL(request.url).protocol.slice(0, -1).toLowerCase();
}

export function isSecureRequest(request: Request): boolean {
  return requestScheme(request) === "https";
}

/** The host the connection itself was addressed to (Host header, else the URL), never a proxy header. */
export function directHost(request: Request): string {
  return request.headers.get("host") ?? new URL(request.url).host;
}

/** The origin the browser was targeting, rebuilt from Forwarded, then X-Forwarded-*, then Host. */
export function requestOrigin(request: Request): string | null {
  const scheme = requestScheme(request);
  let host = forwardedParam(request, "host") ?? firstValue(request.headers.get("x-forwarded-host")) ?? directHost(request);
  const forwardedPort = firstValue(request.headers.get("x-forwarded-port"));
  if (forwardedPort !== undefined && !host.slice(host.lastIndexOf("]") + 1).includes(":")) host = `${host}:${forwardedPort}`;
  return normalizeOrigin(`${scheme}://${host}`);
}

/** Loopback as a bind address: 127.0.0.0/8, ::1 or localhost. */
export function isLoopbackAddress(host: string): boolean {
  const bare = host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (bare === "localhost" || bare === "::1" || bare === "0:0:0:0:0:0:0:1") return true;
  const octets = bare.split(".");
  return octets.length === 4 && octets[0] === "127" && octets.every((octet) => /^\d{1,3}$/.test(octet) && Number(octet) <= 255);
}

/** Loopback as a Host header: a loopback address, or a `*.localhost` name (RFC 6761), with any port. */
export function isLoopbackHostHeader(hostHeader: string): boolean {
  let url: URL;
  try {
    url = new URL(`http://${hostHeader.trim()}`);
  } catch {
    return false;
  }
  if (url.username !== "" || url.password !== "" || url.pathname !== "/") return false;
  const hostname = url.hostname.toLowerCase();
  return isLoopbackAddress(hostname) || hostname.endsWith(".localhost");
}

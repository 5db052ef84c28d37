import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { GatewayEnv, GatewayUser } from "../types.ts";
import type { AuthFailure } from "./errors.ts";

export const ACCESS_TOKEN_COOKIE = "access_token";
export const CSRF_COOKIE = "csrf_token";
export const CSRF_HEADER = "X-CSRF-Token";
export const API_KEY_HEADER = "x-api-key";
export const INTERNAL_TOKEN_HEADER = "X-DeerFlow-Internal-Token";
export const INTERNAL_OWNER_HEADER = "X-DeerFlow-Owner-User-Id";

export const NOT_AUTHENTICATED: AuthFailure = Object.freeze({
  status: 401,
  code: "not_authenticated",
  message: "Authentication required: sign in at /api/v1/auth/login/local or send an API key in the x-api-key header.",
});

/**
 * The caller `authenticate` stamped on the context. A route behind the layer always has one; one
 * reached without it (a wiring mistake) answers 401 instead of running anonymously.
 */
export function authenticatedUser(c: Context<GatewayEnv>): GatewayUser {
  const user = c.get("user") as GatewayUser | undefined;
  if (user === undefined) {
    throw new HTTPException(401, { res: Response.json({ detail: { code: NOT_AUTHENTICATED.code, message: NOT_AUTHENTICATED.message } }, { status: 401 }) });
  }
  return user;
}

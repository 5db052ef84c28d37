import type { Context } from "hono";

/** The stable codes of a 401 (and of a refused login), as upstream's AuthErrorCode spells them. */
export type AuthErrorCode =
  | "not_authenticated"
  | "token_expired"
  | "token_invalid"
  | "user_not_found"
  | "invalid_api_key"
  | "invalid_credentials"
  | "too_many_attempts"
  | "email_already_exists"
  | "system_already_initialized";

export interface AuthFailure {
  readonly status: 400 | 401 | 409 | 429;
  readonly code: AuthErrorCode;
  readonly message: string;
}

/** Auth failures keep upstream's `{"detail": {"code", "message"}}`, so a UI can switch on the code. */
export function authErrorResponse(c: Context, failure: AuthFailure): Response {
  return c.json({ detail: { code: failure.code, message: failure.message } }, failure.status);
}

/** Every other refusal is the plain `{"detail": "..."}` of the rest of the API. */
export function forbiddenResponse(c: Context, message: string): Response {
  return c.json({ detail: message }, 403);
}

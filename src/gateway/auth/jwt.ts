import { SignJWT, errors as joseErrors, jwtVerify } from "jose";
import { randomToken } from "./crypto.ts";

/*
 * The session token in the `access_token` cookie: HS256 over `{sub, iat, exp, ver, jti}`. `ver` ties
 * a token to the user's current credentials (see sessionVersion), so a changed password or a raised
 * token_version signs the user out everywhere without a server-side session table. `jti` names this
 * one session, so a logout can end it alone (see revocations.ts).
 */

export interface SessionClaims {
  readonly sub: string;
  readonly iat: number;
  readonly exp: number;
  readonly ver: string;
  readonly jti: string;
}

export type TokenFailure = "token_expired" | "token_invalid";

const ALGORITHM = "HS256";

export async function signSessionToken(
  secret: Uint8Array,
  claims: { readonly sub: string; readonly ver: string },
  nowMs: number,
  lifetimeSeconds: number,
): Promise<string> {
  const iat = Math.floor(nowMs / 1000);
  return new SignJWT({ ver: claims.ver })
    .setProtectedHeader({ alg: ALGORITHM, typ: "JWT" })
    .setSubject(claims.sub)
    .setIssuedAt(iat)
    .setExpirationTime(iat + lifetimeSeconds)
    .setJti(randomToken(18))
    .sign(secret);
}

/** The claims of a valid token, or why it is not valid. Expiry is judged against `nowMs` (the gateway's clock). */
export async function verifySessionToken(secret: Uint8Array, token: string, nowMs: number): Promise<SessionClaims | TokenFailure> {
  try {
    const { payload } = await jwtVerify(token, secret, {
      algorithms: [ALGORITHM],
      currentDate: new Date(nowMs),
      requiredClaims: ["sub", "exp", "iat", "jti"],
    });
    const { sub, iat, exp, ver, jti } = payload as Record<string, unknown>;
    if (typeof sub !== "string" || sub === "" || typeof iat !== "number" || typeof exp !== "number" || typeof ver !== "string" || typeof jti !== "string") {
      return "token_invalid";
    }
    return { sub, iat, exp, ver, jti };
  } catch (error) {
    return error instanceof joseErrors.JWTExpired ? "token_expired" : "token_invalid";
  }
}

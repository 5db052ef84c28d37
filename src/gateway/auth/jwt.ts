import { SignJWT, errors as joseErrors, jwtVerify } from "jose";
import type { VersionedKeyValue } from "../../ports/versioned-key-value.ts";
import { CAS_MAX_ATTEMPTS, parseStoredJson, VersionedConflictError } from "../../storage/versioned.ts";
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

/** A stored secret's text: JSON-quoted as KeyValue.setItem kept it before, or as it is. */
function storedSecretText(value: string): string {
  const parsed = parseStoredJson(value);
  return typeof parsed === "string" ? parsed : value;
}

/**
 * The deployment's one secret under `key`: the stored one, or `generate()`'s written by a
 * create-if-absent write. Of workers starting together exactly one write lands; the others read
 * the winner's, so a token signed by any worker verifies on every other.
 */
export async function sharedSecret(versioned: VersionedKeyValue, key: string, minLength: number, generate: () => string): Promise<string> {
  for (let attempt = 0; attempt < CAS_MAX_ATTEMPTS; attempt++) {
    const { value, version } = await versioned.read(key);
    const stored = value === null ? undefined : storedSecretText(value);
    if (stored !== undefined && stored.length >= minLength) return stored;
    // Absent, or too short to trust (hand-edited): replaced, unless another worker replaced it first.
    const generated = generate();
    if (await versioned.write(key, generated, version)) return generated;
  }
  throw new VersionedConflictError(key);
}

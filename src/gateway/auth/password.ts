import { base64ToBytes, bytesToBase64 } from "../../core/base64.ts";
import { DeerflowError } from "../../core/errors.ts";
import { PASSWORD_HASH_PATTERN } from "../../config/gateway.ts";
import { constantTimeEqualBytes } from "./crypto.ts";

/*
 * Password hashes as config.yaml stores them: `pbkdf2-sha256$<iterations>$<salt b64>$<hash b64>`.
 * PBKDF2 because crypto.subtle offers it on every runtime (bcrypt and scrypt would need a native
 * or WASM package); the iteration count travels in the string, so raising the default later keeps
 * every stored hash valid.
 */

/** OWASP's 2023 figure for PBKDF2-HMAC-SHA256. */
export const DEFAULT_PASSWORD_ITERATIONS = 600_000;
/** Below this a stored hash is refused as too weak to be worth checking. */
export const MIN_PASSWORD_ITERATIONS = 1_000;
/** Above this one login could tie up the server for seconds. */
export const MAX_PASSWORD_ITERATIONS = 10_000_000;
const SALT_BYTES = 16;
const HASH_BYTES = 32;
const PREFIX = "pbkdf2-sha256";

async function derive(password: string, salt: Uint8Array, iterations: number, bytes: number): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(password.normalize("NFC")), "PBKDF2", false, ["deriveBits"]);
  const bits = await crypto.subtle.deriveBits({ name: "PBKDF2", hash: "SHA-256", salt: salt as BufferSource, iterations }, key, bytes * 8);
  return new Uint8Array(bits);
}

function checkIterations(iterations: number): number {
  if (!Number.isInteger(iterations) || iterations < MIN_PASSWORD_ITERATIONS || iterations > MAX_PASSWORD_ITERATIONS) {
    throw new DeerflowError(
      "invalid_password_iterations",
      `PBKDF2 iterations must be a whole number from ${MIN_PASSWORD_ITERATIONS} to ${MAX_PASSWORD_ITERATIONS}, got ${iterations}; use the default (${DEFAULT_PASSWORD_ITERATIONS}).`,
    );
  }
  return iterations;
}

/** The config.yaml form of `password`, with a fresh random salt. */
export async function hashPassword(password: string, options: { readonly iterations?: number } = {}): Promise<string> {
  if (typeof password !== "string" || password.length === 0) {
    throw new DeerflowError("invalid_password", "The password is empty; choose a non-empty password.");
  }
  const iterations = checkIterations(options.iterations ?? DEFAULT_PASSWORD_ITERATIONS);
  const salt = crypto.getRandomValues(new Uint8Array(SALT_BYTES));
  const hash = await derive(password, salt, iterations, HASH_BYTES);
  return `${PREFIX}$${iterations}$${bytesToBase64(salt)}$${bytesToBase64(hash)}`;
}

interface ParsedHash {
  readonly iterations: number;
  readonly salt: Uint8Array;
  readonly hash: Uint8Array;
}

function parseHash(stored: string): ParsedHash | null {
  if (typeof stored !== "string" || !PASSWORD_HASH_PATTERN.test(stored)) return null;
  const [, iterationsText, saltText, hashText] = stored.split("$");
  const iterations = Number(iterationsText);
  if (iterations < MIN_PASSWORD_ITERATIONS || iterations > MAX_PASSWORD_ITERATIONS) return null;
  try {
    const salt = base64ToBytes(saltText!);
    const hash = base64ToBytes(hashText!);
    if (salt.length < 8 || hash.length < 16) return null;
    return { iterations, salt, hash };
  } catch {
    return null;
  }
}

/** True when `stored` is a well-formed hash that `password` produces. A malformed hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parsed = parseHash(stored);
  if (parsed === null || typeof password !== "string") return false;
  const candidate = await derive(password, parsed.salt, parsed.iterations, parsed.hash.length);
  return constantTimeEqualBytes(candidate, parsed.hash);
}

/** Whether a stored hash is one `verifyPassword` can check (for startup validation). */
export function isUsablePasswordHash(stored: string): boolean {
  return parseHash(stored) !== null;
}

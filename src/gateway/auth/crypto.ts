import { bytesToBase64 } from "../../core/base64.ts";
import { sha256Bytes } from "../../core/hex.ts";

const encoder = new TextEncoder();

/**
 * Compares two byte strings without an early exit, so the time taken does not reveal how long a
 * matching prefix was. A length difference is folded into the result instead of returning early.
 */
export function constantTimeEqualBytes(a: Uint8Array, b: Uint8Array): boolean {
  const length = Math.max(a.length, b.length);
  let diff = a.length ^ b.length;
  for (let i = 0; i < length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

export function constantTimeEqual(a: string, b: string): boolean {
  return constantTimeEqualBytes(encoder.encode(a), encoder.encode(b));
}

/**
 * Secrets are compared through their digests: equal-length inputs to the comparison, so neither
 * the secret's length nor a shared prefix can be learned from timing.
 */
export async function secretsEqual(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256Bytes(presented), sha256Bytes(expected)]);
  return constantTimeEqualBytes(a, b);
}

export function base64Url(bytes: Uint8Array): string {
  return bytesToBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** A URL- and cookie-safe random token of `bytes` random bytes. */
export function randomToken(bytes = 32): string {
  return base64Url(crypto.getRandomValues(new Uint8Array(bytes)));
}

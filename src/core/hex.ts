/*
 * Hex and SHA-256: the one set the library uses. The text hashes come from extension-api (floor 0,
 * which must import nothing outside its folder, so it holds them and the hex encoder): `sha256Hex` (async, refuses lone
 * surrogates so two different texts never share a hash) and `sha256HexSync` (the same digest in
 * synchronous code paths). `sha256Bytes` is the raw digest of bytes, or of any string as
 * TextEncoder writes it (lone surrogates become U+FFFD), for input an HTTP request may carry.
 */

export { sha256Hex } from "../extension-api/canonical.ts";
export { sha256HexSync } from "../extension-api/sha256-sync.ts";
export { bytesToHex, hexToBytes } from "../extension-api/hex.ts";

const encoder = new TextEncoder();

/** SHA-256 (crypto.subtle) of bytes, or of a string's UTF-8 as TextEncoder writes it. */
export async function sha256Bytes(data: string | Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  const bytes = typeof data === "string" ? encoder.encode(data) : data;
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
}

// Bytes as hex and back: the library's one encoder (core/hex.ts re-exports it). It lives at floor 0
// because the contract's own hashes (canonical.ts) need it and this folder imports nothing outside.

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** Bytes as lowercase hex, two digits each. */
export function bytesToHex(bytes: Uint8Array): string {
  let hex = "";
  for (const byte of bytes) hex += HEX[byte];
  return hex;
}

/** The bytes of an even-length hex string (what bytesToHex wrote). */
export function hexToBytes(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

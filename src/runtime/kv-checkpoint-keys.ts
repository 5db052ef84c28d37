// Key segments of the checkpointer's storage keys (layout in kv-checkpointer.ts). An id becomes
// one or more pieces of lowercase hex of its UTF-8 bytes: every piece but the last starts with
// "y", the last with "x" (so "" is "x"). Pieces contain only [xy0-9a-f]: no ":" "/" "\" "?" "$"
// ".", no "..", nothing an fs driver or a case-insensitive file system can misread, and the
// encoding is prefix-free, so `getKeys("<...>:<thread>")` never matches another thread. Long ids
// are split so no file name exceeds 201 characters.
import { bytesToHex, hexToBytes } from "../core/hex.ts";

const PIECE_HEX_CHARS = 200;
const PIECE = /^[xy](?:[0-9a-f]{2})*$/;
const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

export function encodeSegment(value: string): string {
  const hex = bytesToHex(utf8Encoder.encode(value));
  const pieces: string[] = [];
  for (let i = PIECE_HEX_CHARS; i < hex.length; i += PIECE_HEX_CHARS) {
    pieces.push("y" + hex.slice(i - PIECE_HEX_CHARS, i));
  }
  pieces.push("x" + hex.slice(pieces.length * PIECE_HEX_CHARS));
  return pieces.join(":");
}

export function decodeSegment(encoded: string): string | undefined {
  const hex = encoded.replace(/(^|:)[xy]/g, "");
  const bytes = hexToBytes(hex);
  try {
    return utf8Decoder.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Splits `count` encoded segments off the front of `pieces`; undefined if they are not ours. */
export function takeSegments(pieces: string[], count: number): { segments: string[]; rest: string[] } | undefined {
  const segments: string[] = [];
  let current: string[] = [];
  let i = 0;
  for (; i < pieces.length && segments.length < count; i++) {
    const piece = pieces[i]!;
    if (!PIECE.test(piece)) return undefined;
    current.push(piece);
    if (piece[0] === "x") {
      segments.push(current.join(":"));
      current = [];
    }
  }
  if (segments.length < count || current.length > 0) return undefined;
  return { segments, rest: pieces.slice(i) };
}

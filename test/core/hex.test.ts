import { describe, expect, it } from "vitest";
import { bytesToHex, hexToBytes, sha256Bytes, sha256Hex, sha256HexSync } from "../../src/core/hex.ts";

// FIPS 180-2 test vectors.
const EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const TWO_BLOCKS = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
const TWO_BLOCKS_TEXT = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

describe("hex and sha256", () => {
  it("writes bytes as two lowercase hex digits each, and reads them back", () => {
    const bytes = new Uint8Array([0, 1, 15, 16, 127, 128, 171, 255]);
    expect(bytesToHex(bytes)).toBe("00010f107f80abff");
    expect(bytesToHex(new Uint8Array())).toBe("");
    expect([...hexToBytes("00010f107f80abff")]).toEqual([...bytes]);
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    expect([...hexToBytes(bytesToHex(all))]).toEqual([...all]);
  });

  it("matches the known SHA-256 vectors, async, sync and as raw bytes", async () => {
    for (const [text, hex] of [["", EMPTY], ["abc", ABC], [TWO_BLOCKS_TEXT, TWO_BLOCKS]] as const) {
      expect(await sha256Hex(text)).toBe(hex);
      expect(sha256HexSync(text)).toBe(hex);
      expect(bytesToHex(await sha256Bytes(text))).toBe(hex);
      expect(bytesToHex(await sha256Bytes(new TextEncoder().encode(text)))).toBe(hex);
    }
  });

  it("hashes any string as raw bytes, but refuses a lone surrogate as a text fingerprint", async () => {
    expect(bytesToHex(await sha256Bytes("a\uD800"))).toBe(bytesToHex(await sha256Bytes("a\uFFFD")));
    await expect(sha256Hex("a\uD800")).rejects.toThrow(/surrogate/i);
  });
});

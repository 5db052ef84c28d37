import { describe, expect, it } from "vitest";
import { base64ToBytes, bytesToBase64 } from "../../src/core/base64.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

describe(`base64 (${runtime})`, () => {
  it("writes standard padded base64", () => {
    expect(bytesToBase64(new Uint8Array())).toBe("");
    expect(bytesToBase64(new TextEncoder().encode("deer"))).toBe("ZGVlcg==");
    expect(bytesToBase64(new Uint8Array([0, 255, 128]))).toBe("AP+A");
  });

  it("gives back every byte value, also past the chunk size that guards String.fromCharCode", () => {
    const bytes = new Uint8Array(100_003).map((_, i) => (i * 31 + 7) % 256);
    const back = base64ToBytes(bytesToBase64(bytes));
    expect(back).toBeInstanceOf(Uint8Array);
    expect(back.length).toBe(bytes.length);
    expect(back.findIndex((byte, i) => byte !== bytes[i])).toBe(-1);
  });

  it("rejects text that is not base64", () => {
    expect(() => base64ToBytes("not base64!")).toThrow();
  });
});

import { describe, expect, it } from "vitest";
import { CanonicalJsonError, canonicalHash, canonicalJson, sha256Hex } from "../../src/extension-api/index.ts";

// Expected strings and digests were computed once with Python, independently of this code:
// hashlib.sha256(json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
// They must come out identical on Node, Deno and Bun.
const vectors: ReadonlyArray<{ name: string; value: unknown; canonical: string; sha256: string }> = [
  {
    name: "pinned example",
    value: { b: 1, a: [true, false, null], c: { z: "ü", y: "été" } },
    canonical: '{"a":[true,false,null],"b":1,"c":{"y":"été","z":"ü"}}',
    sha256: "dd784a642e90556bfaa84c6f085d49d705d3c0536d1e66bed03c471c88e8fc62",
  },
  {
    name: "astral keys sort after BMP private-use keys",
    value: { "\uE000": 1, "\u{1F600}": 2, "\uFFFF": 3, a: 4, "\u00e9": 5, "\u{10000}": 6, "\uFFFD": 7 },
    canonical: '{"a":4,"\u00e9":5,"\ue000":1,"\ufffd":7,"\uffff":3,"\ud800\udc00":6,"\ud83d\ude00":2}',
    sha256: "26f8c703b0b87d564d9948ae469aa3f6a86d78b3c86a7b2ae0b082a58f35b474",
  },
  {
    name: "escapes in values and keys",
    value: {
      s: 'line1\nline2 "quoted" \\ back \u0001 ctrl \t tab \u001f us \u007f del \u2028 ls / slash',
      'k"\n': "\r\b\f",
    },
    canonical:
      '{"k\\"\\n":"\\r\\b\\f","s":"line1\\nline2 \\"quoted\\" \\\\ back \\u0001 ctrl \\t tab \\u001f us \u007f del \u2028 ls / slash"}',
    sha256: "a9e90aea020f8054d41a594d6bd1d5d853946291715ef5873b1ceed975dc6605",
  },
  {
    name: "keys sharing a prefix, the empty key and a NUL",
    value: { ab: 1, a: 2, "a\u0000": 3, "": 4, B: 5 },
    canonical: '{"":4,"B":5,"a":2,"a\\u0000":3,"ab":1}',
    sha256: "34802a722aa2010c3ad7e9bc350416c506fc306e6bf46bcf755ae3770e76b904",
  },
  {
    name: "numbers and empty containers",
    value: { n: [0, -7, 123456789012345, 0.5, -2.25], e: {}, l: [], t: true, nul: null },
    canonical: '{"e":{},"l":[],"n":[0,-7,123456789012345,0.5,-2.25],"nul":null,"t":true}',
    sha256: "034c82b01940f187c8e3e60c9119bdcf84b6f79448479809b614f9b7c9111ce2",
  },
  {
    name: "nested arrays and non-Latin text",
    value: [{ 名前: "深度流", emoji: "🦌🌊", combining: "e\u0301" }, [[["deep"]]], "\u{1F600}\uFFFF"],
    canonical: '[{"combining":"e\u0301","emoji":"🦌🌊","名前":"深度流"},[[["deep"]]],"\u{1F600}\uFFFF"]',
    sha256: "f67a365fd8590dd33c4bdcf5799e39863065261ba08bacd4ecfc62f136360c1e",
  },
  {
    name: "a bare string",
    value: "héllo wörld",
    canonical: '"héllo wörld"',
    sha256: "1ce51a774d019f7859eae8c528cd9da6277a4958576cd7f76a6eeadc78a0ca5a",
  },
  { name: "null", value: null, canonical: "null", sha256: "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b" },
  { name: "an integer", value: 42, canonical: "42", sha256: "73475cb40a568e8da8a045ced110137e159f890ac4da883b6b17dc651b3a8049" },
];

describe("canonical JSON and hash, identical on every runtime", () => {
  for (const vector of vectors) {
    it(`matches Python for ${vector.name}`, async () => {
      expect(canonicalJson(vector.value)).toBe(vector.canonical);
      expect(await canonicalHash(vector.value)).toBe(vector.sha256);
    });
  }

  it("writes 1.0 as 1, so a float-typed integer hashes like the integer", async () => {
    expect(canonicalJson({ x: 1.0, y: -0 })).toBe('{"x":1,"y":0}');
    expect(await canonicalHash({ b: 1.0, a: [true, false, null], c: { z: "ü", y: "été" } })).toBe(vectors[0]?.sha256);
  });

  it("hashes raw text by its UTF-8 bytes, as sha256sum would", async () => {
    expect(await sha256Hex("é".repeat(300))).toBe("7250b66610f8b7dbd6f5e5426d2143bcba6d826cedb4bea8a358695da78db023");
    expect(await sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  });

  it("rejects a lone surrogate instead of hashing a replacement character", async () => {
    expect(() => canonicalJson({ text: "cut \uD83D" })).toThrow(CanonicalJsonError);
    await expect(canonicalHash(["\uDE00 tail"])).rejects.toMatchObject({ code: "lone_surrogate", path: "$[0]" });
    await expect(sha256Hex("a\uD800b")).rejects.toMatchObject({ code: "lone_surrogate" });
  });
});

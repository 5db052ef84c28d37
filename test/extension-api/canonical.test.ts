import { describe, expect, it } from "vitest";
import {
  CanonicalJsonError,
  ExtensionApiError,
  canonicalHash,
  canonicalJson,
  compareCodePoints,
  isPlainObject,
} from "../../src/extension-api/index.ts";

function failure(value: unknown): CanonicalJsonError {
  try {
    canonicalJson(value);
  } catch (error) {
    if (error instanceof CanonicalJsonError) return error;
    throw error;
  }
  throw new Error("expected canonicalJson to throw");
}

describe("canonicalJson output", () => {
  it("sorts keys at every depth and keeps array order", () => {
    expect(canonicalJson({ z: [3, 1, 2], a: { d: 1, c: { f: 1, e: 2 } } })).toBe(
      '{"a":{"c":{"e":2,"f":1},"d":1},"z":[3,1,2]}',
    );
  });

  it("orders keys by code point where UTF-16 order would differ", () => {
    const keys = ["\u{1F600}", "\uFFFF", "\uE000", "z"];
    expect(canonicalJson(Object.fromEntries(keys.map((key) => [key, 0])))).toBe(
      '{"z":0,"\uE000":0,"\uFFFF":0,"\u{1F600}":0}',
    );
    expect([...keys].sort()).not.toEqual([...keys].sort(compareCodePoints));
  });

  it("produces the same text whatever order the keys were inserted in", async () => {
    const forward = { alpha: 1, beta: [1, { y: 2, x: 1 }], gamma: "γ" };
    const backward = { gamma: "γ", beta: [1, { x: 1, y: 2 }], alpha: 1 };
    expect(canonicalJson(forward)).toBe(canonicalJson(backward));
    expect(await canonicalHash(forward)).toBe(await canonicalHash(backward));
  });

  it("changes the hash when any value changes", async () => {
    expect(await canonicalHash({ a: 1 })).not.toBe(await canonicalHash({ a: 2 }));
    expect(await canonicalHash({ a: "1" })).not.toBe(await canonicalHash({ a: 1 }));
    expect(await canonicalHash([1, 2])).not.toBe(await canonicalHash([2, 1]));
  });

  it("returns 64 lowercase hex digits", async () => {
    expect(await canonicalHash({ any: "thing" })).toMatch(/^[0-9a-f]{64}$/);
  });

  it("writes non-ASCII raw and escapes like JSON.stringify", () => {
    expect(canonicalJson("ü\n\"\\\u0000")).toBe('"ü\\n\\"\\\\\\u0000"');
  });

  it("accepts null-prototype objects and repeated shared references", () => {
    const bare = Object.create(null) as Record<string, unknown>;
    bare.b = 2;
    bare.a = 1;
    expect(canonicalJson(bare)).toBe('{"a":1,"b":2}');
    const shared = { k: [1] };
    expect(canonicalJson({ x: shared, y: shared, z: [shared, shared] })).toBe(
      '{"x":{"k":[1]},"y":{"k":[1]},"z":[{"k":[1]},{"k":[1]}]}',
    );
  });

  it("keeps a __proto__ key as data", () => {
    const parsed: unknown = JSON.parse('{"__proto__":{"polluted":true},"a":1}');
    expect(canonicalJson(parsed)).toBe('{"__proto__":{"polluted":true},"a":1}');
  });

  it("writes large safe integers exactly", () => {
    expect(canonicalJson([Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER])).toBe(
      "[9007199254740991,-9007199254740991]",
    );
  });
});

describe("canonicalJson rejections", () => {
  const cases: ReadonlyArray<{ name: string; value: unknown; code: string; path: string; mentions: RegExp }> = [
    { name: "undefined property", value: { a: [0, 1, { b: undefined }] }, code: "unsupported_type", path: "$.a[2].b", mentions: /undefined.*null/ },
    { name: "undefined array item", value: [1, undefined], code: "unsupported_type", path: "$[1]", mentions: /undefined/ },
    { name: "undefined at the top", value: undefined, code: "unsupported_type", path: "$", mentions: /undefined/ },
    { name: "sparse array hole", value: [1, , 3], code: "unsupported_type", path: "$[1]", mentions: /hole/ },
    { name: "function", value: { run: () => 1 }, code: "unsupported_type", path: "$.run", mentions: /function/ },
    { name: "symbol", value: { s: Symbol("x") }, code: "unsupported_type", path: "$.s", mentions: /symbol/ },
    { name: "symbol key", value: { [Symbol("k")]: 1 }, code: "unsupported_type", path: "$", mentions: /symbol key/ },
    { name: "bigint", value: { big: 10n }, code: "unsupported_type", path: "$.big", mentions: /bigint.*string/ },
    { name: "NaN", value: { n: [NaN] }, code: "non_finite_number", path: "$.n[0]", mentions: /NaN/ },
    { name: "Infinity", value: { n: Infinity }, code: "non_finite_number", path: "$.n", mentions: /Infinity/ },
    { name: "-Infinity", value: [-Infinity], code: "non_finite_number", path: "$[0]", mentions: /-Infinity/ },
    { name: "lone high surrogate", value: { t: "abc\uD83D" }, code: "lone_surrogate", path: "$.t", mentions: /U\+D83D at index 3/ },
    { name: "lone low surrogate", value: ["\uDE00x"], code: "lone_surrogate", path: "$[0]", mentions: /U\+DE00/ },
    { name: "swapped surrogate pair", value: "\uDE00\uD83D", code: "lone_surrogate", path: "$", mentions: /surrogate/ },
    { name: "lone surrogate in a key", value: { ok: { "k\uD800": 1 } }, code: "lone_surrogate", path: '$.ok["k\\ud800"]', mentions: /key/ },
    { name: "Date", value: { when: new Date(0) }, code: "non_plain_object", path: "$.when", mentions: /a Date.*convert it first.*ISO/ },
    { name: "Map", value: [new Map()], code: "non_plain_object", path: "$[0]", mentions: /a Map.*convert it first/ },
    { name: "class instance", value: { x: new (class Widget {})() }, code: "non_plain_object", path: "$.x", mentions: /a Widget/ },
    { name: "boxed string", value: { s: new String("x") }, code: "non_plain_object", path: "$.s", mentions: /String/ },
    { name: "typed array", value: new Uint8Array(2), code: "non_plain_object", path: "$", mentions: /an? Uint8Array/ },
    { name: "array subclass", value: { xs: new (class Items extends Array {})() }, code: "non_plain_object", path: "$.xs", mentions: /Array\.from/ },
    { name: "key needing quotes in the path", value: { "my key": { "0": undefined } }, code: "unsupported_type", path: '$["my key"]["0"]', mentions: /undefined/ },
  ];

  for (const testCase of cases) {
    it(`rejects ${testCase.name} with ${testCase.code} at ${testCase.path}`, async () => {
      const error = failure(testCase.value);
      expect(error).toBeInstanceOf(ExtensionApiError);
      expect(error.code).toBe(testCase.code);
      expect(error.path).toBe(testCase.path);
      expect(error.message).toContain(testCase.path);
      expect(error.message).toMatch(testCase.mentions);
      await expect(canonicalHash(testCase.value)).rejects.toBeInstanceOf(CanonicalJsonError);
    });
  }

  it("rejects a cycle and names both ends", () => {
    const root: Record<string, unknown> = { a: { b: [] as unknown[] } };
    ((root.a as { b: unknown[] }).b).push(root.a);
    const error = failure(root);
    expect(error.code).toBe("cycle");
    expect(error.path).toBe("$.a.b[0]");
    expect(error.message).toMatch(/\$\.a\.b\[0\].*own ancestor \$\.a/);
  });

  it("rejects a self-containing array", () => {
    const items: unknown[] = [];
    items.push(items);
    expect(failure(items)).toMatchObject({ code: "cycle", path: "$[0]" });
  });

  it("rejects an object with toJSON instead of silently calling it", () => {
    expect(failure({ v: { toJSON: () => "x" } })).toMatchObject({ code: "unsupported_type", path: "$.v.toJSON" });
  });
});

describe("compareCodePoints", () => {
  it("orders a prefix first and equal strings as equal", () => {
    expect(compareCodePoints("a", "ab")).toBeLessThan(0);
    expect(compareCodePoints("ab", "a")).toBeGreaterThan(0);
    expect(compareCodePoints("\u{1F600}x", "\u{1F600}x")).toBe(0);
  });

  it("puts an astral character after every BMP character", () => {
    expect(compareCodePoints("\u{10000}", "\uFFFF")).toBeGreaterThan(0);
    expect(compareCodePoints("\uE000", "\u{1F600}")).toBeLessThan(0);
    expect(compareCodePoints("\u{1F600}", "\u{1F601}")).toBeLessThan(0);
  });
});

describe("isPlainObject", () => {
  it("accepts literals and null-prototype objects only", () => {
    expect(isPlainObject({})).toBe(true);
    expect(isPlainObject(Object.create(null))).toBe(true);
    expect(isPlainObject([])).toBe(false);
    expect(isPlainObject(new Date())).toBe(false);
    expect(isPlainObject(null)).toBe(false);
    expect(isPlainObject("x")).toBe(false);
  });
});

import { describe, expect, it } from "vitest";
import { isRecord } from "../../src/core/guards.ts";

describe("isRecord", () => {
  it("accepts objects whose keys can be read, whatever their prototype", () => {
    for (const value of [{}, { a: 1 }, Object.create(null), new Map(), new Date(0)]) expect(isRecord(value)).toBe(true);
  });

  it("rejects null, arrays and every primitive", () => {
    for (const value of [null, undefined, [], [1], "x", 0, true, Symbol("s"), () => 1]) expect(isRecord(value)).toBe(false);
  });
});

import { describe, expect, it } from "vitest";
import { isOneOf } from "../../src/extension-api/one-of.ts";

const COLOURS = Object.freeze(["red", "green"] as const);

describe("isOneOf", () => {
  it("accepts exactly the listed strings", () => {
    expect(isOneOf(COLOURS, "red")).toBe(true);
    expect(isOneOf(COLOURS, "green")).toBe(true);
    expect(isOneOf(COLOURS, "blue")).toBe(false);
    expect(isOneOf(COLOURS, "")).toBe(false);
    expect(isOneOf(COLOURS, "RED")).toBe(false);
  });

  it("rejects every non-string, even one that would stringify to a listed value", () => {
    const stringish = { toString: () => "red" };
    for (const value of [undefined, null, 0, true, ["red"], stringish]) expect(isOneOf(COLOURS, value)).toBe(false);
  });
});

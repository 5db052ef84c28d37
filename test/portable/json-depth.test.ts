import { describe, expect, it } from "vitest";
import { jsonDepthExcess } from "../../src/core/json-depth.ts";

const nested = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;

describe("jsonDepthExcess", () => {
  it("accepts nesting up to the limit and names where it is first exceeded", () => {
    expect(jsonDepthExcess(nested(64), 64)).toBeUndefined();
    expect(jsonDepthExcess(nested(65), 64)).toEqual({ path: "[0][0][0][0][0][0]…" });
    expect(jsonDepthExcess(`{"metadata":${nested(64)}}`, 64)).toEqual({ path: "metadata[0][0][0][0][0]…" });
    expect(jsonDepthExcess(`{"config":{"configurable":{"x":${nested(3)}}}}`, 4)).toEqual({ path: "config.configurable.x[0]" });
    expect(jsonDepthExcess("{}", 0)).toEqual({ path: "body" });
  });

  it("counts the entry a deep value sits at: later keys and array indices", () => {
    expect(jsonDepthExcess(`{"a":1,"b":{"c":[1,2,{"d":[[]]}]}}`, 5)).toEqual({ path: "b.c[2].d[0]" });
    expect(jsonDepthExcess(`[{},{},[[[]]]]`, 3)).toEqual({ path: "[2][0][0]" });
  });

  it("never counts brackets inside strings, escaped quotes included", () => {
    expect(jsonDepthExcess(JSON.stringify({ text: "[[[[{{{{\\\"[[[[" + "[".repeat(1000) }), 2)).toBeUndefined();
    expect(jsonDepthExcess(`{"k\\"ey":${nested(2)}}`, 2)).toEqual({ path: 'k\\"ey[0]' });
  });

  it("shortens a long key and leaves text that is not JSON to the parser", () => {
    const key = "k".repeat(100);
    expect(jsonDepthExcess(`{"${key}":[[]]}`, 2)?.path).toBe(`${"k".repeat(40)}…[0]`);
    expect(jsonDepthExcess("not json ]]]}}}", 1)).toBeUndefined();
    expect(jsonDepthExcess('{"unterminated": "[[[', 1)).toBeUndefined();
  });

  it("handles a 2 MB text of a million levels without recursion", () => {
    expect(jsonDepthExcess(nested(1_000_000), 64)?.path).toBe("[0][0][0][0][0][0]…");
    expect(jsonDepthExcess(nested(1_000_000), 2_000_000)).toBeUndefined();
  });
});

import * as v from "valibot";
import { describe, expect, it } from "vitest";
import { parseMiddlewareConfig } from "../../src/engine/middleware-config.ts";

const Schema = v.strictObject({ lazy_init: v.optional(v.boolean(), true) });

describe("parseMiddlewareConfig", () => {
  it("fills defaults, reading undefined and null as no config", () => {
    expect(parseMiddlewareConfig(Schema, undefined, "ThreadData")).toEqual({ lazy_init: true });
    expect(parseMiddlewareConfig(Schema, null, "ThreadData")).toEqual({ lazy_init: true });
    expect(parseMiddlewareConfig(Schema, { lazy_init: false }, "ThreadData")).toEqual({ lazy_init: false });
  });

  it("names the middleware and the key, and says what to do", () => {
    expect(() => parseMiddlewareConfig(Schema, { lazy: true }, "ThreadData")).toThrow(
      expect.objectContaining({
        code: "invalid_middleware_config",
        message: 'ThreadData.lazy: Invalid key: Expected never but received "lazy". Remove or fix this key.',
      }),
    );
    expect(() => parseMiddlewareConfig(Schema, { lazy_init: "yes" }, "ThreadData", "Use true or false.")).toThrow(
      expect.objectContaining({ message: 'ThreadData.lazy_init: Invalid type: Expected boolean but received "yes". Use true or false.' }),
    );
  });
});

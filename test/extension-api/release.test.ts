import { describe, expect, it } from "vitest";
import {
  ExtensionApiError,
  collectReleasePolicies,
  hashLongText,
  isReleasePolicyProvider,
  middlewareName,
  unwrapMiddleware,
} from "../../src/extension-api/index.ts";

class LoopDetection {
  readonly name = "LoopDetection";
  constructor(private readonly warnThreshold = 3) {}
  releasePolicyParameters(): Record<string, unknown> {
    return { warn_threshold: this.warnThreshold, hard_limit: 5 };
  }
}

class Plain {
  readonly name = "Plain";
}

/** Stands in for the extension isolation wrapper: it forwards no declaration. */
class IsolatedMiddleware {
  readonly name = "IsolatedMiddleware";
  constructor(
    readonly inner: object,
    readonly source: string,
  ) {}
}

function provider(name: string, declare: () => unknown): object {
  return { name, releasePolicyParameters: declare };
}

describe("isReleasePolicyProvider", () => {
  it("recognises any object with a releasePolicyParameters method", () => {
    expect(isReleasePolicyProvider(new LoopDetection())).toBe(true);
    expect(isReleasePolicyProvider({ releasePolicyParameters: () => ({}) })).toBe(true);
    expect(isReleasePolicyProvider({ releasePolicyParameters: {} })).toBe(false);
    expect(isReleasePolicyProvider(new Plain())).toBe(false);
    expect(isReleasePolicyProvider(null)).toBe(false);
    expect(isReleasePolicyProvider("LoopDetection")).toBe(false);
  });
});

describe("collectReleasePolicies", () => {
  it("keys declarations by middleware name in stack order and skips undeclared ones", () => {
    const policies = collectReleasePolicies([new Plain(), new LoopDetection(4), provider("Todo", () => ({ state_channel: "todos" }))]);
    expect(policies).toEqual({ LoopDetection: { warn_threshold: 4, hard_limit: 5 }, Todo: { state_channel: "todos" } });
    expect(Object.keys(policies)).toEqual(["LoopDetection", "Todo"]);
  });

  it("numbers repeats Name#2, Name#3", () => {
    const policies = collectReleasePolicies([new LoopDetection(1), new Plain(), new LoopDetection(2), new LoopDetection(3)]);
    expect(policies).toEqual({
      LoopDetection: { warn_threshold: 1, hard_limit: 5 },
      "LoopDetection#2": { warn_threshold: 2, hard_limit: 5 },
      "LoopDetection#3": { warn_threshold: 3, hard_limit: 5 },
    });
  });

  it("never overwrites an entry whose name already looks numbered", () => {
    const policies = collectReleasePolicies([
      provider("A#2", () => ({ which: "literal" })),
      provider("A", () => ({ which: "first" })),
      provider("A", () => ({ which: "second" })),
    ]);
    expect(policies).toEqual({ "A#2": { which: "literal" }, A: { which: "first" }, "A#3": { which: "second" } });
  });

  it("describes the extension's middleware inside isolation wrappers, however deeply nested", () => {
    const wrapped = new IsolatedMiddleware(new IsolatedMiddleware(new LoopDetection(9), "acme"), "acme");
    expect(collectReleasePolicies([wrapped])).toEqual({ LoopDetection: { warn_threshold: 9, hard_limit: 5 } });
    expect(collectReleasePolicies([new IsolatedMiddleware(new Plain(), "acme")])).toEqual({});
  });

  it("falls back to the class name when a middleware has no name", () => {
    class TokenBudget {
      releasePolicyParameters() {
        return { config: { max_tokens: 1000 } };
      }
    }
    expect(collectReleasePolicies([new TokenBudget(), { name: "", releasePolicyParameters: () => ({}) }])).toEqual({
      TokenBudget: { config: { max_tokens: 1000 } },
      Object: {},
    });
  });

  it("records a throwing declaration by its error type and carries on", () => {
    class PolicyUnavailable extends Error {}
    const policies = collectReleasePolicies([
      provider("Broken", () => {
        throw new PolicyUnavailable("boom");
      }),
      provider("Typed", () => {
        throw new TypeError("bad");
      }),
      provider("Named", () => {
        throw Object.assign(new Error("late"), { name: "TimeoutError" });
      }),
      new LoopDetection(),
    ]);
    expect(policies).toEqual({
      Broken: { error: "PolicyUnavailable" },
      Typed: { error: "TypeError" },
      Named: { error: "TimeoutError" },
      LoopDetection: { warn_threshold: 3, hard_limit: 5 },
    });
  });

  it("records a declaration that is not a mapping as NonMappingDeclaration", () => {
    const policies = collectReleasePolicies([
      provider("List", () => [1, 2]),
      provider("Text", () => "x"),
      provider("Nothing", () => undefined),
      provider("Async", async () => ({ a: 1 })),
      provider("Dated", () => new Date(0)),
    ]);
    for (const key of ["List", "Text", "Nothing", "Async", "Dated"]) {
      expect(policies[key]).toEqual({ error: "NonMappingDeclaration" });
    }
  });

  it("records a declaration canonical JSON cannot encode as NonJsonDeclaration", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const policies = collectReleasePolicies([
      provider("Undef", () => ({ a: undefined })),
      provider("Nan", () => ({ ratio: NaN })),
      provider("Fn", () => ({ f: () => 1 })),
      provider("Cycle", () => cyclic),
      provider("Surrogate", () => ({ text: "\uD800" })),
      provider("Dated", () => ({ at: new Date(0) })),
    ]);
    for (const key of ["Undef", "Nan", "Fn", "Cycle", "Surrogate", "Dated"]) {
      expect(policies[key]).toEqual({ error: "NonJsonDeclaration" });
    }
  });

  it("records a copy, so later mutation of the middleware's state does not rewrite it", () => {
    const state = { allowed_tools: ["bash"] };
    const policies = collectReleasePolicies([provider("Allowlist", () => state)]);
    state.allowed_tools.push("web_fetch");
    expect(policies).toEqual({ Allowlist: { allowed_tools: ["bash"] } });
  });

  it("returns plain data that canonical JSON accepts, even with hostile names", () => {
    const policies = collectReleasePolicies([provider("__proto__", () => ({ a: 1 }))]);
    expect(Object.getPrototypeOf(policies)).toBe(Object.prototype);
    expect(Object.keys(policies)).toEqual(["__proto__"]);
  });

  it("returns an empty record for an empty stack", () => {
    expect(collectReleasePolicies([])).toEqual({});
  });
});

describe("unwrapMiddleware and middlewareName", () => {
  it("stops at a member whose inner is not an object and survives a self-referencing wrapper", () => {
    const notAWrapper = { inner: "text" };
    expect(unwrapMiddleware(notAWrapper)).toBe(notAWrapper);
    const loop: { inner?: object } = {};
    loop.inner = loop;
    expect(unwrapMiddleware(loop)).toBe(loop);
  });

  it("names anonymous members", () => {
    expect(middlewareName(Object.create(null))).toBe("AnonymousMiddleware");
    expect(middlewareName(undefined)).toBe("AnonymousMiddleware");
  });
});

describe("hashLongText", () => {
  it("returns a short text unchanged", async () => {
    expect(await hashLongText("merge_leading_system_message")).toBe("merge_leading_system_message");
    expect(await hashLongText("x".repeat(256))).toBe("x".repeat(256));
  });

  it("replaces a text longer than the threshold with its SHA-256 and length", async () => {
    // Digest computed independently: python3 hashlib.sha256(("é" * 300).encode()).hexdigest()
    const digest = await hashLongText("é".repeat(300));
    expect(digest).toEqual({ sha256: "7250b66610f8b7dbd6f5e5426d2143bcba6d826cedb4bea8a358695da78db023", length: 300 });
    expect(JSON.stringify(digest)).not.toContain("é");
  });

  it("counts code points, not UTF-16 units", async () => {
    expect(await hashLongText("🦌".repeat(256))).toBe("🦌".repeat(256));
    // python3: hashlib.sha256(("🦌" * 257).encode()).hexdigest(), len == 257
    expect(await hashLongText("🦌".repeat(257))).toEqual({
      sha256: "79d04813f9bf52be414f7112ede3bd6db7475ed3b5cf5ee12a41bbf5e3506f83",
      length: 257,
    });
  });

  it("honours a custom threshold, including zero", async () => {
    expect(await hashLongText("abc", 2)).toMatchObject({ length: 3 });
    expect(await hashLongText("", 0)).toBe("");
    expect(await hashLongText("a", 0)).toMatchObject({ length: 1 });
  });

  it("refuses a bad threshold, a non-string and a lone surrogate", async () => {
    await expect(hashLongText("abc", -1)).rejects.toMatchObject({ code: "invalid_threshold" });
    await expect(hashLongText("abc", 1.5)).rejects.toBeInstanceOf(ExtensionApiError);
    await expect(hashLongText(42 as unknown as string)).rejects.toMatchObject({ code: "invalid_text" });
    await expect(hashLongText(`${"a".repeat(300)}\uD800`)).rejects.toMatchObject({ code: "lone_surrogate" });
  });
});

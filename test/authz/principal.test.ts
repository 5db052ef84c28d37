import { describe, expect, it } from "vitest";
import { buildPrincipalFromContext, normalizeAuthzAttributes } from "../../src/authz/principal.ts";

const USER = { default_role: "user" };

describe("buildPrincipalFromContext", () => {
  it("an empty context gives the default role and nothing else", () => {
    expect(buildPrincipalFromContext({}, USER)).toEqual({
      userId: null,
      role: "user",
      oauthProvider: null,
      oauthId: null,
      channelUserId: null,
      isInternal: false,
      attributes: {},
    });
  });

  it("maps every identity field of the run context", () => {
    const principal = buildPrincipalFromContext(
      {
        user_id: "u1",
        user_role: "admin",
        oauth_provider: "github",
        oauth_id: "gh-123",
        channel_user_id: "ou_sender_1",
        is_internal: true,
        authz_attributes: { department: "eng" },
        thread_id: "ignored",
      },
      USER,
    );
    expect(principal).toEqual({
      userId: "u1",
      role: "admin",
      oauthProvider: "github",
      oauthId: "gh-123",
      channelUserId: "ou_sender_1",
      isInternal: true,
      attributes: { department: "eng" },
    });
  });

  it.each([
    ["missing", {}],
    ["null", { user_role: null }],
    ["empty", { user_role: "" }],
  ])("a %s role becomes default_role", (_label, context) => {
    expect(buildPrincipalFromContext(context, { default_role: "guest" }).role).toBe("guest");
  });

  it("keeps an unknown but non-empty role: the provider decides what it may do", () => {
    expect(buildPrincipalFromContext({ user_role: "editor" }, USER).role).toBe("editor");
  });

  it.each([
    [true, true],
    [false, false],
    [1, false],
    ["true", false],
    ["1", false],
    [null, false],
    [[], false],
    [{}, false],
  ])("is_internal %j counts as internal only when it is the boolean true (%s)", (value, expected) => {
    expect(buildPrincipalFromContext({ is_internal: value }, USER).isInternal).toBe(expected);
  });

  it("copies authz_attributes, deeply, so changing the context later changes nothing", () => {
    const attributes = { team: "platform", scopes: ["a"] };
    const principal = buildPrincipalFromContext({ authz_attributes: attributes }, USER);
    attributes.team = "changed";
    attributes.scopes.push("b");
    expect(principal.attributes).toEqual({ team: "platform", scopes: ["a"] });
  });

  it("is frozen: a provider cannot change what the next check sees", () => {
    const principal = buildPrincipalFromContext({ authz_attributes: { team: "platform" } }, USER);
    expect(Object.isFrozen(principal)).toBe(true);
    expect(Object.isFrozen(principal.attributes)).toBe(true);
  });

  it.each([[[["key", "value"]]], ["not a mapping"], [42], [[1, 2, 3]]])("rejects authz_attributes that are not a mapping (%j)", (invalid) => {
    expect(() => buildPrincipalFromContext({ authz_attributes: invalid }, USER)).toThrow(
      expect.objectContaining({ code: "invalid_authz_attributes", message: expect.stringMatching(/authz_attributes must be a mapping/) }),
    );
  });

  it("names the type it got", () => {
    expect(() => normalizeAuthzAttributes([1, 2])).toThrow(/got list/);
  });

  it("rejects a non-string identity field instead of coercing it", () => {
    expect(() => buildPrincipalFromContext({ user_role: ["admin"] }, USER)).toThrow(
      expect.objectContaining({ code: "invalid_principal_context", message: expect.stringContaining("user_role") }),
    );
  });

  it("does not change its input", () => {
    const context = { user_id: "u1", user_role: "admin", authz_attributes: { k: "v" } };
    const before = structuredClone(context);
    buildPrincipalFromContext(context, USER);
    expect(context).toEqual(before);
  });
});

import * as v from "valibot";
import { describe, expect, it } from "vitest";
import {
  AUTHORIZATION_DEFAULTS,
  AuthorizationConfigSchema,
  GUARDRAILS_DEFAULTS,
  GuardrailsConfigSchema,
  type AuthorizationConfigInput,
  type GuardrailsConfigInput,
} from "../../src/authz/config.ts";
import { AllowlistProvider, type GuardrailProvider } from "../../src/authz/guardrail-provider.ts";
import type { Principal } from "../../src/authz/principal.ts";
import type { AuthorizationProvider } from "../../src/authz/provider.ts";
import { RbacAuthorizationProvider } from "../../src/authz/rbac.ts";
import { resolveAuthorizationProvider, resolveGuardrailProvider } from "../../src/authz/runtime.ts";

const authz = (input: AuthorizationConfigInput) => v.parse(AuthorizationConfigSchema, input);
const guardrails = (input: GuardrailsConfigInput) => v.parse(GuardrailsConfigSchema, input);

const principal: Principal = { userId: null, role: "user", oauthProvider: null, oauthId: null, channelUserId: null, isInternal: false, attributes: {} };

const custom: AuthorizationProvider = {
  name: "custom",
  authorize: () => ({ allowed: true, rule: "custom.allowed" }),
  filterResources: (_p, _r, names) => names,
};

describe("config sections", () => {
  it("defaults: both disabled and fail-closed, default_role user", () => {
    expect(v.parse(AuthorizationConfigSchema, {})).toEqual(AUTHORIZATION_DEFAULTS);
    expect(v.parse(GuardrailsConfigSchema, {})).toEqual(GUARDRAILS_DEFAULTS);
    expect(AUTHORIZATION_DEFAULTS).toMatchObject({ enabled: false, fail_closed: true, default_role: "user" });
    expect(GUARDRAILS_DEFAULTS).toMatchObject({ enabled: false, fail_closed: true, passport: null, provider: null });
  });

  it("reads upstream's provider form verbatim", () => {
    const parsed = guardrails({
      enabled: true,
      fail_closed: false,
      passport: "./guardrails/passport.json",
      provider: { use: "deerflow.guardrails.builtin:AllowlistProvider", config: { denied_tools: ["bash"] } },
    });
    expect(parsed.provider).toEqual({ use: "deerflow.guardrails.builtin:AllowlistProvider", config: { denied_tools: ["bash"] } });
  });

  it("rejects unknown keys, both authorization forms at once, and lists beside a { use, config } provider", () => {
    expect(() => authz({ enabled: true, rolez: {} } as AuthorizationConfigInput)).toThrow();
    expect(() => authz({ roles: { user: {} }, provider: { use: "rbac", config: { roles: { user: {} } } } })).toThrow(
      "set either roles (the built-in RBAC) or provider, not both",
    );
    expect(() => guardrails({ provider: { use: "allowlist" }, allowed_tools: ["bash"] })).toThrow("the lists go under provider.config");
    expect(() => authz({ default_role: "" })).toThrow();
  });
});

describe("resolveAuthorizationProvider", () => {
  it("disabled builds nothing, even with a provider that could not be built", () => {
    expect(resolveAuthorizationProvider(authz({ enabled: false, provider: { use: "nonexistent.module:Fake" } }))).toBeNull();
  });

  it("enabled without any provider fails clearly", () => {
    expect(() => resolveAuthorizationProvider(authz({ enabled: true }))).toThrow(
      expect.objectContaining({ code: "authorization_provider_missing", message: expect.stringContaining("no provider is configured") }),
    );
  });

  it("builds the built-in RBAC from roles and from upstream's provider form", () => {
    const fromRoles = resolveAuthorizationProvider(authz({ enabled: true, default_role: "admin", roles: { admin: { tools: { allow: "*" } } } }));
    expect(fromRoles).toBeInstanceOf(RbacAuthorizationProvider);
    const fromProvider = resolveAuthorizationProvider(
      authz({
        enabled: true,
        provider: { use: "deerflow.authz.rbac:RbacAuthorizationProvider", config: { roles: { user: { tools: { allow: ["web_search"] } } } } },
      }),
    );
    expect(fromProvider?.name).toBe("rbac");
    expect(fromProvider?.filterResources(principal, "tool", ["bash", "web_search"])).toEqual(["web_search"]);
  });

  it("names an unknown class path and says how to plug in a custom provider", () => {
    expect(() => resolveAuthorizationProvider(authz({ enabled: true, provider: { use: "nonexistent.module:FakeProvider" } }))).toThrow(
      expect.objectContaining({ code: "unknown_authorization_provider", message: expect.stringContaining("nonexistent.module:FakeProvider") }),
    );
  });

  it("surfaces RBAC config errors with their path", () => {
    expect(() =>
      resolveAuthorizationProvider(authz({ enabled: true, provider: { use: "rbac", config: { roles: { user: {} }, bogus: true } } })),
    ).toThrow(/^authorization\.provider\.config\.bogus: unknown provider config key "bogus"/);
    expect(() => resolveAuthorizationProvider(authz({ enabled: true, provider: { use: "rbac", config: { roles: "not a dict" } } }))).toThrow(
      /^authorization\.provider\.config\.roles: roles must be a mapping/,
    );
  });

  it("an unknown default_role fails agent construction, naming the role and the known roles", () => {
    expect(() => resolveAuthorizationProvider(authz({ enabled: true, default_role: "missing", roles: { user: { tools: { allow: "*" } } } }))).toThrow(
      expect.objectContaining({
        code: "authorization_unknown_role",
        message: expect.stringMatching(/authorization\.default_role 'missing' is not defined; known roles: \["user"\]/),
      }),
    );
  });

  it("uses a custom provider object as is", () => {
    expect(resolveAuthorizationProvider(authz({ enabled: true }), custom)).toBe(custom);
    expect(() => resolveAuthorizationProvider(authz({ enabled: true }), {} as AuthorizationProvider)).toThrow(
      expect.objectContaining({ code: "invalid_authorization_provider" }),
    );
  });

  it("checks default_role against a provided RBAC instance too", () => {
    const rbac = new RbacAuthorizationProvider({ roles: { guest: {} } });
    expect(() => resolveAuthorizationProvider(authz({ enabled: true }), rbac)).toThrow("authorization.default_role 'user' is not defined");
    expect(resolveAuthorizationProvider(authz({ enabled: true, default_role: "guest" }), rbac)).toBe(rbac);
  });

  it("never caches: each build gets a fresh instance", () => {
    const config = authz({ enabled: true, roles: { user: {} } });
    expect(resolveAuthorizationProvider(config)).not.toBe(resolveAuthorizationProvider(config));
  });
});

describe("resolveGuardrailProvider", () => {
  it("disabled builds nothing", () => {
    expect(resolveGuardrailProvider(guardrails({ enabled: false, provider: "nonexistent" }))).toBeNull();
  });

  it("enabled without a provider fails clearly", () => {
    expect(() => resolveGuardrailProvider(guardrails({ enabled: true }))).toThrow(expect.objectContaining({ code: "guardrail_provider_missing" }));
  });

  it("builds the allowlist from the shorthand and from upstream's form", () => {
    const short = resolveGuardrailProvider(guardrails({ enabled: true, provider: "allowlist", allowed_tools: ["web_search"] }));
    expect(short).toBeInstanceOf(AllowlistProvider);
    expect(short?.releasePolicyParameters?.()).toEqual({ allowed_tools: ["web_search"], denied_tools: [] });
    const upstream = resolveGuardrailProvider(
      guardrails({ enabled: true, provider: { use: "deerflow.guardrails.builtin:AllowlistProvider", config: { denied_tools: ["bash", "write_file"] } } }),
    );
    expect(upstream?.releasePolicyParameters?.()).toEqual({ allowed_tools: null, denied_tools: ["bash", "write_file"] });
  });

  it("rejects an unknown provider and bad allowlist config with their path", () => {
    expect(() => resolveGuardrailProvider(guardrails({ enabled: true, provider: "my_package:MyGuardrailProvider" }))).toThrow(
      expect.objectContaining({ code: "unknown_guardrail_provider" }),
    );
    expect(() => resolveGuardrailProvider(guardrails({ enabled: true, provider: { use: "allowlist", config: { allowed: ["x"] } } }))).toThrow(
      /^guardrails\.provider\.config\.allowed: /,
    );
  });

  it("uses a custom provider object as is", () => {
    const provider: GuardrailProvider = { name: "oap", evaluate: () => ({ allow: true }) };
    expect(resolveGuardrailProvider(guardrails({ enabled: true }), provider)).toBe(provider);
  });
});

import { describe, expect, it } from "vitest";
import type { Principal } from "../../src/authz/principal.ts";
import type { AuthzRequest } from "../../src/authz/provider.ts";
import { RbacAuthorizationProvider } from "../../src/authz/rbac.ts";

function principal(role: string | null = "user"): Principal {
  return { userId: null, role, oauthProvider: null, oauthId: null, channelUserId: null, isInternal: false, attributes: {} };
}

function req(target: string, resource = "tool", action = "call"): AuthzRequest {
  return { resource, action, target };
}

function rbac(roles: unknown): RbacAuthorizationProvider {
  return new RbacAuthorizationProvider({ roles });
}

const allowed = (p: RbacAuthorizationProvider, target: string, role = "user", resource = "tool") =>
  p.authorize(principal(role), req(target, resource)).allowed;

describe("RbacAuthorizationProvider: allow", () => {
  it("'*' and true allow everything", () => {
    expect(allowed(rbac({ user: { tools: { allow: "*" } } }), "bash")).toBe(true);
    expect(allowed(rbac({ user: { tools: { allow: true } } }), "write_file")).toBe(true);
  });

  it("false and [] allow nothing", () => {
    expect(allowed(rbac({ user: { tools: { allow: false } } }), "web_search")).toBe(false);
    expect(allowed(rbac({ user: { tools: { allow: [] } } }), "bash")).toBe(false);
  });

  it("a list allows exactly its names", () => {
    const p = rbac({ user: { tools: { allow: ["web_search", "read_file"] } } });
    expect(allowed(p, "web_search")).toBe(true);
    expect(allowed(p, "read_file")).toBe(true);
    expect(allowed(p, "bash")).toBe(false);
  });

  it("a missing allow means everything, deny still applies", () => {
    const p = rbac({ user: { tools: { deny: ["bash"] } } });
    expect(allowed(p, "bash")).toBe(false);
    expect(allowed(p, "web_search")).toBe(true);
  });

  it("deny wins over '*', a list and true", () => {
    expect(allowed(rbac({ user: { tools: { allow: "*", deny: ["bash"] } } }), "bash")).toBe(false);
    expect(allowed(rbac({ user: { tools: { allow: ["bash", "web_search"], deny: ["bash"] } } }), "bash")).toBe(false);
    expect(allowed(rbac({ user: { tools: { allow: true, deny: ["bash"] } } }), "bash")).toBe(false);
  });

  it("a denial names the rule and says who was denied what", () => {
    const decision = rbac({ guest: { tools: { allow: ["web_search"] } } }).authorize(principal("guest"), req("bash"));
    expect(decision).toEqual({
      allowed: false,
      rule: "authz.denied",
      reason: "role 'guest' is denied 'bash' on resource 'tool'",
      policyId: "rbac:deny",
    });
  });
});

describe("RbacAuthorizationProvider: resources", () => {
  it("maps request resources to config keys (tool → tools, model → models)", () => {
    const p = rbac({ user: { tools: { allow: ["web_search"] }, models: { allow: ["gpt-4o"] } } });
    expect(allowed(p, "web_search", "user", "tool")).toBe(true);
    expect(allowed(p, "bash", "user", "tool")).toBe(false);
    expect(allowed(p, "gpt-4o", "user", "model")).toBe(true);
    expect(allowed(p, "gpt-4", "user", "model")).toBe(false);
  });

  it("sandbox and custom resources use their own name", () => {
    expect(allowed(rbac({ user: { sandbox: { allow: [] } } }), "default", "user", "sandbox")).toBe(false);
    expect(allowed(rbac({ user: { custom_resource: { allow: ["item1"] } } }), "item1", "user", "custom_resource")).toBe(true);
  });

  it("a role with no policy for a resource is unrestricted for it", () => {
    const decision = rbac({ user: { tools: { allow: ["web_search"] } } }).authorize(principal(), req("any", "model", "use"));
    expect(decision).toMatchObject({ allowed: true, rule: "authz.no_policy", policyId: "rbac:unrestricted" });
  });

  it.each([
    ["tool", "tools"],
    ["model", "models"],
    ["skill", "skills"],
    ["mcp_server", "mcp_servers"],
    ["route", "routes"],
  ])("rejects the request alias %s as a config key (use %s)", (alias, key) => {
    expect(() => rbac({ user: { [alias]: { allow: [] } } })).toThrow(`resource key '${alias}' is a reserved request alias; use '${key}'`);
  });
});

describe("RbacAuthorizationProvider: roles", () => {
  it("applies each role's own policy", () => {
    const p = rbac({ admin: { tools: { allow: "*" } }, user: { tools: { allow: [] } } });
    expect(allowed(p, "bash", "admin")).toBe(true);
    expect(allowed(p, "bash", "user")).toBe(false);
  });

  it("an unknown role throws instead of allowing", () => {
    expect(() => rbac({ admin: {} }).authorize(principal("editor"), req("bash"))).toThrow(
      expect.objectContaining({ code: "authorization_unknown_role", message: expect.stringContaining("Unknown role 'editor'") }),
    );
  });

  it.each([null, ""])("a missing role (%j) throws", (role) => {
    expect(() => rbac({ admin: {} }).authorize(principal(role), req("bash"))).toThrow(expect.objectContaining({ code: "authorization_missing_role" }));
  });

  it("validateRole names the field and the known roles", () => {
    expect(() => rbac({ user: {}, admin: {} }).validateRole("missing", "authorization.default_role")).toThrow(
      `authorization.default_role 'missing' is not defined; known roles: ["admin","user"]`,
    );
  });
});

describe("RbacAuthorizationProvider: filterResources", () => {
  it("keeps input order and duplicates, never adds, never changes its input", () => {
    const p = rbac({ user: { tools: { allow: ["web_search", "bash", "read_file"] } } });
    const candidates = ["bash", "web_search", "write_file", "read_file", "bash"];
    expect(p.filterResources(principal(), "tool", candidates)).toEqual(["bash", "web_search", "read_file", "bash"]);
    expect(candidates).toEqual(["bash", "web_search", "write_file", "read_file", "bash"]);
  });

  it("agrees with authorize item by item", () => {
    const p = rbac({ user: { tools: { allow: "*", deny: ["bash"] } } });
    const candidates = ["bash", "web_search", "read_file", "write_file"];
    expect(p.filterResources(principal(), "tool", candidates)).toEqual(candidates.filter((c) => allowed(p, c)));
  });

  it("returns everything when the role has no policy", () => {
    expect(rbac({ admin: {} }).filterResources(principal("admin"), "tool", ["a", "b"])).toEqual(["a", "b"]);
  });

  it("raises the same role errors as authorize", () => {
    expect(() => rbac({ user: {} }).filterResources(principal("editor"), "tool", ["bash"])).toThrow("Unknown role");
    expect(() => rbac({ user: {} }).filterResources(principal(null), "tool", ["bash"])).toThrow(expect.objectContaining({ code: "authorization_missing_role" }));
  });

  it("rejects malformed identifiers whatever the policy", () => {
    for (const roles of [{ user: {} }, { user: { tools: { allow: "*" } } }, { user: { tools: { allow: ["bash"] } } }]) {
      const p = rbac(roles);
      expect(() => p.filterResources(principal(), "tool", ["bash", ""])).toThrow("candidates[1] must be a non-empty string");
      expect(() => p.authorize(principal(), req(""))).toThrow("target must be a non-empty string");
    }
    expect(() => rbac({ user: {} }).filterResources(principal(), "", ["bash"])).toThrow("resource type must be a non-empty string");
    expect(() => rbac({ user: {} }).filterResources(principal(), "tool", "bash" as unknown as string[])).toThrow("candidates must be a list");
  });
});

describe("RbacAuthorizationProvider: construction", () => {
  it.each([
    [{ roles: { user: {} }, bogus: true }, "unknown provider config key \"bogus\""],
    [{ rolez: { user: {} } }, "unknown provider config key \"rolez\""],
    [{}, "missing required provider config key roles"],
    [{ roles: ["not", "a", "dict"] }, "roles must be a mapping"],
    [{ roles: { user: "not a dict" } }, "a role must map resource keys"],
    [{ roles: { user: { tools: "not a dict" } } }, "a resource policy must be a mapping"],
    [{ roles: { user: { tools: { allow: 42 } } } }, "allow must be '*', true/false or a list of names"],
    [{ roles: { user: { tools: { allow: "not_wildcard" } } } }, "allow string must be '*'"],
    [{ roles: { user: { tools: { allow: ["ok", 42] } } } }, "every allow entry must be a non-empty string"],
    [{ roles: { user: { tools: { allow: ["ok", ""] } } } }, "every allow entry must be a non-empty string"],
    [{ roles: { user: { tools: { deny: ["ok", null] } } } }, "every deny entry must be a non-empty string"],
    [{ roles: { user: { tools: { deny: 42 } } } }, "deny must be a list of names"],
    [{ roles: { "": { tools: { allow: "*" } } } }, "a role name must be a non-empty string"],
    [{ roles: { user: { "": { allow: "*" } } } }, "a resource key must be a non-empty string"],
    [{ roles: { user: { tools: { allow: null } } } }, "allow must not be null"],
    [{ roles: { user: { tools: { allow: "*", deny: null } } } }, "deny must not be null"],
    [{ roles: { user: { tools: { alow: ["web_search"] } } } }, "unknown policy key \"alow\""],
  ])("rejects %j", (config, message) => {
    expect(() => new RbacAuthorizationProvider(config)).toThrow(expect.objectContaining({ code: "invalid_authorization_config", message: expect.stringContaining(message) }));
  });

  it("names the key's full path", () => {
    expect(() => new RbacAuthorizationProvider({ roles: { user: { tools: { allow: 42 } } } }, { configPath: "authorization" })).toThrow(
      /^authorization\.roles\.user\.tools\.allow: /,
    );
  });

  it("ignores later edits of the config object", () => {
    const roles: Record<string, { tools: { allow: string[] } }> = { user: { tools: { allow: ["bash"] } } };
    const p = rbac(roles);
    roles["user"]!.tools.allow = ["web_search"];
    roles["admin"] = { tools: { allow: ["bash"] } };
    expect(allowed(p, "bash")).toBe(true);
    expect(allowed(p, "web_search")).toBe(false);
    expect(() => allowed(p, "bash", "admin")).toThrow("Unknown role");
  });

  it("declares its roles and a policy hash that moves when the policy does", () => {
    const a = rbac({ user: { tools: { allow: ["bash"] } }, admin: {} }).releasePolicyParameters();
    const b = rbac({ user: { tools: { allow: ["web_search"] } }, admin: {} }).releasePolicyParameters();
    expect(a["known_roles"]).toEqual(["admin", "user"]);
    expect(a["policy_hash"]).toMatch(/^[0-9a-f]{64}$/);
    expect(a["policy_hash"]).not.toBe(b["policy_hash"]);
  });
});

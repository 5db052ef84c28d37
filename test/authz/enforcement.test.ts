import { describe, expect, it } from "vitest";
import {
  ROUTE_PERMISSIONS,
  authorizeModelName,
  authorizeSandbox,
  createSandboxAuthorizer,
  filterToolsForPrincipal,
  resolveRoutePermissions,
} from "../../src/authz/enforcement.ts";
import { buildPrincipalFromContext, type Principal } from "../../src/authz/principal.ts";
import type { AuthorizationProvider, AuthzDecision, AuthzRequest } from "../../src/authz/provider.ts";
import { RbacAuthorizationProvider } from "../../src/authz/rbac.ts";

const user = buildPrincipalFromContext({ user_id: "user-123", user_role: "user" }, { default_role: "user" });

const tool = (name: string) => ({ name, description: name });

/** Records every call; denies or fails the named targets (or resources, for filterResources). */
class RecordingProvider implements AuthorizationProvider {
  readonly name = "recording";
  readonly authorizeCalls: AuthzRequest[] = [];
  readonly filterCalls: Array<[string, readonly string[]]> = [];
  constructor(
    readonly options: { denied?: string[]; errors?: string[]; filter?: (names: readonly string[]) => unknown } = {},
  ) {}
  async authorize(_principal: Principal, request: AuthzRequest): Promise<AuthzDecision> {
    this.authorizeCalls.push(request);
    if (this.options.errors?.includes(request.target)) throw new Error(`provider failed for ${request.target}`);
    const allowed = !this.options.denied?.includes(request.target);
    return { allowed, rule: allowed ? "authz.allowed" : "authz.denied" };
  }
  async filterResources(_principal: Principal, resource: string, names: readonly string[]): Promise<readonly string[]> {
    this.filterCalls.push([resource, [...names]]);
    if (this.options.errors?.includes(resource)) throw new Error(`provider failed for ${resource}`);
    if (this.options.filter) return this.options.filter(names) as readonly string[];
    return names.filter((n) => !this.options.denied?.includes(n));
  }
}

describe("filterToolsForPrincipal (Layer 1)", () => {
  it("keeps only allowed tools, in their order, and asks once for resource tool", async () => {
    const provider = new RecordingProvider({ filter: (names) => names.filter((n) => n === "web_search" || n === "read_file") });
    const filtered = await filterToolsForPrincipal([tool("bash"), tool("web_search"), tool("read_file")], user, provider);
    expect(filtered.map((t) => t.name)).toEqual(["web_search", "read_file"]);
    expect(provider.filterCalls).toEqual([["tool", ["bash", "web_search", "read_file"]]]);
  });

  it("no provider (authorization disabled) keeps every tool", async () => {
    const tools = [tool("bash")];
    expect(await filterToolsForPrincipal(tools, user, null)).toEqual(tools);
  });

  it("a failing provider leaves no tools when fail-closed, all of them when open", async () => {
    const tools = [tool("bash"), tool("web_search")];
    const provider = new RecordingProvider({ errors: ["tool"] });
    expect(await filterToolsForPrincipal(tools, user, provider)).toEqual([]);
    expect(await filterToolsForPrincipal(tools, user, provider, { failClosed: false })).toEqual(tools);
  });

  it.each([["bash"], [["bash", 1]], [null]])("a malformed answer (%j) fails closed", async (answer) => {
    const provider = new RecordingProvider({ filter: () => answer });
    expect(await filterToolsForPrincipal([tool("bash")], user, provider)).toEqual([]);
  });

  it("a provider cannot add a tool that was not a candidate", async () => {
    const provider = new RecordingProvider({ filter: (names) => [...names, "injected_tool"] });
    expect((await filterToolsForPrincipal([tool("bash")], user, provider)).map((t) => t.name)).toEqual(["bash"]);
  });

  it("works with the built-in RBAC (unknown role → provider error → fail closed)", async () => {
    const rbac = new RbacAuthorizationProvider({ roles: { guest: { tools: { allow: ["web_search"] } } } });
    const guest = buildPrincipalFromContext({ user_role: "guest" }, { default_role: "guest" });
    expect((await filterToolsForPrincipal([tool("bash"), tool("web_search")], guest, rbac)).map((t) => t.name)).toEqual(["web_search"]);
    expect(await filterToolsForPrincipal([tool("web_search")], user, rbac)).toEqual([]);
  });
});

describe("authorizeModelName (model:use at agent creation)", () => {
  const models = ["gpt-4", "claude-3"];

  it("no provider is a no-op", async () => {
    expect(await authorizeModelName("gpt-4", user, null, models)).toBe("gpt-4");
  });

  it("an allowed model is kept, checked as model:use", async () => {
    const provider = new RecordingProvider();
    expect(await authorizeModelName("gpt-4", user, provider, models)).toBe("gpt-4");
    expect(provider.authorizeCalls).toEqual([{ resource: "model", action: "use", target: "gpt-4" }]);
  });

  it("a denied model falls back to another allowed one (RBAC)", async () => {
    const rbac = new RbacAuthorizationProvider({ roles: { user: { models: { allow: ["claude-3"] } } } });
    expect(await authorizeModelName("gpt-4", user, rbac, models)).toBe("claude-3");
  });

  it("no allowed model: fail-closed throws, fail-open keeps the original", async () => {
    const rbac = new RbacAuthorizationProvider({ roles: { user: { models: { allow: [] } } } });
    await expect(authorizeModelName("gpt-4", user, rbac, models)).rejects.toMatchObject({
      code: "model_not_authorized",
      message: expect.stringContaining("No models are authorized for the current role."),
    });
    expect(await authorizeModelName("gpt-4", user, rbac, models, { failClosed: false })).toBe("gpt-4");
  });

  /** Lists every model but refuses model:use for the named ones. */
  const listButNotUse = (deniedUse: string[]): AuthorizationProvider => ({
    name: "list-not-use",
    authorize: (_p, r) => {
      const allowed = !(r.resource === "model" && r.action === "use" && deniedUse.includes(r.target));
      return { allowed, rule: allowed ? "authz.allowed" : "authz.denied" };
    },
    filterResources: (_p, _r, names) => [...names],
  });

  it("re-checks each fallback with model:use: a listable but unusable model is skipped", async () => {
    expect(await authorizeModelName("gpt-4", user, listButNotUse(["gpt-4"]), ["gpt-4", "o1", "claude-3"])).toBe("o1");
    expect(await authorizeModelName("gpt-4", user, listButNotUse(["gpt-4", "o1"]), ["gpt-4", "o1", "claude-3"])).toBe("claude-3");
  });

  it("never reselects a denied model: none usable throws when closed, keeps the original when open", async () => {
    const provider = listButNotUse(models);
    await expect(authorizeModelName("gpt-4", user, provider, models)).rejects.toMatchObject({ code: "model_not_authorized" });
    expect(await authorizeModelName("gpt-4", user, provider, models, { failClosed: false })).toBe("gpt-4");
  });

  it("a provider error throws when closed (saying it was the provider) and keeps the model when open", async () => {
    const provider = new RecordingProvider({ errors: ["gpt-4"] });
    await expect(authorizeModelName("gpt-4", user, provider, models)).rejects.toMatchObject({
      code: "model_not_authorized",
      message: expect.stringContaining("(authorization provider error)"),
    });
    expect(await authorizeModelName("gpt-4", user, provider, models, { failClosed: false })).toBe("gpt-4");
  });

  it("ignores a fallback the provider invented outside the candidates", async () => {
    const provider = new RecordingProvider({ denied: ["gpt-4"], filter: () => ["made-up"] });
    await expect(authorizeModelName("gpt-4", user, provider, models)).rejects.toMatchObject({ code: "model_not_authorized" });
  });
});

describe("authorizeSandbox (sandbox:execute)", () => {
  it("asks sandbox:execute and reports the provider's decision", async () => {
    const provider = new RecordingProvider();
    expect(await authorizeSandbox(user, provider)).toMatchObject({ allowed: true, providerError: false });
    expect(provider.authorizeCalls).toEqual([{ resource: "sandbox", action: "execute", target: "default" }]);
  });

  it("the RBAC sandbox policy can deny it", async () => {
    const rbac = new RbacAuthorizationProvider({ roles: { user: { sandbox: { allow: [] } }, admin: {} } });
    expect((await authorizeSandbox(user, rbac)).allowed).toBe(false);
    const admin = buildPrincipalFromContext({ user_role: "admin" }, { default_role: "user" });
    expect((await authorizeSandbox(admin, rbac)).allowed).toBe(true);
  });

  it("a provider error denies when closed and allows when open", async () => {
    const provider = new RecordingProvider({ errors: ["default"] });
    expect(await authorizeSandbox(user, provider)).toMatchObject({ allowed: false, rule: "authz.evaluator_error", providerError: true });
    expect(await authorizeSandbox(user, provider, { failClosed: false })).toMatchObject({ allowed: true, providerError: true });
  });

  it("the error of a cancelled run passes through instead of being decided on", async () => {
    const controller = new AbortController();
    controller.abort();
    const provider = new RecordingProvider({ errors: ["default"] });
    await expect(authorizeSandbox(user, provider, { failClosed: false, signal: controller.signal })).rejects.toThrow("provider failed for default");
  });

  it("createSandboxAuthorizer builds the principal from the run context on every call", async () => {
    const rbac = new RbacAuthorizationProvider({ roles: { user: { sandbox: { allow: [] } }, admin: {} } });
    const authorizer = createSandboxAuthorizer(rbac, { default_role: "user", fail_closed: true });
    expect(await authorizer({ user_role: "admin" })).toBe(true);
    expect(await authorizer({})).toBe(false);
    expect(await authorizer({ user_role: "stranger" })).toBe(false);
    const open = createSandboxAuthorizer(rbac, { default_role: "user", fail_closed: false });
    expect(await open({ user_role: "stranger" })).toBe(true);
  });
});

describe("resolveRoutePermissions (gateway routes, provider side)", () => {
  it("without a provider grants every registered permission", async () => {
    expect(await resolveRoutePermissions(user, null)).toEqual([...ROUTE_PERMISSIONS]);
  });

  it("checks each permission as resource route with the full string as target", async () => {
    const provider = new RecordingProvider({ denied: ["threads:delete"] });
    const granted = await resolveRoutePermissions(user, provider);
    expect(granted).toEqual(ROUTE_PERMISSIONS.filter((p) => p !== "threads:delete"));
    expect(provider.authorizeCalls).toContainEqual({ resource: "route", action: "delete", target: "threads:delete" });
  });

  it("a provider error costs only that permission (denied closed, granted open)", async () => {
    const provider = new RecordingProvider({ errors: ["runs:cancel"] });
    expect(await resolveRoutePermissions(user, provider)).not.toContain("runs:cancel");
    expect(await resolveRoutePermissions(user, provider)).toContain("runs:read");
    expect(await resolveRoutePermissions(user, provider, { failClosed: false })).toContain("runs:cancel");
  });

  it("the RBAC routes policy applies", async () => {
    const rbac = new RbacAuthorizationProvider({ roles: { guest: { routes: { allow: ["threads:read", "runs:read"] } } } });
    const guest = buildPrincipalFromContext({ user_role: "guest" }, { default_role: "guest" });
    expect(await resolveRoutePermissions(guest, rbac)).toEqual(["threads:read", "runs:read"]);
  });
});

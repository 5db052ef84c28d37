import { describe, expect, it } from "vitest";
import type { Principal } from "../../../src/authz/principal.ts";
import type { AuthorizationProvider, AuthzDecision, AuthzRequest } from "../../../src/authz/provider.ts";
import { ROUTE_PERMISSIONS } from "../../../src/gateway/types.ts";
import { API_KEY, INTERNAL_TOKEN, USER_API_KEY, buildTestGateway, request, unreachableProvider, type TestGatewayOptions } from "./auth-fixtures.ts";

const keys = {
  mode: "api_key" as const,
  api_keys: [
    { key_env: "ADMIN_KEY", user_id: "ops", role: "admin" as const },
    { key_env: "USER_KEY", user_id: "u1", role: "user" as const },
  ],
};

function gateway(options: Omit<TestGatewayOptions, "gateway"> = {}) {
  const built = buildTestGateway({ gateway: { auth: keys }, ...options });
  built.threads.set("t-u1", "u1");
  built.threads.set("t-ops", "ops");
  return built;
}

class ScriptedProvider implements AuthorizationProvider {
  readonly name = "scripted";
  readonly calls: Array<{ principal: Principal; request: AuthzRequest }> = [];
  constructor(private readonly decide: (principal: Principal, request: AuthzRequest) => boolean) {}
  async authorize(principal: Principal, request: AuthzRequest): Promise<AuthzDecision> {
    this.calls.push({ principal, request });
    return { allowed: this.decide(principal, request), rule: "scripted" };
  }
  filterResources(): readonly string[] {
    return [];
  }
}

async function permissionsOf(app: ReturnType<typeof gateway>["app"], headers: Record<string, string>): Promise<string[]> {
  const response = await request(app, "/api/whoami", { headers });
  return ((await response.json()) as { permissions: string[] }).permissions;
}

describe("route authorization (scenario G50)", () => {
  it("scenario G50: a provider denying runs:create to role user gives that user 403 on POST runs while GET thread is 200", async () => {
    const { app } = gateway({
      authorization: { enabled: true, roles: { user: { routes: { deny: ["runs:create"] } }, admin: {} } },
    });
    const asUser = { "x-api-key": USER_API_KEY };
    const run = await request(app, "/api/threads/t-u1/runs", { method: "POST", headers: asUser, body: "{}" });
    expect(run.status).toBe(403);
    expect(await run.json()).toEqual({ detail: "Permission denied: runs:create" });
    expect((await request(app, "/api/threads/t-u1", { headers: asUser })).status).toBe(200);
    expect(await permissionsOf(app, asUser)).toEqual(ROUTE_PERMISSIONS.filter((p) => p !== "runs:create").sort());
    // The admin role has no route policy, so it keeps runs:create.
    expect((await request(app, "/api/threads/t-ops/runs", { method: "POST", headers: { "x-api-key": API_KEY }, body: "{}" })).status).toBe(200);
  });

  it("scenario G50: a throwing provider follows fail_closed: deny by default, allow when fail_closed is false", async () => {
    const throwing = unreachableProvider();
    const closed = gateway({ authorization: { enabled: true }, provider: throwing });
    expect(await permissionsOf(closed.app, { "x-api-key": USER_API_KEY })).toEqual([]);
    const read = await request(closed.app, "/api/threads/t-u1", { headers: { "x-api-key": USER_API_KEY } });
    expect(read.status).toBe(403);
    expect(await read.json()).toEqual({ detail: "Permission denied: threads:read" });

    const open = gateway({ authorization: { enabled: true, fail_closed: false }, provider: throwing });
    expect(await permissionsOf(open.app, { "x-api-key": USER_API_KEY })).toEqual([...ROUTE_PERMISSIONS].sort());
  });

  it("a provider failure costs only the permission it failed on", async () => {
    const provider = new ScriptedProvider((_principal, req) => {
      if (req.target === "runs:cancel") throw new Error("flaky");
      return true;
    });
    const { app } = gateway({ authorization: { enabled: true }, provider });
    expect(await permissionsOf(app, { "x-api-key": USER_API_KEY })).toEqual(ROUTE_PERMISSIONS.filter((p) => p !== "runs:cancel").sort());
  });

  it("permissions are decided once per request: six route checks, as resource route with the full permission as target", async () => {
    const provider = new ScriptedProvider(() => true);
    const { app } = gateway({ authorization: { enabled: true }, provider });
    await request(app, "/api/threads/t-u1", { headers: { "x-api-key": USER_API_KEY } });
    expect(provider.calls).toHaveLength(6);
    expect(provider.calls.map((call) => call.request.target).sort()).toEqual([...ROUTE_PERMISSIONS].sort());
    expect(provider.calls.every((call) => call.request.resource === "route" && call.request.target.endsWith(`:${call.request.action}`))).toBe(true);
    expect(provider.calls[0]!.principal).toMatchObject({ userId: "u1", role: "user", isInternal: false });
  });

  it("an internal caller's role is dropped, so default_role applies, and it is marked internal", async () => {
    const provider = new ScriptedProvider((principal) => principal.role === "member");
    const { app } = gateway({ authorization: { enabled: true, default_role: "member" }, provider });
    const permissions = await permissionsOf(app, { "X-DeerFlow-Internal-Token": INTERNAL_TOKEN, "X-DeerFlow-Owner-User-Id": "u1" });
    expect(permissions).toEqual([...ROUTE_PERMISSIONS].sort());
    expect(provider.calls[0]!.principal).toMatchObject({ userId: "u1", role: "member", isInternal: true });
  });

  it("authorization enabled with no provider configured grants nothing under fail_closed", async () => {
    const { app, layer } = gateway({ authorization: { enabled: true } });
    expect(layer.authorizer.providerError).toMatch(/no provider is configured/);
    expect(await permissionsOf(app, { "x-api-key": API_KEY })).toEqual([]);
  });

  it("authorization disabled grants all six", async () => {
    const { app } = gateway();
    expect(await permissionsOf(app, { "x-api-key": USER_API_KEY })).toEqual([...ROUTE_PERMISSIONS].sort());
  });
});

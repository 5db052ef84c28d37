import { describe, expect, it } from "vitest";
import type { Principal } from "../../../src/authz/principal.ts";
import type { AuthorizationProvider, AuthzRequest } from "../../../src/authz/provider.ts";
import { API_KEY, USER_API_KEY, buildTestGateway, request, type TestGatewayOptions } from "./auth-fixtures.ts";

const models: NonNullable<TestGatewayOptions["models"]> = [
  { name: "gpt-fast", use: "openai-compatible", model: "gpt-4o-mini", display_name: "Fast" },
  { name: "gpt-smart", use: "openai-compatible", model: "gpt-4o" },
  { name: "local", use: "openai-compatible", model: "qwen" },
];

const auth = {
  mode: "api_key" as const,
  api_keys: [
    { key_env: "ADMIN_KEY", user_id: "ops", role: "admin" as const },
    { key_env: "USER_KEY", user_id: "u1", role: "user" as const },
  ],
};

function gateway(options: Omit<TestGatewayOptions, "gateway" | "models"> = {}) {
  return buildTestGateway({ gateway: { auth }, models, ...options }).app;
}

async function listed(app: ReturnType<typeof gateway>, key = USER_API_KEY): Promise<string[]> {
  const response = await request(app, "/api/models", { headers: { "x-api-key": key } });
  expect(response.status).toBe(200);
  return ((await response.json()) as { models: Array<{ name: string }> }).models.map((model) => model.name);
}

describe("model authorization (scenario G50)", () => {
  it("scenario G50: GET /api/models lists only the models filterResources allows", async () => {
    const app = gateway({
      authorization: {
        enabled: true,
        roles: { user: { models: { allow: ["gpt-fast", "local"] } }, admin: {} },
      },
    });
    expect(await listed(app)).toEqual(["gpt-fast", "local"]);
    expect(await listed(app, API_KEY)).toEqual(["gpt-fast", "gpt-smart", "local", "demo"]);
    const denied = await request(app, "/api/models/gpt-smart", { headers: { "x-api-key": USER_API_KEY } });
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { detail: string }).detail).toMatch(/^Model 'gpt-smart' is not available for your role/);
    const allowed = await request(app, "/api/models/gpt-fast", { headers: { "x-api-key": USER_API_KEY } });
    expect(allowed.status).toBe(200);
    expect(await allowed.json()).toEqual({
      name: "gpt-fast",
      display_name: "Fast",
      provider: "openai-compatible",
      model: "gpt-4o-mini",
      is_demo: false,
      supports_thinking: false,
      supports_vision: false,
    });
  });

  it("scenario G50: a throwing provider leaves an empty list under fail_closed (and every model when open)", async () => {
    const throwing: AuthorizationProvider = {
      name: "down",
      authorize() {
        throw new Error("down");
      },
      filterResources() {
        throw new Error("down");
      },
    };
    const closed = gateway({ authorization: { enabled: true }, provider: throwing });
    expect(await listed(closed)).toEqual([]);
    expect((await request(closed, "/api/models/gpt-fast", { headers: { "x-api-key": USER_API_KEY } })).status).toBe(403);
    const open = gateway({ authorization: { enabled: true, fail_closed: false }, provider: throwing });
    expect(await listed(open)).toEqual(["gpt-fast", "gpt-smart", "local", "demo"]);
    expect((await request(open, "/api/models/gpt-fast", { headers: { "x-api-key": USER_API_KEY } })).status).toBe(200);
  });

  it("a provider answering with something that is not a list of names counts as a failure, and invented names never appear", async () => {
    const calls: Array<{ principal: Principal; names: readonly string[] }> = [];
    const inventive: AuthorizationProvider = {
      name: "inventive",
      authorize: (_p: Principal, _r: AuthzRequest) => ({ allowed: true, rule: "ok" }),
      filterResources(principal, _resource, names) {
        calls.push({ principal, names });
        return ["secret-model", "gpt-smart"];
      },
    };
    expect(await listed(gateway({ authorization: { enabled: true }, provider: inventive }))).toEqual(["gpt-smart"]);
    expect(calls[0]).toMatchObject({ principal: { userId: "u1", role: "user" }, names: ["gpt-fast", "gpt-smart", "local", "demo"] });
    const malformed: AuthorizationProvider = { ...inventive, filterResources: () => "gpt-smart" as unknown as string[] };
    expect(await listed(gateway({ authorization: { enabled: true }, provider: malformed }))).toEqual([]);
  });

  it("without authorization every configured model and the demo model are listed, with the default first choice", async () => {
    const app = gateway();
    const response = await request(app, "/api/models", { headers: { "x-api-key": USER_API_KEY } });
    const body = (await response.json()) as { models: Array<Record<string, unknown>>; default_model: string };
    expect(body.models.map((model) => model.name)).toEqual(["gpt-fast", "gpt-smart", "local", "demo"]);
    expect(body.models.at(-1)).toMatchObject({ name: "demo", provider: "demo", model: "demo", is_demo: true });
    expect(body.default_model).toBe("gpt-fast");
    expect(JSON.stringify(body)).not.toMatch(/base_url|api_key|timeout/);
  });

  it("an unknown model is 404; the routes need a caller", async () => {
    const app = gateway();
    const missing = await request(app, "/api/models/nope", { headers: { "x-api-key": USER_API_KEY } });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ detail: "Model 'nope' not found" });
    expect((await request(app, "/api/models")).status).toBe(401);
  });
});

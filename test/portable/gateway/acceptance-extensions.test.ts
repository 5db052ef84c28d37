import { describe, expect, it } from "vitest";
import { hashPassword } from "../../../src/gateway/auth/password.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { gatewayProbe, resetGatewayProbe } from "../../fixtures/plugins/gateway-acceptance.ts";
import { acceptanceGateway, acceptanceGateways, call, cookiesOf, plugin, pluginUse, send, type AcceptanceGateway } from "../../fixtures/plugins/gateway-harness.ts";

/*
 * Extension routers and services through createGateway as `serve` builds it: plugins named in a
 * config, loaded by the real loader, the auth layer the config describes. (The router checks on
 * their own are in extension-routers.test.ts; here they meet the real host routes and auth.)
 */

const gatewayWith = acceptanceGateways();

const errorsFrom = (built: AcceptanceGateway) => [...built.loaded.diagnostics, ...built.gateway.diagnostics].filter((d) => d.level === "error");

describe("extension routers through createGateway", () => {
  it("scenario G32: a router with GET /health is refused; /health still returns the host body and the diagnostic names the extension", async () => {
    const built = await gatewayWith({ plugins: [plugin("installRouter", { variant: "health" })] });
    const health = await call(built.gateway, "GET", "/health");
    expect(health).toMatchObject({ status: 200, body: { status: "healthy" } });
    expect(health.body).not.toEqual({ status: "extension" });
    expect(errorsFrom(built)).toEqual([
      expect.objectContaining({ source: pluginUse("installRouter"), message: expect.stringMatching(/\/health.*not mounted/) }),
    ]);
  });

  it("scenario G33: a router with GET /api/ext/a and GET /api/models is rejected whole: /api/ext/a is 404 and the diagnostic says host", async () => {
    const built = await gatewayWith({ plugins: [plugin("installRouter", { variant: "models-clash" })] });
    expect((await call(built.gateway, "GET", "/api/ext/a")).status).toBe(404);
    const models = await call(built.gateway, "GET", "/api/models");
    expect(models.status).toBe(200);
    expect(models.body.models.map((m: { name: string }) => m.name)).toEqual(["demo"]);
    const [diagnostic, ...rest] = errorsFrom(built);
    expect(rest).toEqual([]);
    expect(diagnostic).toMatchObject({ source: pluginUse("installRouter") });
    expect(diagnostic!.message).toContain("/api/models is already served by host");
  });

  it("scenario G34: POST /api/models mounts (the host serves GET only); GET /api/threads/{n:int}'s router is rejected as shadowed", async () => {
    const built = await gatewayWith({
      plugins: [plugin("installRouter", { variant: "post-models" }), plugin("installRouter", { variant: "threads-int" })],
    });
    expect(await call(built.gateway, "POST", "/api/models")).toMatchObject({ status: 200, body: { posted: "extension" } });
    expect((await call(built.gateway, "GET", "/api/models")).body.models).toBeDefined();
    // The host's GET /api/threads/:thread_id answers: the thread does not exist.
    const thread = await call(built.gateway, "GET", "/api/threads/42");
    expect(thread.status).toBe(404);
    expect(thread.body).not.toEqual({ n: "extension" });
    const errors = errorsFrom(built);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toMatch(/\/api\/threads\/\{n:int\} is already served by host/);
  });

  // Spec (extension-system.md, routers): nonstandard converters the host supports are usable in
  // contributed routes. createGateway's routeConverters is how a host registers one.
  it("a converter the host registers through createGateway's routeConverters serves a contributed route; without it the route is refused naming the converter; a bad registration fails createGateway", async () => {
    const served = await gatewayWith({ plugins: [plugin("installRouter", { variant: "sku" })] }, { routeConverters: { sku: "[A-Z]+-[0-9]+" } });
    expect(errorsFrom(served)).toEqual([]);
    expect(await call(served.gateway, "GET", "/api/ext/items/AB-12")).toMatchObject({ status: 200, body: { code: "AB-12" } });
    expect((await call(served.gateway, "GET", "/api/ext/items/ab-12")).status).toBe(404);

    const refused = await gatewayWith({ plugins: [plugin("installRouter", { variant: "sku" })] });
    expect((await call(refused.gateway, "GET", "/api/ext/items/AB-12")).status).toBe(404);
    expect(errorsFrom(refused)).toEqual([expect.objectContaining({ source: pluginUse("installRouter"), message: expect.stringContaining("sku") })]);

    await expect(gatewayWith({ plugins: [plugin("installRouter", { variant: "sku" })] }, { routeConverters: { sku: "([A-Z])-\\1" } })).rejects.toThrow(
      /converter "sku": its pattern may not contain a capturing group/,
    );
  });

  it("scenario G35: [WebSocket router, startup-hook router, valid router] → the first two are refused with diagnostics, the third is mounted and reachable", async () => {
    const built = await gatewayWith({
      plugins: [
        plugin("installRouter", { variant: "websocket" }),
        plugin("installRouter", { variant: "startup-hook" }),
        plugin("installRouter", { variant: "valid" }),
      ],
    });
    expect(await call(built.gateway, "GET", "/api/ext/valid")).toMatchObject({ status: 200, body: { valid: "default" } });
    expect((await call(built.gateway, "GET", "/api/ext/socket")).status).toBe(404);
    expect((await call(built.gateway, "GET", "/api/ext/started")).status).toBe(404);
    const messages = errorsFrom(built).map((d) => d.message);
    expect(messages).toHaveLength(2);
    // The registry refuses a router carrying a lifetime at install; the mount refuses the WebSocket route.
    expect(messages).toEqual(
      expect.arrayContaining([expect.stringMatching(/WebSocket route.*not mounted/), expect.stringMatching(/install\(\) failed.*onStartup/)]),
    );
  });

  it("scenario G36: with session auth, GET /api/ext/ping is 401 without a session, 200 after login; a POST without X-CSRF-Token is 403, with it 200", async () => {
    const built = await gatewayWith({
      gateway: { auth: { mode: "session", users: [{ id: "carol", password_hash: await hashPassword("correct horse", { iterations: 1_000 }) }] } },
      plugins: [plugin("installRouter", { variant: "ping" })],
    });
    const { gateway } = built;
    const anonymous = await call(gateway, "GET", "/api/ext/ping");
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.detail.code).toBe("not_authenticated");

    const login = await send(gateway, "POST", "/api/v1/auth/login/local", { body: { username: "carol", password: "correct horse" } });
    expect(login.status).toBe(200);
    const cookies = cookiesOf(login);
    expect(Object.keys(cookies).sort()).toEqual(["access_token", "csrf_token"]);

    expect(await call(gateway, "GET", "/api/ext/ping", { cookies })).toMatchObject({ status: 200, body: { pong: "carol" } });
    const noHeader = await call(gateway, "POST", "/api/ext/ping", { cookies });
    expect(noHeader.status).toBe(403);
    expect(noHeader.body.detail).toMatch(/CSRF token missing/);
    const wrongHeader = await call(gateway, "POST", "/api/ext/ping", { cookies, headers: { "X-CSRF-Token": "not-the-cookie" } });
    expect(wrongHeader.status).toBe(403);
    const withHeader = await call(gateway, "POST", "/api/ext/ping", { cookies, headers: { "X-CSRF-Token": cookies["csrf_token"]! } });
    expect(withHeader).toMatchObject({ status: 200, body: { posted: "carol" } });
    // A forged cookie is not a session.
    expect((await call(gateway, "GET", "/api/ext/ping", { cookies: { access_token: "forged", csrf_token: "x" } })).status).toBe(401);
  });
});

describe("extension services through createGateway", () => {
  it("scenario G29: S1, S2, S3 where S2's start throws → the gateway serves with S1 and S3 started, one diagnostic for S2; shutdown stops S3, S2, S1", async () => {
    const probe = resetGatewayProbe();
    const built = await gatewayWith({
      plugins: [
        plugin("installService", { name: "S1" }),
        plugin("installService", { name: "S2", fail_start: true }),
        plugin("installService", { name: "S3" }),
      ],
    });
    expect(probe.log).toEqual(["start:S1", "start:S2", "start:S3"]);
    expect((await call(built.gateway, "GET", "/api/ok")).status).toBe(200);
    const errors = errorsFrom(built);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ source: pluginUse("installService"), message: expect.stringContaining('service "S2" start() failed') });

    probe.log.length = 0;
    await built.gateway.shutdown();
    expect(probe.log.filter((line) => line.startsWith("stop:"))).toEqual(["stop:S3", "stop:S2", "stop:S1"]);
  });

  it("scenario G29: services have started by the time createGateway returns, and a second shutdown stops nothing twice", async () => {
    const probe = resetGatewayProbe();
    const built = await gatewayWith({ plugins: [plugin("installService", { name: "only" })] });
    expect(gatewayProbe().log).toEqual(["start:only"]);
    await built.gateway.shutdown();
    await built.gateway.shutdown();
    expect(probe.log).toEqual(["start:only", "stop:only", "stopped:only"]);
  });
});

describe("a start that fails after the services started", () => {
  it("scenario G29: createGateway failing later (unreadable storage) still stops the services it started, in reverse, and closes storage", async () => {
    const probe = resetGatewayProbe();
    const storage = createMemoryKeyValue();
    const order: string[] = [];
    storage.getKeys = async () => {
      throw new Error("storage unreachable");
    };
    const dispose = storage.dispose.bind(storage);
    storage.dispose = async () => {
      order.push("storage:dispose");
      await dispose();
    };
    probe.onServiceStop = (name) => void order.push(`stop:${name}`);
    await expect(
      acceptanceGateway({ plugins: [plugin("installService", { name: "S1" }), plugin("installService", { name: "S2" })] }, { storage }),
    ).rejects.toThrow("storage unreachable");
    expect(probe.log.filter((line) => line.startsWith("start:"))).toEqual(["start:S1", "start:S2"]);
    expect(order).toEqual(["stop:S2", "stop:S1", "storage:dispose"]);
  });
});

import { request as httpRequest } from "node:http";
import { Client } from "@langchain/langgraph-sdk";
import { afterEach, describe, expect, it } from "vitest";
import type { HttpServerHandle } from "../../../src/ports/http-server.ts";
import { API_KEY, buildTestGateway, passwordHash } from "./auth-fixtures.ts";
import { runtimeServe } from "./runtime-serve.ts";

/*
 * The auth layer behind a real socket on 127.0.0.1: the official SDK's x-api-key, a browser-style
 * cookie session with its CSRF pair, and the Host check that stops DNS rebinding while auth is off
 * (fetch cannot forge Host, so that one goes through node:http).
 */

const { runtime, serve: serveFetch } = await runtimeServe();
const servers: HttpServerHandle[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function serve(gateway: ReturnType<typeof buildTestGateway>): Promise<HttpServerHandle> {
  const server = await serveFetch((request) => gateway.app.fetch(request), { hostname: "127.0.0.1", port: 0 });
  servers.push(server);
  return server;
}

function rawGet(server: HttpServerHandle, path: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: server.port, path, method: "GET", headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe(`auth over a real socket (${runtime})`, () => {
  it("the LangGraph SDK's apiKey travels as x-api-key and is accepted; without it the SDK gets the 401", async () => {
    const gateway = buildTestGateway({ gateway: { auth: { mode: "api_key", api_keys: [{ key_env: "ADMIN_KEY", user_id: "ops", role: "admin" }] } } });
    gateway.threads.set("t-ops", "ops");
    const server = await serve(gateway);
    const withKey = new Client({ apiUrl: `${server.url}/api`, apiKey: API_KEY });
    expect(await withKey.threads.get("t-ops")).toMatchObject({ thread_id: "t-ops", owner_id: "ops" });
    const withoutKey = new Client({ apiUrl: `${server.url}/api`, apiKey: null });
    await expect(withoutKey.threads.get("t-ops")).rejects.toThrow(/401|not_authenticated/);
  });

  it("a browser session: login sets the cookies, the CSRF pair is required for writes, logout ends it", async () => {
    const gateway = buildTestGateway({ gateway: { auth: { mode: "session", users: [{ id: "u1", password_hash: await passwordHash("pw-u1") }] } } });
    const server = await serve(gateway);
    const login = await fetch(`${server.url}/api/v1/auth/login/local`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: server.url },
      body: JSON.stringify({ username: "u1", password: "pw-u1" }),
    });
    expect(login.status).toBe(200);
    const jar = new Map(login.headers.getSetCookie().map((line) => line.split(";")[0]!.split("=") as [string, string]));
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join("; ");
    expect((await fetch(`${server.url}/api/whoami`, { headers: { cookie } })).status).toBe(200);
    expect((await fetch(`${server.url}/api/echo`, { method: "POST", headers: { cookie } })).status).toBe(403);
    const write = await fetch(`${server.url}/api/echo`, { method: "POST", headers: { cookie, "x-csrf-token": decodeURIComponent(jar.get("csrf_token")!) } });
    expect(write.status).toBe(200);
  });

  it("with auth disabled, a request whose Host is not a loopback name is refused (DNS rebinding)", async () => {
    const server = await serve(buildTestGateway());
    const rebound = await rawGet(server, "/api/whoami", `evil.example:${server.port}`);
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body).detail).toMatch(/configure gateway\.auth/);
    expect((await rawGet(server, "/api/whoami", `127.0.0.1:${server.port}`)).status).toBe(200);
    expect((await rawGet(server, "/api/whoami", `localhost:${server.port}`)).status).toBe(200);
  });
});

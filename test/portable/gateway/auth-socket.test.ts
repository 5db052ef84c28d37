// Login throttling and logout on this runtime's own HTTP server (Node: @hono/node-server, Deno:
// Deno.serve, Bun: Bun.serve): the client address comes from the real socket, and both the throttle
// and the ended session survive a restart (a new gateway over the same storage on disk).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../../adapters/shared/fs-key-value.ts";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { ManualClock } from "../../../src/core/clock.ts";
import { hashPassword } from "../../../src/gateway/auth/password.ts";
import { createGateway, type Gateway } from "../../../src/gateway/app.ts";
import type { HttpServerHandle } from "../../../src/ports/http-server.ts";
import { runtimeServe } from "./runtime-serve.ts";

const { runtime, serve } = await runtimeServe();
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const PASSWORD = "alice correct horse";
const passwordHash = hashPassword(PASSWORD, { iterations: 1_000 });

interface Served {
  readonly gateway: Gateway;
  /** The same gateway on 127.0.0.1 and on [::1]: two client addresses from one machine. */
  readonly v4: HttpServerHandle;
  readonly v6: HttpServerHandle;
  stop(): Promise<void>;
}

async function start(dir: string, clock: ManualClock): Promise<Served> {
  const config = validateLeadConfig({ gateway: { auth: { mode: "session", users: [{ id: "alice", password_hash: await passwordHash }] } } }, "auth-socket");
  const gateway = await createGateway({ config, storage: createFsKeyValue(dir), clock, listening: { host: "127.0.0.1" } });
  const v4 = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
  const v6 = await serve(gateway.fetch, { hostname: "::1", port: 0 });
  return {
    gateway,
    v4,
    v6,
    async stop() {
      await v4.close();
      await v6.close();
      await gateway.shutdown();
    },
  };
}

function login(server: HttpServerHandle, password: string): Promise<Response> {
  return fetch(`${server.url}/api/v1/auth/login/local`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: "alice", password }),
  });
}

function accessCookie(response: Response): string {
  const line = response.headers.getSetCookie().find((cookie) => cookie.startsWith("access_token="));
  if (line === undefined) throw new Error(`no access_token cookie (${response.status})`);
  return line.split(";", 1)[0]!;
}

describe(`login throttling and logout over ${runtime}'s own server`, () => {
  it(`throttles by the socket's client address (${runtime}): 127.0.0.1 is slowed with 429 + Retry-After while ::1 logs in`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "deerflow-auth-socket-"));
    dirs.push(dir);
    const served = await start(dir, new ManualClock(Date.UTC(2026, 0, 1)));
    try {
      for (let i = 0; i < 3; i++) {
        const failed = await login(served.v4, `wrong ${i}`);
        expect(failed.status).toBe(401);
        await failed.body?.cancel();
      }
      const refused = await login(served.v4, PASSWORD);
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(((await refused.json()) as { detail: { code: string } }).detail.code).toBe("too_many_attempts");

      const other = await login(served.v6, PASSWORD);
      expect(other.status).toBe(200);
      await other.body?.cancel();
      // An in-process call has no socket: it is the separate "unknown" client.
      const inProcess = await served.gateway.fetch(
        new Request("http://127.0.0.1/api/v1/auth/login/local", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "alice", password: PASSWORD }) }),
      );
      expect(inProcess.status).toBe(200);
    } finally {
      await served.stop();
    }
  });

  it(`a restart over the same storage keeps the throttle and the ended session (${runtime})`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "deerflow-auth-socket-"));
    dirs.push(dir);
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const first = await start(dir, clock);
    let loggedOut: string;
    let kept: string;
    try {
      const signedIn = await login(first.v6, PASSWORD);
      expect(signedIn.status).toBe(200);
      loggedOut = accessCookie(signedIn);
      kept = accessCookie(await login(first.v6, PASSWORD));
      expect((await fetch(`${first.v6.url}/api/v1/auth/me`, { headers: { cookie: loggedOut } })).status).toBe(200);
      const out = await fetch(`${first.v6.url}/api/v1/auth/logout`, { method: "POST", headers: { cookie: loggedOut } });
      expect(out.status).toBe(200);
      const refusedNow = await fetch(`${first.v6.url}/api/v1/auth/me`, { headers: { cookie: loggedOut } });
      expect(refusedNow.status).toBe(401);
      await refusedNow.body?.cancel();

      for (let i = 0; i < 3; i++) await (await login(first.v4, `wrong ${i}`)).body?.cancel();
      const throttled = await login(first.v4, PASSWORD);
      expect(throttled.status).toBe(429);
      await throttled.body?.cancel();
    } finally {
      await first.stop();
    }

    const second = await start(dir, clock);
    try {
      const me = await fetch(`${second.v4.url}/api/v1/auth/me`, { headers: { cookie: loggedOut } });
      expect(me.status).toBe(401);
      expect(((await me.json()) as { detail: { message: string } }).detail.message).toBe("This session was ended by a logout; sign in again.");
      const other = await fetch(`${second.v4.url}/api/v1/auth/me`, { headers: { cookie: kept } });
      expect(other.status).toBe(200);
      await other.body?.cancel();

      const stillThrottled = await login(second.v4, PASSWORD);
      expect(stillThrottled.status).toBe(429);
      expect(stillThrottled.headers.get("retry-after")).toBe("1");
      await stillThrottled.body?.cancel();
      await clock.advance(1000);
      const afterWaiting = await login(second.v4, PASSWORD);
      expect(afterWaiting.status).toBe(200);
      await afterWaiting.body?.cancel();
    } finally {
      await second.stop();
    }
  });
});

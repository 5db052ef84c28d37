// Sessions end at logout (server-side, kept in storage) and logins are throttled by growing delays
// per client address and per account, never by a lock someone else can put on an account.
import { describe, expect, it, vi } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { REVOKED_SESSIONS_PREFIX } from "../../../src/gateway/auth/revocations.ts";
import { FORGET_MS, LOGIN_THROTTLE_PREFIX } from "../../../src/gateway/auth/login-throttle.ts";
import { addressBucket, connectionAddress, normalizeIpAddress } from "../../../src/gateway/auth/client-address.ts";
import { buildTestGateway, login, passwordHash, request, type TestGateway } from "./auth-fixtures.ts";

const hashes = new Map<string, Promise<string>>();
function hashOnce(password: string): Promise<string> {
  if (!hashes.has(password)) hashes.set(password, passwordHash(password));
  return hashes.get(password)!;
}

const ALICE_PASSWORD = "alice correct horse";
const ATTACKER = "203.0.113.66";
const ALICE_HOME = "198.51.100.7";

async function sessionGateway(options: { clock?: ManualClock; storage?: KeyValue; trustedProxies?: string[] } = {}): Promise<TestGateway> {
  return buildTestGateway({
    gateway: {
      ...(options.trustedProxies === undefined ? {} : { trusted_proxies: options.trustedProxies }),
      auth: {
        mode: "session",
        users: [
          { id: "alice", password_hash: await hashOnce(ALICE_PASSWORD), role: "user" },
          { id: "bob", password_hash: await hashOnce("bob correct horse"), role: "user" },
        ],
      },
    },
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.storage === undefined ? {} : { storage: options.storage }),
  });
}

function attempt(gateway: TestGateway, username: string, password: string, from?: string, headers?: Record<string, string>): Promise<Response> {
  return request(gateway.app, "/api/v1/auth/login/local", {
    method: "POST",
    body: JSON.stringify({ username, password }),
    ...(from === undefined ? {} : { from }),
    ...(headers === undefined ? {} : { headers }),
  });
}

async function detail(response: Response): Promise<{ code: string; message: string }> {
  return ((await response.json()) as { detail: { code: string; message: string } }).detail;
}

describe("logout ends the session server-side", () => {
  it("after POST logout the old cookie is 401 on every route, while the same user's other session goes on", async () => {
    const gateway = await sessionGateway();
    const laptop = await login(gateway.app, "alice", ALICE_PASSWORD);
    const phone = await login(gateway.app, "alice", ALICE_PASSWORD);
    expect((await request(gateway.app, "/api/whoami", { cookies: laptop })).status).toBe(200);

    const out = await request(gateway.app, "/api/v1/auth/logout", { method: "POST", cookies: laptop });
    expect(out.status).toBe(200);

    const routes: Array<[string, RequestInit]> = [
      ["/api/whoami", {}],
      ["/api/v1/auth/me", {}],
      ["/api/models", {}],
      ["/api/echo", { method: "POST", body: "{}", headers: { "X-CSRF-Token": laptop.csrf_token } }],
      ["/api/threads", { method: "POST", body: JSON.stringify({ thread_id: "t1" }), headers: { "X-CSRF-Token": laptop.csrf_token } }],
    ];
    for (const [path, init] of routes) {
      const response = await request(gateway.app, path, { ...init, cookies: laptop });
      expect(response.status, path).toBe(401);
      expect(await detail(response), path).toEqual({ code: "token_invalid", message: "This session was ended by a logout; sign in again." });
    }
    expect(await (await request(gateway.app, "/api/whoami", { cookies: phone })).json()).toMatchObject({ id: "alice", source: "session" });
    // A logout without a valid cookie has nothing to end: it clears the cookies and records nothing.
    for (const cookies of [undefined, { access_token: "not-a-jwt" }]) {
      expect((await request(gateway.app, "/api/v1/auth/logout", { method: "POST", ...(cookies === undefined ? {} : { cookies }) })).status).toBe(200);
    }
    expect((await request(gateway.app, "/api/whoami", { cookies: phone })).status).toBe(200);
  });

  it("the ending is kept in storage: a gateway restarted over the same storage refuses the old cookie", async () => {
    const storage = createMemoryKeyValue();
    const first = await sessionGateway({ storage });
    const cookies = await login(first.app, "alice", ALICE_PASSWORD);
    const kept = await login(first.app, "alice", ALICE_PASSWORD);
    expect((await request(first.app, "/api/v1/auth/logout", { method: "POST", cookies })).status).toBe(200);

    const restarted = await sessionGateway({ storage });
    expect((await request(restarted.app, "/api/whoami", { cookies })).status).toBe(401);
    expect((await request(restarted.app, "/api/whoami", { cookies: kept })).status).toBe(200);
  });

  it("an entry lasts only as long as its token would have: expired ones are dropped", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const storage = createMemoryKeyValue();
    const gateway = await sessionGateway({ clock, storage });
    const cookies = await login(gateway.app, "alice", ALICE_PASSWORD);
    await request(gateway.app, "/api/v1/auth/logout", { method: "POST", cookies });
    expect(await storage.getKeys(REVOKED_SESSIONS_PREFIX)).toHaveLength(1);

    // Past the 7-day token lifetime a restarted gateway drops the entry when it loads the list...
    await clock.advance(7 * 24 * 3600_000 + 1000);
    const restarted = await sessionGateway({ clock, storage });
    const fresh = await login(restarted.app, "alice", ALICE_PASSWORD);
    expect((await request(restarted.app, "/api/whoami", { cookies: fresh })).status).toBe(200);
    expect(await storage.getKeys(REVOKED_SESSIONS_PREFIX)).toEqual([]);

    // ...and a running one drops it with a later logout's sweep.
    const second = await login(restarted.app, "alice", ALICE_PASSWORD);
    await request(restarted.app, "/api/v1/auth/logout", { method: "POST", cookies: second });
    await clock.advance(7 * 24 * 3600_000 + 1000);
    const third = await login(restarted.app, "alice", ALICE_PASSWORD);
    await request(restarted.app, "/api/v1/auth/logout", { method: "POST", cookies: third });
    expect(await storage.getKeys(REVOKED_SESSIONS_PREFIX)).toHaveLength(1);
  });
});

describe("login throttling", () => {
  it("failures from one address get growing delays, answered 429 with Retry-After; after waiting, the right password logs in", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const gateway = await sessionGateway({ clock });
    for (let i = 0; i < 3; i++) expect((await attempt(gateway, "alice", "wrong", ATTACKER)).status).toBe(401);
    const refused = await attempt(gateway, "alice", ALICE_PASSWORD, ATTACKER);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(await detail(refused)).toEqual({
      code: "too_many_attempts",
      message: "Too many failed sign-ins for this account from this address; try again in 1 second(s), after 2026-01-01T00:00:01.000Z.",
    });
    await clock.advance(1000);
    expect((await attempt(gateway, "alice", "wrong", ATTACKER)).status).toBe(401);
    expect((await attempt(gateway, "alice", "wrong", ATTACKER)).headers.get("retry-after")).toBe("2");
    await clock.advance(2000);
    expect((await attempt(gateway, "alice", "wrong", ATTACKER)).status).toBe(401);
    expect((await attempt(gateway, "alice", "wrong", ATTACKER)).headers.get("retry-after")).toBe("4");
    // Hammering a refusal checks no password and does not make it longer.
    for (let i = 0; i < 5; i++) expect((await attempt(gateway, "alice", "wrong", ATTACKER)).headers.get("retry-after")).toBe("4");
    await clock.advance(4000);
    expect((await attempt(gateway, "alice", ALICE_PASSWORD, ATTACKER)).status).toBe(200);
  });

  it("an attacker hammering alice from elsewhere never locks her out: her right password from her own address logs in at once", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const gateway = await sessionGateway({ clock });
    // 40 guesses from one address, and one guess from each of 40 others.
    for (let i = 0; i < 40; i++) {
      await attempt(gateway, "alice", `guess ${i}`, ATTACKER);
      expect((await attempt(gateway, "alice", `guess ${i}`, `192.0.2.${i + 1}`)).status).toBe(401);
      await clock.advance(100);
    }
    expect((await attempt(gateway, "alice", "guess", ATTACKER)).status).toBe(429);
    const alice = await attempt(gateway, "alice", ALICE_PASSWORD, ALICE_HOME);
    expect(alice.status).toBe(200);

    // After a typo of her own she waits, but briefly (the account-wide slowdown is capped at 30 s),
    // counted from her typo, however much the attacker keeps guessing.
    expect((await attempt(gateway, "alice", "typo", ALICE_HOME)).status).toBe(401);
    const slowed = await attempt(gateway, "alice", ALICE_PASSWORD, ALICE_HOME);
    expect(slowed.status).toBe(429);
    expect(Number(slowed.headers.get("retry-after"))).toBeLessThanOrEqual(30);
    for (let i = 0; i < 10; i++) await attempt(gateway, "alice", `more ${i}`, `192.0.2.${100 + i}`);
    await clock.advance(30_000);
    expect((await attempt(gateway, "alice", ALICE_PASSWORD, ALICE_HOME)).status).toBe(200);
  });

  it("spraying over many usernames from one address is slowed by the per-address limiter, unknown names counted alike", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const gateway = await sessionGateway({ clock });
    const names = ["alice", "bob", ...Array.from({ length: 8 }, (_, i) => `ghost${i}`)];
    for (const name of names) expect((await attempt(gateway, name, "Winter2026!", ATTACKER)).status).toBe(401);
    for (const name of ["carol", "dave", "bob"]) {
      const refused = await attempt(gateway, name, "Winter2026!", ATTACKER);
      expect(refused.status, name).toBe(429);
      expect((await detail(refused)).message).toMatch(/^Too many failed sign-ins from this address; try again in 1 second/);
    }
    // The spray does not reach other clients, not even bob's own right password.
    expect((await attempt(gateway, "bob", "bob correct horse", ALICE_HOME)).status).toBe(200);
  });

  it("parallel guesses cannot slip in under one count: each is counted before its password is checked", async () => {
    const gateway = await sessionGateway({ clock: new ManualClock(Date.UTC(2026, 0, 1)) });
    const statuses = await Promise.all(Array.from({ length: 20 }, (_, i) => attempt(gateway, "alice", `parallel ${i}`, ATTACKER).then((r) => r.status)));
    expect(statuses.filter((status) => status === 401)).toHaveLength(3);
    expect(statuses.filter((status) => status === 429)).toHaveLength(17);
  });

  it("the delays are kept in storage: a gateway restarted over the same storage still throttles", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const storage = createMemoryKeyValue();
    const first = await sessionGateway({ clock, storage });
    for (let i = 0; i < 3; i++) await attempt(first, "alice", "wrong", ATTACKER);
    for (let i = 0; i < 10; i++) await attempt(first, `ghost${i}`, "wrong", "192.0.2.50");
    expect((await storage.getKeys(LOGIN_THROTTLE_PREFIX)).length).toBeGreaterThan(0);

    const restarted = await sessionGateway({ clock, storage });
    expect((await attempt(restarted, "alice", ALICE_PASSWORD, ATTACKER)).status).toBe(429);
    expect((await attempt(restarted, "bob", "wrong", "192.0.2.50")).status).toBe(429);
    expect((await attempt(restarted, "alice", ALICE_PASSWORD, ALICE_HOME)).status).toBe(200);
  });

  it("counters are forgotten a day after their last failure and swept from storage, so it does not grow with every address ever seen", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const storage = createMemoryKeyValue();
    const gateway = await sessionGateway({ clock, storage });
    for (let i = 0; i < 3; i++) await attempt(gateway, "alice", "wrong", ATTACKER);
    for (let i = 0; i < 5; i++) await attempt(gateway, `ghost${i}`, "wrong", `192.0.2.${i + 1}`);
    // alice's address and pair, 5 more addresses and pairs, and 6 accounts.
    expect(await storage.getKeys(LOGIN_THROTTLE_PREFIX)).toHaveLength(18);
    expect((await attempt(gateway, "alice", ALICE_PASSWORD, ATTACKER)).status).toBe(429);

    await clock.advance(FORGET_MS + 1000);
    expect((await attempt(gateway, "alice", ALICE_PASSWORD, ATTACKER)).status).toBe(200);
    // The success took its own count back; the others' counters go with the sweep, off the login's path.
    await vi.waitFor(async () => expect(await storage.getKeys(LOGIN_THROTTLE_PREFIX)).toEqual([]), { timeout: 5000 });
  });

  it("a success clears the pair's delay: after waiting one out and signing in, the next typos start from zero", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const gateway = await sessionGateway({ clock });
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 3; i++) expect((await attempt(gateway, "alice", "typo", ALICE_HOME)).status).toBe(401);
      expect((await attempt(gateway, "alice", ALICE_PASSWORD, ALICE_HOME)).status).toBe(429);
      await clock.advance(1000);
      expect((await attempt(gateway, "alice", ALICE_PASSWORD, ALICE_HOME)).status).toBe(200);
    }
  });

  it("calls without connection info share one 'unknown' bucket", async () => {
    const gateway = await sessionGateway({ clock: new ManualClock(Date.UTC(2026, 0, 1)) });
    for (let i = 0; i < 3; i++) await attempt(gateway, "alice", "wrong");
    expect((await attempt(gateway, "alice", ALICE_PASSWORD)).status).toBe(429);
    expect((await attempt(gateway, "alice", ALICE_PASSWORD, ALICE_HOME)).status).toBe(200);
  });

  it("X-Forwarded-For is believed only from a configured trusted proxy", async () => {
    const proxy = "10.0.0.2";
    const spoofing = await sessionGateway({ clock: new ManualClock(Date.UTC(2026, 0, 1)) });
    for (let i = 0; i < 3; i++) await attempt(spoofing, "alice", "wrong", ATTACKER, { "x-forwarded-for": `192.0.2.${i}` });
    // Not from a trusted proxy: a new X-Forwarded-For each time is still the same client.
    expect((await attempt(spoofing, "alice", "wrong", ATTACKER, { "x-forwarded-for": "192.0.2.99" })).status).toBe(429);

    const proxied = await sessionGateway({ clock: new ManualClock(Date.UTC(2026, 0, 1)), trustedProxies: [proxy] });
    for (let i = 0; i < 3; i++) await attempt(proxied, "alice", "wrong", proxy, { "x-forwarded-for": `6.6.6.6, ${ATTACKER}` });
    expect((await attempt(proxied, "alice", "wrong", proxy, { "x-forwarded-for": `7.7.7.7, ${ATTACKER}` })).status).toBe(429);
    // The proxy's other clients are told apart by the entry the proxy itself appended.
    expect((await attempt(proxied, "alice", ALICE_PASSWORD, proxy, { "x-forwarded-for": `${ATTACKER}, ${ALICE_HOME}` })).status).toBe(200);
  });

  it("gateway.trusted_proxies takes IP addresses only", async () => {
    await expect(sessionGateway({ trustedProxies: ["proxy.example"] })).rejects.toThrow(/expected an IP address/);
  });
});

describe("client addresses", () => {
  it("have one spelling per host, and an IPv6 address counts as its /64", () => {
    expect(normalizeIpAddress("::ffff:127.0.0.1")).toBe("127.0.0.1");
    expect(normalizeIpAddress("[::1]")).toBe("0:0:0:0:0:0:0:1");
    expect(normalizeIpAddress("2001:DB8::1%eth0")).toBe("2001:db8:0:0:0:0:0:1");
    expect(normalizeIpAddress("2001:db8::ffff:1.2.3.4")).toBe("2001:db8:0:0:0:ffff:102:304");
    for (const bad of ["", "example.com", "1.2.3.256", "1::2::3", "1:2:3:4:5:6:7:8:9", "unknown"]) expect(normalizeIpAddress(bad), bad).toBeNull();
    expect(addressBucket("2001:db8:1:2:3:4:5:6")).toBe(addressBucket("2001:db8:1:2:ffff:0:0:1"));
    expect(addressBucket("2001:db8:1:2:3:4:5:6")).not.toBe(addressBucket("2001:db8:1:3:3:4:5:6"));
    expect(addressBucket("192.0.2.1")).toBe("192.0.2.1");
  });

  it("are read from the adapters' ConnectionInfo and from the info a platform-owned server (`deno serve`) passes an exported handler", () => {
    expect(connectionAddress({ remoteAddress: "192.0.2.1" })).toBe("192.0.2.1");
    expect(connectionAddress({ remoteAddr: { hostname: "2001:db8::1" } })).toBe("2001:db8::1");
    expect(connectionAddress({})).toBeUndefined();
    expect(connectionAddress(undefined)).toBeUndefined();
  });
});

// Each record several gateway processes write, written by two store instances ("processes") over
// one shared versioned store: nothing either writes is lost. Here the shared store is the
// in-process one over one memory KeyValue (what versionedOver gives every consumer of that
// KeyValue); PostgreSQL and Deno KV pass their own through the same options. Two processes over
// one fs folder are not coordinated (each has its own lock table): that needs such a store.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.ts";
import { mapEnv } from "../../src/core/env.ts";
import { parseGatewayConfig } from "../../src/config/gateway.ts";
import { createGateway } from "../../src/gateway/app.ts";
import { createAuthLayer } from "../../src/gateway/auth/layer.ts";
import { createMemoryStore, type MemoryExtractor } from "../../src/middlewares/memory/store.ts";
import type { Sandbox } from "../../src/ports/sandbox.ts";
import type { VersionedKeyValue } from "../../src/ports/versioned-key-value.ts";
import { KeyValueThreadStore } from "../../src/runtime/thread-store.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { ORPHAN_GRACE_MS, UploadStore } from "../../src/sandbox/upload-store.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { versionedOver } from "../../src/storage/versioned.ts";
import { buildTestGateway, login, passwordHash, request } from "../portable/gateway/auth-fixtures.ts";
import { config } from "../portable/gateway/threads-fixtures.ts";

/** Resolves once `count` callers have arrived: both workers have read before either writes. */
function barrier(count: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return async () => {
    if (++arrived >= count) open();
    await opened;
  };
}

/** A shared versioned store whose reads wait for each other, so two workers' read-modify-writes overlap. */
function overlapping(versioned: VersionedKeyValue, readers: number): VersionedKeyValue {
  let wait: (() => Promise<void>) | undefined = barrier(readers);
  return {
    async read(key) {
      const value = await versioned.read(key);
      const gate = wait;
      if (gate) await gate();
      wait = undefined;
      return value;
    },
    write: (key, value, expected) => versioned.write(key, value, expected),
  };
}

describe("two workers over one versioned store", () => {
  it("thread rows: two concurrent metadata patches through two stores are both kept", async () => {
    const storage = createMemoryKeyValue();
    const shared = overlapping(versionedOver(storage), 2);
    await new KeyValueThreadStore({ storage }).create({ threadId: "t1", ownerId: "alice" });
    const a = new KeyValueThreadStore({ storage, versioned: shared });
    const b = new KeyValueThreadStore({ storage, versioned: shared });
    await Promise.all([a.update("t1", { metadata: { from_a: 1 } }), b.update("t1", { metadata: { from_b: 2 } })]);
    expect((await a.get("t1"))?.metadata).toEqual({ from_a: 1, from_b: 2 });
    expect((await b.get("t1"))?.metadata).toEqual({ from_a: 1, from_b: 2 });
  });

  it("thread rows: a create racing on two workers creates once, and both answer the same row", async () => {
    const storage = createMemoryKeyValue();
    // A create writes if-absent first: both workers reach that write before either makes it.
    const real = versionedOver(storage);
    const bothWriting = barrier(2);
    const shared: VersionedKeyValue = {
      read: (key) => real.read(key),
      write: async (key, value, expected) => (await bothWriting(), real.write(key, value, expected)),
    };
    const a = new KeyValueThreadStore({ storage, versioned: shared });
    const b = new KeyValueThreadStore({ storage, versioned: shared });
    const [x, y] = await Promise.all([a.create({ threadId: "t2", ownerId: "alice", metadata: { by: "a" } }), b.create({ threadId: "t2", ownerId: "bob", metadata: { by: "b" } })]);
    expect([x.created, y.created].filter(Boolean)).toHaveLength(1);
    expect(x.thread).toEqual(y.thread);
  });

  it("memory: two workers extracting for one user at once keep both facts", async () => {
    const storage = createMemoryKeyValue();
    const versioned = versionedOver(storage);
    const bothExtracting = barrier(2);
    const extractor: MemoryExtractor = async (input) => {
      // Both have read the (empty) record before either writes.
      await bothExtracting();
      return [{ content: `fact from ${input.threadId}`, category: "context", confidence: 0.9 }];
    };
    const clock = new ManualClock(1_000);
    const a = createMemoryStore(storage, clock, { extractor, versioned });
    const b = createMemoryStore(storage, clock, { extractor, versioned });
    a.enqueue({ userId: "alice", threadId: "thread-a", messages: [{ id: "m1", role: "user", text: "one" }] });
    b.enqueue({ userId: "alice", threadId: "thread-b", messages: [{ id: "m2", role: "user", text: "two" }] });
    await Promise.all([a.flush(), b.flush()]);
    const facts = (await a.recall("alice")).map((fact) => fact.content).sort();
    expect(facts).toEqual(["fact from thread-a", "fact from thread-b"]);
    const record = (await storage.getItem("memory:alice")) as { watermarks: Record<string, string> };
    expect(record.watermarks).toEqual({ "thread-a": "m1", "thread-b": "m2" });
    await Promise.all([a.close(), b.close()]);
  });

  const PASSWORD = "alice correct horse";
  const sessionAuth = async () => ({
    auth: { mode: "session" as const, users: [{ id: "alice", password_hash: await passwordHash(PASSWORD), role: "user" as const }] },
  });

  it("JWT secret: two gateways booting at once generate one secret, and a token from one verifies on the other", async () => {
    const storage = createMemoryKeyValue();
    const gateway = await sessionAuth();
    // No AUTH_JWT_SECRET: each gateway would generate its own.
    const a = buildTestGateway({ gateway, storage, env: { AUTH_JWT_SECRET: "" } });
    const b = buildTestGateway({ gateway, storage, env: { AUTH_JWT_SECRET: "" } });
    // The first request carrying a token makes each load its secret: both at once, as two workers booting.
    const first = await Promise.all([a, b].map((via) => request(via.app, "/api/whoami", { cookies: { access_token: "not-a-jwt" } })));
    expect(first.map((response) => response.status)).toEqual([401, 401]);
    const [fromA, fromB] = await Promise.all([login(a.app, "alice", PASSWORD), login(b.app, "alice", PASSWORD)]);
    for (const [cookies, other] of [
      [fromA, b],
      [fromB, a],
    ] as const) {
      const response = await request(other.app, "/api/whoami", { cookies });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ id: "alice", source: "session" });
    }
  });

  it("JWT secret: several processes over a store that cannot compare-and-set are refused with a pointer to jwt_secret_env", async () => {
    const gateway = await sessionAuth();
    expect(() =>
      createAuthLayer({ config: parseGatewayConfig(gateway), env: mapEnv({}), storage: createMemoryKeyValue(), severalProcesses: true }),
    ).toThrow(expect.objectContaining({ code: "auth_jwt_secret_not_shared", message: expect.stringMatching(/Set AUTH_JWT_SECRET/) }));
    // With the secret set, or a shared versioned store, it starts.
    expect(() =>
      createAuthLayer({ config: parseGatewayConfig(gateway), env: mapEnv({ AUTH_JWT_SECRET: "x".repeat(40) }), storage: createMemoryKeyValue(), severalProcesses: true }),
    ).not.toThrow();
    const storage = createMemoryKeyValue();
    expect(() => createAuthLayer({ config: parseGatewayConfig(gateway), env: mapEnv({}), storage, versioned: versionedOver(storage), severalProcesses: true })).not.toThrow();
  });

  it("login lockout: 5 failed logins spread over two gateways slow the account on both, as 5 on one would", async () => {
    const storage = createMemoryKeyValue();
    const clock = new ManualClock(1_000_000);
    const gateway = await sessionAuth();
    const a = buildTestGateway({ gateway, storage, clock });
    const b = buildTestGateway({ gateway, storage, clock });
    const attempt = (via: typeof a, password: string) =>
      request(via.app, "/api/v1/auth/login/local", { method: "POST", body: JSON.stringify({ username: "alice", password }), from: "203.0.113.66" });
    for (const via of [a, b, a, b, a]) {
      const response = await attempt(via, "wrong password");
      expect(response.status).toBe(401);
      // Past the delay the count so far has earned (at most 2 s after 4 failures).
      await clock.advance(3_000);
    }
    // 5 failures counted together: 4 s now, so both refuse. Counted per worker (3 and 2) A would
    // wait 1 s, long over, and B none.
    for (const via of [a, b]) {
      const response = await attempt(via, PASSWORD);
      expect(response.status).toBe(429);
      await response.body?.cancel();
    }
    await clock.advance(1_500);
    expect((await attempt(b, PASSWORD)).status).toBe(200);
  });

  const scope = { userId: "alice", threadId: "thread-1" };
  const bytes = (text: string) => new TextEncoder().encode(text);
  async function upload(provider: ReturnType<typeof createVirtualSandboxProvider>, name: string, text: string, beforeCommit?: () => Promise<void>) {
    const batch = await provider.uploads!.begin(scope);
    const sink = await batch.file(name);
    await sink.write(bytes(text));
    await sink.close();
    await beforeCommit?.();
    await batch.commit();
  }
  const uploadText = async (provider: ReturnType<typeof createVirtualSandboxProvider>, name: string) => {
    const read = await provider.uploads!.read!(scope, name);
    return read === undefined ? undefined : new TextDecoder().decode(read);
  };

  it("sandbox: an upload through gateway B while a run's sandbox on gateway A saves is kept, its records too", async () => {
    const storage = createMemoryKeyValue();
    const a = createVirtualSandboxProvider({ storage });
    const b = createVirtualSandboxProvider({ storage });
    const sandbox: Sandbox = await a.acquire(scope);
    await sandbox.writeFile("/mnt/user-data/uploads/report.txt", "written by the run");
    await sandbox.writeFile("/mnt/user-data/workspace/notes.txt", "workspace file");
    // B's bytes are stored, not yet committed, while A's release saves (and sweeps unindexed records).
    await upload(b, "from-b.txt", "uploaded through B", () => a.release(sandbox.id));
    // And one more racing A's next save outright.
    const again = await a.acquire(scope);
    await again.writeFile("/mnt/user-data/uploads/second.txt", "second run file");
    await Promise.all([a.release(again.id), upload(b, "from-b-2.txt", "second upload through B")]);

    const reader = createVirtualSandboxProvider({ storage });
    expect(await uploadText(reader, "from-b.txt")).toBe("uploaded through B");
    expect(await uploadText(reader, "from-b-2.txt")).toBe("second upload through B");
    expect(await uploadText(reader, "report.txt")).toBe("written by the run");
    expect(await uploadText(reader, "second.txt")).toBe("second run file");
    const box = await reader.acquire(scope);
    expect(await box.readFile("/mnt/user-data/workspace/notes.txt")).toBe("workspace file");
    await Promise.all([a.close(), b.close(), reader.close()]);
  });

  it("sandbox: two workers saving one thread's files merge by file; a file both changed keeps both versions and is reported", async () => {
    const storage = createMemoryKeyValue();
    const seed = createVirtualSandboxProvider({ storage });
    const first = await seed.acquire(scope);
    await first.writeFile("/mnt/user-data/workspace/shared.txt", "base");
    await first.writeFile("/mnt/user-data/workspace/gone.txt", "delete me");
    await seed.release(first.id);

    const conflicts: unknown[] = [];
    const a = createVirtualSandboxProvider({ storage });
    const b = createVirtualSandboxProvider({ storage, onConflict: (_, found) => conflicts.push(...found) });
    const onA = await a.acquire(scope);
    const onB = await b.acquire(scope);
    await onA.writeFile("/mnt/user-data/workspace/a.txt", "from a");
    await onA.writeFile("/mnt/user-data/workspace/shared.txt", "a's version");
    await onA.remove("/mnt/user-data/workspace/gone.txt");
    await onB.writeFile("/mnt/user-data/outputs/b.txt", "from b");
    await onB.writeFile("/mnt/user-data/workspace/shared.txt", "b's version");
    await a.release(onA.id);
    await b.release(onB.id);

    expect(conflicts).toEqual([{ path: "/mnt/user-data/workspace/shared.txt", keptAs: "/mnt/user-data/workspace/shared.txt.conflict" }]);
    const reader = createVirtualSandboxProvider({ storage });
    const box = await reader.acquire(scope);
    expect(await box.readFile("/mnt/user-data/workspace/a.txt")).toBe("from a");
    expect(await box.readFile("/mnt/user-data/outputs/b.txt")).toBe("from b");
    // The later save keeps its version at the path; the earlier one's is beside it.
    expect(await box.readFile("/mnt/user-data/workspace/shared.txt")).toBe("b's version");
    expect(await box.readFile("/mnt/user-data/workspace/shared.txt.conflict")).toBe("a's version");
    // A's deletion of a file B left alone stands.
    expect(await box.exists("/mnt/user-data/workspace/gone.txt")).toBe(false);
    await Promise.all([seed.close(), a.close(), b.close(), reader.close()]);
  });

  it("sandbox: another worker's upload records no index names yet are swept only once older than the grace", async () => {
    const storage = createMemoryKeyValue();
    let now = 1_800_000_000_000;
    const a = new UploadStore(storage, { now: () => now });
    const b = new UploadStore(storage, { now: () => now });
    // B stores a file's bytes and dies before committing it.
    const sink = b.stage(scope, "never-committed.txt");
    await sink.write(bytes("bytes of a crashed request"));
    await sink.close();
    const dataKeys = () => storage.getKeys(`sandbox:uploads:${scope.userId}:${scope.threadId}:data`);
    await a.exclusive(scope, () => a.putLocked(scope, "one.txt", bytes("1")));
    expect(await dataKeys()).toHaveLength(2);
    now += ORPHAN_GRACE_MS + 1;
    await a.exclusive(scope, () => a.putLocked(scope, "two.txt", bytes("2")));
    expect(await dataKeys()).toHaveLength(2);
    expect(Object.keys(await a.index(scope)).sort()).toEqual(["one.txt", "two.txt"]);
  });
});

describe("GatewayOptions.versioned", () => {
  it("is what two gateways over one store write thread rows through: concurrent PATCHes on both are both kept", async () => {
    const storage = createMemoryKeyValue();
    const inner = versionedOver(storage);
    const written: string[] = [];
    const versioned: VersionedKeyValue = {
      read: (key) => inner.read(key),
      write: (key, value, expected) => {
        written.push(key);
        return inner.write(key, value, expected);
      },
    };
    const [a, b] = await Promise.all([createGateway({ config, storage, versioned }), createGateway({ config, storage, versioned })]);
    try {
      const json = (body: unknown) => ({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      expect((await a.fetch(new Request("http://localhost/api/threads", json({ thread_id: "t9" })))).status).toBe(200);
      const patch = (gateway: typeof a, metadata: Record<string, unknown>) =>
        gateway.fetch(new Request("http://localhost/api/threads/t9", { ...json({ metadata }), method: "PATCH" }));
      const responses = await Promise.all([patch(a, { via_a: true }), patch(b, { via_b: true })]);
      expect(responses.map((response) => response.status)).toEqual([200, 200]);
      const thread = (await (await b.fetch(new Request("http://localhost/api/threads/t9"))).json()) as { metadata: Record<string, unknown> };
      expect(thread.metadata).toMatchObject({ via_a: true, via_b: true });
      expect(written.filter((key) => key === "gateway:threads:t9").length).toBeGreaterThanOrEqual(3);
    } finally {
      await Promise.all([a.shutdown(), b.shutdown()]);
    }
  });
});

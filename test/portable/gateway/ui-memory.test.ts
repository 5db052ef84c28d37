import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { AgentScope, Placement } from "../../../src/extension-api/index.ts";
import { hashPassword } from "../../../src/gateway/auth/password.ts";
import { createMemoryStore, memoryKey, recallMemoryFacts } from "../../../src/middlewares/memory/index.ts";
import type { ModuleLoader } from "../../../src/ports/module-loader.ts";
import type { VersionedKeyValue } from "../../../src/ports/versioned-key-value.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { versionedOver } from "../../../src/storage/versioned.ts";
import { acceptanceGateways, call, cookiesOf, human, send, type SendOptions } from "../../fixtures/plugins/gateway-harness.ts";

/*
 * Settings → Memory as DeerFlow's UI uses it (/api/memory: get, clear, export, import, fact create,
 * patch, delete), through a real gateway: each user's own memory record, the one the Memory
 * middleware writes and the next run injects; compare-and-set against a concurrent extraction; and
 * the exact request the UI's own Next.js memory proxy sends in session-cookie mode.
 */

const U1_KEY = "u1-key-0123456789abcdef";
const U2_KEY = "u2-key-0123456789abcdef";
const ENV = { U1_KEY, U2_KEY };
const auth = {
  mode: "api_key",
  api_keys: [
    { key_env: "U1_KEY", user_id: "u1", role: "user" },
    { key_env: "U2_KEY", user_id: "u2", role: "user" },
  ],
};
const u1: SendOptions = { headers: { "x-api-key": U1_KEY } };
const u2: SendOptions = { headers: { "x-api-key": U2_KEY } };
const withBody = (who: SendOptions, body: unknown): SendOptions => ({ ...who, body });

const gatewayWith = acceptanceGateways(() => ({ env: ENV }));

/** What every model call of a run was sent, as text per message, through a real model-call middleware. */
function recordingLoader(requests: string[][]): ModuleLoader {
  return {
    async load() {
      return {
        install: (registry: { middlewares(c: { contributeMiddlewares(): unknown[] }): void }) =>
          registry.middlewares({
            contributeMiddlewares: () => [
              {
                middleware: {
                  name: "memory_test_recorder",
                  async wrapModelCall(request: { messages: readonly { content: unknown }[] }, handler: (r: unknown) => Promise<unknown>) {
                    requests.push(request.messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))));
                    return handler(request);
                  },
                },
                placement: Placement.STANDARD,
                scope: AgentScope.LEAD,
              },
            ],
          }),
      };
    },
  };
}

async function memoryGateway(options: Parameters<typeof gatewayWith>[1] = {}, raw: Record<string, unknown> = {}) {
  return gatewayWith({ gateway: { auth }, ...raw }, options);
}

const EMPTY_SECTION = { summary: "", updatedAt: "" };

describe("/api/memory", () => {
  it("starts as the empty document the UI reads, then adds, edits and deletes facts of the caller", async () => {
    const { gateway } = await memoryGateway();
    const empty = await call(gateway, "GET", "/api/memory", u1);
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({
      version: "1.0",
      lastUpdated: "",
      user: { workContext: EMPTY_SECTION, personalContext: EMPTY_SECTION, topOfMind: EMPTY_SECTION },
      history: { recentMonths: EMPTY_SECTION, earlierContext: EMPTY_SECTION, longTermBackground: EMPTY_SECTION },
      facts: [],
    });

    // The UI's form: free-text category, confidence as a number; content trimmed.
    const created = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "  I deploy on Fridays ", category: "work habits", confidence: 0.8 }));
    expect(created.status).toBe(200);
    expect(created.body.lastUpdated).not.toBe("");
    expect(created.body.facts).toEqual([
      { id: expect.any(String), content: "I deploy on Fridays", category: "work habits", confidence: 0.8, createdAt: expect.any(String), updatedAt: expect.any(String), source: "manual" },
    ]);
    const id = created.body.facts[0].id as string;
    // Defaults as upstream: blank category is "context", no confidence is 0.5.
    const second = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "I like tea", category: "  " }));
    expect(second.body.facts[1]).toMatchObject({ content: "I like tea", category: "context", confidence: 0.5 });

    const patched = await call(gateway, "PATCH", `/api/memory/facts/${encodeURIComponent(id)}`, withBody(u1, { confidence: 0.95 }));
    expect(patched.status).toBe(200);
    expect(patched.body.facts[0]).toMatchObject({ id, content: "I deploy on Fridays", category: "work habits", confidence: 0.95 });
    const renamed = await call(gateway, "PATCH", `/api/memory/facts/${id}`, withBody(u1, { content: "I deploy on Thursdays", category: "ops" }));
    expect(renamed.body.facts[0]).toMatchObject({ id, content: "I deploy on Thursdays", category: "ops", confidence: 0.95 });
    expect((await call(gateway, "GET", "/api/memory", u1)).body.facts.map((f: { content: string }) => f.content)).toEqual(["I deploy on Thursdays", "I like tea"]);

    const deleted = await call(gateway, "DELETE", `/api/memory/facts/${id}`, u1);
    expect(deleted.status).toBe(200);
    expect(deleted.body.facts.map((f: { content: string }) => f.content)).toEqual(["I like tea"]);
    expect((await call(gateway, "DELETE", `/api/memory/facts/${id}`, u1)).status).toBe(404);

    const cleared = await call(gateway, "DELETE", "/api/memory", u1);
    expect(cleared.status).toBe(200);
    expect(cleared.body.facts).toEqual([]);
    expect((await call(gateway, "GET", "/api/memory", u1)).body.facts).toEqual([]);
  });

  it("keeps each user's memory their own: another user's fact id is 404 and stays as it was", async () => {
    const { gateway } = await memoryGateway();
    const mine = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "My cat is called Miso", category: "personal", confidence: 0.9 }));
    const id = mine.body.facts[0].id as string;
    expect((await call(gateway, "GET", "/api/memory", u2)).body.facts).toEqual([]);
    expect((await call(gateway, "GET", "/api/memory/export", u2)).body.facts).toEqual([]);
    const patch = await call(gateway, "PATCH", `/api/memory/facts/${id}`, withBody(u2, { content: "taken over" }));
    expect(patch.status).toBe(404);
    expect(patch.body.detail).toBe(`Memory fact '${id}' not found.`);
    expect((await call(gateway, "DELETE", `/api/memory/facts/${id}`, u2)).status).toBe(404);
    expect((await call(gateway, "DELETE", "/api/memory", u2)).status).toBe(200);
    expect((await call(gateway, "GET", "/api/memory", u1)).body.facts).toEqual([expect.objectContaining({ id, content: "My cat is called Miso" })]);
    // Without credentials there is no memory at all.
    expect((await call(gateway, "GET", "/api/memory")).status).toBe(401);
  });

  it("refuses a bad fact with 422 naming the field, a repeated fact with 409, and writes nothing", async () => {
    const { gateway } = await memoryGateway();
    expect((await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "I use vim" }))).status).toBe(200);
    const id = (await call(gateway, "GET", "/api/memory", u1)).body.facts[0].id as string;
    const cases: [string, string, unknown, string][] = [
      ["POST", "/api/memory/facts", { content: "   " }, "content: must not be empty"],
      ["POST", "/api/memory/facts", { category: "x" }, "content:"],
      ["POST", "/api/memory/facts", { content: "x".repeat(501) }, "content: must be at most 500 characters"],
      ["POST", "/api/memory/facts", { content: "ok", confidence: 1.5 }, "confidence: must be between 0 and 1"],
      ["POST", "/api/memory/facts", { content: "ok", confidence: "high" }, "confidence:"],
      ["POST", "/api/memory/facts", { content: "ok", category: "c".repeat(65) }, "category: must be at most 64 characters"],
      ["POST", "/api/memory/facts", { content: "ok", colour: "red" }, "colour: unknown field"],
      ["POST", "/api/memory/facts", ["I use vim"], "expected a JSON object"],
      ["PATCH", `/api/memory/facts/${id}`, { content: "" }, "content: must not be empty"],
      ["PATCH", `/api/memory/facts/${id}`, { confidence: -0.1 }, "confidence: must be between 0 and 1"],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await call(gateway, method, path, withBody(u1, body));
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.detail, JSON.stringify(body)).toContain(field);
    }
    const repeated = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "i use  VIM." }));
    expect(repeated.status).toBe(409);
    expect(repeated.body.detail).toContain("same content already exists");
    expect((await call(gateway, "GET", "/api/memory", u1)).body.facts).toEqual([expect.objectContaining({ id, content: "I use vim", category: "context", confidence: 0.5 })]);
  });

  it("answers 409 when memory.max_facts is full of more confident facts, and keeps the new one when it outranks one", async () => {
    const { gateway } = await memoryGateway({}, { memory: { max_facts: 10 } });
    for (let i = 0; i < 10; i++) {
      expect((await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: `fact ${i}`, confidence: i === 0 ? 0.1 : 0.9 }))).status).toBe(200);
    }
    const weak = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "weak newcomer", confidence: 0.05 }));
    expect(weak.status).toBe(409);
    expect(weak.body.detail).toContain("memory.max_facts");
    const strong = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "strong newcomer", confidence: 0.99 }));
    expect(strong.status).toBe(200);
    const contents = strong.body.facts.map((f: { content: string }) => f.content);
    expect(contents).toHaveLength(10);
    expect(contents).toContain("strong newcomer");
    expect(contents).not.toContain("fact 0");
  });
});

describe("/api/memory export and import", () => {
  it("exports what import accepts: a round trip through another user gives the same document", async () => {
    const { gateway } = await memoryGateway();
    await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "I prefer dark mode", category: "preference", confidence: 0.9 }));
    await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "Works at ACME", category: "work", confidence: 0.7 }));
    const imported = {
      ...(await call(gateway, "GET", "/api/memory/export", u1)).body,
      user: { workContext: { summary: "Builds gateways", updatedAt: "2026-11-01T00:00:00.000Z" } },
    };
    expect((await call(gateway, "POST", "/api/memory/import", withBody(u1, imported))).status).toBe(200);
    const exported = await call(gateway, "GET", "/api/memory/export", u1);
    expect(exported.status).toBe(200);
    expect(exported.body.user.workContext).toEqual({ summary: "Builds gateways", updatedAt: "2026-11-01T00:00:00.000Z" });
    expect(exported.body.user.topOfMind).toEqual(EMPTY_SECTION);

    const restored = await call(gateway, "POST", "/api/memory/import", withBody(u2, exported.body));
    expect(restored.status).toBe(200);
    const again = (await call(gateway, "GET", "/api/memory/export", u2)).body;
    expect({ ...again, lastUpdated: "" }).toEqual({ ...exported.body, lastUpdated: "" });
    // Facts with a thread of origin keep it; upstream's extra fact fields are left out, not refused.
    const upstream = {
      version: "1.0",
      revision: 7,
      facts: [{ id: "fact_abc123", content: "User prefers TypeScript", category: "preference", confidence: 0.9, createdAt: "2024-01-15T10:30:00Z", source: "thread_xyz", topics: ["lang"], status: "active" }],
    };
    const fromUpstream = await call(gateway, "POST", "/api/memory/import", withBody(u2, upstream));
    expect(fromUpstream.status).toBe(200);
    expect(fromUpstream.body.facts).toEqual([
      { id: "fact_abc123", content: "User prefers TypeScript", category: "preference", confidence: 0.9, createdAt: "2024-01-15T10:30:00Z", updatedAt: "2024-01-15T10:30:00Z", source: "thread_xyz" },
    ]);
    expect(fromUpstream.body.user.workContext).toEqual(EMPTY_SECTION);
  });

  it("validates the whole document first: a bad import is 422 naming the field and the old memory is untouched", async () => {
    const { gateway } = await memoryGateway({}, { memory: { max_facts: 10 } });
    await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "kept fact", confidence: 0.8 }));
    const before = (await call(gateway, "GET", "/api/memory", u1)).body;
    const good = { content: "fine", category: "context", confidence: 0.5 };
    const cases: [unknown, string][] = [
      [{ facts: [good, { content: "bad", confidence: 3 }] }, "facts.1.confidence: must be between 0 and 1"],
      [{ facts: [good, { content: "" }] }, "facts.1.content: must not be empty"],
      [{ facts: [good, { id: "../x", content: "odd id" }] }, "facts.1.id:"],
      [{ facts: [good, { content: "FINE." }] }, "facts.1.content: repeats facts.0"],
      [{ facts: [{ id: "f1", content: "a" }, { id: "f1", content: "b" }] }, "facts.1.id: repeats the id of facts.0"],
      [{ facts: Array.from({ length: 11 }, (_, i) => ({ content: `n${i}` })) }, "facts: at most 10 facts (memory.max_facts)"],
      [{ user: { workContext: { summary: 5 } } }, "user.workContext.summary:"],
      [{ facts: "none" }, "facts:"],
      [[], "expected a JSON object"],
    ];
    for (const [body, field] of cases) {
      const res = await call(gateway, "POST", "/api/memory/import", withBody(u1, body));
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(422);
      expect(res.body.detail, JSON.stringify(body).slice(0, 80)).toContain(field);
    }
    expect((await call(gateway, "GET", "/api/memory", u1)).body).toEqual(before);
  });

  it("answers 409 for a memory record it cannot read, until a clear or an import replaces it", async () => {
    const storage = createMemoryKeyValue();
    const { gateway } = await memoryGateway({ storage });
    await storage.setItem(memoryKey("u1"), JSON.stringify({ version: 99, facts: "?" }));
    const res = await call(gateway, "GET", "/api/memory", u1);
    expect(res.status).toBe(409);
    expect(res.body.detail).toContain("DELETE /api/memory clears it");
    expect((await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "x" }))).status).toBe(409);
    expect((await call(gateway, "POST", "/api/memory/import", withBody(u1, { facts: [{ content: "fresh start" }] }))).status).toBe(200);
    expect((await call(gateway, "GET", "/api/memory", u1)).body.facts.map((f: { content: string }) => f.content)).toEqual(["fresh start"]);
  });
});

describe("memory edited here and the Memory middleware", () => {
  it("a fact added through the API is in the <memory> block the next run sends the model", async () => {
    const requests: string[][] = [];
    const { gateway } = await memoryGateway({ loader: recordingLoader(requests) }, { plugins: [{ use: "./recorder.ts:install" }] });
    const added = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "My favourite colour is teal <b>", category: "personal", confidence: 0.9 }));
    expect(added.status).toBe(200);
    await call(gateway, "POST", "/api/threads", withBody(u1, { thread_id: "t-mem" }));
    const run = await call(gateway, "POST", "/api/threads/t-mem/runs/wait", withBody(u1, { input: human("what colour do I like?") }));
    expect(run.status).toBe(200);
    const sent = requests.at(-1)!.join("\n");
    expect(sent).toContain("<memory>");
    expect(sent).toContain("- [personal | 0.90] My favourite colour is teal &lt;b&gt;");

    // Another user's run gets none of it.
    await call(gateway, "POST", "/api/threads", withBody(u2, { thread_id: "t-other" }));
    await call(gateway, "POST", "/api/threads/t-other/runs/wait", withBody(u2, { input: human("what colour do I like?") }));
    expect(requests.at(-1)!.join("\n")).not.toContain("teal");
  });

  it("a UI edit that races an extraction keeps both: the edit retries on the record the extraction wrote", async () => {
    const storage = createMemoryKeyValue();
    const inner = versionedOver(storage);
    const store = createMemoryStore(storage, systemClock, { versioned: inner, config: { debounce_seconds: 1 } });
    let raced = false;
    // Between the API's read and its write, the Memory middleware's updater writes the record.
    const racing: VersionedKeyValue = {
      read: (key) => inner.read(key),
      async write(key, value, expected) {
        if (key === memoryKey("u1") && !raced) {
          raced = true;
          store.enqueue({ userId: "u1", threadId: "t1", messages: [{ id: "m1", role: "user", text: "Remember that I live in Lisbon." }] });
          await store.flush();
        }
        return inner.write(key, value, expected);
      },
    };
    try {
      const { gateway } = await memoryGateway({ storage, versioned: racing });
      const res = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "I cycle to work", confidence: 0.8 }));
      expect(res.status).toBe(200);
      expect(raced).toBe(true);
      expect(res.body.facts.map((f: { content: string }) => f.content).sort()).toEqual(["I cycle to work", "I live in Lisbon"]);
      expect(res.body.facts.find((f: { content: string }) => f.content === "I live in Lisbon").source).toBe("t1");
      expect((await recallMemoryFacts(storage, "u1")).map((f) => f.content).sort()).toEqual(["I cycle to work", "I live in Lisbon"]);
    } finally {
      await store.close();
    }
  });

  it("an extraction after an import keeps the imported summaries and facts", async () => {
    const storage = createMemoryKeyValue();
    const { gateway } = await memoryGateway({ storage });
    const document = { user: { topOfMind: { summary: "Shipping v2", updatedAt: "2026-11-30T00:00:00.000Z" } }, facts: [{ content: "imported fact", confidence: 0.8 }] };
    expect((await call(gateway, "POST", "/api/memory/import", withBody(u1, document))).status).toBe(200);
    const store = createMemoryStore(storage, systemClock, { versioned: versionedOver(storage), config: { debounce_seconds: 1 } });
    try {
      store.enqueue({ userId: "u1", threadId: "t1", messages: [{ id: "m1", role: "user", text: "Remember that I use Deno." }] });
      await store.flush();
    } finally {
      await store.close();
    }
    const after = (await call(gateway, "GET", "/api/memory", u1)).body;
    expect(after.user.topOfMind).toEqual({ summary: "Shipping v2", updatedAt: "2026-11-30T00:00:00.000Z" });
    expect(after.facts.map((f: { content: string }) => f.content)).toEqual(["imported fact", "I use Deno"]);
  });

  it("cleared memory is not refilled from turns the updater already processed", async () => {
    const storage = createMemoryKeyValue();
    const { gateway } = await memoryGateway({ storage });
    const store = createMemoryStore(storage, systemClock, { versioned: versionedOver(storage), config: { debounce_seconds: 1 } });
    const first = { id: "m1", role: "user" as const, text: "Remember that I live in Oslo." };
    try {
      store.enqueue({ userId: "u1", threadId: "t1", messages: [first] });
      await store.flush();
      expect((await call(gateway, "GET", "/api/memory", u1)).body.facts.map((f: { content: string }) => f.content)).toEqual(["I live in Oslo"]);
      expect((await call(gateway, "DELETE", "/api/memory", u1)).status).toBe(200);
      // The thread's next turn hands the whole conversation over again.
      store.enqueue({ userId: "u1", threadId: "t1", messages: [first, { id: "m2", role: "assistant", text: "Noted." }, { id: "m3", role: "user", text: "Thanks" }] });
      await store.flush();
    } finally {
      await store.close();
    }
    expect((await call(gateway, "GET", "/api/memory", u1)).body.facts).toEqual([]);
  });

  it("an extraction that races a UI delete and add keeps both changes", async () => {
    const storage = createMemoryKeyValue();
    const inner = versionedOver(storage);
    const { gateway } = await memoryGateway({ storage });
    const first = await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "old fact", confidence: 0.8 }));
    const oldId = first.body.facts[0].id as string;
    let raced = false;
    // Between the updater's read and its write, the user deletes one fact and adds another.
    const racing: VersionedKeyValue = {
      read: (key) => inner.read(key),
      async write(key, value, expected) {
        if (key === memoryKey("u1") && !raced) {
          raced = true;
          expect((await call(gateway, "DELETE", `/api/memory/facts/${oldId}`, u1)).status).toBe(200);
          expect((await call(gateway, "POST", "/api/memory/facts", withBody(u1, { content: "added meanwhile", confidence: 0.8 }))).status).toBe(200);
        }
        return inner.write(key, value, expected);
      },
    };
    const store = createMemoryStore(storage, systemClock, { versioned: racing, config: { debounce_seconds: 1 } });
    try {
      store.enqueue({ userId: "u1", threadId: "t1", messages: [{ id: "m1", role: "user", text: "Remember that I speak Portuguese." }] });
      await store.flush();
      expect(raced).toBe(true);
      const contents = (await call(gateway, "GET", "/api/memory", u1)).body.facts.map((f: { content: string }) => f.content).sort();
      expect(contents).toEqual(["I speak Portuguese", "added meanwhile"]);
    } finally {
      await store.close();
    }
  });
});

describe("the UI's own Next.js memory proxy (frontend/src/app/api/memory/**)", () => {
  // The browser talks to the UI at http://localhost:3000; its route handler forwards every header it
  // got (Next adds the x-forwarded-* ones) minus host, connection and content-length, to
  // http://127.0.0.1:8001, where the gateway listens.
  const UI_ORIGIN = "http://localhost:3000";
  const GATEWAY = "http://127.0.0.1:8001";

  async function sessionGateway(corsOrigins: string[] = []) {
    const { gateway } = await gatewayWith({
      gateway: { cors_origins: corsOrigins, auth: { mode: "session", users: [{ id: "ada", password_hash: await hashPassword("pw-ada-secret", { iterations: 1_000 }) }] } },
    });
    const login = await send(gateway, "POST", "/api/v1/auth/login/local", { body: { username: "ada", password: "pw-ada-secret" } });
    expect(login.status).toBe(200);
    return { gateway, cookies: cookiesOf(login) };
  }

  function proxied(method: string, path: string, cookies: Record<string, string>, body: unknown, overrides: Record<string, string | null> = {}): Request {
    const headers: Record<string, string> = {
      accept: "*/*",
      "accept-encoding": "gzip, deflate, br, zstd",
      "accept-language": "en-US,en;q=0.9",
      "content-type": "application/json",
      cookie: `access_token=${cookies.access_token}; csrf_token=${cookies.csrf_token}`,
      origin: UI_ORIGIN,
      referer: `${UI_ORIGIN}/workspace/settings`,
      "sec-fetch-dest": "empty",
      "sec-fetch-mode": "cors",
      "sec-fetch-site": "same-origin",
      "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0.0.0",
      "x-csrf-token": cookies.csrf_token!,
      "x-forwarded-for": "::1",
      "x-forwarded-host": "localhost:3000",
      "x-forwarded-port": "3000",
      "x-forwarded-proto": "http",
    };
    for (const [name, value] of Object.entries(overrides)) {
      if (value === null) delete headers[name];
      else headers[name] = value;
    }
    return new Request(`${GATEWAY}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  }

  it("passes CSRF with exactly the headers the proxy sends, with no extra configuration", async () => {
    const { gateway, cookies } = await sessionGateway();
    const created = await gateway.fetch(proxied("POST", "/api/memory/facts", cookies, { content: "I like Next.js", category: "context", confidence: 0.8 }));
    expect(created.status).toBe(200);
    const id = ((await created.json()) as { facts: { id: string }[] }).facts[0]!.id;
    expect((await gateway.fetch(proxied("PATCH", `/api/memory/facts/${id}`, cookies, { confidence: 0.9 }))).status).toBe(200);
    expect((await gateway.fetch(proxied("DELETE", `/api/memory/facts/${id}`, cookies, undefined, { "content-type": null }))).status).toBe(200);
    expect((await gateway.fetch(proxied("DELETE", "/api/memory", cookies, undefined, { "content-type": null }))).status).toBe(200);
    const listed = await gateway.fetch(proxied("GET", "/api/memory", cookies, undefined, { "content-type": null, "x-csrf-token": null }));
    expect(listed.status).toBe(200);
  });

  it("with auth disabled (upstream's real-backend specs) the same proxied request is the local user's", async () => {
    const { gateway } = await gatewayWith({});
    const noSession = { access_token: "", csrf_token: "" };
    const created = await gateway.fetch(proxied("POST", "/api/memory/facts", noSession, { content: "no sign-in here" }, { cookie: null, "x-csrf-token": null }));
    expect(created.status).toBe(200);
    const foreign = await gateway.fetch(proxied("POST", "/api/memory/facts", noSession, { content: "forged" }, { cookie: null, "x-csrf-token": null, origin: "https://evil.example" }));
    expect(foreign.status).toBe(403);
    expect((await call(gateway, "GET", "/api/memory")).body.facts.map((f: { content: string }) => f.content)).toEqual(["no sign-in here"]);
  });

  it("still refuses a page of another site, a missing token, and, without Next's x-forwarded-* headers, an unconfigured UI origin", async () => {
    const { gateway, cookies } = await sessionGateway();
    const fact = { content: "forged" };
    const foreign = await gateway.fetch(proxied("POST", "/api/memory/facts", cookies, fact, { origin: "https://evil.example", "sec-fetch-site": "cross-site" }));
    expect(foreign.status).toBe(403);
    expect((await gateway.fetch(proxied("POST", "/api/memory/facts", cookies, fact, { "x-csrf-token": null }))).status).toBe(403);
    const bare = { "x-forwarded-host": null, "x-forwarded-port": null, "x-forwarded-proto": null } as const;
    const stripped = await gateway.fetch(proxied("POST", "/api/memory/facts", cookies, fact, bare));
    expect(stripped.status).toBe(403);
    expect(((await stripped.json()) as { detail: string }).detail).toContain("gateway.cors_origins");
    // The documented fix for a proxy in between that drops them: the UI's origin in gateway.cors_origins.
    const configured = await sessionGateway([UI_ORIGIN]);
    expect((await configured.gateway.fetch(proxied("POST", "/api/memory/facts", configured.cookies, { content: "allowed" }, bare))).status).toBe(200);
    expect((await call(gateway, "GET", "/api/memory", { cookies: { access_token: cookies.access_token! } })).body.facts).toEqual([]);
  });
});

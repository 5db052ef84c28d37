// Every request costs bounded time and memory (issue 12, point 1 and finding 5), proven on this
// runtime's own server over a real socket: a deep path is refused before storage or a sandbox sees
// it (and, with the cap raised, a deep missing path is still cheap); a 250 MB body is cut off at
// its route's cap while it streams; JSON nested 5,000 levels deep is a 422 on every JSON route.
// Each time, /api/ok answers while the hostile requests are still in flight.
import { afterEach, describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import type { GatewayLimitsConfig } from "../../../src/config/gateway.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { createGateway } from "../../../src/gateway/app.ts";
import { bodyKindOf } from "../../../src/gateway/request-limits.ts";
import { LOGIN_PATH } from "../../../src/gateway/auth/request.ts";
import type { HttpServerHandle } from "../../../src/ports/http-server.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { passwordHash } from "./auth-fixtures.ts";
import { flood, streamedRequest, type FloodAnswer, type StreamedRequest } from "./raw-http.ts";
import { runtimeServe } from "./runtime-serve.ts";

const { runtime, serve } = await runtimeServe();

const API_KEY = "limits-test-key-0123456789abcdef";
const KEY_HEADERS = { "x-api-key": API_KEY };
const JSON_HEADERS = { ...KEY_HEADERS, "content-type": "application/json" };
const MB = 1024 * 1024;
const HOSTILE_BODY_BYTES = 250 * MB;
/** Waiting bound for /api/ok: a server whose loop is held would never answer within it. */
const OK_WAIT_MS = 15_000;

interface Served {
  readonly url: string;
  readonly threadId: string;
}

const closing: Array<() => Promise<void>> = [];
const streams: StreamedRequest[] = [];
afterEach(async () => {
  for (const stream of streams.splice(0)) stream.close();
  for (const close of closing.splice(0).reverse()) await close();
});

/** The real gateway in api_key mode with one password user (for login), on this runtime's server. */
async function served(limits: Partial<GatewayLimitsConfig> = {}): Promise<Served> {
  const config = validateLeadConfig(
    {
      gateway: {
        auth: {
          mode: "api_key",
          api_keys: [{ key_env: "LIMITS_TEST_KEY", user_id: "alice", role: "admin" }],
          users: [{ id: "bob", password_hash: await passwordHash("bob-password") }],
        },
        limits,
      },
    },
    "request-limits",
  );
  const gateway = await createGateway({
    config,
    storage: createMemoryKeyValue(),
    env: mapEnv({ LIMITS_TEST_KEY: API_KEY }),
    listening: { host: "127.0.0.1" },
    logger: { error: () => undefined, warn: () => undefined, info: () => undefined },
  });
  const server: HttpServerHandle = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
  closing.push(() => gateway.shutdown(), () => server.close());
  const created = await fetch(`${server.url}/api/threads`, { method: "POST", headers: JSON_HEADERS, body: "{}" });
  expect(created.status).toBe(200);
  const { thread_id: threadId } = (await created.json()) as { thread_id: string };
  return { url: server.url, threadId };
}

async function apiOk(url: string): Promise<number> {
  const response = await fetch(`${url}/api/ok`, { signal: AbortSignal.timeout(OK_WAIT_MS) });
  await response.arrayBuffer();
  return response.status;
}

/** /api/ok answers 200 while `hostile` keeps requests in flight; then every hostile answer. */
async function okDuringFlood(url: string, hostile: (n: number) => Promise<Response>, concurrency = 4): Promise<FloodAnswer[]> {
  const load = flood(hostile, concurrency);
  await load.firstAnswered;
  expect(await apiOk(url)).toBe(200);
  // Still going: the check above happened between hostile requests, not after them.
  expect(load.answered()).toBeGreaterThan(0);
  return load.stop();
}

function detailOf(answer: FloodAnswer | { body: string }): string {
  return String((JSON.parse(answer.body) as { detail?: unknown }).detail);
}

/**
 * Streams a 250 MB chunked POST: `firstBytes` (under the cap), then /api/ok must answer while the
 * body is still unanswered, then the rest until the server's 413; returns its detail.
 */
async function okWhileStreamingThenRefused(
  url: string,
  options: { path: string; headers: Record<string, string>; firstBytes: number; chunkBytes?: number },
): Promise<string> {
  const upload = streamedRequest(url, { method: "POST", totalBytes: HOSTILE_BODY_BYTES, ...options });
  streams.push(upload);
  await upload.firstPartSent;
  expect(await apiOk(url)).toBe(200);
  expect(upload.answered()).toBe(false);
  upload.release();
  const response = await upload.response;
  expect(response.status).toBe(413);
  // Cut off while it was still arriving: far from all 250 MB went out.
  expect(upload.finished()).toBe(false);
  expect(upload.sent()).toBeLessThan(100 * MB);
  return detailOf(response);
}

const deepPath = (levels: number) => `/mnt/user-data/outputs/${Array.from({ length: levels }, () => "a").join("/")}`;

describe(`request limits on ${runtime}'s own server`, () => {
  it("a 4 KB+ deep missing artifact path is a 414 naming gateway.limits.max_path_bytes, and /api/ok answers while such requests are in flight", async () => {
    const { url, threadId } = await served();
    const hostile = `${url}/api/threads/${threadId}/artifacts${deepPath(2100)}`;
    expect(hostile.length).toBeGreaterThan(4096);
    const answers = await okDuringFlood(url, () => fetch(hostile, { headers: KEY_HEADERS }));
    for (const answer of answers) {
      expect(answer.status).toBe(414);
      expect(detailOf(answer)).toContain("gateway.limits.max_path_bytes");
    }
  });

  it("a short path with too many segments, or one too long segment, is a 414 naming its limit; every path parameter is bounded", async () => {
    const { url, threadId } = await served();
    const deep = await fetch(`${url}/api/threads/${threadId}/artifacts${deepPath(100)}`, { headers: KEY_HEADERS });
    expect(deep.status).toBe(414);
    expect(detailOf({ body: await deep.text() })).toContain("gateway.limits.max_path_segments");
    // An encoded slash separates segments too: the artifact route decodes it into one.
    const encoded = await fetch(`${url}/api/threads/${threadId}/artifacts/mnt/user-data/outputs/${"a%2F".repeat(100)}x`, { headers: KEY_HEADERS });
    expect(encoded.status).toBe(414);
    expect(detailOf({ body: await encoded.text() })).toContain("gateway.limits.max_path_segments");

    const long = "r".repeat(2000);
    for (const path of [
      `/api/threads/${long}`,
      `/api/threads/${threadId}/runs/${long}`,
      `/api/threads/${threadId}/uploads/${long}.txt`,
      `/api/threads/${threadId}/state/${long}`,
      `/api/assistants/${long}`,
      `/api/models/${long}`,
    ]) {
      const response = await fetch(`${url}${path}`, { method: path.includes("/uploads/") ? "DELETE" : "GET", headers: KEY_HEADERS });
      expect(response.status, path).toBe(414);
      expect(detailOf({ body: await response.text() }), path).toContain("gateway.limits.max_path_segment_bytes");
    }
    // Within the segment cap, a run id is still checked against the alphabet run ids have.
    const runId = await fetch(`${url}/api/threads/${threadId}/runs/${"r".repeat(200)}`, { headers: KEY_HEADERS });
    expect(runId.status).toBe(422);
    expect(detailOf({ body: await runId.text() })).toContain("run_id");
  });

  it("with the path limits raised, a 2,000-level missing artifact path is a cheap 404, and /api/ok answers while such requests are in flight", async () => {
    const { url, threadId } = await served({ max_path_bytes: 16_384, max_path_segments: 4096 });
    const hostile = `${url}/api/threads/${threadId}/artifacts${deepPath(2000)}`;
    const answers = await okDuringFlood(url, () => fetch(hostile, { headers: KEY_HEADERS }), 2);
    for (const answer of answers) {
      expect(answer.status).toBe(404);
      expect(detailOf(answer)).toContain("Artifact not found");
    }
  });

  it("a 250 MB body streamed chunked to login is cut off at 16 KiB with a 413 naming gateway.limits.max_unauthenticated_body_bytes; /api/ok answers while it streams", async () => {
    const { url } = await served();
    const detail = await okWhileStreamingThenRefused(url, { path: LOGIN_PATH, headers: { "content-type": "application/json" }, firstBytes: 8 * 1024, chunkBytes: 4 * 1024 });
    expect(detail).toContain("gateway.limits.max_unauthenticated_body_bytes");
    expect(detail).toContain("16384 bytes");
  });

  it("a 250 MB body streamed chunked to a run route is cut off at 4 MiB with a 413 naming gateway.limits.max_run_body_bytes; /api/ok answers while it streams", async () => {
    const { url, threadId } = await served();
    const detail = await okWhileStreamingThenRefused(url, { path: `/api/threads/${threadId}/runs/stream`, headers: JSON_HEADERS, firstBytes: 2 * MB });
    expect(detail).toContain("gateway.limits.max_run_body_bytes");
  });

  it("a declared 250 MB body is refused from its Content-Length before a byte of it is read, on login, a run and a thread PATCH, and without credentials by auth", async () => {
    const { url, threadId } = await served();
    for (const [path, method, key] of [
      [LOGIN_PATH, "POST", "max_unauthenticated_body_bytes"],
      [`/api/runs/wait`, "POST", "max_run_body_bytes"],
      [`/api/threads/${threadId}`, "PATCH", "max_body_bytes"],
    ] as const) {
      const upload = streamedRequest(url, { method, path, headers: JSON_HEADERS, totalBytes: HOSTILE_BODY_BYTES, firstBytes: 0, declareLength: true });
      streams.push(upload);
      const response = await upload.response;
      expect(response.status, path).toBe(413);
      expect(detailOf(response), path).toContain(`gateway.limits.${key}`);
      expect(upload.sent(), path).toBe(0);
    }
    // A caller without credentials is refused (CSRF, then auth) before its body is read, whatever the route's cap.
    const anonymous = streamedRequest(url, { method: "POST", path: `/api/threads/${threadId}/runs/stream`, headers: { "content-type": "application/json" }, totalBytes: HOSTILE_BODY_BYTES, firstBytes: 0, declareLength: true });
    streams.push(anonymous);
    expect([401, 403]).toContain((await anonymous.response).status);
    expect(anonymous.sent()).toBe(0);
    // Under the cap is fine: 900 KiB of metadata fits a thread PATCH's 1 MiB.
    const metadata = JSON.stringify({ metadata: { note: "n".repeat(900 * 1024) } });
    const patched = await fetch(`${url}/api/threads/${threadId}`, { method: "PATCH", headers: JSON_HEADERS, body: metadata });
    expect(patched.status).toBe(200);
  });

  it("the generic cap does not cut an upload below gateway.uploads: a 2 MiB file (over max_body_bytes) is stored", async () => {
    const { url, threadId } = await served({ max_body_bytes: MB });
    const form = new FormData();
    form.append("files", new File([new Uint8Array(2 * MB).fill(120)], "big.bin"));
    const response = await fetch(`${url}/api/threads/${threadId}/uploads`, { method: "POST", headers: KEY_HEADERS, body: form });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { files: Array<{ size: number }> }).files[0]!.size).toBe(2 * MB);
  });

  it("JSON nested 5,000 levels deep is a 422 naming gateway.limits.max_json_depth and the field, on every JSON route; /api/ok answers while such requests are in flight", async () => {
    const { url, threadId } = await served();
    const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
    const routes: Array<{ method: string; path: string; body: string; at: string; headers?: Record<string, string> }> = [
      { method: "POST", path: "/api/threads", body: `{"metadata":${deep}}`, at: "metadata" },
      { method: "PATCH", path: `/api/threads/${threadId}`, body: `{"metadata":${deep}}`, at: "metadata" },
      { method: "POST", path: "/api/threads/search", body: `{"metadata":${deep}}`, at: "metadata" },
      { method: "POST", path: `/api/threads/${threadId}/state`, body: `{"values":{"messages":${deep}}}`, at: "values.messages" },
      { method: "POST", path: `/api/threads/${threadId}/state/checkpoint`, body: `{"checkpoint":{"checkpoint_id":${deep}}}`, at: "checkpoint.checkpoint_id" },
      { method: "POST", path: `/api/threads/${threadId}/history`, body: `{"metadata":${deep}}`, at: "metadata" },
      { method: "POST", path: "/api/assistants/search", body: `{"metadata":${deep}}`, at: "metadata" },
      { method: "POST", path: `/api/threads/${threadId}/runs`, body: `{"input":${deep}}`, at: "input" },
      { method: "POST", path: `/api/threads/${threadId}/runs/stream`, body: `{"context":${deep}}`, at: "context" },
      { method: "POST", path: `/api/threads/${threadId}/runs/wait`, body: `{"config":{"configurable":${deep}}}`, at: "config.configurable" },
      { method: "POST", path: "/api/runs/stream", body: `{"metadata":${deep}}`, at: "metadata" },
      { method: "POST", path: "/api/runs/wait", body: `{"input":{"messages":${deep}}}`, at: "input.messages" },
      { method: "POST", path: LOGIN_PATH, body: `{"username":${deep},"password":"x"}`, at: "username", headers: { "content-type": "application/json" } },
    ];
    const send = (n: number) => {
      const route = routes[n % routes.length]!;
      return fetch(`${url}${route.path}`, { method: route.method, headers: route.headers ?? JSON_HEADERS, body: route.body });
    };
    const answers = await okDuringFlood(url, send);
    expect(answers.length).toBeGreaterThanOrEqual(1);
    // Every route once more, each answer checked against its own route.
    for (const [index, route] of routes.entries()) {
      const response = await send(index);
      const detail = detailOf({ body: await response.text() });
      expect(response.status, route.path).toBe(422);
      expect(detail, route.path).toContain("gateway.limits.max_json_depth");
      expect(detail, route.path).toContain(` at ${route.at}`);
    }
    for (const answer of answers) expect(answer.status).toBe(422);

    // Up to the limit is fine: 63 levels under metadata (64 with the body) are kept.
    const atLimit = `{"metadata":{"k":${"[".repeat(62)}${"]".repeat(62)}}}`;
    const kept = await fetch(`${url}/api/threads`, { method: "POST", headers: JSON_HEADERS, body: atLimit });
    expect(kept.status).toBe(200);
  });
});

describe("which body cap a route gets", () => {
  it("run creation gets the run cap, uploads their own (none here), routes without credentials the small one, the rest the default", () => {
    for (const path of ["/api/threads/t1/runs", "/api/threads/t1/runs/stream", "/api/threads/t1/runs/wait", "/api/runs/stream", "/api/runs/wait"]) {
      expect(bodyKindOf("POST", path), path).toBe("run");
    }
    expect(bodyKindOf("POST", "/api/threads/t1/uploads")).toBe("upload");
    for (const path of [LOGIN_PATH, "/api/v1/auth/logout", "/api/ok", "/health", "/api/info"]) expect(bodyKindOf("POST", path), path).toBe("unauthenticated");
    for (const [method, path] of [
      ["PATCH", "/api/threads/t1"],
      ["POST", "/api/threads/t1/state"],
      ["POST", "/api/threads/t1/runs/r1/cancel"],
      ["POST", "/api/threads/t1/runs/r1/stream"],
      ["GET", "/api/threads/t1/runs"],
      ["POST", "/api/threads/search"],
      ["POST", "/api/my-extension/hook"],
    ] as const) {
      expect(bodyKindOf(method, path), `${method} ${path}`).toBe("default");
    }
  });
});

describe("a body that breaks off while it is read", () => {
  it("is a 400 saying the body could not be read, not an unhandled 500", async () => {
    const errors: string[] = [];
    const gateway = await createGateway({
      config: validateLeadConfig({}, "request-limits"),
      storage: createMemoryKeyValue(),
      listening: { host: "127.0.0.1" },
      logger: { error: (message) => errors.push(message), warn: () => undefined, info: () => undefined },
    });
    closing.push(() => gateway.shutdown());
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"metadata":'));
      },
      pull(controller) {
        controller.error(new Error("connection reset by peer"));
      },
    });
    const response = await gateway.fetch(
      new Request("http://127.0.0.1/api/threads", { method: "POST", headers: { "content-type": "application/json" }, body, duplex: "half" } as RequestInit),
    );
    expect(response.status).toBe(400);
    expect(String(((await response.json()) as { detail: string }).detail)).toContain("The request body could not be read");
    expect(errors).toEqual([]);
  });
});

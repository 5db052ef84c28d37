// Hostile input, table-driven, against the real gateway on this runtime's own server: every
// malformed request gets a 4xx whose JSON `detail` names what was wrong, never a 5xx, and the server
// keeps answering /api/ok after each one. Runs on Node, Deno and Bun.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { createGateway, type Gateway } from "../../../src/gateway/app.ts";
import type { HttpServerHandle } from "../../../src/ports/http-server.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { runtimeServe } from "./runtime-serve.ts";

type Body = string | Uint8Array | FormData | undefined;

interface Case {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly body?: Body;
  readonly headers?: Record<string, string>;
  /** Exact status when the behaviour is pinned; any 4xx otherwise. */
  readonly status?: number;
  /** What the `detail` must name. */
  readonly detail: RegExp;
}

const OWN = "own-thread";
// `{fresh}` is a thread made for that case alone, so a case that wrongly starts a run cannot
// turn the next one into a 409.
const RUN_ROUTES = ["/api/threads/{fresh}/runs", "/api/threads/{fresh}/runs/stream", "/api/threads/{fresh}/runs/wait", "/api/runs/stream", "/api/runs/wait"];
const JSON_HEADERS = { "content-type": "application/json" };
const json = (value: unknown) => JSON.stringify(value);
const human = { messages: [{ type: "human", content: "hi" }] };
/** `depth` nested arrays around a value, as raw JSON text (no recursion needed to build it). */
const deep = (depth: number) => "[".repeat(depth) + "1" + "]".repeat(depth);
const deepIn = (key: string, extra: Record<string, unknown> = {}) =>
  `{${Object.entries(extra).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)},`).join("")}${JSON.stringify(key)}:{"x":${deep(5000)}}}`;

function cases(): Case[] {
  const list: Case[] = [];
  const add = (c: Case) => list.push(c);

  // Run bodies, on every route that starts a run.
  for (const route of RUN_ROUTES) {
    const post = (name: string, body: string, detail: RegExp, status?: number) =>
      add({ name: `${route}: ${name}`, method: "POST", path: route, body, headers: JSON_HEADERS, detail, ...(status ? { status } : {}) });
    post("not JSON", "{input:", /json/i);
    post("an array body", "[]", /object/i, 422);
    post("a null body", "null", /object/i, 422);
    post("a string body", '"run"', /object/i, 422);
    post("input is a string", json({ input: "hello" }), /input/);
    post("an unknown field", json({ input: human, surprise: true }), /surprise/);
    post("an unsupported stream mode", json({ input: human, stream_mode: ["telepathy"] }), /stream_mode|telepathy/);
    post("recursion_limit -1", json({ input: human, config: { recursion_limit: -1 } }), /recursion_limit/, 422);
    post("recursion_limit 0", json({ input: human, config: { recursion_limit: 0 } }), /recursion_limit/, 422);
    post("recursion_limit a string", json({ input: human, config: { recursion_limit: "ten" } }), /recursion_limit/, 422);
    post("metadata an array", json({ input: human, metadata: [] }), /metadata/, 422);
    post("metadata a string", json({ input: human, metadata: "x" }), /metadata/, 422);
    post("a bogus multitask strategy", json({ input: human, multitask_strategy: "shove" }), /multitask_strategy/);
    post("a bogus on_disconnect", json({ input: human, on_disconnect: "explode" }), /on_disconnect/);
    post("a webhook", json({ input: human, webhook: "http://127.0.0.1:1/hook" }), /webhook/);
    post("config a string", json({ input: human, config: "x" }), /config/);
    post("configurable an array", json({ input: human, config: { configurable: [] } }), /configurable/);
    post("context an array", json({ input: human, context: [] }), /context/);
    post("command a string", json({ command: "resume" }), /command/);
    post("an unknown assistant", json({ assistant_id: "nobody", input: human }), /nobody.*lead_agent/, 404);
    post("5,000-deep input", deepIn("input"), /depth|nest/i, 422);
    post("5,000-deep metadata", deepIn("metadata", { input: human }), /depth|nest/i, 422);
    post("5,000-deep context", deepIn("context", { input: human }), /depth|nest/i, 422);
    post("5,000-deep configurable", `{"input":${json(human)},"config":{"configurable":{"x":${deep(5000)}}}}`, /depth|nest/i, 422);
    post("messages with a bogus type", json({ input: { messages: [{ type: "overlord", content: "x" }] } }), /type|overlord|message/i);
  }

  // Threads.
  const threadsPost = (name: string, body: string, detail: RegExp, status?: number) =>
    add({ name: `POST /api/threads: ${name}`, method: "POST", path: "/api/threads", body, headers: JSON_HEADERS, detail, ...(status ? { status } : {}) });
  threadsPost("not JSON", "{", /json/i);
  threadsPost("an array body", "[]", /object/i);
  threadsPost("metadata an array", json({ metadata: [] }), /metadata/, 422);
  threadsPost("metadata a number", json({ metadata: 5 }), /metadata/, 422);
  threadsPost("thread_id a number", json({ thread_id: 5 }), /thread_id/);
  threadsPost("thread_id with a slash", json({ thread_id: "../etc" }), /thread_id|thread id/i);
  threadsPost("thread_id of 1,000 characters", json({ thread_id: "a".repeat(1000) }), /thread_id|thread id/i);
  threadsPost("thread_id with a NUL", json({ thread_id: "a\u0000b" }), /thread_id|thread id/i);
  threadsPost("a bogus if_exists", json({ if_exists: "overwrite-everything" }), /if_exists/);
  threadsPost("an unknown field", json({ colour: "red" }), /colour/);
  threadsPost("5,000-deep metadata", deepIn("metadata"), /depth|nest/i, 422);

  const patch = (name: string, body: string, detail: RegExp, status?: number) =>
    add({ name: `PATCH /api/threads/{id}: ${name}`, method: "PATCH", path: `/api/threads/${OWN}`, body, headers: JSON_HEADERS, detail, ...(status ? { status } : {}) });
  patch("not JSON", "nope", /json/i);
  patch("metadata an array", json({ metadata: [] }), /metadata/, 422);
  patch("metadata a string", json({ metadata: "x" }), /metadata/, 422);
  patch("an unknown field", json({ metadata: {}, owner_id: "mallory" }), /owner_id/);
  patch("5,000-deep metadata", deepIn("metadata"), /depth|nest/i, 422);

  const search = (name: string, body: string, detail: RegExp, status?: number) =>
    add({ name: `POST /api/threads/search: ${name}`, method: "POST", path: "/api/threads/search", body, headers: JSON_HEADERS, detail, ...(status ? { status } : {}) });
  search("limit -1", json({ limit: -1 }), /limit/, 422);
  search("limit 0", json({ limit: 0 }), /limit/, 422);
  search("limit a string", json({ limit: "ten" }), /limit/, 422);
  search("limit 1e9", json({ limit: 1e9 }), /limit/, 422);
  search("offset -5", json({ offset: -5 }), /offset/, 422);
  search("offset 1.5", json({ offset: 1.5 }), /offset/, 422);
  search("a bogus status", json({ status: "haunted" }), /status/);
  search("metadata an array", json({ metadata: [] }), /metadata/, 422);
  search("an unknown field", json({ where: "1=1" }), /where/);
  search("5,000-deep metadata", deepIn("metadata"), /depth|nest/i, 422);
  search("not JSON", "{{", /json/i);

  const state = (name: string, body: string, detail: RegExp, status?: number) =>
    add({ name: `POST /api/threads/{id}/state: ${name}`, method: "POST", path: `/api/threads/${OWN}/state`, body, headers: JSON_HEADERS, detail, ...(status ? { status } : {}) });
  state("values a string", json({ values: "x" }), /values/);
  state("as_node a number", json({ values: {}, as_node: 1 }), /as_node/);
  state("a server-owned channel", json({ values: { sandbox: { sandbox_id: "someone-else" } } }), /sandbox/);
  state("an unknown field", json({ values: {}, sneaky: 1 }), /sneaky/);
  state("5,000-deep values", deepIn("values"), /depth|nest/i, 422);
  state("not JSON", "values=1", /json/i);

  const history = (name: string, body: string, detail: RegExp, status?: number) =>
    add({ name: `POST /api/threads/{id}/history: ${name}`, method: "POST", path: `/api/threads/${OWN}/history`, body, headers: JSON_HEADERS, detail, ...(status ? { status } : {}) });
  history("limit -1", json({ limit: -1 }), /limit/, 422);
  history("limit 0", json({ limit: 0 }), /limit/, 422);
  history("before a number", json({ before: 5 }), /before/);
  history("an unknown field", json({ everything: true }), /everything/);
  history("5,000-deep metadata", deepIn("metadata"), /depth|nest/i, 422);
  add({ name: "GET /api/threads/{id}/history?limit=-1", method: "GET", path: `/api/threads/${OWN}/history?limit=-1`, detail: /limit/, status: 422 });
  add({ name: "GET /api/threads/{id}/history?limit=abc", method: "GET", path: `/api/threads/${OWN}/history?limit=abc`, detail: /limit/, status: 422 });

  // Bad ids and traversal in every path parameter.
  const badThreadIds: [string, string][] = [
    ["an encoded ../", "..%2F..%2Fetc"],
    ["an encoded NUL", "a%00b"],
    ["a 1,000-character id", "a".repeat(1000)],
    ["a space", "a%20b"],
    ["an encoded backslash", "..%5C..%5Cwindows"],
  ];
  const threadPaths = [
    ["GET", (id: string) => `/api/threads/${id}`],
    ["GET", (id: string) => `/api/threads/${id}/state`],
    ["POST", (id: string) => `/api/threads/${id}/history`],
    ["GET", (id: string) => `/api/threads/${id}/runs`],
    ["POST", (id: string) => `/api/threads/${id}/runs/wait`],
    ["GET", (id: string) => `/api/threads/${id}/uploads/list`],
    ["GET", (id: string) => `/api/threads/${id}/artifacts/mnt/user-data/outputs/a.txt`],
    ["DELETE", (id: string) => `/api/threads/${id}`],
  ] as const;
  for (const [label, id] of badThreadIds) {
    for (const [method, path] of threadPaths) {
      add({
        name: `${method} ${path("{id}")} with ${label}`,
        method,
        path: path(id),
        ...(method === "POST" ? { body: json(path("").endsWith("wait") ? { input: human } : {}), headers: JSON_HEADERS } : {}),
        detail: /thread/i,
      });
    }
  }
  const badRunIds: [string, string][] = [
    ["an encoded ../", "..%2F..%2Fruns"],
    ["a 1,000-character id", "r".repeat(1000)],
    ["an encoded NUL", "r%00"],
  ];
  for (const [label, id] of badRunIds) {
    for (const [method, suffix] of [["GET", ""], ["GET", "/join"], ["GET", "/stream"], ["GET", "/events"], ["POST", "/cancel"], ["DELETE", ""]] as const) {
      add({ name: `${method} runs/{run_id}${suffix} with ${label}`, method, path: `/api/threads/${OWN}/runs/${id}${suffix}`, detail: /run/i });
    }
  }
  for (const [label, id] of [["an encoded ../", "..%2F..%2Fsecret"], ["a 1,000-character name", "f".repeat(1000)], ["an encoded NUL", "a%00.txt"]] as const) {
    add({ name: `DELETE uploads/{filename} with ${label}`, method: "DELETE", path: `/api/threads/${OWN}/uploads/${id}`, detail: /file|name|upload/i });
  }

  // Artifacts.
  const artifact = (name: string, path: string, detail: RegExp, status?: number) =>
    add({ name: `GET artifacts: ${name}`, method: "GET", path: `/api/threads/${OWN}/artifacts/${path}`, detail, ...(status ? { status } : {}) });
  artifact("../ to /etc/passwd", "mnt/user-data/../../../etc/passwd", /path|outside|not found/i);
  artifact("encoded ../ to /etc/passwd", "mnt/user-data/%2E%2E/%2E%2E/%2E%2E/etc/passwd", /path|outside|not found/i);
  artifact("outside the virtual roots", "etc/passwd", /path|outside|not found|mnt\/user-data/i);
  artifact("a missing file", "mnt/user-data/outputs/nothing-here.txt", /not found|nothing-here/i, 404);
  artifact("2,000 levels deep", `mnt/user-data/outputs/${"d/".repeat(2000)}x.txt`, /path|deep|long|limit/i);
  artifact("a 10 KB segment", `mnt/user-data/outputs/${"x".repeat(10_000)}`, /path|long|limit|name/i);
  artifact("an encoded NUL", "mnt/user-data/outputs/a%00.txt", /path|name|not found/i);
  add({ name: "GET artifacts: an unsatisfiable range", method: "GET", path: `/api/threads/${OWN}/artifacts/mnt/user-data/uploads/hello.txt`, headers: { range: "bytes=999999-" }, detail: /range/i, status: 416 });

  // Uploads.
  const upload = (name: string, build: () => { body: Body; headers?: Record<string, string> }, detail: RegExp, status?: number) =>
    add({ name: `POST uploads: ${name}`, method: "POST", path: `/api/threads/${OWN}/uploads`, ...build(), detail, ...(status ? { status } : {}) });
  const form = (...files: [string, string | Uint8Array][]) => {
    const data = new FormData();
    for (const [name, content] of files) data.append("files", new Blob([content as BlobPart]), name);
    return data;
  };
  upload("a JSON body", () => ({ body: json({ files: [] }), headers: JSON_HEADERS }), /multipart|form/i);
  upload("multipart with no files", () => ({ body: (() => { const d = new FormData(); d.append("note", "x"); return d; })() }), /file/i);
  // A traversal name is cut to its last segment (as upstream); one with no usable segment is refused.
  upload("a file name that is only ..", () => ({ body: form(["..", "x"]) }), /name|file/i);
  upload("a file name that is only ../../", () => ({ body: form(["../../", "x"]) }), /name|file/i);
  upload("an empty file name", () => ({ body: form(["", "x"]) }), /name|file/i);
  upload("a file name of 1,000 characters", () => ({ body: form(["n".repeat(1000) + ".txt", "x"]) }), /name|long|file/i);
  upload("more files than max_files", () => ({ body: form(...Array.from({ length: 4 }, (_, i) => [`f${i}.txt`, "x"] as [string, string])) }), /max_files|files/i, 413);
  upload("a file over max_file_bytes", () => ({ body: form(["big.bin", new Uint8Array(4096)]) }), /max_file_bytes|file|large|limit/i, 413);
  upload("a multipart body with a broken boundary", () => ({ body: "--nope\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a.txt\"\r\n\r\nx", headers: { "content-type": "multipart/form-data; boundary=other" } }), /multipart|form|body/i);
  upload("multipart without a boundary", () => ({ body: "x", headers: { "content-type": "multipart/form-data" } }), /multipart|boundary|form/i);

  // Runs: cancel, join, Last-Event-ID.
  add({ name: "POST cancel with a bogus action", method: "POST", path: `/api/threads/${OWN}/runs/{run}/cancel?action=obliterate`, detail: /action/ });
  add({ name: "POST cancel with wait=maybe", method: "POST", path: `/api/threads/${OWN}/runs/{run}/cancel?wait=maybe`, detail: /wait/ });
  for (const id of ["abc", "1-", "-1", "1-99999x", "1-2-3", "\u00e9t\u00e9"]) {
    add({ name: `GET runs/{run}/stream with Last-Event-ID ${id}`, method: "GET", path: `/api/threads/${OWN}/runs/{run}/stream`, headers: { "last-event-id": id }, detail: /Last-Event-ID/i, status: 400 });
  }
  add({ name: "GET runs/{run}/join for a missing run", method: "GET", path: `/api/threads/${OWN}/runs/no-such-run/join`, detail: /run/i, status: 404 });
  add({ name: "GET runs?limit=-1", method: "GET", path: `/api/threads/${OWN}/runs?limit=-1`, detail: /limit/, status: 422 });
  add({ name: "GET runs?status=haunted", method: "GET", path: `/api/threads/${OWN}/runs?status=haunted`, detail: /status/ });

  // Assistants and models.
  add({ name: "GET an unknown assistant", method: "GET", path: "/api/assistants/nobody", detail: /assistant|nobody/i, status: 404 });
  add({ name: "POST /api/assistants/search limit -1", method: "POST", path: "/api/assistants/search", body: json({ limit: -1 }), headers: JSON_HEADERS, detail: /limit/, status: 422 });
  add({ name: "POST /api/assistants/search unknown field", method: "POST", path: "/api/assistants/search", body: json({ owner: "x" }), headers: JSON_HEADERS, detail: /owner/ });
  add({ name: "POST /api/assistants/search an array", method: "POST", path: "/api/assistants/search", body: "[]", headers: JSON_HEADERS, detail: /object/i });
  add({ name: "GET an unknown model", method: "GET", path: "/api/models/no-such-model", detail: /model|no-such-model/i, status: 404 });

  // Wrong methods on existing paths.
  for (const [method, path, allow] of [
    ["PUT", "/api/threads", /POST/],
    ["DELETE", "/api/ok", /GET/],
    ["PUT", `/api/threads/${OWN}`, /GET/],
    ["PATCH", `/api/threads/${OWN}/runs`, /GET/],
    ["GET", "/api/runs/wait", /POST/],
    ["PUT", `/api/threads/${OWN}/uploads`, /POST/],
    ["POST", "/api/models", /GET/],
  ] as const) {
    add({ name: `${method} ${path} is 405`, method, path, ...(method === "GET" ? {} : { body: "{}", headers: JSON_HEADERS }), detail: /method/i, status: 405, allow } as Case & { allow: RegExp });
  }
  return list;
}

const { serve } = await runtimeServe();

describe("hostile input", () => {
  let gateway: Gateway;
  let server: HttpServerHandle;
  let runId = "";
  beforeAll(async () => {
    gateway = await createGateway({
      config: validateLeadConfig({ gateway: { uploads: { max_files: 3, max_file_bytes: 1024, max_total_bytes: 2048 } } }, "hostile"),
      storage: createMemoryKeyValue(),
      listening: { host: "127.0.0.1" },
    });
    server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
    const created = await fetch(`${server.url}/api/threads`, { method: "POST", headers: JSON_HEADERS, body: json({ thread_id: OWN }) });
    expect(created.status).toBe(200);
    const upload = new FormData();
    upload.append("files", new Blob(["hello"]), "hello.txt");
    expect((await fetch(`${server.url}/api/threads/${OWN}/uploads`, { method: "POST", body: upload })).status).toBe(200);
    const run = await fetch(`${server.url}/api/threads/${OWN}/runs/wait`, { method: "POST", headers: JSON_HEADERS, body: json({ input: human }) });
    expect(run.status).toBe(200);
    await run.text();
    runId = ((await (await fetch(`${server.url}/api/threads/${OWN}/runs`)).json()) as { run_id: string }[])[0]!.run_id;
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await gateway?.shutdown();
  });

  const table = cases();
  it("has at least 150 cases", () => {
    expect(table.length).toBeGreaterThanOrEqual(150);
  });

  for (const c of table) {
    it(c.name, async () => {
      let path = c.path.replace("{run}", runId);
      if (path.includes("{fresh}")) {
        const fresh = (await (await fetch(`${server.url}/api/threads`, { method: "POST", headers: JSON_HEADERS, body: "{}" })).json()) as { thread_id: string };
        path = path.replace("{fresh}", fresh.thread_id);
      }
      const response = await fetch(`${server.url}${path}`, {
        method: c.method,
        ...(c.headers ? { headers: c.headers } : {}),
        ...(c.body === undefined ? {} : { body: c.body as BodyInit }),
      });
      const text = await response.text();
      if (c.status) expect(response.status, text).toBe(c.status);
      expect(response.status, text).toBeGreaterThanOrEqual(400);
      expect(response.status, text).toBeLessThan(500);
      let detail: unknown;
      try {
        detail = (JSON.parse(text) as { detail?: unknown }).detail;
      } catch {
        throw new Error(`not a JSON error body: ${text.slice(0, 200)}`);
      }
      const message = typeof detail === "string" ? detail : JSON.stringify(detail);
      expect(message, text).toMatch(c.detail);
      // Never a host path or a stack trace in what the caller sees.
      expect(text).not.toMatch(/\/(?:home|tmp|work|root|Users)\/|\bat .*\.ts:\d+/);
      const allow = (c as Case & { allow?: RegExp }).allow;
      if (allow) expect(response.headers.get("allow") ?? "").toMatch(allow);
      const ok = await fetch(`${server.url}/api/ok`);
      expect(ok.status).toBe(200);
      await ok.text();
    });
  }
});

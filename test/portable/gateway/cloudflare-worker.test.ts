// What a user of the Cloudflare Workers entry does: build it (node scripts/build-worker.mjs, the
// esbuild ES modules: the entry and the sandbox's chunk it imports on first use), serve it with
// workerd (the Workers runtime, nodejs_compat; ./workerd-harness.ts) and talk to it over a real
// port with the official SDK client. The model is the replay server of recorded
// OpenAI-compatible traffic on another local port, which the worker reaches through workerd's
// network service opened to loopback. One workerd process serves three workers from the same
// bundle: a configured one, one without gateway.auth and one asking for fs storage.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadFixtures, startReplayServer, type ReplayServer } from "../openai-replay.ts";
import { TRIM_MARKER } from "../../../scripts/build-worker.mjs";
import { buildWorkerModules, startWorkerd, type Workerd } from "./workerd-harness.ts";

const MINUTE = 60_000;
const API_KEY = "wk-test-3f9c1a7e5b2d4c6e8a0b1c2d3e4f5a6b";
const PROMPT = "Write a note to the workspace and read it back.";

let dir = "";
let provider: ReplayServer;
let workerd: Workerd<"main" | "vars" | "noAuth" | "fsStorage"> | undefined;
let urls: Record<"main" | "vars" | "noAuth" | "fsStorage", string>;
const workerdOutput = () => workerd?.output() ?? "";

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "deerflow-worker-"));
  const modules = await buildWorkerModules(join(dir, "worker"));
  expect(modules[0]).toBe("deerflow-edge-worker.mjs");
  provider = await startReplayServer(loadFixtures(fileURLToPath(new URL("../../fixtures/openai/agent-bash/", import.meta.url))));
  const model = { name: "remote", use: "openai-compatible", model: "gpt-4o-mini", base_url: provider.baseUrl, api_key_env: "PROVIDER_KEY" };
  const auth = { mode: "api_key", api_keys: [{ key_env: "DEERFLOW_API_KEY", user_id: "edge-user" }] };
  const secrets = { PROVIDER_KEY: "sk-test-123", DEERFLOW_API_KEY: API_KEY };
  workerd = await startWorkerd(dir, "worker", modules, {
    main: { config: { models: [model], gateway: { auth } }, secrets },
    // The Deno Deploy entry's variables, no DEERFLOW_CONFIG.
    vars: { secrets: { DEERFLOW_API_KEY: API_KEY, DEERFLOW_MODEL: "gpt-4o-mini", DEERFLOW_MODEL_BASE_URL: provider.baseUrl, DEERFLOW_MODEL_API_KEY: "sk-vars-456" } },
    noAuth: { config: { models: [model] }, secrets: { PROVIDER_KEY: "sk-test-123" } },
    fsStorage: { config: { models: [model], gateway: { auth }, storage: { driver: "fs", base: "/data" } }, secrets },
  });
  urls = workerd.urls;
}, 5 * MINUTE);

afterAll(async () => {
  await workerd?.kill();
  await provider?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

type Message = { type: string; content: unknown; tool_calls?: Array<{ name: string }> };
const conversation = (values: unknown) => ((values as { messages?: Message[] }).messages ?? []).filter((m) => m.type !== "system");

describe("the Cloudflare Workers entry on workerd", () => {
  it("streams a run whose bash call runs in the virtual sandbox, through the official SDK with an API key", async () => {
    const client = new Client({ apiUrl: `${urls.main}/api`, apiKey: API_KEY });
    const thread = await client.threads.create();
    const events: string[] = [];
    let last: unknown = {};
    const before = provider.received.length;
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: PROMPT }] },
      streamMode: ["values"],
    })) {
      events.push(part.event);
      if (part.event === "values") last = part.data;
    }
    expect(events[0], workerdOutput()).toBe("metadata");
    expect(events).not.toContain("error");
    const messages = conversation(last);
    expect(messages.map((m) => m.type), JSON.stringify(messages)).toEqual(["human", "ai", "tool", "ai"]);
    expect(messages[1]!.tool_calls?.map((c) => c.name)).toEqual(["bash"]);
    expect(String(messages[2]!.content)).toContain("edge-sandbox\n42");
    expect(messages[3]!.content).toBe("The sandbox wrote the note and printed 42.");
    // The worker called the provider with the key its binding holds.
    const calls = provider.received.slice(before);
    expect(calls.map((r) => r.fixture)).toEqual(["chat-bash-call.json", "chat-tool-answer.json"]);
    expect(calls[0]!.headers.authorization).toBe("Bearer sk-test-123");
    // The thread is kept (memory storage of the isolate): its state has the same conversation.
    expect(conversation((await client.threads.getState(thread.thread_id)).values)).toEqual(messages);
  }, 3 * MINUTE);

  it("streams the model's tokens (messages-tuple) on a second thread, the provider's SSE read through workerd's fetch", async () => {
    const client = new Client({ apiUrl: `${urls.main}/api`, apiKey: API_KEY });
    const thread = await client.threads.create();
    const before = provider.received.length;
    const tokens: string[] = [];
    let last: unknown = {};
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: PROMPT }] },
      streamMode: ["values", "messages-tuple"],
    })) {
      if (part.event === "values") last = part.data;
      if (part.event === "messages") {
        const [chunk] = part.data as [{ type: string; content: unknown }, unknown];
        if (chunk.type === "AIMessageChunk" && typeof chunk.content === "string" && chunk.content !== "") tokens.push(chunk.content);
      }
    }
    expect(provider.received.slice(before).map((r) => r.fixture)).toEqual(["stream-bash-call.json", "stream-tool-answer.json"]);
    // The answer arrived as the provider's deltas, one frame each, not as one block.
    expect(tokens.length, JSON.stringify(tokens)).toBeGreaterThan(3);
    expect(tokens.join("")).toContain("The sandbox wrote the note and printed 42.");
    const messages = conversation(last);
    expect(messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai"]);
    expect(String(messages[2]!.content)).toContain("edge-sandbox\n42");
  }, 3 * MINUTE);

  it("runs a background run (runs.create) that another request joins, as the SDK's create-then-join does", async () => {
    const client = new Client({ apiUrl: `${urls.main}/api`, apiKey: API_KEY });
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "lead_agent", { input: { messages: [{ type: "human", content: PROMPT }] } });
    await client.runs.join(thread.thread_id, run.run_id);
    expect((await client.runs.get(thread.thread_id, run.run_id)).status, workerdOutput()).toBe("success");
    const messages = conversation((await client.threads.getState(thread.thread_id)).values);
    expect(messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai"]);
    expect(String(messages[2]!.content)).toContain("edge-sandbox\n42");
  }, 3 * MINUTE);

  it("is configured by the Deno Deploy entry's variables alone (DEERFLOW_API_KEY, DEERFLOW_MODEL*): a run with a bash call", async () => {
    const client = new Client({ apiUrl: `${urls.vars}/api`, apiKey: API_KEY });
    const thread = await client.threads.create();
    const before = provider.received.length;
    const done = await client.runs.wait(thread.thread_id, "lead_agent", { input: { messages: [{ type: "human", content: PROMPT }] } });
    const messages = conversation(done);
    expect(messages.map((m) => m.type), workerdOutput()).toEqual(["human", "ai", "tool", "ai"]);
    expect(String(messages[2]!.content)).toContain("edge-sandbox\n42");
    const calls = provider.received.slice(before);
    expect(calls.length).toBe(2);
    expect(calls[0]!.headers.authorization).toBe("Bearer sk-vars-456");
    expect((await fetch(`${urls.vars}/api/threads/${thread.thread_id}/state`)).status).toBe(401);
  }, 3 * MINUTE);

  it("answers 401 with a detail to a caller without the API key, or with a wrong one", async () => {
    const thread = await new Client({ apiUrl: `${urls.main}/api`, apiKey: API_KEY }).threads.create();
    for (const headers of [{}, { "x-api-key": "wk-wrong" }] as Record<string, string>[]) {
      const response = await fetch(`${urls.main}/api/threads/${thread.thread_id}/state`, { headers });
      expect(response.status).toBe(401);
      expect(((await response.json()) as { detail?: unknown }).detail).toBeTruthy();
    }
  });

  it("refuses to serve without gateway.auth, saying what to set", async () => {
    const response = await fetch(`${urls.noAuth}/api/ok`);
    expect(response.status).toBe(503);
    const body = (await response.json()) as { detail: string; code: string };
    expect(body.code).toBe("deploy_env_invalid");
    expect(body.detail).toContain("DEERFLOW_CONFIG sets no gateway.auth");
    expect(body.detail).toContain("DEERFLOW_API_KEY");
  });

  it("refuses fs storage, naming the key and what to use", async () => {
    const response = await fetch(`${urls.fsStorage}/api/ok`);
    expect(response.status).toBe(503);
    const body = (await response.json()) as { detail: string };
    expect(body.detail).toContain('storage.driver "fs"');
    expect(body.detail).toContain("driver: memory");
  });

  // scripts/build-worker.mjs leaves langsmith's API client, most of @langchain/core's import map,
  // three just-bash commands and more out of the bundle behind stubs that print
  // "deerflow-edge-trim: ..." when called; the runs above (SDK streams, a background run, a join,
  // the variables-only entry, each thread's state read back through the checkpoint serializer)
  // must never reach one.
  it("ran every run above without calling a trimmed module's stub (workerd printed no deerflow-edge-trim line)", () => {
    expect(workerdOutput()).not.toContain(TRIM_MARKER);
  });
});

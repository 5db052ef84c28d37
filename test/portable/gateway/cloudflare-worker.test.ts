// What a user of the Cloudflare Workers entry does: build it (node scripts/build-worker.mjs, the
// esbuild ES modules: the entry and the sandbox's chunk it imports on first use), serve it with workerd (the Workers runtime, nodejs_compat) and talk to it
// over a real port with the official SDK client. The model is the replay server of recorded
// OpenAI-compatible traffic on another local port, which the worker reaches through workerd's
// network service opened to loopback. One workerd process serves three workers from the same
// bundle: a configured one, one without gateway.auth and one asking for fs storage.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadFixtures, startReplayServer, type ReplayServer } from "../openai-replay.ts";

const exec = promisify(execFile);
const repo = fileURLToPath(new URL("../../..", import.meta.url));
const MINUTE = 60_000;
const API_KEY = "wk-test-3f9c1a7e5b2d4c6e8a0b1c2d3e4f5a6b";
const PROMPT = "Write a note to the workspace and read it back.";

let dir = "";
let provider: ReplayServer;
let workerd: ChildProcess | undefined;
let workerdOutput = "";
const urls = { main: "", noAuth: "", fsStorage: "" };

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** A capnp text literal (the config holds JSON; JSON's escapes are capnp's). */
const capnpText = (value: string) => JSON.stringify(value);

/** What build-worker.mjs wrote: the entry first, then the chunks it imports on first use. */
let modules: string[] = [];

function workerBlock(name: string, config: unknown, secrets: Record<string, string>): string {
  const bindings = [`(name = "DEERFLOW_CONFIG", text = ${capnpText(JSON.stringify(config))})`, ...Object.entries(secrets).map(([key, value]) => `(name = "${key}", text = ${capnpText(value)})`)];
  return `const ${name} :Workerd.Worker = (
  modules = [ ${modules.map((module) => `(name = ${capnpText(module)}, esModule = embed ${capnpText(`worker/${module}`)})`).join(", ")} ],
  compatibilityDate = "2026-08-01",
  compatibilityFlags = ["nodejs_compat"],
  bindings = [ ${bindings.join(", ")} ],
  globalOutbound = "loopback",
);
`;
}

async function waitForOk(url: string): Promise<void> {
  const deadline = Date.now() + MINUTE;
  for (;;) {
    try {
      const response = await fetch(`${url}/api/ok`);
      await response.body?.cancel();
      return;
    } catch (error) {
      if (Date.now() > deadline || workerd?.exitCode !== null) throw new Error(`workerd did not answer ${url}: ${String(error)}\n${workerdOutput}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "deerflow-worker-"));
  const built = await exec("node", [join(repo, "scripts/build-worker.mjs"), "--outdir", join(dir, "worker")], { cwd: repo, timeout: 3 * MINUTE });
  modules = built.stdout.trim().split("\n");
  expect(modules[0]).toBe("deerflow-edge-worker.mjs");
  provider = await startReplayServer(loadFixtures(new URL("../../fixtures/openai-agent/", import.meta.url)));
  const model = { name: "remote", use: "openai-compatible", model: "gpt-4o-mini", base_url: provider.baseUrl, api_key_env: "PROVIDER_KEY" };
  const auth = { mode: "api_key", api_keys: [{ key_env: "DEERFLOW_API_KEY", user_id: "edge-user" }] };
  const ports = { main: await freePort(), noAuth: await freePort(), fsStorage: await freePort() };
  const capnp = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .mainWorker),
    (name = "no-auth", worker = .noAuthWorker),
    (name = "fs-storage", worker = .fsStorageWorker),
    # The model provider listens on 127.0.0.1: workerd's default network service allows only public addresses.
    (name = "loopback", network = (allow = ["public", "local"])),
  ],
  sockets = [
    (name = "main", address = "127.0.0.1:${ports.main}", http = (), service = "main"),
    (name = "no-auth", address = "127.0.0.1:${ports.noAuth}", http = (), service = "no-auth"),
    (name = "fs-storage", address = "127.0.0.1:${ports.fsStorage}", http = (), service = "fs-storage"),
  ],
);
${workerBlock("mainWorker", { models: [model], gateway: { auth } }, { PROVIDER_KEY: "sk-test-123", DEERFLOW_API_KEY: API_KEY })}
${workerBlock("noAuthWorker", { models: [model] }, { PROVIDER_KEY: "sk-test-123" })}
${workerBlock("fsStorageWorker", { models: [model], gateway: { auth }, storage: { driver: "fs", base: "/data" } }, { PROVIDER_KEY: "sk-test-123", DEERFLOW_API_KEY: API_KEY })}`;
  await writeFile(join(dir, "config.capnp"), capnp);
  workerd = spawn(join(repo, "node_modules/.bin/workerd"), ["serve", join(dir, "config.capnp")], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  workerd.stdout!.on("data", (chunk: Buffer) => (workerdOutput += chunk.toString()));
  workerd.stderr!.on("data", (chunk: Buffer) => (workerdOutput += chunk.toString()));
  urls.main = `http://127.0.0.1:${ports.main}`;
  urls.noAuth = `http://127.0.0.1:${ports.noAuth}`;
  urls.fsStorage = `http://127.0.0.1:${ports.fsStorage}`;
  await Promise.all(Object.values(urls).map(waitForOk));
}, 5 * MINUTE);

afterAll(async () => {
  if (workerd && workerd.exitCode === null) {
    const exited = new Promise<void>((done) => workerd!.once("exit", () => done()));
    workerd.kill("SIGKILL");
    await exited;
  }
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
    expect(events[0], workerdOutput).toBe("metadata");
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
    expect((await client.runs.get(thread.thread_id, run.run_id)).status, workerdOutput).toBe("success");
    const messages = conversation((await client.threads.getState(thread.thread_id)).values);
    expect(messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai"]);
    expect(String(messages[2]!.content)).toContain("edge-sandbox\n42");
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
    expect(body.code).toBe("worker_config_invalid");
    expect(body.detail).toContain("gateway.auth in DEERFLOW_CONFIG");
    expect(body.detail).toContain("DEERFLOW_API_KEY");
  });

  it("refuses fs storage, naming the key and what to use", async () => {
    const response = await fetch(`${urls.fsStorage}/api/ok`);
    expect(response.status).toBe(503);
    const body = (await response.json()) as { detail: string };
    expect(body.detail).toContain('storage.driver "fs"');
    expect(body.detail).toContain("driver: memory");
  });
});

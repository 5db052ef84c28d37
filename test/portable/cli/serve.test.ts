import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { describe, expect, it } from "vitest";
import { createModuleLoader } from "../../../adapters/shared/module-loader.ts";
import type { CliHost } from "../../../src/cli/host.ts";
import { main } from "../../../src/cli/main.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { mapEnv } from "../../../src/core/env.ts";
import type { HttpServerHandle, ServeFetch } from "../../../src/ports/http-server.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { runtimeServe } from "../gateway/runtime-serve.ts";

const { runtime, serve: runtimeServeFetch } = await runtimeServe();
const here = dirname(fileURLToPath(import.meta.url));
const example = `${here}/../../../examples/deerflow-extension-example/src/index.ts`;

interface ServeHost extends CliHost {
  out: string[];
  err: string[];
  storage: KeyValue;
  /** Resolves with the server once it listens. */
  listening: Promise<HttpServerHandle>;
  served: HttpServerHandle[];
  /** Ctrl-C. */
  interrupt(): void;
}

function serveHost(argv: string[], files: Record<string, string> = {}, env: Record<string, string> = {}): ServeHost {
  const out: string[] = [];
  const err: string[] = [];
  const storage = createMemoryKeyValue();
  const served: HttpServerHandle[] = [];
  let onListen!: (server: HttpServerHandle) => void;
  const listening = new Promise<HttpServerHandle>((resolve) => (onListen = resolve));
  const handlers = new Set<() => void>();
  const serve: ServeFetch = async (fetch, options) => {
    const server = await runtimeServeFetch(fetch, options);
    served.push(server);
    onListen(server);
    return server;
  };
  return {
    argv,
    env: mapEnv(env),
    clock: systemClock,
    out,
    err,
    storage,
    served,
    listening,
    stdout: { write: (t) => void out.push(t), isTTY: false },
    stderr: { write: (t) => void err.push(t), isTTY: false },
    readFile: async (path) => files[path],
    createStorage: () => storage,
    createSandboxProvider: (_config, kv) => createVirtualSandboxProvider({ storage: kv }),
    onInterrupt: (handler) => {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    interrupt: () => {
      for (const handler of [...handlers]) handler();
    },
    serve,
    createModuleLoader: (baseDir) => createModuleLoader({ baseDir }),
    dirname,
  };
}

describe(`deerflow-edge serve (${runtime})`, () => {
  it("serves the LangGraph API on loopback with the embedded defaults, streams a run, and stops cleanly on Ctrl-C", async () => {
    const host = serveHost(["serve", "--port", "0"]);
    const exit = main(host);
    const server = await host.listening;
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const client = new Client({ apiUrl: `${server.url}/api` });
    const thread = await client.threads.create();
    const events: string[] = [];
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "Write a note about serving." }] },
      streamMode: ["values", "messages-tuple"],
    })) {
      events.push(part.event);
    }
    expect(events[0]).toBe("metadata");
    expect(events).toContain("messages");
    expect(events.at(-1)).toBe("end");
    const state = await client.threads.getState<{ messages: Array<{ type: string }> }>(thread.thread_id);
    // The date reminder DynamicContext adds comes first, then the demo session: write_file, bash, answer.
    expect(state.values.messages.map((m) => m.type)).toEqual(["system", "human", "ai", "tool", "ai", "tool", "ai"]);
    const banner = host.out.join("");
    expect(banner).toContain(`deerflow-edge gateway · ${server.url} · auth off (loopback only) · model demo`);
    expect(banner).toContain(`apiUrl "${server.url}/api"`);

    host.interrupt();
    expect(await exit).toBe(0);
    expect(host.out.join("")).toContain("stopping: draining runs, stopping services, closing storage");
    // The port is closed: nothing answers any more.
    await expect(fetch(`${server.url}/api/ok`)).rejects.toThrow();
  });

  it("refuses to serve without auth on a non-loopback address, before any port is opened", async () => {
    const host = serveHost(["serve", "--host", "0.0.0.0", "--port", "0"]);
    expect(await main(host)).toBe(1);
    expect(host.err.join("")).toMatch(/^error: .*0\.0\.0\.0.*gateway\.auth/);
    expect(host.served).toEqual([]);
  });

  it("refuses to start when a configured model's api_key_env variable is unset, naming the variable and the model, before any port opens", async () => {
    const config = [
      "default_model: remote",
      "models:",
      "  - name: remote",
      "    use: openai-compatible",
      "    model: gpt-4o-mini",
      "    base_url: http://127.0.0.1:9/v1",
      "    api_key_env: DEERFLOW_TEST_UNSET_KEY",
      "",
    ].join("\n");
    for (const env of [{}, { DEERFLOW_TEST_UNSET_KEY: "  " }] as Record<string, string>[]) {
      const host = serveHost(["serve", "--port", "0", "--config", "c.yaml"], { "c.yaml": config }, env);
      expect(await main(host)).toBe(1);
      const err = host.err.join("");
      expect(err).toMatch(/^error: Model "remote" needs an API key in the environment variable DEERFLOW_TEST_UNSET_KEY, which is not set/);
      expect(host.served).toEqual([]);
    }
    // With the variable set, the same config serves.
    const host = serveHost(["serve", "--port", "0", "--config", "c.yaml"], { "c.yaml": config }, { DEERFLOW_TEST_UNSET_KEY: "sk-test" });
    const exit = main(host);
    const server = await host.listening;
    expect((await fetch(`${server.url}/api/ok`)).status).toBe(200);
    host.interrupt();
    expect(await exit).toBe(0);
  });

  it("scenario G3: a required plugin that fails stops the start, naming it, and no port is served", async () => {
    const broken = `${here}/../../fixtures/plugins/throws-at-import.mjs`;
    const host = serveHost(["serve", "--port", "0", "--config", "c.yaml"], {
      "c.yaml": `plugins:\n  - use: ${broken}:install\n    required: true\n`,
    });
    expect(await main(host)).toBe(1);
    expect(host.err.join("")).toContain("throws-at-import.mjs:install");
    expect(host.served).toEqual([]);
  });

  it("loads the example extension: its service runs while serving and its route sits behind session auth and CSRF", async () => {
    const config = [
      "gateway:",
      "  auth:",
      "    mode: api_key",
      "    api_keys:",
      "      - key_env: TEST_GATEWAY_KEY",
      "        user_id: alice",
      "plugins:",
      `  - use: ${example}:install`,
      "",
    ].join("\n");
    const key = "k".repeat(24);
    const host = serveHost(["serve", "--port", "0", "--config", "c.yaml"], { "c.yaml": config }, { TEST_GATEWAY_KEY: key });
    const exit = main(host);
    const server = await host.listening;
    expect((await fetch(`${server.url}/example/ping`)).status).toBe(401);
    const ping = await fetch(`${server.url}/example/ping`, { headers: { "x-api-key": key } });
    expect(ping.status).toBe(200);
    expect(await ping.json()).toMatchObject({ ok: true, user: "alice", serviceStarted: true });
    // alice is not an administrator: the admin-only route refuses her.
    expect((await fetch(`${server.url}/example/events`, { headers: { "x-api-key": key } })).status).toBe(403);
    host.interrupt();
    expect(await exit).toBe(0);
  });
});

describe("deerflow-edge hash-password", () => {
  it("hashes the password read from stdin into the form gateway.auth.users takes, and refuses a short one", async () => {
    const { verifyPassword } = await import("../../../src/gateway/auth/password.ts");
    const host = { ...serveHost(["hash-password"]), readLine: async () => "correct horse battery" };
    expect(await main(host)).toBe(0);
    const hash = host.out.join("").trim();
    expect(hash).toMatch(/^pbkdf2-sha256\$\d+\$/);
    expect(await verifyPassword("correct horse battery", hash)).toBe(true);
    expect(await verifyPassword("wrong", hash)).toBe(false);

    const short = { ...serveHost(["hash-password"]), readLine: async () => "short" };
    expect(await main(short)).toBe(2);
    expect(short.err.join("")).toMatch(/at least 8 characters/);
  });
});

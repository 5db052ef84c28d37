// The real gateway on this runtime's own server, its virtual sandbox in workers: while the model's
// bash calls run loops that never yield, in three threads at once, /api/ok still answers; the
// configured command timeout stops them and the model is told which limit it hit.
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { createGateway } from "../../../src/gateway/app.ts";
import type { SandboxProvider } from "../../../src/ports/sandbox.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { RUNAWAY_LOOP, runtime, runtimeSandboxWorkers } from "../sandbox-workers.ts";
import { runtimeServe } from "./runtime-serve.ts";
import { scriptedCompletion, scriptedModelConfig, scriptedModelEnv } from "./scripted-model.ts";

const { serve } = await runtimeServe();

const TIMEOUT_MS = 800;

/** An OpenAI-compatible model that asks for one bash call, then answers with what the tool said. */
function scriptedModel(command: string): Hono {
  const app = new Hono();
  app.post("/v1/chat/completions", async (c) => {
    const body = (await c.req.json()) as { messages: Array<{ role: string; content: unknown }> };
    const last = body.messages.at(-1)!;
    const message =
      last.role === "tool"
        ? { role: "assistant", content: `The command said: ${String(last.content)}` }
        : {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: `call_${crypto.randomUUID().slice(0, 8)}`, type: "function", function: { name: "bash", arguments: JSON.stringify({ description: "count", command }) } },
            ],
          };
    return c.json(scriptedCompletion(message));
  });
  return app;
}

/** Counts the sandbox commands that have started and not yet finished. */
function watchCommands(provider: SandboxProvider): { provider: SandboxProvider; running(): number; finished(): number } {
  let running = 0;
  let finished = 0;
  const watched = new WeakSet<object>();
  return {
    running: () => running,
    finished: () => finished,
    provider: {
      ...provider,
      kind: provider.kind,
      async acquire(scope) {
        const sandbox = await provider.acquire(scope);
        if (!watched.has(sandbox)) {
          watched.add(sandbox);
          const exec = sandbox.exec.bind(sandbox);
          sandbox.exec = async (command, options) => {
            running++;
            try {
              return await exec(command, options);
            } finally {
              running--;
              finished++;
            }
          };
        }
        return sandbox;
      },
    },
  };
}

async function until(condition: () => boolean, what: string, limitMs = 60_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe(`the gateway on ${runtime}'s own server with runaway sandbox commands`, () => {
  it(`answers /api/ok while three threads' bash loops run, and the configured timeout stops each, naming it (${runtime})`, async () => {
    const model = await serve(scriptedModel(RUNAWAY_LOOP).fetch, { hostname: "127.0.0.1", port: 0 });
    const config = scriptedModelConfig(model.url, { sandbox: { command_timeout_ms: TIMEOUT_MS } }, "sandbox-runaway");
    const storage = createMemoryKeyValue();
    const sandbox = watchCommands(
      createVirtualSandboxProvider({ storage, workers: await runtimeSandboxWorkers(), defaultTimeoutMs: config.sandbox.command_timeout_ms }),
    );
    const gateway = await createGateway({
      config,
      storage,
      env: scriptedModelEnv(),
      sandbox: sandbox.provider,
      listening: { host: "127.0.0.1" },
    });
    const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
    try {
      const post = (path: string, body: unknown) =>
        fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const threadIds: string[] = [];
      for (let i = 0; i < 3; i++) threadIds.push(((await (await post("/api/threads", {})).json()) as { thread_id: string }).thread_id);
      // Acquired up front (auth is off, so the runs' user is "default"): the three loops then start
      // together instead of each waiting for its worker to load.
      await Promise.all(threadIds.map((threadId) => sandbox.provider.acquire({ userId: "default", threadId })));
      const waits = threadIds.map((id) => post(`/api/threads/${id}/runs/wait`, { input: { messages: [{ type: "human", content: "count forever" }] } }));

      await until(() => sandbox.running() === 3, "three sandbox commands in flight");
      const ok = await fetch(`${server.url}/api/ok`);
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ ok: true });
      // Answered while every loop was still running, not after.
      expect(sandbox.finished()).toBe(0);
      expect(sandbox.running()).toBe(3);

      const finals = await Promise.all(waits.map(async (response) => ((await response).json()) as Promise<{ messages: Array<{ type: string; content: unknown }> }>));
      expect(sandbox.finished()).toBe(3);
      for (const final of finals) {
        const tool = final.messages.find((m) => m.type === "tool");
        expect(String(tool?.content)).toMatch(new RegExp(`timed out after ${TIMEOUT_MS} ms`));
        expect(String(final.messages.at(-1)?.content)).toMatch(new RegExp(`^The command said: Command timed out after ${TIMEOUT_MS} ms`));
      }
      expect((await fetch(`${server.url}/api/ok`)).status).toBe(200);
    } finally {
      await server.close();
      await gateway.shutdown();
      await sandbox.provider.close();
      await model.close();
    }
  }, 90_000);
});

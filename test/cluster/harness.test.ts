// The cluster harness's own pieces, without PostgreSQL: the proxy (rotation, pinning, a dead
// worker skipped, SSE passed through as it is written), and the scripted model with the count_run
// plugin and counter through a real `serve` on each runtime (memory storage).
import { createServer, type Server } from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCli, type CliRuntime } from "../portable/gateway/cli-server.ts";
import { freeLoopbackPort } from "../support/embedded-postgres.ts";
import { startRunCounter, type RunCounter } from "./counter.ts";
import { CLUSTER_DENO_FLAGS, MODEL_KEY_ENV, workerConfig } from "./harness.ts";
import { listenLoopback, type Listening } from "./loopback.ts";
import { PIN_HEADER, SERVED_BY_HEADER, startProxy } from "./proxy.ts";
import { scriptedInput, startScriptedModel, type ScriptedModel } from "./scripted-model.ts";

/** An upstream that names itself; /sse writes one frame, then the second only when told. */
async function upstream(name: string): Promise<Listening & { release(): void }> {
  let release = () => undefined as void;
  const server: Server = createServer((req, res) => {
    if (req.url === "/sse") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`event: first\ndata: ${name}\n\n`);
      release = () => res.end(`event: second\ndata: ${name}\n\n`);
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" }).end(`${name} ${req.method} ${req.url}`);
  });
  const listening = await listenLoopback(server);
  return { ...listening, release: () => release() };
}

describe("the cluster proxy", () => {
  it("rotates over the workers that are up, pins by header, skips one that refuses connections, and passes SSE through before the stream ends", async () => {
    const a = await upstream("a");
    const b = await upstream("b");
    // A port nobody listens on: a worker that died.
    const dead = `http://127.0.0.1:${await freeLoopbackPort()}`;
    const targets = [
      { url: a.url, up: true },
      { url: dead, up: true },
      { url: b.url, up: true },
    ];
    const proxy = await startProxy(() => targets);
    try {
      const names: string[] = [];
      for (let i = 0; i < 6; i++) {
        const response = await fetch(`${proxy.url}/x?i=${i}`, { method: "POST", body: "payload" });
        expect(response.status).toBe(200);
        names.push((await response.text()).split(" ")[0]!);
      }
      // The dead worker's turns went to the next one up; nothing failed.
      expect(names.filter((n) => n === "a").length + names.filter((n) => n === "b").length).toBe(6);
      expect(new Set(names)).toEqual(new Set(["a", "b"]));

      const pinned = await fetch(`${proxy.url}/y`, { headers: { [PIN_HEADER]: "2" } });
      expect(pinned.headers.get(SERVED_BY_HEADER)).toBe("2");
      expect(await pinned.text()).toBe("b GET /y");
      const pinnedDead = await fetch(`${proxy.url}/y`, { headers: { [PIN_HEADER]: "1" } });
      expect(pinnedDead.status).toBe(503);
      await pinnedDead.text();
      targets[0] = { url: a.url, up: false };
      const downPinned = await fetch(`${proxy.url}/y`, { headers: { [PIN_HEADER]: "0" } });
      expect(downPinned.status).toBe(503);
      expect(await downPinned.text()).toContain("worker 0 is down");
      for (let i = 0; i < 3; i++) expect(await (await fetch(`${proxy.url}/z`)).text()).toBe("b GET /z");

      // The first frame reaches the client while the upstream holds the stream open.
      const sse = await fetch(`${proxy.url}/sse`, { headers: { [PIN_HEADER]: "2" } });
      const reader = sse.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      expect(first).toBe("event: first\ndata: b\n\n");
      b.release();
      let rest = "";
      for (let part = await reader.read(); !part.done; part = await reader.read()) rest += new TextDecoder().decode(part.value);
      expect(rest).toBe("event: second\ndata: b\n\n");
    } finally {
      await proxy.close();
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe("the scripted model and the count_run plugin in a real serve", () => {
  let model: ScriptedModel;
  let counter: RunCounter;
  let dir: string;
  beforeAll(async () => {
    [model, counter] = await Promise.all([startScriptedModel(), startRunCounter()]);
    dir = await mkdtemp(join(tmpdir(), "deerflow-cluster-pieces-"));
  });
  afterAll(async () => {
    await Promise.all([model?.close(), counter?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  for (const runtime of ["node", "deno", "bun"] as const satisfies readonly CliRuntime[]) {
    it(`runs the script on ${runtime}: #steps tool calls, each counted under the run id with the worker's label, then the final answer`, async () => {
      const configPath = join(dir, `${runtime}.yaml`);
      await writeFile(configPath, JSON.stringify({ ...workerConfig(`w-${runtime}`, model, counter), storage: { driver: "memory" } }));
      const server = await startCli(runtime, configPath, { [MODEL_KEY_ENV]: "k" }, { denoFlags: CLUSTER_DENO_FLAGS });
      try {
        const client = new Client({ apiUrl: `${server.url}/api` });
        const thread = await client.threads.create();
        const run = await client.runs.create(thread.thread_id, "lead_agent", { input: scriptedInput({ steps: 2 }) });
        await client.runs.join(thread.thread_id, run.run_id);
        expect((await client.runs.get(thread.thread_id, run.run_id)).status, server.output()).toBe("success");
        const calls = counter.callsOf(run.run_id);
        expect(calls.map((c) => [c.step, c.worker, c.threadId])).toEqual([
          [1, `w-${runtime}`, thread.thread_id],
          [2, `w-${runtime}`, thread.thread_id],
        ]);
        const state = await client.threads.getState<{ messages: Array<{ type: string; content: unknown }> }>(thread.thread_id);
        expect(state.values.messages.at(-1)).toMatchObject({ type: "ai", content: "done after 2 steps" });
      } finally {
        await server.kill();
      }
    });
  }
});

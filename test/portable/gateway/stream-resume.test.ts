// Issue 12, point 4: a rejoin with Last-Event-ID resumes exactly, over a real socket on this
// runtime's own server (Node, Deno and Bun), with raw fetch and with the official SDK's joinStream.
// A malformed id is a 400; an id past the newest frame replays nothing; one below the window gets
// the single gap frame.
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { createGateway, type Gateway } from "../../../src/gateway/app.ts";
import type { HttpServerHandle } from "../../../src/ports/http-server.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { deferred, eventually, scriptedAgentFactory, type Deferred } from "../runtime/runs-fixtures.ts";
import { CountingBridge, sseFrames, type SseFrame } from "./runs-harness.ts";
import { runtimeServe } from "./runtime-serve.ts";

const { runtime, serve } = await runtimeServe();
const RETAIN = 64;

interface Served {
  gateway: Gateway;
  server: HttpServerHandle;
  bridge: CountingBridge;
  client: Client;
  /** The block tool's gate, replaced per run; `entered` resolves when the tool is waiting on it. */
  gate: { release: Deferred<string>; entered: Deferred<void> };
}

async function start(retain = RETAIN): Promise<Served> {
  const storage = createMemoryKeyValue();
  const checkpointer = new KeyValueCheckpointSaver({ storage });
  const gate = { release: deferred<string>(), entered: deferred<void>() };
  const gates = {
    get block() {
      gate.entered.resolve();
      return gate.release;
    },
  };
  const bridge = new CountingBridge({ retain });
  const gateway = await createGateway({
    config: validateLeadConfig({}, "stream-resume"),
    storage,
    checkpointer,
    agentFactory: scriptedAgentFactory(checkpointer, { gates }),
    listening: { host: "127.0.0.1" },
    runs: { bridge },
  });
  const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
  const client = new Client({ apiUrl: `${server.url}/api`, apiKey: null, callerOptions: { maxRetries: 0 } });
  return { gateway, server, bridge, client, gate };
}

async function stop(s: Served): Promise<void> {
  await s.server.close();
  await s.gateway.shutdown();
}

const seq = (id: string | undefined) => Number(id!.split("-")[1]);

/**
 * A background run blocked in its tool, and every frame it published so far, read once from the
 * start (so the last one is the newest frame while the run waits).
 */
async function blockedRun(s: Served, threadId: string): Promise<{ runId: string; seen: SseFrame[] }> {
  s.gate.release = deferred<string>();
  s.gate.entered = deferred<void>();
  expect((await post(s, "/api/threads", { thread_id: threadId })).status).toBe(200);
  const created = await post(s, `/api/threads/${threadId}/runs`, { input: { messages: [{ type: "human", content: "tool:block" }] }, stream_mode: ["values", "updates"] });
  expect(created.status).toBe(200);
  const { run_id: runId } = (await created.json()) as { run_id: string };
  await s.gate.entered.promise;
  const reading = new AbortController();
  const response = await fetch(`${s.server.url}/api/threads/${threadId}/runs/${runId}/stream`, { signal: reading.signal });
  const seen: SseFrame[] = [];
  const frames = sseFrames(response.body!);
  for await (const frame of frames) {
    if (frame.comment !== undefined) continue;
    seen.push(frame);
    if (seq(frame.id) === s.bridge.published(runId) - 1) break;
  }
  reading.abort();
  expect(seen.length).toBeGreaterThanOrEqual(2);
  return { runId, seen };
}

function post(s: Served, path: string, body: unknown): Promise<Response> {
  return fetch(`${s.server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

function join(s: Served, threadId: string, runId: string, lastEventId?: string, method = "GET"): Promise<Response> {
  return fetch(`${s.server.url}/api/threads/${threadId}/runs/${runId}/stream`, {
    method,
    headers: lastEventId === undefined ? {} : { "Last-Event-ID": lastEventId },
  });
}

async function dataFrames(response: Response): Promise<SseFrame[]> {
  const out: SseFrame[] = [];
  for await (const frame of sseFrames(response.body!)) if (frame.comment === undefined) out.push(frame);
  return out;
}

async function runStatus(s: Served, threadId: string, runId: string): Promise<string> {
  return ((await (await fetch(`${s.server.url}/api/threads/${threadId}/runs/${runId}`)).json()) as { status: string }).status;
}

describe(`resuming a run's stream with Last-Event-ID (real socket, ${runtime})`, () => {
  let s: Served;
  beforeAll(async () => {
    s = await start();
  });
  afterAll(async () => {
    await stop(s);
  });

  it("a malformed Last-Event-ID is a 400 naming the header and the expected form, on GET and POST, and leaves the run alone", async () => {
    const { runId } = await blockedRun(s, "t-bad");
    for (const bad of ["abc", "-", "1-", "-5", "1-2-3", "1.5-2", "x-1", "12", "1_2", "1 - 2"]) {
      for (const method of ["GET", "POST"]) {
        const res = await join(s, "t-bad", runId, bad, method);
        expect(res.status, `${method} ${JSON.stringify(bad)}`).toBe(400);
        expect(res.headers.get("content-type")).toMatch(/^application\/json/);
        const { detail } = (await res.json()) as { detail: string };
        expect(detail).toContain("Last-Event-ID");
        expect(detail).toContain("<epoch_ms>-<seq>");
      }
    }
    // The SDK's joinStream surfaces the same 400.
    await expect(
      (async () => {
        for await (const _ of s.client.runs.joinStream("t-bad", runId, { lastEventId: "abc" })) void _;
      })(),
    ).rejects.toThrow(/400/);
    expect(await runStatus(s, "t-bad", runId)).toBe("running");
    s.gate.release.resolve("released");
    await eventually(async () => (await runStatus(s, "t-bad", runId)) === "success", 2000);
  });

  it("a valid id resumes right after it, with raw fetch and the SDK's joinStream alike", async () => {
    const { runId, seen } = await blockedRun(s, "t-exact");
    const cursor = seen[1]!.id!;
    const raw = dataFrames(await join(s, "t-exact", runId, cursor));
    const viaSdk = (async () => {
      const ids: string[] = [];
      for await (const part of s.client.runs.joinStream("t-exact", runId, { lastEventId: cursor })) ids.push(part.id!);
      return ids;
    })();
    s.gate.release.resolve("released");
    const rawFrames = await raw;
    expect(seq(rawFrames[0]!.id)).toBe(seq(cursor) + 1);
    expect(rawFrames.map((f) => f.id).slice(0, seen.length - 2)).toEqual(seen.slice(2).map((f) => f.id));
    expect(rawFrames.at(-1)!.event).toBe("end");
    expect(await viaSdk).toEqual(rawFrames.map((f) => f.id));
  });

  it("an id past the newest frame (a future seq) resumes from the newest: nothing is replayed, the live frames follow", async () => {
    const { runId, seen } = await blockedRun(s, "t-future");
    const newest = seq(seen.at(-1)!.id);
    const before = s.bridge.subscriptions;
    const exact = join(s, "t-future", runId, seen.at(-1)!.id).then(dataFrames);
    const future = ["1-99999", `${Date.now() + 86_400_000}-${newest + 1}`, `0-${Number.MAX_SAFE_INTEGER}`, "1-99999999999999999999999"];
    const raw = Promise.all(future.map((id) => join(s, "t-future", runId, id).then(dataFrames)));
    const viaSdk = (async () => {
      const ids: string[] = [];
      for await (const part of s.client.runs.joinStream("t-future", runId, { lastEventId: "1-99999" })) ids.push(part.id!);
      return ids;
    })();
    // Every reader has joined while the run waits, so a replay would have to come from the window.
    await eventually(() => s.bridge.subscriptions === before + future.length + 2);
    s.gate.release.resolve("released");
    const live = (await exact).map((f) => f.id);
    expect(live.length).toBeGreaterThan(0);
    expect(seq(live[0])).toBe(newest + 1);
    for (const frames of await raw) expect(frames.map((f) => f.id)).toEqual(live);
    expect(await viaSdk).toEqual(live);
    // After the end, an id past it gets an empty stream that closes (no replay, no hang).
    expect(await dataFrames(await join(s, "t-future", runId, "1-99999"))).toEqual([]);
    // And without an id the whole retained stream is still there.
    expect((await dataFrames(await join(s, "t-future", runId))).map((f) => seq(f.id))).toEqual([...seen.map((_, i) => i), ...live.map(seq)]);
  });
});

describe(`a cursor older than the replay window (real socket, ${runtime})`, () => {
  let s: Served;
  beforeAll(async () => {
    s = await start(2);
  });
  afterAll(async () => {
    await stop(s);
  });

  it("gets one gap frame without an id, through raw fetch and the SDK, and the run goes on", async () => {
    const { runId } = await blockedRun(s, "t-gap");
    expect(s.bridge.published(runId)).toBeGreaterThan(3);
    const oldest = `${Date.now()}-0`;
    const frames = await dataFrames(await join(s, "t-gap", runId, oldest));
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ event: "gap", data: { code: "stream_replay_gap", requested_event_id: oldest, recovery: "reload_durable_state" } });
    expect(frames[0]!.id).toBeUndefined();
    const parts: Array<{ event: string }> = [];
    for await (const part of s.client.runs.joinStream("t-gap", runId, { lastEventId: oldest })) parts.push({ event: part.event });
    expect(parts).toEqual([{ event: "gap" }]);
    expect(await runStatus(s, "t-gap", runId)).toBe("running");
    s.gate.release.resolve("released");
    await eventually(async () => (await runStatus(s, "t-gap", runId)) === "success", 2000);
  });
});

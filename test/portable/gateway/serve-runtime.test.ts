// The gateway on this runtime's own HTTP server (Node: @hono/node-server, Deno: Deno.serve, Bun:
// Bun.serve) answering one streamed run over a real socket on 127.0.0.1. The same file runs under
// all three (scripts/test-all.sh); each picks its runtime's serve function.
import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { createGateway } from "../../../src/gateway/app.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { sseFrames, type SseFrame } from "./runs-harness.ts";
import { runtimeServe } from "./runtime-serve.ts";

const { runtime, serve } = await runtimeServe();

describe(`the gateway on ${runtime}'s own server`, () => {
  it(`scenario G43 (real socket, ${runtime}): streams one run: Content-Location names the run, metadata first, messages as [chunk, metadata], end last with null data, JSON data and an id on every frame`, async () => {
    const gateway = await createGateway({ config: validateLeadConfig({}, "serve-runtime"), storage: createMemoryKeyValue(), listening: { host: "127.0.0.1" } });
    const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
    try {
      expect(server.url).toBe(`http://127.0.0.1:${server.port}`);
      expect(server.port).toBeGreaterThan(0);
      const created = await fetch(`${server.url}/api/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      expect(created.status).toBe(200);
      const { thread_id: threadId } = (await created.json()) as { thread_id: string };

      const response = await fetch(`${server.url}/api/threads/${threadId}/runs/stream`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify({ input: { messages: [{ type: "human", content: "Summarize the water cycle" }] }, stream_mode: ["values", "messages-tuple"] }),
      });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const location = response.headers.get("content-location") ?? "";
      expect(location).toMatch(new RegExp(`^/api/threads/${threadId}/runs/[^/]+$`));

      const frames: SseFrame[] = [];
      for await (const frame of sseFrames(response.body!)) if (frame.comment === undefined) frames.push(frame);
      expect(frames[0]).toMatchObject({ event: "metadata", data: { thread_id: threadId } });
      const runId = (frames[0]!.data as { run_id: string }).run_id;
      expect(location).toBe(`/api/threads/${threadId}/runs/${runId}`);
      expect(frames.at(-1)).toMatchObject({ event: "end", data: null });
      // sseFrames JSON-parses every data line, so reaching here means every data payload was JSON.
      expect(frames.every((f) => f.data !== undefined && typeof f.id === "string" && f.id !== "")).toBe(true);
      expect(new Set(frames.map((f) => f.event))).toEqual(new Set(["metadata", "values", "messages", "end"]));
      const delta = frames.find((f) => f.event === "messages")!.data as [{ type: string; content: unknown }, Record<string, unknown>];
      expect(delta).toHaveLength(2);
      expect(delta[0].type).toBe("AIMessageChunk");
      const final = frames.findLast((f) => f.event === "values")!.data as { messages: { type: string; content: unknown }[] };
      expect(final.messages.at(-1)).toMatchObject({ type: "ai" });
      expect(String(final.messages.at(-1)!.content)).toContain("Summarize the water cycle");

      const run = (await (await fetch(`${server.url}${location}`)).json()) as { status: string };
      expect(run.status).toBe("success");
    } finally {
      await server.close();
      await gateway.shutdown();
    }
  });
});

describe(`many runs on ${runtime}'s own server`, () => {
  it(`keeps every run's state (${runtime}): 6 runs over 3 threads, streamed, /wait and background, each with tool calls, two on one thread, over fs storage`, async () => {
    const { mkdtemp, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const { createFsKeyValue } = await import("../../../adapters/shared/fs-key-value.ts");
    const base = await mkdtemp(join(tmpdir(), "deerflow-multi-run-"));
    const gateway = await createGateway({ config: validateLeadConfig({}, "serve-runtime"), storage: createFsKeyValue(base), listening: { host: "127.0.0.1" } });
    const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
    const json = { "content-type": "application/json" };
    const post = async (path: string, body: unknown) => {
      const response = await fetch(`${server.url}/api${path}`, { method: "POST", headers: json, body: JSON.stringify(body) });
      expect(response.status, `POST ${path}`).toBe(200);
      return response;
    };
    const input = (topic: string) => ({ input: { messages: [{ type: "human", content: `Write a note about ${topic}` }] } });
    try {
      const threads: string[] = [];
      for (let i = 0; i < 3; i += 1) threads.push(((await (await post("/threads", {})).json()) as { thread_id: string }).thread_id);
      const [a, b, c] = threads as [string, string, string];
      const streamed = async (threadId: string, topic: string) => {
        const response = await post(`/threads/${threadId}/runs/stream`, { ...input(topic), stream_mode: ["values"] });
        const frames: SseFrame[] = [];
        for await (const frame of sseFrames(response.body!)) if (frame.comment === undefined) frames.push(frame);
        expect(frames.at(-1)?.event).toBe("end");
        expect(frames.some((f) => f.event === "error")).toBe(false);
      };
      const waited = async (threadId: string, topic: string) => {
        const values = (await (await post(`/threads/${threadId}/runs/wait`, input(topic))).json()) as { messages: unknown[] };
        expect(values.messages.length).toBeGreaterThan(2);
      };
      const background = async (threadId: string, topic: string) => {
        const run = (await (await post(`/threads/${threadId}/runs`, input(topic))).json()) as { run_id: string };
        await (await fetch(`${server.url}/api/threads/${threadId}/runs/${run.run_id}/join`)).text();
        const row = (await (await fetch(`${server.url}/api/threads/${threadId}/runs/${run.run_id}`)).json()) as { status: string };
        expect(row.status).toBe("success");
      };
      // One after another on a, then the other two threads at once, then a's second run.
      await streamed(a, "the water cycle");
      await Promise.all([waited(b, "tide pools"), background(c, "glaciers")]);
      await Promise.all([background(a, "clouds"), streamed(b, "coral reefs"), waited(c, "icebergs")]);

      const expectedRuns = { [a]: 2, [b]: 2, [c]: 2 };
      for (const threadId of threads) {
        const state = (await (await fetch(`${server.url}/api/threads/${threadId}/state`)).json()) as {
          values: { messages?: { type: string; content: unknown; tool_calls?: unknown[] }[] };
          checkpoint: { checkpoint_ns: string; checkpoint_id: string | null };
        };
        const messages = state.values.messages ?? [];
        const humans = messages.filter((m) => m.type === "human");
        expect(humans, `thread ${threadId} keeps both of its turns`).toHaveLength(expectedRuns[threadId]!);
        // Every run called tools: each turn's AI messages carry tool calls answered by tool messages.
        expect(messages.filter((m) => m.type === "ai" && (m.tool_calls?.length ?? 0) > 0).length).toBeGreaterThanOrEqual(expectedRuns[threadId]!);
        expect(messages.filter((m) => m.type === "tool").length).toBeGreaterThanOrEqual(expectedRuns[threadId]!);
        expect(messages.at(-1)?.type).toBe("ai");
        expect(state.checkpoint.checkpoint_ns).toBe("");
        expect(state.checkpoint.checkpoint_id).toEqual(expect.any(String));

        const history = (await (await post(`/threads/${threadId}/history`, { limit: 100 })).json()) as { checkpoint: { checkpoint_ns: string } }[];
        expect(history.length).toBeGreaterThan(4);
        expect(new Set(history.map((h) => h.checkpoint.checkpoint_ns))).toEqual(new Set([""]));
        const runs = (await (await fetch(`${server.url}/api/threads/${threadId}/runs`)).json()) as { status: string }[];
        expect(runs.map((r) => r.status)).toEqual(["success", "success"]);
      }
    } finally {
      await server.close();
      await gateway.shutdown();
      await rm(base, { recursive: true, force: true });
    }
  }, 60_000);
});

// The gateway on this runtime's own HTTP server (Node: @hono/node-server, Deno: Deno.serve, Bun:
// Bun.serve) answering one streamed run over a real socket on 127.0.0.1. The same file runs under
// all three (scripts/test-all.sh); each picks its runtime's serve function.
import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { createGateway } from "../../../src/gateway/app.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { sseFrames, type SseFrame } from "./runs-harness.ts";
import { runtimeServe } from "./serve-harness.ts";

const { runtime, serve } = await runtimeServe();

describe(`the gateway on ${runtime}'s own server`, () => {
  it(`scenario 43 (real socket, ${runtime}): streams one run: Content-Location names the run, metadata first, messages as [chunk, metadata], end last with null data, JSON data and an id on every frame`, async () => {
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

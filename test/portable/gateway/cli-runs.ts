// Requests against a CLI server (cli-server.ts) that several CLI tests make: a new thread, and one
// streamed run of the built-in demo model.
import { expect } from "vitest";
import type { CliServer } from "./cli-server.ts";
import { sseFrames, type SseFrame } from "./runs-harness.ts";

const JSON_HEADERS = { "content-type": "application/json" };

export async function post(server: CliServer, path: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}/api${path}`, { method: "POST", headers: JSON_HEADERS, body: JSON.stringify(body) });
}

export async function newThread(server: CliServer): Promise<string> {
  const created = await post(server, "/threads", {});
  expect(created.status, server.output()).toBe(200);
  return ((await created.json()) as { thread_id: string }).thread_id;
}

/** One streamed run of the built-in demo model (it writes a file and runs bash): its frames. */
export async function streamedRun(server: CliServer, threadId: string, content: string): Promise<SseFrame[]> {
  const response = await fetch(`${server.url}/api/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { ...JSON_HEADERS, accept: "text/event-stream" },
    body: JSON.stringify({ input: { messages: [{ type: "human", content }] }, stream_mode: ["values"] }),
  });
  expect(response.status, server.output()).toBe(200);
  const frames: SseFrame[] = [];
  for await (const frame of sseFrames(response.body!)) if (frame.comment === undefined) frames.push(frame);
  return frames;
}

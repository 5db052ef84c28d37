// The real `deerflow-edge serve` of this runtime in a fresh process, driven over its port: many
// runs over several threads, each checked afterwards. A fresh process matters: Deno lost every
// run's state after the first one in a process (a context carried from the first run's dynamic
// imports into later requests), which a server made inside an already warmed-up test never shows.
import { Client } from "@langchain/langgraph-sdk";
import { describe, expect, it } from "vitest";
import { cliWorkspace, currentRuntime } from "./cli-server.ts";
import { sseFrames, type SseFrame } from "./runs-harness.ts";

const runtime = currentRuntime();

interface Message {
  type: string;
  tool_calls?: unknown[];
}

describe(`deerflow-edge serve on ${runtime}, many runs`, () => {
  it(`keeps every run's state (${runtime}): 6 runs over 3 threads (streamed, /wait, background; SDK and raw HTTP), each with tool calls, two per thread`, async () => {
    const workspace = await cliWorkspace();
    const server = await workspace.start();
    try {
      const api = `${server.url}/api`;
      const client = new Client({ apiUrl: api });
      const input = (topic: string) => ({ messages: [{ type: "human", content: `Write a note about ${topic}` }] });
      const threads = await Promise.all([0, 1, 2].map(() => client.threads.create()));
      const [a, b, c] = threads.map((t) => t.thread_id) as [string, string, string];

      const streamed = async (threadId: string, topic: string) => {
        const events: string[] = [];
        for await (const part of client.runs.stream(threadId, "lead_agent", { input: input(topic), streamMode: ["values", "messages-tuple"] })) events.push(part.event);
        expect(events).toContain("values");
        expect(events).not.toContain("error");
      };
      const waited = async (threadId: string, topic: string) => {
        const response = await fetch(`${api}/threads/${threadId}/runs/wait`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ assistant_id: "lead_agent", input: input(topic) }),
        });
        expect(response.status).toBe(200);
        expect(((await response.json()) as { messages: unknown[] }).messages.length).toBeGreaterThan(2);
      };
      const background = async (threadId: string, topic: string) => {
        const run = await client.runs.create(threadId, "lead_agent", { input: input(topic) });
        const response = await fetch(`${api}/threads/${threadId}/runs/${run.run_id}/stream`);
        const frames: SseFrame[] = [];
        for await (const frame of sseFrames(response.body!)) if (frame.comment === undefined) frames.push(frame);
        expect(frames.at(-1)?.event).toBe("end");
        expect((await client.runs.get(threadId, run.run_id)).status).toBe("success");
      };

      // The first run alone in the fresh process, then runs side by side on different threads.
      await streamed(a, "the water cycle");
      await Promise.all([waited(b, "tide pools"), background(c, "glaciers")]);
      await Promise.all([background(a, "clouds"), streamed(b, "coral reefs"), waited(c, "icebergs")]);

      for (const threadId of [a, b, c]) {
        const state = await client.threads.getState<{ messages?: Message[] }>(threadId);
        const messages = state.values.messages ?? [];
        expect(messages.filter((m) => m.type === "human"), `thread ${threadId} keeps both of its turns`).toHaveLength(2);
        // Every run called tools: two turns with tool calls, answered by tool messages.
        expect(messages.filter((m) => m.type === "ai" && (m.tool_calls?.length ?? 0) > 0).length).toBeGreaterThanOrEqual(2);
        expect(messages.filter((m) => m.type === "tool").length).toBeGreaterThanOrEqual(2);
        expect(messages.at(-1)?.type).toBe("ai");
        expect(state.checkpoint.checkpoint_ns).toBe("");

        const history = await client.threads.getHistory(threadId, { limit: 100 });
        expect(history.length).toBeGreaterThan(4);
        expect(new Set(history.map((h) => h.checkpoint.checkpoint_ns))).toEqual(new Set([""]));
        expect(history[0]!.checkpoint.checkpoint_id).toBe(state.checkpoint.checkpoint_id);
        const runs = await client.runs.list(threadId);
        expect(runs.map((r) => r.status)).toEqual(["success", "success"]);
      }
    } finally {
      await workspace.dispose();
    }
  }, 90_000);
});

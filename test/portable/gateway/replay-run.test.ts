import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { loadReplayRecordings } from "../../../src/config/load.ts";
import { REPLAY_MODEL_MARKER } from "../../../src/models/replay.ts";
import { acceptanceGateways, call, human, send } from "../../fixtures/plugins/gateway-harness.ts";
import { sseFrames } from "./runs-harness.ts";

/*
 * A replayed session through a real gateway: `use: replay` with upstream's write_read_file
 * fixture, read from its file as `serve` does. The recorded tool calls run the real sandbox tools,
 * so the file the recording writes is in the thread's outputs afterwards, and the recorded answer
 * streams back token by token.
 */

const FIXTURE_DIR = new URL("../../fixtures/replay/", import.meta.url).href.replace(/\/$/, "");
const PROMPT = (JSON.parse(await readFile(new URL(`${FIXTURE_DIR}/write_read_file.ultra.json`), "utf8")) as { prompt: string }).prompt;
// What the UI sends for the recorded session (ultra mode).
const CONTEXT = { mode: "ultra", thinking_enabled: true, is_plan_mode: true, subagent_enabled: true };

const gatewayWith = acceptanceGateways();

async function replayGateway(extra: Record<string, unknown> = {}) {
  const raw = { models: [{ name: "scenario-model", display_name: "Scenario Model", use: "replay", fixture: "write_read_file.ultra.json" }], ...extra };
  const config = await loadReplayRecordings(
    validateLeadConfig(raw, `${FIXTURE_DIR}/config.yaml`),
    { readText: (path) => readFile(new URL(path), "utf8").catch(() => undefined), baseDir: FIXTURE_DIR },
    "config.yaml",
  );
  const { gateway } = await gatewayWith(config as unknown as Record<string, unknown>);
  return gateway;
}

interface Frame {
  event?: string;
  data?: any;
}

async function streamRun(gateway: Awaited<ReturnType<typeof replayGateway>>, threadId: string, prompt: string): Promise<Frame[]> {
  expect((await call(gateway, "POST", "/api/threads", { body: { thread_id: threadId } })).status).toBe(200);
  const response = await send(gateway, "POST", `/api/threads/${threadId}/runs/stream`, {
    body: { input: human(prompt), context: CONTEXT, stream_mode: ["values", "messages-tuple"] },
  });
  expect(response.status).toBe(200);
  const frames: Frame[] = [];
  for await (const frame of sseFrames(response.body!)) frames.push(frame as Frame);
  return frames;
}

describe("use: replay through the gateway", () => {
  it("plays the recorded session: the real tools write and read the file, the answer streams, the thread keeps it", async () => {
    const gateway = await replayGateway();
    const frames = await streamRun(gateway, "replay-1", PROMPT);
    expect(frames.at(-1)?.event).toBe("end");
    expect(frames.some((frame) => frame.event === "error")).toBe(false);

    const values = frames.filter((frame) => frame.event === "values").at(-1)!.data;
    // The conversation, without what middlewares add for the model (a plan-mode system note).
    const messages = (values.messages as Array<{ type: string }>).filter((m) => m.type !== "system") as Array<{ type: string; content: unknown; name?: string; tool_calls?: Array<{ name: string }>; additional_kwargs?: Record<string, unknown> }>;
    expect(messages.map((m) => [m.type, m.type === "tool" ? m.name : (m.tool_calls ?? []).map((c) => c.name).join(",")])).toEqual([
      ["human", ""],
      ["ai", "write_file"],
      ["tool", "write_file"],
      ["ai", "read_file"],
      ["tool", "read_file"],
      ["ai", ""],
    ]);
    // read_file answered with what write_file wrote, through the sandbox.
    expect(String(messages[4]!.content)).toContain("hi from replay.");
    const answer = messages.at(-1)!;
    expect(answer.content).toBe("hi from replay.");
    expect(answer.additional_kwargs?.[REPLAY_MODEL_MARKER]).toBe(true);

    // The answer came as tokens, not one block: each chunk a piece of the recorded text.
    const tokens = frames
      .filter((frame) => frame.event === "messages")
      .map((frame) => frame.data[0])
      .filter((chunk: { type?: string; content?: unknown }) => typeof chunk?.content === "string" && chunk.content !== "" && /chunk/i.test(chunk.type ?? ""))
      .map((chunk: { content: string }) => chunk.content);
    expect(tokens).toEqual(["hi ", "from ", "replay."]);

    // The file the recording wrote is in the thread's outputs.
    const artifact = await send(gateway, "GET", "/api/threads/replay-1/artifacts/mnt/user-data/outputs/note.txt");
    expect(artifact.status).toBe(200);
    expect(await artifact.text()).toBe("hi from replay.");

    const state = await call(gateway, "GET", "/api/threads/replay-1/state");
    expect(state.body.values.messages.at(-1).content).toBe("hi from replay.");
  });

  it("plays it the same through runs/wait, with the prompt as content blocks as the UI sends it", async () => {
    const gateway = await replayGateway();
    await call(gateway, "POST", "/api/threads", { body: { thread_id: "replay-w" } });
    const input = { messages: [{ type: "human", content: [{ type: "text", text: PROMPT }] }] };
    const waited = await call(gateway, "POST", "/api/threads/replay-w/runs/wait", { body: { input, context: CONTEXT } });
    expect(waited.status).toBe(200);
    expect(waited.body.messages.at(-1).content).toBe("hi from replay.");
    expect(await (await send(gateway, "GET", "/api/threads/replay-w/artifacts/mnt/user-data/outputs/note.txt")).text()).toBe("hi from replay.");
  });

  it("titles the thread with the recorded title when the replay model is the title model", async () => {
    const gateway = await replayGateway({ title: { model_name: "scenario-model" } });
    await streamRun(gateway, "replay-2", PROMPT);
    const state = await call(gateway, "GET", "/api/threads/replay-2/state");
    expect(state.body.values.title).toBe("Direct File Creation and Readback");
  });

  it("ends a run whose prompt has no recording with an error naming the prompt and the fixture", async () => {
    const gateway = await replayGateway();
    const frames = await streamRun(gateway, "replay-3", "What is the weather in Paris tomorrow?");
    expect(frames.at(-1)?.event).toBe("end");
    // The run ends with the model's failure as its answer, as any provider failure does.
    const last = frames.filter((frame) => frame.event === "values").at(-1)!.data.messages.at(-1);
    expect(last.type).toBe("ai");
    expect(last.content).toMatch(/no recorded answer for the prompt "What is the weather in Paris.*write_read_file\.ultra\.json/);
  });
});

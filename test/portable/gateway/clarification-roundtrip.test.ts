import { AIMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/index.ts";
import { createClarificationMiddleware } from "../../../src/middlewares/clarification/clarification.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { askUnits, call, gatewayWithThread } from "./threads-fixtures.ts";

interface Frame {
  event: string;
  data: unknown;
}

function parseSse(text: string): Frame[] {
  return text
    .split("\n\n")
    .filter((block) => block.includes("event:"))
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)![1]!;
      const data = /^data: (.*)$/m.exec(block)?.[1];
      return { event, data: data === undefined ? null : JSON.parse(data) };
    });
}

describe("a clarification card round-trips through the gateway", () => {
  it("the run ends with the card in values (text and its structured human_input); the answer comes back as the next run and the agent goes on", async () => {
    const storage = createMemoryKeyValue();
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    const model = fakeModel()
      .respond(askUnits())
      .respond(new AIMessage("Using metric units, as you asked."));
    const agent = createAgent({
      name: "lead-agent",
      model,
      // The middleware brings the ask_clarification tool itself.
      middlewares: [createClarificationMiddleware()],
      services: { clock: systemClock },
      checkpointer,
    });
    const { gateway, threadId } = await gatewayWithThread(agent, storage, checkpointer);
    try {
      const first = await gateway.fetch(
        new Request(`http://gateway.test/api/threads/${threadId}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-test-user": "alice" },
          body: JSON.stringify({ input: { messages: [{ type: "human", content: "Convert 5 miles." }] }, stream_mode: ["values"] }),
        }),
      );
      const frames = parseSse(await first.text());
      expect(frames.at(-1)).toEqual({ event: "end", data: null });
      const last = frames.filter((f) => f.event === "values").at(-1)!.data as {
        messages: Array<{ type: string; name?: string; content: string; artifact?: { human_input?: { question?: string; options?: Array<{ value: string }> } } }>;
      };
      const card = last.messages.at(-1)!;
      expect(card).toMatchObject({ type: "tool", name: "ask_clarification" });
      expect(card.content).toContain("Metric or imperial units?");
      expect(card.artifact?.human_input?.question).toBe("Metric or imperial units?");
      expect(card.artifact?.human_input?.options?.map((option) => option.value)).toEqual(["metric", "imperial"]);
      // The model was asked once: the card ended the run instead of going back to it.
      expect(model.calls).toHaveLength(1);

      const answer = await call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, { input: { messages: [{ type: "human", content: "metric" }] } });
      expect(answer.status).toBe(200);
      const messages = (answer.body as { messages: Array<{ type: string; content: string }> }).messages;
      expect(messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "human", "ai"]);
      expect(messages.at(-1)!.content).toBe("Using metric units, as you asked.");
      // The second model call saw the card and the answer.
      expect(model.calls[1]!.messages.map((m) => m.getType())).toEqual(["human", "ai", "tool", "human"]);
    } finally {
      await gateway.shutdown();
    }
  });
});

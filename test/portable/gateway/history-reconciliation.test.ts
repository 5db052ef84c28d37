import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/index.ts";
import type { AgentMiddleware, AgentTool } from "../../../src/engine/types.ts";
import { createClarificationMiddleware } from "../../../src/middlewares/clarification/clarification.ts";
import { createSummarizationMiddleware } from "../../../src/middlewares/summarization/summarization.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { askUnits, call, gatewayWithThread } from "./threads-fixtures.ts";

/*
 * The thread's history page (messages/page) is what the web UI reloads a conversation from; here it
 * is read from the checkpoint lineage, so a message compaction took out of the head comes back
 * from the head's ancestors. Spec (middleware-chain.md, ClarificationMiddleware):
 * - "That reconciliation is not ask_clarification-only — any middleware that answers a tool call
 *   has the same gap, and a result the user saw must not vanish on reload (#4666 —
 *   ReadBeforeWriteMiddleware blocked-write errors reached the UI but not the event store). It is
 *   bounded by three conditions, not a name allowlist: the message is user-visible, the call
 *   belongs to this run's lead agent ..., and it is not already persisted."
 * - "Human Input Card replies are hide_from_ui HumanMessages with additional_kwargs.human_input_response;
 *   RunJournal persists only allowlisted hidden sources (currently ask_clarification) as llm.human.input."
 */

const guardedTool = (name: string): AgentTool => ({
  name,
  description: name,
  schema: { type: "object", properties: {} },
  invoke: async () => {
    throw new Error(`${name} must be answered by the middleware, never run`);
  },
});

/** Answers two tool calls itself, as ReadBeforeWrite answers a blocked write: one visibly, one hidden. */
const answeringMiddleware: AgentMiddleware = {
  name: "AnswersToolCalls",
  async wrapToolCall(request, handler) {
    const id = request.toolCall.id ?? "";
    if (request.toolCall.name === "write_file") {
      return new ToolMessage({ content: "Error: read /mnt/user-data/workspace/a.txt before writing it", tool_call_id: id, name: "write_file", status: "error" });
    }
    if (request.toolCall.name === "probe") {
      return new ToolMessage({ content: "internal probe", tool_call_id: id, name: "probe", additional_kwargs: { hide_from_ui: true } });
    }
    return handler(request);
  },
};

function hiddenReply(source: string, requestId: string, value: string) {
  return {
    type: "human",
    content: value,
    additional_kwargs: {
      hide_from_ui: true,
      human_input_response: { version: 1, kind: "human_input_response", source, request_id: requestId, response_kind: "text", value },
    },
  };
}

interface PageRow {
  seq: number;
  content: { type: string; id: string; name?: string; content: unknown; tool_call_id?: string; additional_kwargs?: Record<string, unknown> };
}

describe("the history page keeps what the user saw", () => {
  it("a visible ToolMessage a middleware answered, the card, and the allowlisted hidden card reply survive compaction; hidden results and other hidden sources stay out; nothing twice", async () => {
    const storage = createMemoryKeyValue();
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    const model = fakeModel()
      .respond(
        new AIMessage({
          content: "",
          tool_calls: [
            { id: "w1", name: "write_file", args: {} },
            { id: "p1", name: "probe", args: {} },
          ],
        }),
      )
      .respond(askUnits())
      .respond(new AIMessage("Using metric units, as you asked."));
    const agent = createAgent({
      name: "lead-agent",
      model,
      tools: [guardedTool("write_file"), guardedTool("probe")],
      middlewares: [
        createSummarizationMiddleware(
          { enabled: true, trigger: { type: "messages", value: 8 }, keep: { type: "messages", value: 2 } },
          { model: fakeModel().respond(new AIMessage("EARLIER TURNS")) },
        ),
        createClarificationMiddleware(),
        answeringMiddleware,
      ],
      services: { clock: systemClock },
      checkpointer,
    });
    const { gateway, threadId } = await gatewayWithThread(agent, storage, checkpointer);
    try {
      const first = await call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, { input: { messages: [{ type: "human", content: "Convert 5 miles." }] } });
      expect(first.status).toBe(200);
      const card = (first.body as { messages: Array<{ type: string; name?: string; artifact?: { human_input?: { request_id?: string } } }> }).messages.at(-1)!;
      expect(card).toMatchObject({ type: "tool", name: "ask_clarification" });
      const requestId = card.artifact?.human_input?.request_id ?? "ask-1";

      const second = await call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, {
        input: { messages: [hiddenReply("ask_clarification", requestId, "metric"), hiddenReply("some_extension", "other-1", "not the user's words")] },
      });
      expect(second.status).toBe(200);
      // The compaction ran: the head no longer holds the first run's tool results.
      const head = (second.body as { messages: Array<{ type: string; tool_call_id?: string }> }).messages;
      expect(head.some((m) => m.tool_call_id === "w1")).toBe(false);

      const page = await call(gateway, "GET", `/api/threads/${threadId}/messages/page?limit=200`);
      expect(page.status).toBe(200);
      const rows = (page.body as { data: PageRow[] }).data;
      const listed = rows.map((row) => row.content);

      // User-visible and answered by a middleware: listed, although compaction took it out of the head.
      const blocked = listed.find((m) => m.tool_call_id === "w1");
      expect(blocked?.content).toBe("Error: read /mnt/user-data/workspace/a.txt before writing it");
      expect(listed.find((m) => m.tool_call_id === "ask-1")).toMatchObject({ type: "tool", name: "ask_clarification" });
      // Not user-visible: not listed.
      expect(listed.some((m) => m.tool_call_id === "p1")).toBe(false);
      // The allowlisted hidden reply is listed as the user's input, with its response; another source is not.
      const replies = listed.filter((m) => m.type === "human" && m.additional_kwargs?.["human_input_response"] !== undefined);
      expect(replies.map((m) => (m.additional_kwargs!["human_input_response"] as { source: string }).source)).toEqual(["ask_clarification"]);
      expect(replies[0]!.content).toBe("metric");
      // Not already persisted: each message once.
      expect(new Set(listed.map((m) => m.id)).size).toBe(listed.length);
      expect(listed.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai", "tool", "human", "ai"]);
    } finally {
      await gateway.shutdown();
    }
  });
});

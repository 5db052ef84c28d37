import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { MemorySaver } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import { PROVENANCE_KEYS } from "../../src/extension-api/index.ts";
import { createMemoryMiddleware } from "../../src/middlewares/memory/memory.ts";
import { createSummarizationMiddleware } from "../../src/middlewares/summarization/summarization.ts";
import type { SystemModelCallHook } from "../../src/middlewares/system-model-call.ts";
import { createTitleMiddleware } from "../../src/middlewares/title.ts";
import { recordingStore } from "../portable/middlewares/memory-fixtures.ts";

/*
 * Spec (middleware-chain.md, message provenance): "Summarization, Title, and Memory are
 * deliberately absent: Summarization's and Title's own model calls are already attributed through
 * system-model-call observation (SystemOperationKind.SUMMARIZATION / .TITLE), and the summary text
 * they produce only ever enters a request via DurableContextMiddleware's already-stamped
 * durable_context_data block — there is no separate message of theirs to stamp. Memory only reads
 * messages to queue them for extraction".
 */

function stamped(messages: readonly BaseMessage[]): BaseMessage[] {
  return messages.filter((message) => PROVENANCE_KEYS.some((key) => Object.hasOwn(message.additional_kwargs ?? {}, key)));
}


function history(): BaseMessage[] {
  return [
    new HumanMessage({ content: "first request", id: "u1" }),
    new AIMessage({ content: "first answer", id: "a1" }),
    new HumanMessage({ content: "second request", id: "u2" }),
    new AIMessage({ content: "", id: "a2", tool_calls: [{ id: "c1", name: "search", args: { q: "x" } }] }),
    new ToolMessage({ content: "search result", tool_call_id: "c1", id: "t1" }),
    new AIMessage({ content: "second answer", id: "a3" }),
    new HumanMessage({ content: "Remember that I prefer Python", id: "u3" }),
  ];
}

describe("provenance: the producers the spec leaves out", () => {
  it("Summarization, Title, and Memory are deliberately absent: they stamp no provenance on any message, their model calls are observed as summarization / title", async () => {
    const observed: string[] = [];
    const observeSystemCall: SystemModelCallHook = (kind, _request, invoke) => {
      observed.push(kind);
      return invoke();
    };
    const summarizer = fakeModel().respond(new AIMessage("SUMMARY OF EARLIER TURNS"));
    const titler = fakeModel().respond(new AIMessage("Python preferences"));
    const lead = fakeModel().respond(new AIMessage({ content: "Noted.", id: "final" }));
    const store = recordingStore();
    const agent = createAgent({
      model: lead,
      middlewares: [
        createSummarizationMiddleware(
          { enabled: true, trigger: { type: "messages", value: 5 }, keep: { type: "messages", value: 2 } },
          { model: summarizer, observeSystemCall },
        ),
        createTitleMiddleware({ model_name: "title-model" }, { model: titler, observeSystemCall }),
        createMemoryMiddleware({}, { store }),
      ],
      checkpointer: new MemorySaver(),
      services: { clock: systemClock },
    });

    const result = await agent.invoke({ messages: history() }, { threadId: "t-provenance" });

    // Each of the three did its work, so the absence below is not an absence of activity.
    expect(result.summary_text).toBe("SUMMARY OF EARLIER TURNS");
    expect(result.title).toBe("Python preferences");
    expect(store.updates).toHaveLength(1);
    expect(observed).toEqual(["summarization", "title"]);

    // No message of theirs, and no stamp on anyone else's: in state, in the lead's request, in what Memory queued.
    expect(stamped(result.messages)).toEqual([]);
    expect(result.messages.some((message) => String(message.content).includes("SUMMARY OF EARLIER TURNS"))).toBe(false);
    expect(stamped(lead.calls[0]!.messages)).toEqual([]);
    // Memory queues bare role/text records for extraction: nothing there could carry a stamp.
    expect(store.updates[0]!.messages.flatMap((message) => Object.keys(message)).filter((key) => !["id", "role", "text"].includes(key))).toEqual([]);
  });
});

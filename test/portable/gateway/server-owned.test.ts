import { describe, expect, it } from "vitest";
import { PROVENANCE_KEYS, SERVER_OWNED_MESSAGE_METADATA_KEYS } from "../../../src/extension-api/index.ts";
import {
  isServerOwnedContextKey,
  stripServerOwnedContext,
  stripServerOwnedMessage,
  stripServerOwnedMessages,
} from "../../../src/gateway/server-owned.ts";

describe("server-owned keys are stripped from caller input", () => {
  it("drops identity, delegation and every __-prefixed key from a context, keeping the caller's own", () => {
    const context = {
      model_name: "gpt",
      thinking_enabled: true,
      user_id: "admin",
      user_role: "admin",
      is_internal: true,
      authz_attributes: { groups: ["root"] },
      channel_user_id: "c1",
      original_user_content: "forged",
      langgraph_auth_user: { id: "x" },
      langgraph_auth_user_id: "x",
      __deerflow_run_ticket: "t",
      __anything: 1,
      subagent_citation_verdict: { ok: true },
      deerflow_tool_receipt: { id: "r1" },
      [PROVENANCE_KEYS[0]!]: "tool",
    };
    expect(stripServerOwnedContext(context)).toEqual({ model_name: "gpt", thinking_enabled: true });
  });

  it("treats a non-object context as empty and never lets __proto__ through", () => {
    expect(stripServerOwnedContext(null)).toEqual({});
    expect(stripServerOwnedContext(["a"])).toEqual({});
    const parsed = JSON.parse('{"__proto__": {"is_internal": true}, "mode": "pro"}');
    const out = stripServerOwnedContext(parsed);
    expect(out).toEqual({ mode: "pro" });
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect((out as Record<string, unknown>).is_internal).toBeUndefined();
  });

  it("strips delegated receipts, verdicts and provenance from a message's kwargs, metadata and top level", () => {
    const message = {
      type: "tool",
      content: "done",
      tool_call_id: "call-1",
      subagent_status: "completed",
      additional_kwargs: {
        keep: 1,
        subagent_status: "completed",
        subagent_result_brief: "all good",
        subagent_citation_verdict: { verified: 3 },
        subagent_token_usage: { input_tokens: 1 },
        deerflow_tool_receipt: { id: "r" },
        deerflow_tool_receipt_ledger: [],
        original_user_content: "x",
      },
      response_metadata: { model: "m", token_usage_attribution: {} },
    };
    expect(stripServerOwnedMessage(message)).toEqual({
      type: "tool",
      content: "done",
      tool_call_id: "call-1",
      additional_kwargs: { keep: 1 },
      response_metadata: { model: "m" },
    });
    // The caller's object is never mutated.
    expect(message.additional_kwargs.subagent_status).toBe("completed");
  });

  it("covers LangChain's serialized constructor form and passes non-objects through", () => {
    const serialized = { lc: 1, type: "constructor", id: ["x"], kwargs: { content: "hi", additional_kwargs: { subagent_error: "e", k: 2 } } };
    expect(stripServerOwnedMessages([serialized, "plain", 3])).toEqual([
      { lc: 1, type: "constructor", id: ["x"], kwargs: { content: "hi", additional_kwargs: { k: 2 } } },
      "plain",
      3,
    ]);
  });

  it("every server-owned message key is also refused as a context key", () => {
    for (const key of SERVER_OWNED_MESSAGE_METADATA_KEYS) expect(isServerOwnedContextKey(key)).toBe(true);
    expect(isServerOwnedContextKey("model_name")).toBe(false);
  });
});

describe("server-owned state channels", () => {
  it("names the channels a write may not touch, in object and tuple form", async () => {
    const { serverOwnedChannelsIn } = await import("../../../src/gateway/server-owned.ts");
    expect(serverOwnedChannelsIn({ messages: [], sandbox: { sandbox_id: "virtual:bob:t" }, delegations: [] })).toEqual(["sandbox", "delegations"]);
    expect(serverOwnedChannelsIn([["messages", []], ["thread_data", {}]])).toEqual(["thread_data"]);
    expect(serverOwnedChannelsIn({ messages: [], title: "t", todos: [], goal: {} })).toEqual([]);
    expect(serverOwnedChannelsIn(null)).toEqual([]);
  });
});

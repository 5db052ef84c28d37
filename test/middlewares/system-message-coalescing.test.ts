import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import type { ModelRequest } from "../../src/engine/types.ts";
import {
  SYSTEM_MESSAGE_COALESCING_NAME,
  coalesceSystemMessages,
  createSystemMessageCoalescingMiddleware,
  flattenContent,
} from "../../src/middlewares/system-message-coalescing.ts";
import { emptyThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

function request(systemMessage: SystemMessage | undefined, messages: BaseMessage[]): ModelRequest {
  return {
    model: fakeModel(),
    systemMessage,
    messages,
    tools: [],
    state: { ...emptyThreadState(), messages },
    runtime: makeRuntime({ threadId: "t1" }),
  };
}

/** What the provider receives: the engine prepends systemMessage to messages. */
function finalPayload(req: ModelRequest): BaseMessage[] {
  return req.systemMessage ? [req.systemMessage, ...req.messages] : [...req.messages];
}

function systemCount(messages: readonly BaseMessage[]): number {
  return messages.filter((m) => m.type === "system").length;
}

function coalesced(req: ModelRequest): ModelRequest {
  const result = coalesceSystemMessages(req);
  expect(result).not.toBeNull();
  return result!;
}

function reminder(content: string, id: string, extra: Record<string, unknown> = {}): SystemMessage {
  return new SystemMessage({ content, id, additional_kwargs: { hide_from_ui: true, dynamic_context_reminder: true, ...extra } });
}

class StrictBackendError extends Error {}

/** vLLM / SGLang / Qwen: zero or one system message, and only at position 0. */
async function strictBackend(req: ModelRequest): Promise<AIMessage> {
  const final = finalPayload(req);
  const count = systemCount(final);
  if (count > 1) throw new StrictBackendError("Received multiple system messages");
  if (count === 1 && final[0]!.type !== "system") throw new StrictBackendError("System message must be at the beginning");
  return new AIMessage("ok");
}

describe("coalesceSystemMessages", () => {
  it("no system message anywhere → untouched", () => {
    expect(coalesceSystemMessages(request(undefined, [new HumanMessage("hi")]))).toBeNull();
  });

  it("only the systemMessage field → untouched", () => {
    expect(coalesceSystemMessages(request(new SystemMessage("prompt"), [new HumanMessage("hi")]))).toBeNull();
  });

  it("prompt plus one in-list system message are merged into systemMessage", () => {
    const prompt = new SystemMessage({ content: "You are DeerFlow.", id: "sys-1" });
    const remind = new SystemMessage({ content: "<system-reminder>date</system-reminder>", id: "msg-1" });
    const user = new HumanMessage({ content: "Hello", id: "msg-1__user" });
    const result = coalesced(request(prompt, [remind, user]));
    expect(result.systemMessage!.content).toBe("You are DeerFlow.\n\n<system-reminder>date</system-reminder>");
    expect(result.messages).toEqual([user]);
    expect(result.messages[0]).toBe(user);
  });

  it("non-reminder system messages are all kept", () => {
    const result = coalesced(
      request(new SystemMessage("prompt"), [new SystemMessage("day1"), new SystemMessage("day2"), new HumanMessage("next")]),
    );
    expect(result.systemMessage!.content).toBe("prompt\n\nday1\n\nday2");
  });

  it("without a prompt the in-list system message moves to systemMessage", () => {
    const result = coalesced(request(undefined, [new SystemMessage({ content: "reminder", id: "msg-1" }), new HumanMessage("hi")]));
    expect(result.systemMessage!.content).toBe("reminder");
    expect(result.systemMessage!.id).toBe("msg-1");
    expect(systemCount(result.messages)).toBe(0);
  });

  it("keeps the first part's id", () => {
    const result = coalesced(request(new SystemMessage({ content: "p", id: "sys-1" }), [new SystemMessage({ content: "r", id: "msg-1" })]));
    expect(result.systemMessage!.id).toBe("sys-1");
  });

  it("keeps the order of the other messages", () => {
    const messages = [
      new HumanMessage({ content: "u1", id: "u1" }),
      new AIMessage({ content: "a1", id: "a1" }),
      new SystemMessage("reminder"),
      new HumanMessage({ content: "u2", id: "u2" }),
    ];
    expect(coalesced(request(new SystemMessage("prompt"), messages)).messages.map((m) => m.id)).toEqual(["u1", "a1", "u2"]);
  });

  it("merges additional_kwargs of all parts, later parts winning, and stamps provenance", () => {
    const prompt = new SystemMessage({ content: "prompt", id: "sys-1", additional_kwargs: { source: "prompt", priority: "low" } });
    const remind = new SystemMessage({
      content: "reminder",
      id: "msg-1",
      additional_kwargs: { hide_from_ui: true, dynamic_context_reminder: true, priority: "high" },
    });
    expect(coalesced(request(prompt, [remind])).systemMessage!.additional_kwargs).toEqual({
      source: "prompt",
      priority: "high",
      hide_from_ui: true,
      dynamic_context_reminder: true,
      deerflow_content_kind: "middleware_injection",
      deerflow_producer_kind: "system_coalescing",
    });
  });

  it("flattens list content before joining", () => {
    const prompt = new SystemMessage({ content: [{ type: "text", text: "You are DeerFlow." }], id: "sys-1" });
    const result = coalesced(request(prompt, [new SystemMessage("<system-reminder>date</system-reminder>")]));
    expect(result.systemMessage!.content).toBe("You are DeerFlow.\n\n<system-reminder>date</system-reminder>");
  });

  it("keeps only the last dynamic_context_reminder", () => {
    const result = coalesced(
      request(new SystemMessage({ content: "prompt", id: "sys-prompt" }), [
        reminder("<system-reminder>day1</system-reminder>", "msg-1"),
        reminder("<system-reminder>day2</system-reminder>", "msg-2"),
        new HumanMessage("hi"),
      ]),
    );
    expect(result.systemMessage!.content).toBe("prompt\n\n<system-reminder>day2</system-reminder>");
  });

  it("never drops system messages that are not reminders", () => {
    const result = coalesced(
      request(new SystemMessage("prompt"), [new SystemMessage("custom system block"), reminder("day2", "msg-2"), new HumanMessage("hi")]),
    );
    expect(result.systemMessage!.content).toBe("prompt\n\ncustom system block\n\nday2");
  });

  it("a single reminder is kept", () => {
    const result = coalesced(request(new SystemMessage("prompt"), [reminder("date", "msg-1"), new HumanMessage("hi")]));
    expect(result.systemMessage!.content).toBe("prompt\n\ndate");
  });
});

describe("flattenContent", () => {
  it("strings, lists of strings, text blocks and other values", () => {
    expect(flattenContent("hello")).toBe("hello");
    expect(flattenContent(["line1", "line2"])).toBe("line1\nline2");
    expect(flattenContent([{ type: "text", text: "p1" }, { type: "text", text: "p2" }])).toBe("p1\np2");
    expect(flattenContent(["plain", { type: "text", text: "dict" }, 42])).toBe("plain\ndict\n42");
    expect(flattenContent(42)).toBe("42");
  });
});

describe("SystemMessageCoalescing middleware", () => {
  const middleware = createSystemMessageCoalescingMiddleware();

  it("has a stable name and declares its policy", () => {
    expect(middleware.name).toBe(SYSTEM_MESSAGE_COALESCING_NAME);
    expect(middleware.name).toBe("SystemMessageCoalescing");
    expect(middleware.releasePolicyParameters?.()).toEqual({
      strategy: "merge_leading_system_message",
      dynamic_context_reminder_dedup: "keep_last",
    });
  });

  it("passes the same request object through when there is nothing to merge", async () => {
    const req = request(new SystemMessage("prompt"), [new HumanMessage("hi")]);
    let sent: ModelRequest | undefined;
    await middleware.wrapModelCall!(req, async (r) => {
      sent = r;
      return new AIMessage("x");
    });
    expect(sent).toBe(req);
  });

  it("returns the handler's answer", async () => {
    const answer = new AIMessage("llm-response");
    const req = request(new SystemMessage("prompt"), [new SystemMessage("reminder")]);
    expect(await middleware.wrapModelCall!(req, async () => answer)).toBe(answer);
  });

  it("scenario M35: in-list system messages plus a static prompt reach the model as one system message with the prompt's id; the checkpoint is unchanged", async () => {
    const prompt = new SystemMessage({ content: "You are DeerFlow 2.0, an AI assistant...", id: "sys-prompt" });
    const history: BaseMessage[] = [
      reminder("<system-reminder>\n<current_date>2026-06-22, Monday</current_date>\n</system-reminder>", "msg-1"),
      new HumanMessage({ content: "<memory>User prefers Python.</memory>", id: "msg-1__memory" }),
      new HumanMessage({ content: "What is the capital of France?", id: "msg-1__user" }),
      new AIMessage({ content: "Paris", id: "ai-1" }),
      new SystemMessage({ content: "<durable_context>authority</durable_context>", id: "durable-1" }),
      new HumanMessage({ content: "And Spain?", id: "u2" }),
    ];
    const req = request(prompt, history);
    const stateBefore = [...req.state.messages];
    const kwargsBefore = history.map((m) => ({ ...m.additional_kwargs }));
    let sent: ModelRequest | undefined;
    await middleware.wrapModelCall!(req, async (r) => {
      sent = r;
      return strictBackend(r);
    });
    const final = finalPayload(sent!);
    expect(systemCount(final)).toBe(1);
    expect(final[0]!.type).toBe("system");
    expect(final[0]!.id).toBe("sys-prompt");
    expect(final[0]!.content).toBe(
      "You are DeerFlow 2.0, an AI assistant...\n\n" +
        "<system-reminder>\n<current_date>2026-06-22, Monday</current_date>\n</system-reminder>\n\n" +
        "<durable_context>authority</durable_context>",
    );
    expect(final.slice(1).map((m) => m.id)).toEqual(["msg-1__memory", "msg-1__user", "ai-1", "u2"]);
    expect(req.state.messages).toEqual(stateBefore);
    expect(req.messages).toHaveLength(6);
    expect(history.map((m) => m.additional_kwargs)).toEqual(kwargsBefore);
    expect(prompt.content).toBe("You are DeerFlow 2.0, an AI assistant...");
  });

  it("midnight crossing: only the latest date survives in the single leading block", async () => {
    const req = request(new SystemMessage({ content: "system prompt", id: "sys-prompt" }), [
      reminder("<system-reminder>day1</system-reminder>", "msg-1"),
      new HumanMessage({ content: "<memory>...</memory>", id: "msg-1__memory" }),
      new HumanMessage({ content: "first question", id: "msg-1__user" }),
      new AIMessage({ content: "first answer", id: "ai-1" }),
      reminder("<system-reminder>day2</system-reminder>", "msg-2"),
      new HumanMessage({ content: "second question", id: "msg-2__user" }),
    ]);
    let sent: ModelRequest | undefined;
    await middleware.wrapModelCall!(req, async (r) => {
      sent = r;
      return strictBackend(r);
    });
    const final = finalPayload(sent!);
    expect(systemCount(final)).toBe(1);
    expect(final[0]!.content).toContain("day2");
    expect(final[0]!.content).not.toContain("day1");
    expect(final.slice(1).map((m) => m.content)).toEqual(["<memory>...</memory>", "first question", "first answer", "second question"]);
  });

  it("the strict backend rejects the raw request and accepts the coalesced one", async () => {
    const make = () =>
      request(new SystemMessage({ content: "You are DeerFlow.", id: "sys-prompt" }), [
        new SystemMessage({ content: "<system-reminder>date</system-reminder>", id: "msg-1" }),
        new HumanMessage({ content: "Hello", id: "msg-1__user" }),
      ]);
    await expect(strictBackend(make())).rejects.toThrow(StrictBackendError);
    await expect(middleware.wrapModelCall!(make(), strictBackend)).resolves.toMatchObject({ content: "ok" });
  });

  it("a system message in the middle without a prompt also ends up leading", async () => {
    const req = request(undefined, [new HumanMessage("hi"), new SystemMessage("late")]);
    await expect(strictBackend(req)).rejects.toThrow("System message must be at the beginning");
    await expect(middleware.wrapModelCall!(req, strictBackend)).resolves.toMatchObject({ content: "ok" });
  });

  it("rejects unknown config keys with a code", () => {
    expect(() => createSystemMessageCoalescingMiddleware({ strategy: "x" } as never)).toThrow(
      expect.objectContaining({ code: "invalid_middleware_config" }),
    );
  });
});

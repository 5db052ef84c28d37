import { AIMessage, HumanMessage, RemoveMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { MemorySaver } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, HookSpec, ModelRequest } from "../../../src/engine/types.ts";
import { canonicalHash } from "../../../src/extension-api/canonical.ts";
import { createLLMErrorHandlingMiddleware } from "../../../src/middlewares/llm-error-handling/llm-error-handling.ts";
import { hiddenHumanMessage } from "../../../src/middlewares/messages.ts";
import {
  TERMINAL_RESPONSE_ERROR_REASON,
  TERMINAL_RESPONSE_FALLBACK_CONTENT,
  TERMINAL_RESPONSE_FALLBACK_CONTENT_HASH,
  TERMINAL_RESPONSE_NAME,
  TERMINAL_RESPONSE_RECOVERY_NAME,
  TERMINAL_RESPONSE_RECOVERY_PROMPT,
  TERMINAL_RESPONSE_RECOVERY_PROMPT_HASH,
  createTerminalResponseMiddleware,
} from "../../../src/middlewares/terminal-response/terminal-response.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

const services = { clock: systemClock };

const lookup: AgentTool = {
  name: "lookup_status",
  description: "Return a deterministic tool result.",
  schema: { type: "object", properties: {} },
  invoke: async () => "tool completed",
};

function agentWith(model: ReturnType<typeof fakeModel>, extra: { checkpointer?: MemorySaver } = {}) {
  return createAgent({ model, tools: [lookup], middlewares: [createTerminalResponseMiddleware()], services, ...extra });
}

function emptyTerminal(messages: readonly BaseMessage[]): BaseMessage[] {
  return messages.filter((m) => AIMessage.isInstance(m) && (m.tool_calls?.length ?? 0) === 0 && String(m.content).trim() === "");
}

function isRecovery(message: BaseMessage): boolean {
  return HumanMessage.isInstance(message) && message.name === TERMINAL_RESPONSE_RECOVERY_NAME;
}

function afterModel(middleware: AgentMiddleware) {
  return (middleware.afterModel as HookSpec).hook;
}

function stateOf(messages: BaseMessage[]) {
  return { ...emptyThreadState(), messages };
}

describe("TerminalResponse", () => {
  it("scenario M52: an empty reply after a tool run is removed and the model is re-called once with a hidden recovery prompt", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "lookup_status", args: {}, id: "call-1" }])
      .respond(new AIMessage(""))
      .respond(new AIMessage("The tool completed successfully."));
    const state = await agentWith(model).invoke({ messages: [new HumanMessage("Check the status")] }, { threadId: "t1" });

    expect(model.callCount).toBe(3);
    expect(state.messages.at(-1)?.content).toBe("The tool completed successfully.");
    expect(emptyTerminal(state.messages)).toEqual([]);
    expect(state.messages.some(isRecovery)).toBe(false);

    const retried = model.calls[2]!.messages;
    const reminder = retried.at(-1)!;
    expect(isRecovery(reminder)).toBe(true);
    expect(reminder.content).toBe(TERMINAL_RESPONSE_RECOVERY_PROMPT);
    expect(reminder.additional_kwargs).toEqual({ hide_from_ui: true });
    // The empty reply was taken out of what the retry saw.
    expect(emptyTerminal(retried)).toEqual([]);
  });

  it("scenario M52: a second empty reply becomes a visible error fallback in state, under the same id", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "lookup_status", args: {}, id: "call-2" }])
      .respond(new AIMessage(""))
      .respond(new AIMessage({ content: "", id: "second-empty", response_metadata: { finish_reason: "stop" } }));
    const state = await agentWith(model).invoke({ messages: [new HumanMessage("Check the status")] }, { threadId: "t2" });

    expect(model.callCount).toBe(3);
    const final = state.messages.at(-1) as AIMessage;
    expect(final.id).toBe("second-empty");
    expect(final.content).toBe(TERMINAL_RESPONSE_FALLBACK_CONTENT);
    expect(final.additional_kwargs).toMatchObject({ deerflow_error_fallback: true, error_reason: TERMINAL_RESPONSE_ERROR_REASON });
    expect(final.response_metadata).toMatchObject({ finish_reason: "stop" });
    expect(emptyTerminal(state.messages)).toEqual([]);
    expect(state.messages.filter((m) => m.id === "second-empty")).toHaveLength(1);
  });

  it("scenario M52: the budget is one retry per run, even when the retried reply calls another tool", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "lookup_status", args: {}, id: "call-a" }])
      .respond(new AIMessage(""))
      .respond(new AIMessage({ content: "One more check.", tool_calls: [{ name: "lookup_status", args: {}, id: "call-b", type: "tool_call" }] }))
      .respond(new AIMessage(""));
    const state = await agentWith(model).invoke({ messages: [new HumanMessage("Check twice")] }, { threadId: "t3" });

    expect(model.callCount).toBe(4);
    expect((state.messages.at(-1) as AIMessage).additional_kwargs["deerflow_error_fallback"]).toBe(true);
    const prompts = model.calls.flatMap((call) => call.messages).filter(isRecovery);
    expect(prompts).toHaveLength(1);
  });

  it("scenario M52: each run gets its own budget", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "lookup_status", args: {}, id: "r1" }])
      .respond(new AIMessage(""))
      .respond(new AIMessage("first answer"))
      .respondWithTools([{ name: "lookup_status", args: {}, id: "r2" }])
      .respond(new AIMessage(""))
      .respond(new AIMessage("second answer"));
    const agent = agentWith(model, { checkpointer: new MemorySaver() });
    await agent.invoke({ messages: [new HumanMessage("one")] }, { threadId: "t4" });
    const state = await agent.invoke({ messages: [new HumanMessage("two")] }, { threadId: "t4" });
    expect(state.messages.at(-1)?.content).toBe("second answer");
    expect(model.callCount).toBe(6);
  });

  it("scenario M53: an empty reply with no tool result since the last real user message is not retried", async () => {
    const model = fakeModel().respond(new AIMessage(""));
    const state = await agentWith(model).invoke({ messages: [new HumanMessage("Hello")] }, { threadId: "t5" });
    expect(model.callCount).toBe(1);
    expect(state.messages.at(-1)?.content).toBe("");

    const hook = afterModel(createTerminalResponseMiddleware());
    const earlierTurn = [new HumanMessage("first"), new ToolMessage({ content: "done", tool_call_id: "c0" }), new AIMessage("ok"), new HumanMessage("second"), new AIMessage("")];
    expect(hook(stateOf(earlierTurn), makeRuntime())).toBeUndefined();
  });

  it("scenario M53: tool history without any real user message does not trigger recovery; a hidden clarification answer counts as the user's", () => {
    const hook = afterModel(createTerminalResponseMiddleware());
    const internal = [hiddenHumanMessage("progress_hint", "internal"), new ToolMessage({ content: "done", tool_call_id: "c8" }), new AIMessage("")];
    expect(hook(stateOf(internal), makeRuntime())).toBeUndefined();

    const answered = [
      new HumanMessage("start"),
      hiddenHumanMessage("user-input", "B", { human_input_response: { request_id: "r" } }),
      new ToolMessage({ content: "done", tool_call_id: "c9" }),
      new AIMessage({ content: "", id: "empty-9" }),
    ];
    expect(hook(stateOf(answered), makeRuntime())).toMatchObject({ jumpTo: "model" });
  });

  it("leaves replies that still want a tool to the tool path", () => {
    const hook = afterModel(createTerminalResponseMiddleware());
    const replies = [
      new AIMessage({ content: "", tool_calls: [{ id: "c", name: "lookup_status", args: {}, type: "tool_call" }] }),
      new AIMessage({ content: "", invalid_tool_calls: [{ id: "bad", name: "lookup_status", args: "{", type: "invalid_tool_call" }] }),
      new AIMessage({ content: "", additional_kwargs: { function_call: { name: "lookup_status", arguments: "{}" } } }),
      new AIMessage({ content: "", additional_kwargs: { tool_calls: [{ id: "raw", type: "function", function: { name: "x", arguments: "{}" } }] } }),
      new AIMessage({ content: "", response_metadata: { finish_reason: "function_call" } }),
      new AIMessage({ content: [{ type: "text", text: "visible" }] }),
    ];
    for (const reply of replies) {
      const messages = [new HumanMessage("go"), new ToolMessage({ content: "done", tool_call_id: "c1" }), reply];
      expect(hook(stateOf(messages), makeRuntime())).toBeUndefined();
    }
  });

  it("treats reasoning-only list content as empty", () => {
    const hook = afterModel(createTerminalResponseMiddleware());
    const reply = new AIMessage({ content: [{ type: "thinking", thinking: "hmm" }, { type: "text", text: "  " }], id: "think-1" });
    const messages = [new HumanMessage("go"), new ToolMessage({ content: "done", tool_call_id: "c1" }), reply];
    const result = hook(stateOf(messages), makeRuntime()) as { messages: RemoveMessage[]; jumpTo: string };
    expect(result.jumpTo).toBe("model");
    expect(result.messages[0]!.id).toBe("think-1");
  });

  it("afterAgent and beforeAgent reset the run's budget", async () => {
    const middleware = createTerminalResponseMiddleware();
    const hook = afterModel(middleware);
    const runtime = makeRuntime();
    const messages = [new HumanMessage("go"), new ToolMessage({ content: "done", tool_call_id: "c1" }), new AIMessage({ content: "", id: "e1" })];
    expect(hook(stateOf(messages), runtime)).toMatchObject({ jumpTo: "model" });
    expect(hook(stateOf(messages), runtime)).not.toHaveProperty("jumpTo");
    (middleware.afterAgent as (s: unknown, r: AgentRuntime) => void)(stateOf(messages), runtime);
    expect(hook(stateOf(messages), runtime)).toMatchObject({ jumpTo: "model" });
    (middleware.beforeAgent as (s: unknown, r: AgentRuntime) => void)(stateOf(messages), runtime);
    expect(hook(stateOf(messages), runtime)).toMatchObject({ jumpTo: "model" });
  });

  it("adds the recovery prompt to the next request only, once", async () => {
    const middleware = createTerminalResponseMiddleware();
    const runtime = makeRuntime();
    const messages = [new HumanMessage("go"), new ToolMessage({ content: "done", tool_call_id: "c1" }), new AIMessage({ content: "", id: "e1" })];
    afterModel(middleware)(stateOf(messages), runtime);
    const seen: BaseMessage[][] = [];
    const req: ModelRequest = { model: fakeModel(), systemMessage: undefined, messages: messages.slice(0, 2), tools: [], state: stateOf(messages), runtime };
    const handler = async (r: ModelRequest) => (seen.push([...r.messages]), new AIMessage("ok"));
    await middleware.wrapModelCall!(req, handler);
    await middleware.wrapModelCall!(req, handler);
    expect(seen[0]!.filter(isRecovery)).toHaveLength(1);
    expect(seen[1]!.filter(isRecovery)).toHaveLength(0);
    expect(req.messages).toHaveLength(2);
  });

  it("keeps the recovery prompt for a retried attempt when the provider call failed", async () => {
    const middleware = createTerminalResponseMiddleware();
    const runtime = makeRuntime();
    const messages = [new HumanMessage("go"), new ToolMessage({ content: "done", tool_call_id: "c1" }), new AIMessage({ content: "", id: "e1" })];
    afterModel(middleware)(stateOf(messages), runtime);
    const req: ModelRequest = { model: fakeModel(), systemMessage: undefined, messages: messages.slice(0, 2), tools: [], state: stateOf(messages), runtime };
    const seen: BaseMessage[][] = [];
    const failing = async (r: ModelRequest): Promise<AIMessage> => {
      seen.push([...r.messages]);
      throw new Error("503");
    };
    await expect(middleware.wrapModelCall!(req, failing)).rejects.toThrow("503");
    await middleware.wrapModelCall!(req, async (r) => (seen.push([...r.messages]), new AIMessage("ok")));
    expect(seen.map((m) => m.filter(isRecovery).length)).toEqual([1, 1]);
  });

  it("scenario M52: behind LLMErrorHandling in the chain, a retried recovery call still carries the prompt", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "lookup_status", args: {}, id: "call-r" }])
      .respond(new AIMessage(""))
      .respond(Object.assign(new Error("Service Unavailable"), { status: 503 }))
      .respond(new AIMessage("Recovered after a provider hiccup."));
    const agent = createAgent({
      model,
      tools: [lookup],
      middlewares: [createLLMErrorHandlingMiddleware({ llm_call: { retry_base_delay_ms: 0, retry_cap_delay_ms: 0 } }), createTerminalResponseMiddleware()],
      services: { clock: new ManualClock(0) },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("Check the status")] }, { threadId: "t-chain" });
    expect(state.messages.at(-1)?.content).toBe("Recovered after a provider hiccup.");
    expect(model.calls.map((call) => call.messages.filter(isRecovery).length)).toEqual([0, 0, 1, 1]);
  });

  it("declares its jump, its name and its policy, with hashes of the exact texts", async () => {
    const middleware = createTerminalResponseMiddleware();
    expect(middleware.name).toBe(TERMINAL_RESPONSE_NAME);
    expect(middleware.name).toBe("TerminalResponse");
    expect((middleware.afterModel as HookSpec).canJumpTo).toEqual(["model"]);
    expect(middleware.releasePolicyParameters?.()).toEqual({
      post_tool_empty_retry_limit: 1,
      recovery_prompt_hash: TERMINAL_RESPONSE_RECOVERY_PROMPT_HASH,
      fallback_content_hash: TERMINAL_RESPONSE_FALLBACK_CONTENT_HASH,
    });
    expect(await canonicalHash(TERMINAL_RESPONSE_RECOVERY_PROMPT)).toBe(TERMINAL_RESPONSE_RECOVERY_PROMPT_HASH);
    expect(await canonicalHash(TERMINAL_RESPONSE_FALLBACK_CONTENT)).toBe(TERMINAL_RESPONSE_FALLBACK_CONTENT_HASH);
    expect(() => createTerminalResponseMiddleware({ retries: 2 } as never)).toThrow(/^TerminalResponse\.retries: /);
  });
});

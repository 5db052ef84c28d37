import * as v from "valibot";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentState, AgentTool } from "../../../src/engine/types.ts";
import {
  TokenUsageConfigSchema,
  SUBAGENT_TOKEN_USAGE_ATTRIBUTED_KEY,
  SUBAGENT_TOKEN_USAGE_KEY,
  TOKEN_USAGE_ATTRIBUTION_KEY,
  TOKEN_USAGE_NAME,
  createTokenUsageMiddleware,
  normalizeTokenUsage,
} from "../../../src/middlewares/token-usage/token-usage.ts";
import { buildTodoActions, type TokenUsageAttribution } from "../../../src/middlewares/token-usage/attribution.ts";
import { applyStateUpdate, emptyThreadState, type Todo } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

// The section as its schema fills it in when nothing is configured.
const TOKEN_USAGE_DEFAULTS = v.parse(TokenUsageConfigSchema, {});

const middleware = createTokenUsageMiddleware();

function state(messages: BaseMessage[], todos: Todo[] | null = null): AgentState {
  return { ...emptyThreadState(), messages, todos };
}

function afterModel(s: AgentState, mw = middleware): { messages: BaseMessage[] } | undefined {
  return (mw.afterModel as (state: AgentState, runtime: unknown) => { messages: BaseMessage[] } | undefined)(s, makeRuntime());
}

function attributionOf(message: BaseMessage | undefined): TokenUsageAttribution {
  return message!.additional_kwargs[TOKEN_USAGE_ATTRIBUTION_KEY] as TokenUsageAttribution;
}

const usage = (input: number, output: number) => ({ input_tokens: input, output_tokens: output, total_tokens: input + output });

describe("TokenUsage attribution", () => {
  it("annotates a write_todos step with one action per todo that changed", () => {
    const message = new AIMessage({
      id: "ai",
      content: "",
      tool_calls: [
        {
          id: "write_todos:1",
          name: "write_todos",
          args: {
            todos: [
              { content: "Inspect streaming path", status: "completed" },
              { content: "Design token attribution schema", status: "in_progress" },
            ],
          },
        },
      ],
      usage_metadata: usage(100, 20),
    });
    const result = afterModel(
      state([message], [
        { content: "Inspect streaming path", status: "in_progress" },
        { content: "Design token attribution schema", status: "pending" },
      ]),
    );
    const attribution = attributionOf(result!.messages[0]);
    expect(attribution).toEqual({
      version: 1,
      kind: "tool_batch",
      shared_attribution: true,
      tool_call_ids: ["write_todos:1"],
      actions: [
        { kind: "todo_complete", content: "Inspect streaming path", tool_call_id: "write_todos:1" },
        { kind: "todo_start", content: "Design token attribution schema", tool_call_id: "write_todos:1" },
      ],
    });
    expect(result!.messages[0]!.id).toBe("ai");
    expect((result!.messages[0] as AIMessage).usage_metadata).toEqual(usage(100, 20));
  });

  it("annotates subagent and search steps together as a shared tool batch", () => {
    const message = new AIMessage({
      id: "ai",
      content: "",
      tool_calls: [
        { id: "task:1", name: "task", args: { description: "spec-coder patch message grouping", subagent_type: "general-purpose" } },
        { id: "web_search:1", name: "web_search", args: { query: "LangGraph useStream messages tuple" } },
      ],
    });
    expect(attributionOf(afterModel(state([message]))!.messages[0])).toMatchObject({
      kind: "tool_batch",
      shared_attribution: true,
      actions: [
        { kind: "subagent", description: "spec-coder patch message grouping", subagent_type: "general-purpose", tool_call_id: "task:1" },
        { kind: "search", tool_name: "web_search", query: "LangGraph useStream messages tuple", tool_call_id: "web_search:1" },
      ],
    });
  });

  it("a plain answer is a final_answer, an empty one is thinking, a single task is a subagent_dispatch", () => {
    expect(attributionOf(afterModel(state([new AIMessage({ id: "a", content: "Here is the answer." })]))!.messages[0])).toEqual({
      version: 1,
      kind: "final_answer",
      shared_attribution: false,
      tool_call_ids: [],
      actions: [],
    });
    expect(attributionOf(afterModel(state([new AIMessage({ id: "a", content: "" })]))!.messages[0]).kind).toBe("thinking");
    const dispatch = new AIMessage({ id: "a", content: "", tool_calls: [{ id: "t", name: "task", args: { description: "d" } }] });
    expect(attributionOf(afterModel(state([dispatch]))!.messages[0])).toMatchObject({
      kind: "subagent_dispatch",
      shared_attribution: false,
      actions: [{ kind: "subagent", description: "d", subagent_type: null, tool_call_id: "t" }],
    });
  });

  it("annotates a removed todo", () => {
    const message = new AIMessage({ id: "a", content: "", tool_calls: [{ id: "write_todos:remove", name: "write_todos", args: { todos: [] } }] });
    expect(attributionOf(afterModel(state([message], [{ content: "Archive obsolete plan", status: "pending" }]))!.messages[0])).toMatchObject({
      kind: "todo_update",
      shared_attribution: false,
      actions: [{ kind: "todo_remove", content: "Archive obsolete plan", tool_call_id: "write_todos:remove" }],
    });
  });

  it("labels other tools, clarification and present_files", () => {
    const message = new AIMessage({
      id: "a",
      content: "",
      tool_calls: [
        { id: "1", name: "bash", args: { description: "list files", command: "ls" } },
        { id: "2", name: "ask_clarification", args: {} },
        { id: "3", name: "present_files", args: {} },
      ],
    });
    expect(attributionOf(afterModel(state([message]))!.messages[0]).actions).toEqual([
      { kind: "tool", tool_name: "bash", description: "list files", tool_call_id: "1" },
      { kind: "clarification", tool_call_id: "2" },
      { kind: "present_files", tool_call_id: "3" },
    ]);
  });

  it("a duplicate todo content does not swallow an unrelated removed item", () => {
    const actions = buildTodoActions(
      [
        { content: "A", status: "pending" },
        { content: "B", status: "pending" },
      ],
      [
        { content: "A", status: "in_progress" },
        { content: "A", status: "completed" },
      ],
    );
    expect(actions).toContainEqual({ kind: "todo_remove", content: "B" });
  });

  it("an unchanged attribution is not written again", () => {
    const message = new AIMessage({ id: "a", content: "done" });
    const first = afterModel(state([message]))!.messages;
    expect(afterModel(state(first))).toBeUndefined();
  });
});

describe("subagent usage", () => {
  function taskResult(id: string, callId: string, subagentUsage: unknown, extra: Record<string, unknown> = {}): ToolMessage {
    return new ToolMessage({ id, content: "task result", tool_call_id: callId, additional_kwargs: { [SUBAGENT_TOKEN_USAGE_KEY]: subagentUsage, ...extra } });
  }

  it("merges into the dispatching AI message by position, even when several task calls share it", () => {
    const first = new AIMessage({ id: "d1", content: "", tool_calls: [{ id: "task:first", name: "task", args: {} }] });
    const second = new AIMessage({
      id: "d2",
      content: "",
      tool_calls: [
        { id: "task:second-a", name: "task", args: {} },
        { id: "task:second-b", name: "task", args: {} },
      ],
    });
    const messages = [
      new HumanMessage({ id: "u", content: "go" }),
      first,
      new ToolMessage({ id: "t1", content: "first", tool_call_id: "task:first" }),
      second,
      taskResult("t2a", "task:second-a", usage(10, 5)),
      taskResult("t2b", "task:second-b", usage(20, 7)),
      new AIMessage({ id: "final", content: "done" }),
    ];
    const result = afterModel(state(messages))!.messages;
    const updatedDispatch = result.filter((m) => m.id === "d2");
    expect(updatedDispatch).toHaveLength(1);
    expect((updatedDispatch[0] as AIMessage).tool_calls).toEqual(second.tool_calls);
    expect((updatedDispatch[0] as AIMessage).usage_metadata).toEqual(usage(30, 12));
    expect(result.map((m) => m.id)).toEqual(["d2", "t2a", "t2b", "final"]);
    expect(result.filter((m) => m.type === "tool").every((m) => m.additional_kwargs[SUBAGENT_TOKEN_USAGE_ATTRIBUTED_KEY] === true)).toBe(true);
  });

  it("adds to the dispatch's own usage and keeps its token details", () => {
    const dispatch = new AIMessage({
      id: "d",
      content: "",
      tool_calls: [{ id: "c", name: "task", args: {} }],
      usage_metadata: { ...usage(100, 10), input_token_details: { cache_read: 40 } },
    });
    const result = afterModel(state([new HumanMessage({ id: "u", content: "go" }), dispatch, taskResult("t", "c", usage(1, 2)), new AIMessage({ id: "f", content: "ok" })]))!;
    expect((result.messages[0] as AIMessage).usage_metadata).toEqual({ ...usage(101, 12), input_token_details: { cache_read: 40 } });
  });

  it("only this turn's results count; a reused provider tool-call id in an earlier turn attracts nothing", () => {
    const dispatch = (id: string) => new AIMessage({ id, content: "", tool_calls: [{ id: "reused", name: "task", args: {} }] });
    const messages = [
      new HumanMessage({ id: "u1", content: "first" }),
      dispatch("old"),
      taskResult("t-old", "reused", usage(90, 8)),
      new AIMessage({ id: "a1", content: "done" }),
      new HumanMessage({ id: "u2", content: "second" }),
      dispatch("new"),
      taskResult("t-new", "reused", usage(10, 2)),
      new AIMessage({ id: "a2", content: "done" }),
    ];
    const result = afterModel(state(messages))!.messages;
    expect(result.find((m) => m.id === "new")).toMatchObject({ usage_metadata: usage(10, 2) });
    expect(result.map((m) => m.id)).toEqual(["new", "t-new", "a2"]);
  });

  it.each([
    ["missing", undefined],
    ["negative", { input_tokens: -1, output_tokens: 1, total_tokens: 0 }],
    ["boolean", { input_tokens: true, output_tokens: 1, total_tokens: 2 }],
    ["fractional", { input_tokens: 1.5, output_tokens: 1, total_tokens: 2 }],
    ["partial", { input_tokens: 1, output_tokens: 1 }],
  ])("%s usage stays unmarked and retryable", (_label, bad) => {
    const dispatch = new AIMessage({ id: "d", content: "", tool_calls: [{ id: "c", name: "task", args: {} }] });
    const result = afterModel(state([new HumanMessage({ id: "u", content: "go" }), dispatch, taskResult("t", "c", bad), new AIMessage({ id: "f", content: "ok" })]))!;
    expect(result.messages.map((m) => m.id)).toEqual(["f"]);
    expect(normalizeTokenUsage(bad)).toBeNull();
  });

  it("usage with no matching dispatch stays unmarked", () => {
    const result = afterModel(state([new HumanMessage({ id: "u", content: "go" }), taskResult("t", "nobody", usage(1, 1)), new AIMessage({ id: "f", content: "ok" })]))!;
    expect(result.messages.map((m) => m.id)).toEqual(["f"]);
  });

  it("reprocessing the updated state adds nothing a second time", () => {
    const messages = [
      new HumanMessage({ id: "u", content: "go" }),
      new AIMessage({ id: "d", content: "", tool_calls: [{ id: "c", name: "task", args: {} }] }),
      taskResult("t", "c", usage(10, 2)),
      new AIMessage({ id: "f", content: "done" }),
    ];
    const first = afterModel(state(messages))!;
    const checkpoint = applyStateUpdate(state(messages), { messages: first.messages });
    expect((checkpoint.messages.find((m) => m.id === "d") as AIMessage).usage_metadata).toEqual(usage(10, 2));
    expect(afterModel(checkpoint)).toBeUndefined();
  });
});

describe("scenario M43: two task calls through the real engine", () => {
  const task: AgentTool = {
    name: "task",
    description: "delegate",
    schema: { type: "object", properties: { description: { type: "string" } } },
    invoke: async (args, context) =>
      new ToolMessage({
        content: `done: ${String(args["description"])}`,
        tool_call_id: context.toolCall.id ?? "",
        additional_kwargs: { [SUBAGENT_TOKEN_USAGE_KEY]: args["description"] === "a" ? usage(10, 5) : usage(20, 7) },
      }),
  };

  it("scenario M43: the dispatch is a shared tool_batch with 2 subagent actions and carries the subagent usage exactly once, even on replay", async () => {
    const model = fakeModel()
      .respondWithTools([
        { name: "task", args: { description: "a", subagent_type: "general-purpose" }, id: "call-a" },
        { name: "task", args: { description: "b", subagent_type: "general-purpose" }, id: "call-b" },
      ])
      .respond(new AIMessage("both done"));
    const agent = createAgent({ model, tools: [task], middlewares: [createTokenUsageMiddleware()], services: { clock: systemClock } });
    const result = await agent.invoke({ messages: [new HumanMessage("do a and b")] }, { threadId: "t43" });

    const dispatch = result.messages.find((m) => AIMessage.isInstance(m) && (m.tool_calls?.length ?? 0) > 0) as AIMessage;
    expect(attributionOf(dispatch)).toMatchObject({ version: 1, kind: "tool_batch", shared_attribution: true, tool_call_ids: ["call-a", "call-b"] });
    expect(attributionOf(dispatch).actions.filter((a) => a.kind === "subagent")).toHaveLength(2);
    expect(dispatch.usage_metadata).toMatchObject(usage(30, 12));
    const results = result.messages.filter((m) => ToolMessage.isInstance(m));
    expect(results.every((m) => m.additional_kwargs[SUBAGENT_TOKEN_USAGE_ATTRIBUTED_KEY] === true)).toBe(true);
    expect(attributionOf(result.messages.at(-1)).kind).toBe("final_answer");
    // Replaying the last step on the checkpointed state changes nothing.
    expect(afterModel(result)).toBeUndefined();
  });
});

describe("TokenUsage config", () => {
  it("is on by default, can be turned off, and declares its policy", () => {
    expect(TOKEN_USAGE_DEFAULTS).toEqual({ enabled: true });
    expect(TOKEN_USAGE_NAME).toBe("TokenUsage");
    expect(createTokenUsageMiddleware().releasePolicyParameters!()).toEqual({ enabled: true, attribution_version: 1 });
    const off = createTokenUsageMiddleware({ enabled: false });
    expect(afterModel(state([new AIMessage({ id: "a", content: "x" })]), off)).toBeUndefined();
    expect(() => createTokenUsageMiddleware({ enable: true } as never)).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
  });
});

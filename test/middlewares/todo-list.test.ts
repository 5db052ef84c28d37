import * as v from "valibot";
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { Command, isCommand } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookSpec, ModelRequest } from "../../src/engine/types.ts";
import { canonicalHash } from "../../src/extension-api/index.ts";
import {
  TodoListConfigSchema,
  DEFAULT_TODO_SYSTEM_PROMPT,
  TODO_COMPLETION_REMINDER_NAME,
  TODO_LIST_NAME,
  TODO_REMINDER_NAME,
  createTodoListMiddleware,
  hasToolCallIntentOrError,
} from "../../src/middlewares/todo-list.ts";
import { DEFAULT_WRITE_TODOS_DESCRIPTION, createWriteTodosTool, formatTodoLines } from "../../src/tools/write-todos.ts";
import { emptyThreadState, type Todo } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

// The section as its schema fills it in when nothing is configured.
const TODO_LIST_DEFAULTS = v.parse(TodoListConfigSchema, {});

const incomplete: Todo[] = [
  { content: "Step 1", status: "completed" },
  { content: "Step 2", status: "in_progress" },
  { content: "Step 3", status: "pending" },
];

function state(messages: BaseMessage[], todos: Todo[] | null = null): AgentState {
  return { ...emptyThreadState(), messages, todos };
}

function hooks(mw: AgentMiddleware) {
  const after = mw.afterModel as HookSpec;
  return {
    before: (s: AgentState, runtime: AgentRuntime = makeRuntime()) =>
      (mw.beforeModel as (s: AgentState, r: AgentRuntime) => { messages: BaseMessage[] } | undefined)(s, runtime),
    after: (s: AgentState, runtime: AgentRuntime) => after.hook(s, runtime) as { messages?: BaseMessage[]; jumpTo?: string } | undefined,
    async wrap(messages: BaseMessage[], runtime: AgentRuntime, systemMessage?: SystemMessage): Promise<ModelRequest> {
      let seen: ModelRequest | undefined;
      await mw.wrapModelCall!(
        { model: fakeModel(), systemMessage, messages, tools: [], state: state(messages), runtime },
        async (request) => {
          seen = request;
          return new AIMessage("ok");
        },
      );
      return seen!;
    },
  };
}

const finalAnswer = () => new AIMessage({ content: "all done", id: "final" });
const remindersIn = (messages: readonly BaseMessage[]) => messages.filter((m) => m.name === TODO_COMPLETION_REMINDER_NAME);

describe("write_todos", () => {
  const tool = createWriteTodosTool();
  const context = { toolCall: { id: "call-1", name: "write_todos", args: {} }, state: state([]), runtime: makeRuntime() };

  it("writes the todos channel and answers the call in one Command", async () => {
    const todos = [{ content: "Step 1", status: "pending" }];
    const output = await tool.invoke({ todos }, context);
    expect(isCommand(output)).toBe(true);
    const update = (output as Command).update as { todos: Todo[]; messages: ToolMessage[] };
    expect(update.todos).toEqual(todos);
    expect(update.messages[0]).toMatchObject({ tool_call_id: "call-1", name: "write_todos", content: `Updated todo list to ${JSON.stringify(todos)}` });
  });

  it.each([
    [{}, "got nothing"],
    [{ todos: "a, b" }, 'got "a, b"'],
    [{ todos: [{ content: "a", status: "done" }] }, 'item 1 has status "done"'],
    [{ todos: [{ content: "a", status: "pending" }, { status: "pending" }] }, "item 2 has no content"],
    [{ todos: [null] }, "item 1 is null"],
  ])("answers a malformed call %j with an error the model can act on", async (args, detail) => {
    const output = (await tool.invoke(args, context)) as ToolMessage;
    expect(ToolMessage.isInstance(output)).toBe(true);
    expect(output.status).toBe("error");
    expect(output.content).toContain("`todos` must be a list of {content, status} items");
    expect(output.content).toContain(detail);
  });
});

describe("the context-loss reminder", () => {
  const { before } = hooks(createTodoListMiddleware());

  it("nothing without todos", () => {
    expect(before(state([new HumanMessage("hi")]))).toBeUndefined();
    expect(before(state([new HumanMessage("hi")], []))).toBeUndefined();
  });

  it("nothing while the write_todos call is still in history, or once a reminder is there", () => {
    const call = new AIMessage({ content: "", tool_calls: [{ id: "tc_1", name: "write_todos", args: {} }] });
    expect(before(state([new HumanMessage("hi"), call], incomplete))).toBeUndefined();
    const earlier = new HumanMessage({ content: "reminder", name: TODO_REMINDER_NAME });
    expect(before(state([new HumanMessage("hi"), earlier], incomplete))).toBeUndefined();
  });

  it("scenario M42: todos exist but no write_todos call remains → one hidden todo_reminder listing them is added to state", () => {
    const result = before(state([new HumanMessage("hi"), new AIMessage("summarized away")], incomplete));
    expect(result!.messages).toHaveLength(1);
    const reminder = result!.messages[0]!;
    expect(HumanMessage.isInstance(reminder)).toBe(true);
    expect(reminder.name).toBe(TODO_REMINDER_NAME);
    expect(reminder.additional_kwargs["hide_from_ui"]).toBe(true);
    expect(reminder.content).toContain("- [completed] Step 1\n- [in_progress] Step 2\n- [pending] Step 3");
    expect(reminder.content).toContain("write_todos");
  });

  it("scenario M42: through the real engine the reminder reaches the model and stays in state, once", async () => {
    const model = fakeModel().respond(new AIMessage("continuing")).respond(new AIMessage("still continuing"));
    const agent = createAgent({ model, middlewares: [createTodoListMiddleware()], services: { clock: systemClock } });
    // All items completed, so the completion guard stays out of the way.
    const done = incomplete.map((todo) => ({ ...todo, status: "completed" as const }));
    const first = await agent.invoke({ messages: [new HumanMessage("go on")], todos: done }, { threadId: "t42" });
    const persisted = first.messages.filter((m) => m.name === TODO_REMINDER_NAME);
    expect(persisted).toHaveLength(1);
    expect(model.calls[0]!.messages.some((m) => m.name === TODO_REMINDER_NAME)).toBe(true);
    const second = await agent.invoke({ messages: [...first.messages, new HumanMessage("and then?")], todos: done }, { threadId: "t42b" });
    expect(second.messages.filter((m) => m.name === TODO_REMINDER_NAME)).toHaveLength(1);
  });

  it("formats missing fields with defaults", () => {
    expect(formatTodoLines([{ content: "Task" }, { status: "completed" }])).toBe("- [pending] Task\n- [completed] ");
  });
});

describe("tool-call intent", () => {
  it.each([
    ["a plain final answer", new AIMessage("done"), false],
    ["structured tool calls", new AIMessage({ content: "", tool_calls: [{ id: "1", name: "bash", args: {} }] }), true],
    ["invalid tool calls", new AIMessage({ content: "", invalid_tool_calls: [{ id: "1", name: "bash", args: "{", error: "bad json" }] }), true],
    ["raw provider tool calls", new AIMessage({ content: "", additional_kwargs: { tool_calls: [{ id: "1", type: "function", function: { name: "bash", arguments: "{}" } }] } }), true],
    ["a legacy function_call", new AIMessage({ content: "", additional_kwargs: { function_call: { name: "f", arguments: "{}" } } }), true],
    ["a tool finish reason", new AIMessage({ content: "", response_metadata: { finish_reason: "tool_calls" } }), true],
  ])("%s → %s", (_label, message, expected) => {
    expect(hasToolCallIntentOrError(message)).toBe(expected);
  });
});

describe("the completion guard", () => {
  it("stays out of the way while tools are called, without todos, or with every item completed", () => {
    const { after } = hooks(createTodoListMiddleware());
    const runtime = makeRuntime();
    const calling = new AIMessage({ content: "", tool_calls: [{ id: "1", name: "bash", args: {} }] });
    expect(after(state([calling], incomplete), runtime)).toBeUndefined();
    expect(after(state([finalAnswer()]), runtime)).toBeUndefined();
    expect(after(state([finalAnswer()], incomplete.map((t) => ({ ...t, status: "completed" as const }))), runtime)).toBeUndefined();
    expect(after(state([], incomplete), runtime)).toBeUndefined();
  });

  it("sends the model back with a request-only reminder listing the open items, and the system prompt on every request", async () => {
    const { after, wrap } = hooks(createTodoListMiddleware());
    const runtime = makeRuntime();
    const messages = [new HumanMessage("hi"), finalAnswer()];
    expect(after(state(messages, incomplete), runtime)).toEqual({ jumpTo: "model" });

    const sent = await wrap(messages, runtime, new SystemMessage({ content: "You are DeerFlow.", id: "system-prompt" }));
    expect(sent.systemMessage!.id).toBe("system-prompt");
    expect(String(sent.systemMessage!.content)).toBe(`You are DeerFlow.\n\n${DEFAULT_TODO_SYSTEM_PROMPT}`);
    const reminder = sent.messages.at(-1)!;
    expect(reminder.name).toBe(TODO_COMPLETION_REMINDER_NAME);
    expect(reminder.additional_kwargs["hide_from_ui"]).toBe(true);
    expect(reminder.content).not.toContain("Step 1");
    expect(reminder.content).toContain("- [in_progress] Step 2\n- [pending] Step 3");
    expect(sent.messages.slice(0, -1)).toEqual(messages);
  });

  it("without a pending reminder only the system prompt is added", async () => {
    const { wrap } = hooks(createTodoListMiddleware());
    const sent = await wrap([new HumanMessage("hi")], makeRuntime());
    expect(String(sent.systemMessage!.content)).toContain("write_todos");
    expect(sent.messages).toEqual([new HumanMessage("hi")]);
  });

  it("a retried call keeps the reminder; the next response clears it", async () => {
    const { after, wrap } = hooks(createTodoListMiddleware());
    const runtime = makeRuntime();
    after(state([finalAnswer()], incomplete), runtime);
    expect(remindersIn((await wrap([finalAnswer()], runtime)).messages)).toHaveLength(1);
    expect(remindersIn((await wrap([finalAnswer()], runtime)).messages)).toHaveLength(1);
    after(state([new AIMessage({ content: "", tool_calls: [{ id: "1", name: "bash", args: {} }] })], incomplete), runtime);
    expect(remindersIn((await wrap([finalAnswer()], runtime)).messages)).toHaveLength(0);
  });

  it("lets the model finish after two reminders in a run; a new run starts over", () => {
    const { after } = hooks(createTodoListMiddleware());
    const s = state([finalAnswer()], incomplete);
    const run = makeRuntime({ runId: "run-1" });
    expect(after(s, run)).toEqual({ jumpTo: "model" });
    expect(after(s, run)).toEqual({ jumpTo: "model" });
    expect(after(s, run)).toBeUndefined();
    expect(after(s, makeRuntime({ runId: "run-2" }))).toEqual({ jumpTo: "model" });
  });

  it("refuses parallel write_todos calls with error results and asks the model again", () => {
    const { after } = hooks(createTodoListMiddleware());
    const parallel = new AIMessage({
      content: "",
      tool_calls: [
        { id: "w1", name: "write_todos", args: { todos: [] } },
        { id: "w2", name: "write_todos", args: { todos: [] } },
      ],
    });
    const result = after(state([new HumanMessage("hi"), parallel]), makeRuntime())!;
    expect(result.jumpTo).toBe("model");
    expect(result.messages!.map((m) => [(m as ToolMessage).tool_call_id, (m as ToolMessage).status])).toEqual([
      ["w1", "error"],
      ["w2", "error"],
    ]);
    expect(String(result.messages![0]!.content)).toContain("more than once");

    const withOther = new AIMessage({ content: "", tool_calls: [...parallel.tool_calls!, { id: "b1", name: "bash", args: {} }] });
    const mixed = after(state([new HumanMessage("hi"), withOther]), makeRuntime())!;
    expect(mixed.jumpTo).toBeUndefined();
    expect(mixed.messages).toHaveLength(2);
  });
});

describe("scenario M41: the completion guard through the real engine", () => {
  it("scenario M41: a plain final answer with [a:completed, b:pending] is sent back with a hidden reminder listing - [pending] b, at most twice, never persisted", async () => {
    const model = fakeModel()
      .respondWithTools([
        {
          name: "write_todos",
          id: "todos-1",
          args: {
            todos: [
              { content: "a", status: "completed" },
              { content: "b", status: "pending" },
            ],
          },
        },
      ])
      .respond(new AIMessage("premature final 1"))
      .respond(new AIMessage("premature final 2"))
      .respond(new AIMessage("premature final 3"));
    const agent = createAgent({
      model,
      systemPrompt: "You are DeerFlow.",
      middlewares: [createTodoListMiddleware()],
      services: { clock: systemClock },
    });
    const result = await agent.invoke({ messages: [new HumanMessage("finish all todos")] }, { threadId: "t41" });

    expect(model.callCount).toBe(4);
    const reminders = model.calls.map((call) => remindersIn(call.messages));
    expect(reminders.map((r) => r.length)).toEqual([0, 0, 1, 1]);
    expect(reminders[2]![0]!.content).toContain("- [pending] b");
    expect(reminders[2]![0]!.content).not.toContain("- [completed] a");
    expect(remindersIn(result.messages)).toEqual([]);
    expect(result.messages.at(-1)!.content).toBe("premature final 3");
    expect(result.todos).toEqual([
      { content: "a", status: "completed" },
      { content: "b", status: "pending" },
    ]);
    // The write_todos prompt rides on the system message of every request.
    expect(model.calls.every((call) => String(call.messages[0]!.content).includes("<todo_list_system>"))).toBe(true);
    expect(agent.tools.map((tool) => tool.name)).toContain("write_todos");
  });
});

describe("TodoList identity and policy", () => {
  it("is named Todo and declares hashes of its prompt and tool description", async () => {
    expect(TODO_LIST_NAME).toBe("Todo");
    expect(TODO_LIST_DEFAULTS.tool_description).toBe(DEFAULT_WRITE_TODOS_DESCRIPTION);
    expect(createTodoListMiddleware().releasePolicyParameters!()).toEqual({
      system_prompt_hash: await canonicalHash(DEFAULT_TODO_SYSTEM_PROMPT),
      tool_description_hash: await canonicalHash(DEFAULT_WRITE_TODOS_DESCRIPTION),
      state_channel: "todos",
    });
    const custom = createTodoListMiddleware({ system_prompt: "Plan with todos — ünïcode." });
    expect(custom.releasePolicyParameters!()["system_prompt_hash"]).toBe(await canonicalHash("Plan with todos — ünïcode."));
    expect(custom.tools![0]!.description).toBe(DEFAULT_WRITE_TODOS_DESCRIPTION);
  });

  it("rejects unknown or empty settings", () => {
    expect(() => createTodoListMiddleware({ system_promt: "x" } as never)).toThrow(expect.objectContaining({ message: expect.stringContaining("Todo.system_promt") }));
    expect(() => createTodoListMiddleware({ tool_description: "" })).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
  });
});

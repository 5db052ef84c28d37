import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command, isCommand, messagesStateReducer } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, HookResult, NodeHook, ToolCallRequest, ToolResult } from "../../../src/engine/types.ts";
import { canonicalHash } from "../../../src/extension-api/index.ts";
import {
  ASK_CLARIFICATION_TOOL_NAME,
  CLARIFICATION_DISABLED_TEXT,
  CLARIFICATION_NAME,
  UNREADABLE_QUESTION_TEXT,
  createClarificationMiddleware,
  pruneForClarification,
  type HumanInputRequest,
} from "../../../src/middlewares/clarification/clarification.ts";
import { TOOL_META_KEY } from "../../../src/middlewares/tool-result-meta.ts";
import { createToolErrorHandlingMiddleware } from "../../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import { createAskClarificationTool } from "../../../src/tools/ask-clarification.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

type Dict = Record<string, unknown>;

const middleware = createClarificationMiddleware();

function request(toolCall: Partial<ToolCall> & { name: string }, runtime: AgentRuntime = makeRuntime()): ToolCallRequest {
  return {
    toolCall: { args: {}, type: "tool_call", ...toolCall } as ToolCall,
    tool: undefined,
    state: emptyThreadState(),
    runtime,
  };
}

const neverCalled = async (): Promise<ToolResult> => {
  throw new Error("handler should not be called");
};

async function intercept(req: ToolCallRequest): Promise<ToolResult> {
  return middleware.wrapToolCall!(req, neverCalled);
}

function commandMessage(result: ToolResult): ToolMessage {
  expect(isCommand(result)).toBe(true);
  const update = (result as Command).update as { messages: ToolMessage[] };
  expect(update.messages).toHaveLength(1);
  return update.messages[0]!;
}

function humanInput(message: ToolMessage): HumanInputRequest {
  return (message.artifact as { human_input: HumanInputRequest }).human_input;
}

function afterModel(state: BaseMessage[], runtime: AgentRuntime = makeRuntime()): HookResult {
  const hook = middleware.afterModel;
  const fn = (typeof hook === "function" ? hook : hook?.hook) as NodeHook;
  return fn({ ...emptyThreadState(), messages: state }, runtime) as HookResult;
}

function call(name: string, id: string, args: Dict = {}): ToolCall {
  return { name, id, args, type: "tool_call" };
}

const ask = (id = "c1", args: Dict = { question: "Which env?", clarification_type: "approach_choice", options: ["dev", "prod"] }) =>
  call(ASK_CLARIFICATION_TOOL_NAME, id, args);

/** A tool that records its calls, so a test can show it never ran. */
function recordingTool(name: string, log: string[]): AgentTool {
  return {
    name,
    description: `records ${name}`,
    schema: { type: "object", properties: {} },
    invoke: async (_args, context) => {
      log.push(`${name}:${context.toolCall.id}`);
      return `${name} ran`;
    },
  };
}

describe("Clarification: identity and config", () => {
  it("has the stable name, contributes the ask_clarification tool and rejects unknown config keys", () => {
    expect(middleware.name).toBe("Clarification");
    expect(CLARIFICATION_NAME).toBe("Clarification");
    expect(middleware.tools?.map((t) => t.name)).toEqual(["ask_clarification"]);
    expect(createClarificationMiddleware({}, { includeTool: false }).tools).toBeUndefined();
    expect(() => createClarificationMiddleware({ enabled: true } as never)).toThrow(
      expect.objectContaining({ code: "invalid_middleware_config", message: expect.stringContaining("Clarification") }),
    );
  });

  it("declares its behaviour, with its texts as canonical hashes, never embedded", async () => {
    const declared = middleware.releasePolicyParameters!();
    expect(declared).toEqual({
      tool: "ask_clarification",
      tool_contributed: true,
      ends_run: true,
      sibling_tool_calls: "drop",
      malformed_call: "promote_with_salvaged_args",
      disable_context_key: "disable_clarification",
      disabled_message_hash: await canonicalHash(CLARIFICATION_DISABLED_TEXT),
      unreadable_question_hash: await canonicalHash(UNREADABLE_QUESTION_TEXT),
      payload_versions: { free_text: 1, choice_with_other: 1, form: 2 },
      form_limits: { max_fields: 16, max_field_options: 24, max_field_text_chars: 200, max_serialized_bytes: 16384 },
    });
    expect(JSON.stringify(declared)).not.toContain("human is not present");
    expect(JSON.stringify(declared)).not.toContain("could not be read");
    expect(createClarificationMiddleware({}, { includeTool: false }).releasePolicyParameters!()["tool_contributed"]).toBe(false);
  });
});

describe("Clarification: the ask_clarification tool schema", () => {
  const tool = createAskClarificationTool();
  const properties = tool.schema["properties"] as Record<string, Dict>;

  it("exposes fields (request side only) and no top-level multi_select mode", () => {
    expect(Object.keys(properties).sort()).toEqual(["clarification_type", "context", "fields", "options", "question"]);
    expect(properties).not.toHaveProperty("multi_select");
    expect(tool.schema["required"]).toEqual(["question", "clarification_type"]);
  });

  it("types the field items instead of leaving them opaque", () => {
    const items = properties["fields"]!["items"] as Dict;
    expect(items["required"]).toEqual(["name"]);
    expect(Object.keys(items["properties"] as Dict).sort()).toEqual(["label", "name", "options", "placeholder", "required", "type"]);
    expect(((items["properties"] as Record<string, Dict>)["type"]!)["enum"]).toEqual([
      "text",
      "textarea",
      "number",
      "select",
      "multi_select",
      "checkbox",
      "date",
    ]);
  });
});

describe("Clarification: wrapToolCall", () => {
  it("scenario M56: the tool body never runs; the card is a ToolMessage clarification:<call_id> listing 1. A and 2. B with a v1 choice_with_other artifact", async () => {
    const result = await intercept(
      request({ name: "ask_clarification", id: "call-1", args: { question: "Which one?", clarification_type: "approach_choice", options: ["A", " A ", "", "B"] } }),
    );
    expect(isCommand(result)).toBe(true);
    expect((result as Command).goto).toEqual(["__end__"]);
    const message = commandMessage(result);
    expect(message.id).toBe("clarification:call-1");
    expect(message.tool_call_id).toBe("call-1");
    expect(message.name).toBe("ask_clarification");
    expect(message.content).toBe("🔀 Which one?\n\n  1. A\n  2. B");
    expect(humanInput(message)).toEqual({
      version: 1,
      kind: "human_input_request",
      source: "ask_clarification",
      request_id: "clarification:call-1",
      tool_call_id: "call-1",
      clarification_type: "approach_choice",
      question: "Which one?",
      input_mode: "choice_with_other",
      options: [
        { id: "option-1", label: "A", value: "A" },
        { id: "option-2", label: "B", value: "B" },
      ],
    });
  });

  it("scenario M57: fields give a version-2 form card whose text lists the fields", async () => {
    const message = commandMessage(
      await intercept(
        request({
          name: "ask_clarification",
          id: "call-2",
          args: { question: "Expense details?", clarification_type: "missing_info", fields: [{ name: "amount", type: "number", required: true }] },
        }),
      ),
    );
    expect(humanInput(message)).toMatchObject({ version: 2, input_mode: "form", fields: [{ name: "amount", label: "amount", type: "number", required: true }] });
    expect(message.content).toContain("1. amount (required)");
  });

  it("scenario M57: a __proto__ field downgrades the card to v1 with the options kept", async () => {
    const message = commandMessage(
      await intercept(
        request({
          name: "ask_clarification",
          id: "call-3",
          args: { question: "q?", fields: [{ name: "amount" }, { name: "__proto__" }], options: ["dev", "prod"] },
        }),
      ),
    );
    expect(humanInput(message)).toMatchObject({ version: 1, input_mode: "choice_with_other" });
    expect(humanInput(message)).not.toHaveProperty("fields");
    expect(message.content).toContain("1. dev");
  });

  it("survives unhashable types from the model (clarification_type: [], field type: [])", async () => {
    const message = commandMessage(
      await intercept(request({ name: "ask_clarification", id: "c", args: { question: "q?", clarification_type: [], fields: [{ name: "amount", type: [] }] } })),
    );
    expect(humanInput(message).input_mode).toBe("form");
    expect(humanInput(message).fields?.[0]?.type).toBe("text");
  });

  it("gives a retried call the same message id, so the card replaces itself instead of being added twice", async () => {
    const req = request({ name: "ask_clarification", id: "call-clarify-1", args: { question: "Which environment?", clarification_type: "approach_choice", options: ["dev", "prod"] } });
    const first = commandMessage(await intercept(req));
    const second = commandMessage(await intercept(req));
    expect(first.id).toBe("clarification:call-clarify-1");
    expect(second.id).toBe(first.id);
    expect(humanInput(first).request_id).toBe("clarification:call-clarify-1");
    const merged = messagesStateReducer(messagesStateReducer([], [first]), [second]);
    expect(merged).toHaveLength(1);
    expect((merged[0] as ToolMessage).artifact).toEqual(first.artifact);
  });

  it("derives a stable id from the text when the call has no id", async () => {
    const req = request({ name: "ask_clarification", args: { question: "Which environment?", clarification_type: "missing_info" } });
    delete (req.toolCall as { id?: string }).id;
    const first = commandMessage(await intercept(req));
    const second = commandMessage(await intercept(req));
    expect(first.id).toMatch(/^clarification:[0-9a-f]{16}$/);
    expect(second.id).toBe(first.id);
    expect(messagesStateReducer(messagesStateReducer([], [first]), [second])).toHaveLength(1);
  });

  it("keeps the card in the serialised message (checkpoints and the wire carry the artifact)", async () => {
    const message = commandMessage(await intercept(request({ name: "ask_clarification", id: "c1", args: { question: "Which?", options: ["dev", "prod"] } })));
    const serialised = JSON.parse(JSON.stringify(message)) as { kwargs: { artifact: { human_input: HumanInputRequest }; content: string } };
    expect(serialised.kwargs.artifact.human_input.options?.map((o) => o.label)).toEqual(["dev", "prod"]);
    expect(serialised.kwargs.content).toContain("Which?");
  });

  it("passes every other tool call to the handler, even with clarification disabled", async () => {
    const req = request({ name: "bash", id: "b1", args: { command: "echo hi" } }, makeRuntime({ context: { disable_clarification: true } }));
    const sentinel = new ToolMessage({ content: "ran", tool_call_id: "b1" });
    expect(await middleware.wrapToolCall!(req, async () => sentinel)).toBe(sentinel);
  });

  it("scenario M57: with disable_clarification a plain 'proceed' ToolMessage comes back, not a Command", async () => {
    const result = await intercept(
      request({ name: "ask_clarification", id: "call-clarify-1", args: { question: "Should I create the issue?", clarification_type: "suggestion" } }, makeRuntime({ context: { disable_clarification: true } })),
    );
    expect(isCommand(result)).toBe(false);
    const message = result as ToolMessage;
    expect(ToolMessage.isInstance(message)).toBe(true);
    expect(message.tool_call_id).toBe("call-clarify-1");
    expect(message.id).toBe("clarification:call-clarify-1");
    expect(message.artifact).toBeUndefined();
    expect(String(message.content).toLowerCase()).toContain("disabled");
    expect(String(message.content).toLowerCase()).toContain("proceed");
  });

  it("only an explicit yes disables it: false, 'false', 0 and a missing context still end the run", async () => {
    for (const value of [false, "false", 0, "", null]) {
      const result = await intercept(request({ name: "ask_clarification", id: "c", args: { question: "q?" } }, makeRuntime({ context: { disable_clarification: value } })));
      expect(isCommand(result), String(value)).toBe(true);
    }
    for (const value of [true, "true", "1", 1]) {
      const result = await intercept(request({ name: "ask_clarification", id: "c", args: { question: "q?" } }, makeRuntime({ context: { disable_clarification: value } })));
      expect(isCommand(result), String(value)).toBe(false);
    }
  });
});

describe("Clarification: afterModel drops same-turn siblings", () => {
  it("keeps only the ask_clarification call, in structured calls, raw payload and content blocks", () => {
    const ai = new AIMessage({
      id: "ai-1",
      content: [
        { type: "text", text: "Let me check." },
        { type: "tool_use", id: "b1", name: "bash", input: {} },
        { type: "tool_use", id: "c1", name: "ask_clarification", input: {} },
      ],
      tool_calls: [call("bash", "b1", { command: "rm -rf build" }), ask("c1"), call("web_search", "w1")],
      invalid_tool_calls: [{ type: "invalid_tool_call", id: "x1", name: "write_file", args: "{bad", error: "bad json" }],
      additional_kwargs: {
        tool_calls: [
          { id: "b1", type: "function", function: { name: "bash", arguments: "{}" } },
          { id: "c1", type: "function", function: { name: "ask_clarification", arguments: "{}" } },
          { id: "w1", type: "function", function: { name: "web_search", arguments: "{}" } },
        ],
        custom: "kept",
      },
      response_metadata: { finish_reason: "tool_calls" },
    });
    const update = afterModel([new HumanMessage("go"), ai]) as { messages: AIMessage[] };
    const pruned = update.messages[0]!;
    expect(pruned.id).toBe("ai-1");
    expect(pruned.tool_calls?.map((c) => c.id)).toEqual(["c1"]);
    expect(pruned.invalid_tool_calls).toEqual([]);
    expect((pruned.additional_kwargs["tool_calls"] as Dict[]).map((c) => c["id"])).toEqual(["c1"]);
    expect(pruned.additional_kwargs["custom"]).toBe("kept");
    expect((pruned.content as Dict[]).map((b) => b["id"] ?? b["type"])).toEqual(["text", "c1"]);
    expect(pruned.response_metadata).toEqual({ finish_reason: "tool_calls" });
    // Replaced in place by id, not appended.
    const merged = messagesStateReducer([new HumanMessage({ content: "go", id: "h" }), ai], update.messages);
    expect(merged).toHaveLength(2);
    expect((merged[1] as AIMessage).tool_calls).toHaveLength(1);
  });

  it("keeps only the first of two ask_clarification calls: one card at a time", () => {
    const pruned = pruneForClarification(new AIMessage({ id: "a", content: "", tool_calls: [ask("c1"), ask("c2")] }));
    expect(pruned?.tool_calls?.map((c) => c.id)).toEqual(["c1"]);
  });

  it("changes nothing when ask_clarification is alone, absent, or the last message is not the model's", () => {
    expect(afterModel([new AIMessage({ id: "a", content: "", tool_calls: [ask("c1")] })])).toBeUndefined();
    expect(afterModel([new AIMessage({ id: "a", content: "", tool_calls: [call("bash", "b1"), call("ls", "l1")] })])).toBeUndefined();
    expect(afterModel([new AIMessage({ id: "a", content: "", tool_calls: [ask("c1")] }), new ToolMessage({ content: "x", tool_call_id: "c1" })])).toBeUndefined();
    expect(afterModel([])).toBeUndefined();
  });

  it("keeps the siblings when clarification is disabled", () => {
    const ai = new AIMessage({ id: "a", content: "", tool_calls: [ask("c1"), call("bash", "b1")] });
    expect(afterModel([ai], makeRuntime({ context: { disable_clarification: true } }))).toBeUndefined();
  });

  it("treats a malformed ask_clarification on invalid_tool_calls as the same stop: promoted with its question, siblings dropped", () => {
    const ai = new AIMessage({
      id: "a",
      content: "",
      tool_calls: [call("bash", "b1")],
      invalid_tool_calls: [
        { type: "invalid_tool_call", id: "c9", name: "ask_clarification", args: '{"question": "Which \\"env\\"?", "options": ["dev", "pr', error: "truncated" },
      ],
      additional_kwargs: {
        tool_calls: [
          { id: "b1", type: "function", function: { name: "bash", arguments: "{}" } },
          { id: "c9", type: "function", function: { name: "ask_clarification", arguments: '{"question": "Which \\"env\\"?", "options": ["dev", "pr' } },
        ],
      },
    });
    const pruned = pruneForClarification(ai)!;
    expect(pruned.tool_calls).toEqual([
      { type: "tool_call", id: "c9", name: "ask_clarification", args: { question: 'Which "env"?', clarification_type: "missing_info" } },
    ]);
    expect(pruned.invalid_tool_calls).toEqual([]);
    const raw = pruned.additional_kwargs["tool_calls"] as Array<{ id: string; function: { arguments: string } }>;
    expect(raw.map((c) => c.id)).toEqual(["c9"]);
    expect(JSON.parse(raw[0]!.function.arguments)).toEqual({ question: 'Which "env"?', clarification_type: "missing_info" });
  });

  it("promotes a malformed call whose text still parses, and one with nothing readable under a generic question", () => {
    const parsable = pruneForClarification(
      new AIMessage({ id: "a", content: "", invalid_tool_calls: [{ type: "invalid_tool_call", id: "c1", name: "ask_clarification", args: '{"question": "Sure?", "clarification_type": "risk_confirmation"}' }] }),
    );
    expect(parsable?.tool_calls?.[0]?.args).toEqual({ question: "Sure?", clarification_type: "risk_confirmation" });
    const garbage = pruneForClarification(
      new AIMessage({ id: "a", content: "", invalid_tool_calls: [{ type: "invalid_tool_call", id: undefined, name: "ask_clarification", args: "<<<", error: "x" }] }),
    );
    expect(garbage?.tool_calls?.[0]).toMatchObject({ id: "a:ask_clarification", args: { question: UNREADABLE_QUESTION_TEXT } });
  });
});

describe("Clarification through the real engine", () => {
  const services = { clock: systemClock };

  it("scenario M56: the run ends with the card, the tool body and the sibling never run, afterAgent still runs", async () => {
    const log: string[] = [];
    const askTool: AgentTool = { ...createAskClarificationTool(), invoke: async () => (log.push("ask body"), "never") };
    const model = fakeModel()
      .respondWithTools([
        { name: "bash", args: { command: "rm -rf build" }, id: "b1" },
        { name: "ask_clarification", args: { question: "Which one?", clarification_type: "approach_choice", options: ["A", " A ", "", "B"] }, id: "call-1" },
      ])
      .respond(new AIMessage("unreached"));
    const agent = createAgent({
      model,
      tools: [askTool, recordingTool("bash", log)],
      middlewares: [
        { name: "Finaliser", afterAgent: () => void log.push("afterAgent") } satisfies AgentMiddleware,
        createClarificationMiddleware({}, { includeTool: false }),
      ],
      services,
    });
    const state = await agent.invoke({ messages: [new HumanMessage("clean up")] }, { threadId: "t1" });

    expect(model.callCount).toBe(1);
    expect(log).toEqual(["afterAgent"]);
    const [, ai, card] = state.messages;
    expect(state.messages).toHaveLength(3);
    expect((ai as AIMessage).tool_calls?.map((c) => c.name)).toEqual(["ask_clarification"]);
    expect(ToolMessage.isInstance(card)).toBe(true);
    const message = card as ToolMessage;
    expect(message.id).toBe("clarification:call-1");
    expect(message.content).toContain("1. A");
    expect(message.content).toContain("2. B");
    expect(message.content).not.toContain("3.");
    expect(humanInput(message)).toMatchObject({ version: 1, input_mode: "choice_with_other" });
  });

  it("scenario M57: with disable_clarification the run continues: proceed message, sibling runs, final answer", async () => {
    const log: string[] = [];
    const model = fakeModel()
      .respondWithTools([
        { name: "ask_clarification", args: { question: "Create the issue?", clarification_type: "suggestion" }, id: "c1" },
        { name: "bash", args: {}, id: "b1" },
      ])
      .respond(new AIMessage("created it"));
    const agent = createAgent({ model, tools: [recordingTool("bash", log)], middlewares: [createClarificationMiddleware()], services });
    const state = await agent.invoke({ messages: [new HumanMessage("triage")] }, { threadId: "t1", context: { disable_clarification: true } });

    expect(model.callCount).toBe(2);
    expect(log).toEqual(["bash:b1"]);
    const proceed = state.messages.find((m) => ToolMessage.isInstance(m) && m.tool_call_id === "c1") as ToolMessage;
    expect(proceed.content).toBe(CLARIFICATION_DISABLED_TEXT);
    expect(state.messages.at(-1)?.content).toBe("created it");
  });

  it("a malformed ask_clarification ends the turn with a card too, and its valid sibling never runs", async () => {
    const log: string[] = [];
    const model = fakeModel()
      .respond(
        new AIMessage({
          content: "",
          tool_calls: [call("bash", "b1")],
          invalid_tool_calls: [{ type: "invalid_tool_call", id: "c9", name: "ask_clarification", args: '{"question": "Deploy where?", "opt', error: "truncated" }],
        }),
      )
      .respond(new AIMessage("unreached"));
    const agent = createAgent({ model, tools: [recordingTool("bash", log)], middlewares: [createClarificationMiddleware()], services });
    const state = await agent.invoke({ messages: [new HumanMessage("deploy")] }, { threadId: "t1" });

    expect(model.callCount).toBe(1);
    expect(log).toEqual([]);
    const card = state.messages.at(-1) as ToolMessage;
    expect(card.id).toBe("clarification:c9");
    expect(humanInput(card)).toMatchObject({ question: "Deploy where?", input_mode: "free_text", version: 1 });
  });

  it("as the innermost wrapper its card still passes the outer ToolErrorHandling, which stamps it a success", async () => {
    const model = fakeModel().respondWithTools([{ name: "ask_clarification", args: { question: "Which?" }, id: "c1" }]);
    const agent = createAgent({ model, middlewares: [createToolErrorHandlingMiddleware(), createClarificationMiddleware()], services });
    const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t1" });
    const card = state.messages.at(-1) as ToolMessage;
    expect(card.id).toBe("clarification:c1");
    expect(card.additional_kwargs[TOOL_META_KEY]).toMatchObject({ status: "success" });
  });
});

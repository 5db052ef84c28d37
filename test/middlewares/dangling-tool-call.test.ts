import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import type { ModelRequest } from "../../src/engine/types.ts";
import {
  DANGLING_TOOL_CALL_NAME,
  INTERRUPTED_TOOL_CALL_TEXT,
  buildPatchedMessages,
  createDanglingToolCallMiddleware,
  normalizeToolArguments,
} from "../../src/middlewares/dangling-tool-call.ts";
import { emptyThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

type Dict = Record<string, unknown>;

function tc(name: unknown = "bash", id: unknown = "call_1"): Dict {
  return { name, id, args: {}, type: "tool_call" };
}

function invalidTc(options: { name?: unknown; id?: unknown; error?: unknown; args?: unknown } = {}): Dict {
  return {
    type: "invalid_tool_call",
    name: "name" in options ? options.name : "write_file",
    id: "id" in options ? options.id : "write_file:36",
    args: "args" in options ? options.args : '{"description":"write report","path":"/mnt/user-data/outputs/report.md","content":"bad {"json"}"}',
    error: "error" in options ? options.error : "Failed to parse tool arguments: malformed JSON",
  };
}

/** An AIMessage with exactly these views, bypassing the constructor's parsing of raw payloads. */
function ai(views: { calls?: Dict[]; invalid?: Dict[]; raw?: unknown[] } = {}): AIMessage {
  const message = new AIMessage({ content: "", tool_calls: [], invalid_tool_calls: [] });
  message.tool_calls = (views.calls ?? []) as AIMessage["tool_calls"];
  message.invalid_tool_calls = (views.invalid ?? []) as AIMessage["invalid_tool_calls"];
  if (views.raw !== undefined) message.additional_kwargs = { tool_calls: views.raw as never };
  return message;
}

function aiCalls(...calls: Dict[]): AIMessage {
  return ai({ calls });
}

/** `name: null` builds a result without a name, as a corrupt payload can carry. */
function toolMsg(toolCallId: unknown, name: string | null = "test_tool", content = "result"): ToolMessage {
  const message = new ToolMessage({ content, tool_call_id: "placeholder", ...(name === null ? {} : { name }) });
  (message as unknown as Dict)["tool_call_id"] = toolCallId;
  return message;
}

function rawCall(id: unknown, fn: Dict): Dict {
  return { id, type: "function", function: fn };
}

/**
 * What a strict OpenAI-compatible serializer sends for an assistant message: the structured calls
 * plus the invalid ones, and the raw payload only when both are empty.
 */
function wireCalls(message: BaseMessage): Array<{ id: unknown; name: unknown; arguments: unknown }> {
  const m = message as AIMessage;
  const structured = m.tool_calls ?? [];
  const invalid = m.invalid_tool_calls ?? [];
  if (structured.length > 0 || invalid.length > 0) {
    return [
      ...structured.map((c) => ({ id: c.id, name: c.name, arguments: JSON.stringify(c.args) })),
      ...invalid.map((c) => ({ id: c.id, name: c.name, arguments: c.args })),
    ];
  }
  const raw = (m.additional_kwargs?.["tool_calls"] ?? []) as Dict[];
  return raw.map((c) => ({ id: c["id"], name: (c["function"] as Dict)["name"], arguments: (c["function"] as Dict)["arguments"] }));
}

function tools(messages: BaseMessage[]): ToolMessage[] {
  return messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
}

function patch(messages: BaseMessage[]): BaseMessage[] {
  const patched = buildPatchedMessages(messages);
  expect(patched).not.toBeNull();
  return patched!;
}

describe("DanglingToolCall: valid transcripts go through untouched", () => {
  it("empty history", () => {
    expect(buildPatchedMessages([])).toBeNull();
  });

  it("no AI messages", () => {
    expect(buildPatchedMessages([new HumanMessage("hello")])).toBeNull();
  });

  it("AI message without tool calls", () => {
    expect(buildPatchedMessages([new AIMessage("hello")])).toBeNull();
  });

  it("all tool calls answered", () => {
    expect(buildPatchedMessages([aiCalls(tc("bash", "call_1")), toolMsg("call_1", "bash")])).toBeNull();
  });

  it("valid names in both structured and raw views", () => {
    const message = ai({ calls: [tc("bash", "call_1")], raw: [rawCall("call_1", { name: "bash", arguments: "{}" })] });
    expect(buildPatchedMessages([message, toolMsg("call_1", "bash")])).toBeNull();
  });

  it("adjacent results followed by a human turn", () => {
    expect(buildPatchedMessages([aiCalls(tc("bash", "call_1")), toolMsg("call_1", "bash"), new HumanMessage("next")])).toBeNull();
  });

  it("an invalid call with valid JSON-object args that was answered", () => {
    const message = ai({ invalid: [invalidTc({ id: "valid_args_call", name: "read_file", args: '{"path": "/tmp/data.csv"}', error: "schema validation failed" })] });
    expect(buildPatchedMessages([message, toolMsg("valid_args_call", "read_file")])).toBeNull();
  });

  it("ids reused across turns keep their own results", () => {
    const messages = [
      new HumanMessage({ content: "summary", name: "summary", additional_kwargs: { hide_from_ui: true } }),
      aiCalls(tc("web_search", "web_search:11"), tc("web_search", "web_search:12"), tc("web_search", "web_search:13")),
      toolMsg("web_search:11", "web_search"),
      toolMsg("web_search:12", "web_search"),
      toolMsg("web_search:13", "web_search"),
      aiCalls(tc("web_search", "web_search:9"), tc("web_search", "web_search:10"), tc("web_search", "web_search:11")),
      toolMsg("web_search:9", "web_search"),
      toolMsg("web_search:10", "web_search"),
      toolMsg("web_search:11", "web_search"),
    ];
    expect(buildPatchedMessages(messages)).toBeNull();
  });

  it("the middleware passes the very same request object to the handler", async () => {
    const middleware = createDanglingToolCallMiddleware();
    const request = modelRequest([aiCalls(tc("bash", "call_1")), toolMsg("call_1", "bash")]);
    const seen: ModelRequest[] = [];
    await middleware.wrapModelCall!(request, async (r) => {
      seen.push(r);
      return new AIMessage("ok");
    });
    expect(seen[0]).toBe(request);
  });
});

describe("DanglingToolCall: placeholders for unanswered calls", () => {
  it("a single dangling call", () => {
    const patched = patch([aiCalls(tc("bash", "call_1"))]);
    expect(patched).toHaveLength(2);
    const placeholder = patched[1] as ToolMessage;
    expect(ToolMessage.isInstance(placeholder)).toBe(true);
    expect(placeholder.tool_call_id).toBe("call_1");
    expect(placeholder.status).toBe("error");
    expect(placeholder.name).toBe("bash");
    expect(placeholder.content).toBe(INTERRUPTED_TOOL_CALL_TEXT);
    expect(placeholder.content).toBe("[Tool call was interrupted and did not return a result.]");
  });

  it("several dangling calls of one message", () => {
    const patched = patch([aiCalls(tc("bash", "call_1"), tc("read", "call_2"))]);
    expect(patched).toHaveLength(3);
    expect(tools(patched).map((m) => m.tool_call_id)).toEqual(["call_1", "call_2"]);
  });

  it("the placeholder goes right after its AIMessage", () => {
    const patched = patch([new HumanMessage("hi"), aiCalls(tc("bash", "call_1")), new HumanMessage("still here")]);
    expect(patched.map((m) => m.type)).toEqual(["human", "ai", "tool", "human"]);
    expect((patched[2] as ToolMessage).tool_call_id).toBe("call_1");
  });

  it("scenario M14: [AI(c1,c2), Tool(c1)] + new user message → an interrupted placeholder for c2 right after Tool(c1), in the request only", async () => {
    const answered = toolMsg("c1", "bash");
    const history = [new HumanMessage("do two things"), aiCalls(tc("bash", "c1"), tc("read_file", "c2")), answered, new HumanMessage("what happened?")];
    const state = { ...emptyThreadState(), messages: history };
    const snapshot = [...history];
    const middleware = createDanglingToolCallMiddleware();
    let sent: ModelRequest | undefined;
    await middleware.wrapModelCall!(modelRequest(history, state), async (r) => {
      sent = r;
      return new AIMessage("ok");
    });
    const messages = sent!.messages;
    expect(messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "tool", "human"]);
    expect(messages[2]).toBe(answered);
    const placeholder = messages[3] as ToolMessage;
    expect(placeholder.tool_call_id).toBe("c2");
    expect(placeholder.status).toBe("error");
    expect(placeholder.content).toContain("was interrupted");
    expect(state.messages).toEqual(snapshot);
    expect(state.messages).toHaveLength(4);
  });

  it("only the unanswered call of a mixed message is patched", () => {
    const patched = patch([aiCalls(tc("bash", "call_1"), tc("read", "call_2")), toolMsg("call_1", "bash")]);
    const synthetic = tools(patched).filter((m) => m.status === "error");
    expect(synthetic.map((m) => m.tool_call_id)).toEqual(["call_2"]);
  });

  it("each AI message gets its own placeholders", () => {
    const patched = patch([aiCalls(tc("bash", "call_1")), new HumanMessage("next turn"), aiCalls(tc("read", "call_2"))]);
    expect(patched.map((m) => m.type)).toEqual(["ai", "tool", "human", "ai", "tool"]);
  });

  it("raw provider tool calls are patched when no structured view exists", () => {
    const patched = patch([ai({ raw: [rawCall("call_1", { name: "bash", arguments: '{"command":"ls"}' })] })]);
    expect(patched).toHaveLength(2);
    expect(patched[1]).toMatchObject({ tool_call_id: "call_1", name: "bash", status: "error" });
  });

  it("a raw view shadowed by invalid_tool_calls is not counted twice", () => {
    const message = ai({
      invalid: [{ id: "call_x", name: "read_file", args: null, error: "parse" }],
      raw: [rawCall("call_x", { name: "read_file", arguments: "{}" })],
    });
    const results = tools(patch([message]));
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ tool_call_id: "call_x", status: "error" });
  });
});

describe("DanglingToolCall: invalid tool calls", () => {
  it("an invalid write_file call gets the no-file-was-written guidance without echoing the payload", () => {
    const patched = patch([ai({ invalid: [invalidTc()] })]);
    const placeholder = patched[1] as ToolMessage;
    expect(placeholder).toMatchObject({ tool_call_id: "write_file:36", name: "write_file", status: "error" });
    const text = String(placeholder.content);
    expect(text).toContain("write_file failed before execution");
    expect(text).toContain("no file was written");
    expect(text).toContain("very large Markdown file in a single tool call");
    expect(text).toContain("Do not retry the same large `write_file` payload");
    expect(text).toContain("split the file into smaller sections");
    expect(text).toContain("normal assistant text");
    expect(text).toContain("Failed to parse tool arguments");
    expect(text).not.toContain('bad {"json"}');
  });

  it("other invalid calls get the generic invalid-arguments text", () => {
    const patched = patch([ai({ invalid: [invalidTc({ name: "search", id: "search:1" })] })]);
    const text = String(patched[1]!.content);
    expect(patched[1]).toMatchObject({ tool_call_id: "search:1", name: "search" });
    expect(text).toContain("arguments were invalid");
    expect(text).toContain("Failed to parse tool arguments");
    expect(text).not.toContain("write_file failed before execution");
  });

  it("the parser error is cut to 500 characters", () => {
    const patched = patch([ai({ invalid: [invalidTc({ name: "search", id: "s", error: "e".repeat(800) })] })]);
    expect(String(patched[1]!.content)).toBe(`[Tool call could not be executed because its arguments were invalid: ${"e".repeat(500)}]`);
  });

  it("without a parser error the text says only that the arguments were invalid", () => {
    const patched = patch([ai({ invalid: [invalidTc({ name: "search", id: "s", error: null })] })]);
    expect(patched[1]!.content).toBe("[Tool call could not be executed because its arguments were invalid.]");
  });

  it("valid and invalid calls of one message are both patched", () => {
    const message = ai({ calls: [tc("bash", "call_1")], invalid: [invalidTc()] });
    expect(tools(patch([message])).map((m) => m.tool_call_id).sort()).toEqual(["call_1", "write_file:36"]);
  });

  it("an answered invalid call is sanitised without a placeholder, and the original is untouched", () => {
    const message = ai({ invalid: [invalidTc()] });
    const answer = toolMsg("write_file:36", "write_file");
    const patched = patch([message, answer]);
    expect(patched).toHaveLength(2);
    expect(patched[1]).toBe(answer);
    expect(JSON.parse(String(wireCalls(patched[0]!)[0]!.arguments))).toEqual({});
    expect(message.invalid_tool_calls![0]!.args).toBe(invalidTc().args);
  });
});

describe("DanglingToolCall: names", () => {
  it("scenario M16: an empty-named call and an invalid write_file call show unknown_tool with a missing-name note and a no-file-was-written note", () => {
    const message = ai({ calls: [tc("", "empty_name_call")], invalid: [invalidTc()] });
    const patched = patch([new HumanMessage("write the report"), message]);
    const sanitized = patched[1] as AIMessage;
    expect(sanitized.tool_calls![0]!.name).toBe("unknown_tool");
    expect(wireCalls(sanitized).every((c) => typeof c.name === "string" && c.name.length > 0)).toBe(true);
    const [missingName, noFile] = tools(patched);
    expect(missingName).toMatchObject({ tool_call_id: "empty_name_call", name: "unknown_tool", status: "error" });
    expect(String(missingName!.content)).toContain("name was missing or empty");
    expect(noFile).toMatchObject({ tool_call_id: "write_file:36", name: "write_file", status: "error" });
    expect(String(noFile!.content)).toContain("no file was written");
  });

  it("an empty structured name becomes unknown_tool in the call and the placeholder", () => {
    const patched = patch([aiCalls(tc("", "empty_name_call"))]);
    expect((patched[0] as AIMessage).tool_calls![0]!.name).toBe("unknown_tool");
    expect(wireCalls(patched[0]!)[0]!.name).toBe("unknown_tool");
    expect(patched[1]).toMatchObject({ tool_call_id: "empty_name_call", name: "unknown_tool", status: "error" });
    expect(String(patched[1]!.content)).toContain("name was missing or empty");
  });

  it.each([
    ["missing", rawCall("missing_name_call", { arguments: "{}" })],
    ["non-string", rawCall("non_string_name_call", { name: 42, arguments: "{}" })],
    ["empty", rawCall("raw_empty_name_call", { name: "", arguments: "{}" })],
  ])("a %s raw function name becomes unknown_tool", (_label, raw) => {
    const patched = patch([ai({ raw: [raw] })]);
    const sanitizedRaw = ((patched[0]!.additional_kwargs["tool_calls"] as Dict[])[0]!["function"] as Dict)["name"];
    expect(sanitizedRaw).toBe("unknown_tool");
    expect(wireCalls(patched[0]!)[0]!.name).toBe("unknown_tool");
    expect(patched[1]).toMatchObject({ name: "unknown_tool", status: "error" });
  });

  it("an answered call with a blank name keeps its result, renamed to unknown_tool", () => {
    const patched = patch([aiCalls(tc(" ", "empty_name_call")), toolMsg("empty_name_call", "", "Error: invalid tool")]);
    expect((patched[0] as AIMessage).tool_calls![0]!.name).toBe("unknown_tool");
    expect(patched[1]).toMatchObject({ tool_call_id: "empty_name_call", name: "unknown_tool", content: "Error: invalid tool" });
  });

  it("a valid structured name with an empty raw shadow: raw sanitised, structured kept", () => {
    const message = ai({ calls: [tc("bash", "call_1")], raw: [rawCall("call_1", { name: "", arguments: "{}" })] });
    const patched = patch([message, toolMsg("call_1", "bash")]);
    expect((patched[0] as AIMessage).tool_calls![0]!.name).toBe("bash");
    expect(((patched[0]!.additional_kwargs["tool_calls"] as Dict[])[0]!["function"] as Dict)["name"]).toBe("unknown_tool");
    expect(wireCalls(patched[0]!)[0]!.name).toBe("bash");
    expect(patched[1]).toMatchObject({ tool_call_id: "call_1", name: "bash" });
  });

  it("an empty-named invalid call gets the missing-name note, not the invalid-arguments one", () => {
    const patched = patch([ai({ invalid: [invalidTc({ name: "", id: "empty_invalid_call" })] })]);
    expect(patched[1]).toMatchObject({ tool_call_id: "empty_invalid_call", name: "unknown_tool" });
    expect(String(patched[1]!.content)).toContain("name was missing or empty");
    expect(String(patched[1]!.content)).not.toContain("arguments were invalid");
  });

  it("issue 4172: mixed calls serialise with valid names and JSON-object arguments", () => {
    const invalidArgs = '{"description": "读取CSV数据文件前部内容", "path": "/mnt/user-data/uploads/test2.csv"}}';
    const message = ai({
      calls: [tc("read_file", "valid_call"), tc("", "empty_name_call")],
      invalid: [{ type: "invalid_tool_call", id: "invalid_args_call", name: "read_file", args: invalidArgs, error: null }],
    });
    const patched = patch([
      message,
      toolMsg("valid_call", "read_file"),
      new ToolMessage({ content: "Error: invalid tool", tool_call_id: "empty_name_call", name: "", status: "error" }),
    ]);
    const wire = wireCalls(patched[0]!);
    expect(wire.every((c) => typeof c.name === "string" && c.name.length > 0)).toBe(true);
    expect(wire.map((c) => JSON.parse(String(c.arguments)))).toEqual([{}, {}, {}]);
    expect(message.invalid_tool_calls![0]!.args).toBe(invalidArgs);
    const results = tools(patched);
    expect(results.map((m) => m.tool_call_id)).toEqual(["valid_call", "empty_name_call", "invalid_args_call"]);
    expect(results[1]!.name).toBe("unknown_tool");
    expect(results[2]!.status).toBe("error");
  });
});

describe("DanglingToolCall: arguments", () => {
  it("an empty name and malformed args in an invalid call are both sanitised", () => {
    const patched = patch([ai({ invalid: [invalidTc({ name: "", id: "empty_invalid_call" })] })]);
    const [call] = wireCalls(patched[0]!);
    expect(call!.name).toBe("unknown_tool");
    expect(JSON.parse(String(call!.arguments))).toEqual({});
  });

  it.each([
    ['{"path":"/tmp/data.csv"}}', {}],
    [null, {}],
    ['["not", "an", "object"]', {}],
    [{ path: "/tmp/data.csv" }, { path: "/tmp/data.csv" }],
  ])("raw function.arguments %j becomes a JSON-object string", (args, expected) => {
    const patched = patch([ai({ raw: [rawCall("raw_invalid_args_call", { name: "read_file", arguments: args })] })]);
    const raw = ((patched[0]!.additional_kwargs["tool_calls"] as Dict[])[0]!["function"] as Dict)["arguments"];
    expect(typeof raw).toBe("string");
    expect(JSON.parse(raw as string)).toEqual(expected);
  });

  it("normalizeToolArguments keeps a JSON-object string byte for byte", () => {
    const text = '{ "a" : 1 }';
    expect(normalizeToolArguments(text)).toBe(text);
    expect(normalizeToolArguments("nope")).toBe("{}");
    const circular: Dict = {};
    circular["self"] = circular;
    expect(normalizeToolArguments(circular)).toBe("{}");
  });
});

describe("DanglingToolCall: orphans and regrouping", () => {
  it("a displaced result is moved next to its call", () => {
    const patched = patch([aiCalls(tc("bash", "call_1")), new HumanMessage("interruption"), toolMsg("call_1", "bash")]);
    expect(patched.map((m) => m.type)).toEqual(["ai", "tool", "human"]);
  });

  it("results stay grouped in call order after their AIMessage", () => {
    const patched = patch([
      aiCalls(tc("bash", "call_1"), tc("read", "call_2")),
      new HumanMessage("interruption"),
      toolMsg("call_2", "read"),
      toolMsg("call_1", "bash"),
    ]);
    expect(patched.map((m) => m.type)).toEqual(["ai", "tool", "tool", "human"]);
    expect(tools(patched).map((m) => m.tool_call_id)).toEqual(["call_1", "call_2"]);
  });

  it("a human message between partial results is moved after the group", () => {
    const patched = patch([
      aiCalls(tc("bash", "call_1"), tc("read", "call_2")),
      toolMsg("call_1", "bash"),
      new HumanMessage("interruption"),
      toolMsg("call_2", "read"),
    ]);
    expect(patched.map((m) => m.type)).toEqual(["ai", "tool", "tool", "human"]);
    expect(tools(patched).map((m) => m.tool_call_id)).toEqual(["call_1", "call_2"]);
  });

  it("a reused id: the second, dangling occurrence is patched", () => {
    const patched = patch([aiCalls(tc("web_search", "web_search:11")), toolMsg("web_search:11", "web_search"), aiCalls(tc("web_search", "web_search:11"))]);
    expect((patched[1] as ToolMessage).status).not.toBe("error");
    expect(patched[3]).toMatchObject({ tool_call_id: "web_search:11", status: "error" });
  });

  it("a reused id: the later result serves the first occurrence", () => {
    const result = toolMsg("web_search:11", "web_search");
    const patched = patch([aiCalls(tc("web_search", "web_search:11")), aiCalls(tc("web_search", "web_search:11")), result]);
    expect(patched[1]).toBe(result);
    expect(patched[3]).toMatchObject({ tool_call_id: "web_search:11", status: "error" });
  });

  it("results are grouped with their own turn across several AI messages", () => {
    const patched = patch([
      aiCalls(tc("bash", "call_1")),
      new HumanMessage("interruption"),
      aiCalls(tc("read", "call_2")),
      toolMsg("call_1", "bash"),
      toolMsg("call_2", "read"),
    ]);
    expect(patched.map((m) => m.type)).toEqual(["ai", "tool", "human", "ai", "tool"]);
    expect((patched[1] as ToolMessage).tool_call_id).toBe("call_1");
    expect((patched[4] as ToolMessage).tool_call_id).toBe("call_2");
  });

  it("an orphan result between turns is dropped", () => {
    const orphan = toolMsg("orphan_call", "orphan");
    const patched = patch([aiCalls(tc("bash", "call_1")), orphan, new HumanMessage("interruption"), toolMsg("call_1", "bash")]);
    expect(patched).not.toContain(orphan);
    expect(patched.map((m) => m.type)).toEqual(["ai", "tool", "human"]);
  });

  it("a leading orphan is dropped", () => {
    const orphan = toolMsg("stale_call", "stale");
    const patched = patch([orphan, aiCalls(tc("bash", "call_1")), toolMsg("call_1", "bash")]);
    expect(patched).not.toContain(orphan);
    expect(patched.map((m) => m.type)).toEqual(["ai", "tool"]);
  });

  it("a result with a null tool_call_id is an orphan when no call uses that id", () => {
    const ghost = toolMsg(null, null, "ghost");
    const patched = patch([aiCalls(tc("bash", "call_1")), ghost, toolMsg("call_1", "bash")]);
    expect(patched).not.toContain(ghost);
    expect(patched).toHaveLength(2);
  });

  it("scenario M15: an orphan ToolMessage is dropped from the request but stays in state", async () => {
    const orphan = toolMsg("gone", "web_search");
    const history = [new HumanMessage("q"), orphan, new AIMessage("answer"), new HumanMessage("more")];
    const state = { ...emptyThreadState(), messages: history };
    let sent: ModelRequest | undefined;
    await createDanglingToolCallMiddleware().wrapModelCall!(modelRequest(history, state), async (r) => {
      sent = r;
      return new AIMessage("ok");
    });
    expect(sent!.messages).not.toContain(orphan);
    expect(sent!.messages.map((m) => m.type)).toEqual(["human", "ai", "human"]);
    expect(state.messages).toContain(orphan);
    expect(state.messages).toHaveLength(4);
  });

  it("system messages and other non-AI messages keep their place", () => {
    const system = new SystemMessage("reminder");
    const patched = patch([system, aiCalls(tc("bash", "call_1"))]);
    expect(patched[0]).toBe(system);
  });
});

describe("DanglingToolCall: malformed ids", () => {
  it.each(["", "   ", null])("a structured id %j is replaced by a synthetic id shared with its placeholder", (id) => {
    const patched = patch([aiCalls(tc("bash", id))]);
    const recovered = (patched[0] as AIMessage).tool_calls![0]!.id!;
    expect(recovered).toBe("deerflow_synthetic_tool_call_0_call_0");
    expect(wireCalls(patched[0]!)[0]!.id).toBe(recovered);
    expect(patched[1]).toMatchObject({ tool_call_id: recovered, status: "error" });
  });

  it("an empty-id call keeps its real result", () => {
    const patched = patch([aiCalls(tc("bash", "")), toolMsg("", "bash", "REAL RESULT")]);
    expect(patched).toHaveLength(2);
    expect(patched[1]).toMatchObject({ content: "REAL RESULT", tool_call_id: (patched[0] as AIMessage).tool_calls![0]!.id });
    expect((patched[1] as ToolMessage).status).not.toBe("error");
  });

  it("several empty ids get distinct ids and pair in order", () => {
    const patched = patch([aiCalls(tc("bash", ""), tc("ls", "")), toolMsg("", "bash", "first"), toolMsg("", "ls", "second")]);
    const [first, second] = (patched[0] as AIMessage).tool_calls!.map((c) => c.id);
    expect(first).not.toBe(second);
    expect(patched.slice(1).map((m) => m.content)).toEqual(["first", "second"]);
    expect(patched.slice(1).map((m) => (m as ToolMessage).tool_call_id)).toEqual([first, second]);
  });

  it("an empty-id invalid call is relabelled", () => {
    const patched = patch([ai({ invalid: [invalidTc({ id: "" })] })]);
    const recovered = (patched[0] as AIMessage).invalid_tool_calls![0]!.id;
    expect(recovered).toBe("deerflow_synthetic_tool_call_0_invalid_0");
    expect(wireCalls(patched[0]!)[0]!.id).toBe(recovered);
    expect((patched[1] as ToolMessage).tool_call_id).toBe(recovered);
  });

  it("an empty-id raw call is relabelled when it is the serialised view", () => {
    const patched = patch([new HumanMessage("x"), ai({ raw: [rawCall("", { name: "bash", arguments: "{}" })] })]);
    const recovered = (patched[1]!.additional_kwargs["tool_calls"] as Dict[])[0]!["id"];
    expect(recovered).toBe("deerflow_synthetic_tool_call_1_raw_0");
    expect((patched[2] as ToolMessage).tool_call_id).toBe(recovered);
  });

  it("only the serialised view of a call gets a recovered id", () => {
    const message = ai({ calls: [tc("bash", "")], raw: [rawCall("", { name: "bash", arguments: "{}" })] });
    const patched = patch([message]);
    const recovered = (patched[0] as AIMessage).tool_calls![0]!.id;
    expect(recovered).toBeTruthy();
    expect((patched[1] as ToolMessage).tool_call_id).toBe(recovered);
    expect((patched[0]!.additional_kwargs["tool_calls"] as Dict[])[0]!["id"]).toBe("");
    expect(wireCalls(patched[0]!)).toHaveLength(1);
  });

  it("a raw view shadowed by invalid calls gets no placeholder of its own", () => {
    const badArgs = '{"path": "/mnt/user-data/outputs/report.md", "content": "## Report {"';
    const message = ai({
      invalid: [{ name: "write_file", args: badArgs, id: "", error: "Unterminated string" }],
      raw: [rawCall("", { name: "write_file", arguments: badArgs })],
    });
    const patched = patch([message, toolMsg("", "write_file", "REAL RESULT")]);
    const callIds = wireCalls(patched[0]!).map((c) => c.id);
    const resultIds = tools(patched).map((m) => m.tool_call_id);
    expect(callIds).toHaveLength(1);
    expect(resultIds).toEqual(callIds);
    expect(patched[1]!.content).toBe("REAL RESULT");
  });

  it("a null-id call reclaims its own null-id result", () => {
    const patched = patch([aiCalls(tc("bash", null)), toolMsg(null, null, "REAL RESULT")]);
    expect(patched).toHaveLength(2);
    expect(patched[1]).toMatchObject({ content: "REAL RESULT", tool_call_id: (patched[0] as AIMessage).tool_calls![0]!.id });
  });

  it("a dangling call does not consume a later turn's result", () => {
    const [interruptedCall, interruptedResult, retriedCall, retriedResult] = patch([
      aiCalls(tc("bash", "")),
      aiCalls(tc("bash", "")),
      toolMsg("", "bash", "REAL RESULT"),
    ]) as [AIMessage, ToolMessage, AIMessage, ToolMessage];
    expect(interruptedResult.tool_call_id).toBe(interruptedCall.tool_calls![0]!.id);
    expect(interruptedResult.status).toBe("error");
    expect(retriedResult.tool_call_id).toBe(retriedCall.tool_calls![0]!.id);
    expect(retriedResult.content).toBe("REAL RESULT");
  });

  it("an orphan malformed result is not adopted by a later malformed call", () => {
    const patched = patch([toolMsg("", "search", "STALE ORPHAN"), new HumanMessage("continue"), aiCalls(tc("write_file", ""))]);
    expect(patched.some((m) => m.content === "STALE ORPHAN")).toBe(false);
    const [human, call, result] = patched as [HumanMessage, AIMessage, ToolMessage];
    expect(human.type).toBe("human");
    expect(result.tool_call_id).toBe(call.tool_calls![0]!.id);
    expect(result.status).toBe("error");
  });

  it("the result goes to the sibling whose name it carries", () => {
    const patched = patch([aiCalls(tc("search", ""), tc("write_file", "")), toolMsg("", "write_file", "REAL RESULT")]);
    const [searchId, writeId] = (patched[0] as AIMessage).tool_calls!.map((c) => c.id);
    const byId = new Map(tools(patched).map((m) => [m.tool_call_id, m]));
    expect(byId.get(writeId!)!.content).toBe("REAL RESULT");
    expect(byId.get(searchId!)!.status).toBe("error");
  });

  it("a nameless result is dropped when several siblings could own it", () => {
    const patched = patch([aiCalls(tc("search", ""), tc("write_file", "")), toolMsg("", null, "REAL RESULT")]);
    expect(patched.some((m) => m.content === "REAL RESULT")).toBe(false);
    expect(patched.slice(1).map((m) => (m as ToolMessage).status)).toEqual(["error", "error"]);
  });

  it("identical parallel calls that all answered pair by position", () => {
    const patched = patch([aiCalls(tc("bash", ""), tc("bash", "")), toolMsg("", "bash", "RESULT A"), toolMsg("", "bash", "RESULT B")]);
    const ids = (patched[0] as AIMessage).tool_calls!.map((c) => c.id);
    expect(patched.slice(1).map((m) => (m as ToolMessage).tool_call_id)).toEqual(ids);
    expect(patched.slice(1).map((m) => m.content)).toEqual(["RESULT A", "RESULT B"]);
  });

  it("identical parallel calls with one result drop the ambiguous result", () => {
    const patched = patch([aiCalls(tc("bash", ""), tc("bash", "")), toolMsg("", "bash", "LONE RESULT")]);
    expect(patched.some((m) => m.content === "LONE RESULT")).toBe(false);
    expect(patched.slice(1).map((m) => (m as ToolMessage).status)).toEqual(["error", "error"]);
  });

  it("a result naming no open call is dropped rather than misattributed", () => {
    const patched = patch([aiCalls(tc("search", ""), tc("write_file", "")), toolMsg("", "grep", "RESULT OF NEITHER")]);
    expect(patched.some((m) => m.content === "RESULT OF NEITHER")).toBe(false);
    expect(patched.slice(1).map((m) => (m as ToolMessage).status)).toEqual(["error", "error"]);
  });

  it("valid ids are left byte for byte unchanged next to a recovered one", () => {
    const patched = patch([aiCalls(tc("bash", " call_1 "), tc("ls", "")), toolMsg(" call_1 ", "bash")]);
    const [kept, recovered] = (patched[0] as AIMessage).tool_calls!.map((c) => c.id);
    expect(kept).toBe(" call_1 ");
    expect(recovered).toBeTruthy();
    expect(recovered).not.toBe(" call_1 ");
    const byId = new Map(tools(patched).map((m) => [m.tool_call_id, m]));
    expect(byId.get(" call_1 ")!.content).toBe("result");
    expect(byId.get(recovered!)!.status).toBe("error");
  });
});

describe("DanglingToolCall: request only", () => {
  it("forwards the patched messages and returns the handler's answer", async () => {
    const middleware = createDanglingToolCallMiddleware();
    const request = modelRequest([aiCalls(tc("bash", "call_1"))]);
    const answer = new AIMessage("response");
    let sent: ModelRequest | undefined;
    const result = await middleware.wrapModelCall!(request, async (r) => {
      sent = r;
      return answer;
    });
    expect(result).toBe(answer);
    expect(sent).not.toBe(request);
    expect(sent!.messages).toHaveLength(2);
    expect((sent!.messages[1] as ToolMessage).tool_call_id).toBe("call_1");
    expect(request.messages).toHaveLength(1);
  });

  it("a sanitised copy keeps the message's class, id and content and serialises the repair", () => {
    const original = new AIMessage({ content: "thinking", id: "ai-1", tool_calls: [{ name: "", id: "c1", args: {} }] });
    const [copy] = patch([original]) as [AIMessage];
    expect(copy).not.toBe(original);
    expect(AIMessage.isInstance(copy)).toBe(true);
    expect(copy.id).toBe("ai-1");
    expect(copy.content).toBe("thinking");
    expect(original.tool_calls![0]!.name).toBe("");
    const json = JSON.parse(JSON.stringify(copy)) as { kwargs: { tool_calls: Array<{ name: string }> } };
    expect(json.kwargs.tool_calls[0]!.name).toBe("unknown_tool");
  });

  it("declares name and policy and rejects unknown config", () => {
    const middleware = createDanglingToolCallMiddleware();
    expect(middleware.name).toBe(DANGLING_TOOL_CALL_NAME);
    expect(middleware.name).toBe("DanglingToolCall");
    expect(middleware.releasePolicyParameters?.()).toMatchObject({ orphan_tool_results: "drop_from_request" });
    expect(() => createDanglingToolCallMiddleware({ x: 1 } as never)).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
  });
});

function modelRequest(messages: BaseMessage[], state = { ...emptyThreadState(), messages }): ModelRequest {
  return {
    model: fakeModel(),
    systemMessage: undefined,
    messages,
    tools: [],
    state,
    runtime: makeRuntime({ threadId: "t1" }),
  };
}

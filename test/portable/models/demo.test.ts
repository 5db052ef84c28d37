import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import {
  AIMessage,
  AIMessageChunk,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  type BaseMessage,
} from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import {
  DEMO_INSPECT_COMMAND,
  DEMO_NOTES_PATH,
  DemoChatModel,
} from "../../../src/models/index.ts";

const objectSchema = (...keys: string[]) => ({
  type: "object",
  properties: Object.fromEntries(keys.map((key) => [key, { type: "string" }])),
  required: keys,
});

// DeerFlow's sandbox tools take a `description` first; the bash one is given in OpenAI wire form.
const WRITE_FILE = { name: "write_file", description: "Write a file", schema: objectSchema("description", "path", "content") };
const BASH = {
  type: "function" as const,
  function: { name: "bash", description: "Run a command", parameters: objectSchema("description", "command") },
};
const READ_FILE = { name: "read_file", description: "Read a file", schema: objectSchema("path") };

const TASK = "Compare SQLite and PostgreSQL for a small analytics dashboard, and recommend one.";

function wordCount(text: string): number {
  return text.split(/\s+/).filter((word) => word !== "").length;
}

/** Runs the tool calls against an in-memory workspace, the way the sandbox tools would. */
function runTools(message: AIMessage, files: Map<string, string>): ToolMessage[] {
  return (message.tool_calls ?? []).map((call) => {
    let content: string;
    if (call.name === "write_file") {
      files.set(call.args.path as string, call.args.content as string);
      content = `OK: wrote ${(call.args.content as string).length} characters to ${call.args.path as string}`;
    } else if (call.name === "bash") {
      const text = files.get(DEMO_NOTES_PATH) ?? "";
      content = `${wordCount(text)} ${DEMO_NOTES_PATH}\n${[...files.keys()].map((p) => p.split("/").pop()).join("\n")}`;
    } else {
      content = files.get(call.args.path as string) ?? "Error: file not found";
    }
    return new ToolMessage({ tool_call_id: call.id!, name: call.name, content });
  });
}

async function playSession(tools: unknown[], firstMessages: BaseMessage[]) {
  const model = new DemoChatModel().bindTools(tools as never);
  const files = new Map<string, string>();
  const messages = [...firstMessages];
  const replies: AIMessage[] = [];
  for (let turn = 0; turn < 6; turn++) {
    const reply = (await model.invoke(messages)) as AIMessage;
    replies.push(reply);
    messages.push(reply);
    if ((reply.tool_calls ?? []).length === 0) break;
    messages.push(...runTools(reply, files));
  }
  return { replies, files, messages };
}

describe("DemoChatModel session", () => {
  it("writes notes, inspects them with bash, then reports what the tools returned", async () => {
    const { replies, files } = await playSession([WRITE_FILE, BASH, READ_FILE], [new HumanMessage(TASK)]);
    expect(replies).toHaveLength(3);

    const [write, inspect, answer] = replies as [AIMessage, AIMessage, AIMessage];
    expect(write.tool_calls).toHaveLength(1);
    expect(write.tool_calls![0]).toMatchObject({ name: "write_file", args: { path: DEMO_NOTES_PATH } });
    expect(write.tool_calls![0]!.args.description).toEqual(expect.any(String));
    const notes = files.get(DEMO_NOTES_PATH)!;
    expect(notes).toContain(`> ${TASK}`);
    expect(notes).toContain("- sqlite");
    expect(notes).toContain("- postgresql");
    expect(write.response_metadata.finish_reason).toBe("tool_calls");

    expect(inspect.tool_calls).toHaveLength(1);
    expect(inspect.tool_calls![0]).toMatchObject({ name: "bash", args: { command: DEMO_INSPECT_COMMAND } });

    expect(answer.tool_calls ?? []).toEqual([]);
    expect(answer.response_metadata.finish_reason).toBe("stop");
    const text = answer.content as string;
    // Quotes the real tool output: the word count of what it wrote, and the write acknowledgement.
    expect(text).toContain(`${wordCount(notes)} ${DEMO_NOTES_PATH}`);
    expect(text).toContain(`the notes file holds ${wordCount(notes)} words`);
    expect(text).toContain(`OK: wrote ${notes.length} characters`);
  });

  it("reads the tool results it is given instead of assuming them", async () => {
    const model = new DemoChatModel().bindTools([WRITE_FILE, BASH]);
    const human = new HumanMessage(TASK);
    const write = (await model.invoke([human])) as AIMessage;
    const writeResult = new ToolMessage({ tool_call_id: write.tool_calls![0]!.id!, content: "OK" });
    const inspect = (await model.invoke([human, write, writeResult])) as AIMessage;
    const answerWith = async (output: string) => {
      const result = new ToolMessage({ tool_call_id: inspect.tool_calls![0]!.id!, content: output });
      return (await model.invoke([human, write, writeResult, inspect, result])).content as string;
    };
    const a = await answerWith(`12 ${DEMO_NOTES_PATH}\nnotes.md`);
    const b = await answerWith(`345 ${DEMO_NOTES_PATH}\nnotes.md\ndraft.md`);
    expect(a).toContain("holds 12 words");
    expect(b).toContain("holds 345 words");
    expect(b).toContain("draft.md");
    expect(a).not.toContain("draft.md");
  });

  it("stops and says so when a tool fails", async () => {
    const model = new DemoChatModel().bindTools([WRITE_FILE, BASH]);
    const human = new HumanMessage(TASK);
    const write = (await model.invoke([human])) as AIMessage;
    const failed = new ToolMessage({
      tool_call_id: write.tool_calls![0]!.id!,
      content: "Error: permission denied: /mnt/user-data/workspace",
      status: "error",
    });
    const answer = (await model.invoke([human, write, failed])) as AIMessage;
    expect(answer.tool_calls ?? []).toEqual([]);
    expect(answer.content).toContain("The write_file call failed");
    expect(answer.content).toContain("permission denied: /mnt/user-data/workspace");
  });

  it("uses read_file to check its notes when bash is not bound", async () => {
    const { replies, files } = await playSession([WRITE_FILE, READ_FILE], [new HumanMessage(TASK)]);
    expect(replies.map((r) => r.tool_calls?.[0]?.name)).toEqual(["write_file", "read_file", undefined]);
    expect(replies[1]!.tool_calls![0]!.args).toEqual({ path: DEMO_NOTES_PATH });
    const firstLine = files.get(DEMO_NOTES_PATH)!.split("\n")[0]!;
    expect(replies[2]!.content).toContain(firstLine);
  });

  it("passes a description argument only to tools that declare one", async () => {
    const plainWrite = { name: "write_file", description: "Write", schema: objectSchema("path", "content") };
    const reply = (await new DemoChatModel().bindTools([plainWrite]).invoke([new HumanMessage(TASK)])) as AIMessage;
    expect(Object.keys(reply.tool_calls![0]!.args).sort()).toEqual(["content", "path"]);
  });

  it("starts over for each new user message and ignores hidden middleware messages", async () => {
    const { messages } = await playSession([WRITE_FILE, BASH], [new HumanMessage(TASK)]);
    const model = new DemoChatModel().bindTools([WRITE_FILE, BASH]);
    const hidden = new HumanMessage({ content: "<reminder/>", additional_kwargs: { hide_from_ui: true } });
    const afterHidden = (await model.invoke([...messages.slice(0, -1), hidden])) as AIMessage;
    expect(afterHidden.tool_calls ?? []).toEqual([]);

    const next = (await model.invoke([...messages, new HumanMessage("Now list three risks.")])) as AIMessage;
    expect(next.tool_calls?.[0]?.name).toBe("write_file");
    expect(next.tool_calls![0]!.args.content).toContain("> Now list three risks.");
  });
});

describe("DemoChatModel without tools", () => {
  it("answers directly", async () => {
    const reply = (await new DemoChatModel().invoke([
      new SystemMessage("You are helpful."),
      new HumanMessage(TASK),
    ])) as AIMessage;
    expect(reply.tool_calls ?? []).toEqual([]);
    expect(reply.content).toContain(`You asked: "${TASK}"`);
    expect(reply.content).toContain("No tools are available");
    expect(reply.content).toContain("sqlite");
  });

  it("answers directly when only tools it does not know are bound", async () => {
    const search = { name: "web_search", description: "Search", schema: objectSchema("query") };
    const reply = (await new DemoChatModel().bindTools([search]).invoke([new HumanMessage(TASK)])) as AIMessage;
    expect(reply.tool_calls ?? []).toEqual([]);
    expect(reply.content).toContain("None of the tools I know how to use");
  });
});

/** Tool calls as said, without their ids (fresh per call). */
const callsWithoutIds = (calls: AIMessage["tool_calls"]) => (calls ?? []).map(({ id: _id, ...call }) => call);

describe("DemoChatModel labels, ids and streaming", () => {
  it("labels every message it produces", async () => {
    const { replies } = await playSession([WRITE_FILE, BASH], [new HumanMessage(TASK)]);
    for (const reply of replies) {
      expect(reply.response_metadata.model_name).toBe("demo");
      expect(reply.additional_kwargs.deerflow_demo_model).toBe(true);
      expect(reply.usage_metadata!.total_tokens).toBe(reply.usage_metadata!.input_tokens + reply.usage_metadata!.output_tokens);
      expect(reply.usage_metadata!.output_tokens).toBeGreaterThan(0);
    }
    const ids = replies.map((reply) => reply.id);
    expect(new Set(ids).size).toBe(ids.length);
    const callIds = replies.flatMap((reply) => reply.tool_calls ?? []).map((call) => call.id);
    expect(new Set(callIds).size).toBe(callIds.length);
  });

  it("says the same for a given input, under fresh message and tool-call ids (a regenerated turn is a new message)", async () => {
    const a = (await new DemoChatModel().bindTools([WRITE_FILE]).invoke([new HumanMessage(TASK)])) as AIMessage;
    const b = (await new DemoChatModel().bindTools([WRITE_FILE]).invoke([new HumanMessage(TASK)])) as AIMessage;
    expect(b.content).toBe(a.content);
    expect(callsWithoutIds(b.tool_calls)).toEqual(callsWithoutIds(a.tool_calls));
    expect(callsWithoutIds(a.tool_calls)).toHaveLength(1);
    expect(b.id).not.toBe(a.id);
    expect(b.tool_calls![0]!.id).not.toBe(a.tool_calls![0]!.id);
    // Both stay safe id segments (a subagent's thread id is derived from the tool call's).
    for (const id of [a.id, b.id, a.tool_calls![0]!.id]) expect(id).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it("estimates usage at about four characters per token", async () => {
    const reply = (await new DemoChatModel().invoke([new HumanMessage("x".repeat(400))])) as AIMessage;
    expect(reply.usage_metadata!.input_tokens).toBe(100);
    expect(reply.usage_metadata!.output_tokens).toBe(Math.ceil((reply.content as string).length / 4));
  });

  it("streams the final answer word by word through handleLLMNewToken", async () => {
    const tokens: string[] = [];
    const handler = BaseCallbackHandler.fromMethods({
      handleLLMNewToken(token: string) {
        tokens.push(token);
      },
    });
    const expected = (await new DemoChatModel().invoke([new HumanMessage(TASK)])).content as string;

    const chunks: AIMessageChunk[] = [];
    for await (const chunk of await new DemoChatModel().stream([new HumanMessage(TASK)], { callbacks: [handler] })) {
      chunks.push(chunk);
    }
    const words = tokens.filter((token) => token !== "");
    expect(words.length).toBeGreaterThan(20);
    expect(words.every((word) => word.trim().split(/\s+/).length === 1)).toBe(true);
    expect(words.join("")).toBe(expected);

    const full = chunks.reduce((acc, chunk) => acc.concat(chunk));
    expect(full.content).toBe(expected);
    expect(full.response_metadata.model_name).toBe("demo");
    expect(full.response_metadata.finish_reason).toBe("stop");
    expect(full.additional_kwargs.deerflow_demo_model).toBe(true);
    expect(full.usage_metadata).toMatchObject({ output_tokens: Math.ceil(expected.length / 4) });
  });

  it("streams tool calls as tool_call_chunks that assemble into the same call", async () => {
    const model = new DemoChatModel().bindTools([WRITE_FILE]);
    const invoked = (await model.invoke([new HumanMessage(TASK)])) as AIMessage;
    let full: AIMessageChunk | undefined;
    for await (const chunk of await model.stream([new HumanMessage(TASK)])) full = full === undefined ? chunk : full.concat(chunk);
    expect(callsWithoutIds(full!.tool_calls)).toEqual(callsWithoutIds(invoked.tool_calls));
    expect(full!.tool_calls![0]!.id).toMatch(/^call_demo_/);
    expect(full!.id).toMatch(/^demo-/);
  });

  it("honours an abort signal while streaming", async () => {
    const controller = new AbortController();
    const seen: string[] = [];
    const run = async () => {
      for await (const chunk of await new DemoChatModel({ tokenDelayMs: 1 }).stream([new HumanMessage(TASK)], {
        signal: controller.signal,
      })) {
        seen.push(chunk.content as string);
        if (seen.length === 3) controller.abort();
      }
    };
    await expect(run()).rejects.toThrow();
    expect(seen.length).toBe(3);
  });
});

describe("demo model behind the input guard", () => {
  it("reads the user's words from inside the BEGIN/END USER INPUT guard, as a real model does", async () => {
    const model = new DemoChatModel().bindTools([WRITE_FILE, BASH]);
    const guarded = `--- BEGIN USER INPUT ---\n${TASK}\n--- END USER INPUT ---`;
    const first = (await model.invoke([new HumanMessage(guarded)])) as AIMessage;
    const content = String(first.tool_calls?.[0]?.args.content);
    expect(content).toContain(TASK);
    expect(content).not.toContain("BEGIN USER INPUT");
  });
});

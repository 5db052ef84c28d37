/**
 * The graph the official LangGraph API server runs in bench/gateway.ts: the same conversation as a
 * deerflow-edge demo run, on a bare agent loop (model node, tool node, no middlewares).
 *
 * The scripted model follows the demo model's script (src/models/demo.ts): it says a sentence and
 * calls write_file with notes on the request, says a sentence and calls bash with the same `wc`
 * command, then answers with a report of both results. It streams word by word, as the demo does,
 * so `messages-tuple` carries a comparable number of token chunks. The tools are in-memory
 * equivalents of the virtual sandbox: a per-thread map of files, and a `bash` that understands the
 * one command the script runs.
 *
 * This file is loaded by the API server from bench/lgapi/node_modules (its own @langchain/* copies),
 * so it imports nothing from the project.
 */
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import { BaseChatModel, type BaseChatModelCallOptions } from "@langchain/core/language_models/chat_models";
import { AIMessage, AIMessageChunk, type BaseMessage, type ToolCall } from "@langchain/core/messages";
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs";
import { tool, type StructuredToolInterface } from "@langchain/core/tools";
import type { RunnableConfig } from "@langchain/core/runnables";
import { MessagesAnnotation, StateGraph, START } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

const WORKSPACE = "/mnt/user-data/workspace";
const NOTES_PATH = `${WORKSPACE}/notes.md`;
const INSPECT_COMMAND = `wc -w ${NOTES_PATH} && ls ${WORKSPACE}`;
const FOOTER =
  "I am a scripted model standing in for deerflow-edge's demo model: I follow a fixed script, so this shows the agent loop " +
  "rather than a real answer. It exists so both servers stream the same conversation.";

// ---------------------------------------------------------------------------------------------
// In-memory sandbox

const filesByThread = new Map<string, Map<string, string>>();

function filesOf(config: RunnableConfig | undefined): Map<string, string> {
  const threadId = String(config?.configurable?.["thread_id"] ?? "stateless");
  let files = filesByThread.get(threadId);
  if (files === undefined) filesByThread.set(threadId, (files = new Map()));
  return files;
}

const writeFile = tool(
  async ({ path, content }, config) => {
    filesOf(config).set(path, content);
    return "OK";
  },
  {
    name: "write_file",
    description: "Write text content to a file in the sandbox.",
    schema: z.object({ description: z.string(), path: z.string(), content: z.string() }),
  },
);

const bash = tool(
  async ({ command }, config) => {
    const files = filesOf(config);
    const match = /^wc -w (\S+) && ls (\S+)$/.exec(command);
    if (match === null) return `Error: this sandbox only runs \`${INSPECT_COMMAND}\``;
    const [, path, dir] = match as unknown as [string, string, string];
    const content = files.get(path);
    if (content === undefined) return `wc: ${path}: No such file or directory`;
    const words = content.split(/\s+/).filter((word) => word !== "").length;
    const listing = [...files.keys()]
      .filter((file) => file.startsWith(`${dir}/`))
      .map((file) => file.slice(dir.length + 1))
      .sort()
      .join("\n");
    return `${words} ${path}\n${listing}`;
  },
  {
    name: "bash",
    description: "Run a shell command in the sandbox.",
    schema: z.object({ description: z.string(), command: z.string() }),
  },
);

const tools: StructuredToolInterface[] = [writeFile, bash];

// ---------------------------------------------------------------------------------------------
// The scripted model

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part === "string" ? part : String(part?.text ?? ""))).join("");
  return "";
}

function titleOf(task: string): string {
  const line = task.split(/\r?\n/).find((l) => l.trim() !== "")?.trim() ?? "";
  return line.length <= 80 ? line : `${line.slice(0, 78)}…`;
}

function keyTermsOf(task: string): string[] {
  const counts = new Map<string, number>();
  for (const word of task.toLowerCase().match(/[\p{L}\p{N}][\p{L}\p{N}'-]*/gu) ?? []) {
    if (word.length >= 4) counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([word]) => word);
}

function notesFor(task: string): string {
  const terms = keyTermsOf(task);
  return [
    `# Notes: ${titleOf(task)}`,
    "",
    "Request, as received:",
    "",
    ...task.trim().split(/\r?\n/).map((line) => `> ${line}`),
    "",
    "## Key terms",
    "",
    ...terms.map((term) => `- ${term}`),
    "",
    "## Plan",
    "",
    `1. Pin down the goal: ${titleOf(task).replace(/[.!?…]+$/, "")}.`,
    `2. Collect what is needed about ${terms.slice(0, 2).join(" and ") || "the request"}.`,
    `3. Draft the result in ${WORKSPACE} and check it.`,
    "",
    "_Written by the bench's scripted model._",
    "",
  ].join("\n");
}

interface Turn {
  content: string;
  toolCalls: ToolCall[];
}

let turnCounter = 0;

function planTurn(messages: readonly BaseMessage[]): Turn {
  const userIndex = messages.findLastIndex((m) => m.getType() === "human");
  const task = userIndex >= 0 ? textOf(messages[userIndex]!.content).trim() : "";
  const since = messages.slice(userIndex + 1);
  const rounds = since.filter((m) => m.getType() === "ai" && ((m as AIMessage).tool_calls?.length ?? 0) > 0).length;
  const id = `call_bench_${++turnCounter}`;
  if (rounds === 0) {
    return {
      content: `I'll start by writing my notes on this to ${NOTES_PATH}.`,
      toolCalls: [{ type: "tool_call", id, name: "write_file", args: { description: "Write notes for the request", path: NOTES_PATH, content: notesFor(task) } }],
    };
  }
  if (rounds === 1) {
    return {
      content: "Now let me check what is in the workspace.",
      toolCalls: [{ type: "tool_call", id, name: "bash", args: { description: "Count the words in the notes and list the workspace", command: INSPECT_COMMAND } }],
    };
  }
  const results = since.filter((m) => m.getType() === "tool").map((m) => textOf(m.content));
  const words = /^\s*(\d+)\s/m.exec(results[1] ?? "")?.[1] ?? "?";
  return {
    content: [
      `Here is what I did for "${titleOf(task)}":`,
      "",
      `1. I wrote ${NOTES_PATH} with your request, its key terms and a three-step plan. write_file answered: "${results[0] ?? ""}"`,
      "",
      `2. I ran \`${INSPECT_COMMAND}\`. The output was:`,
      "",
      "```",
      results[1] ?? "",
      "```",
      "",
      `According to \`wc\`, the notes file holds ${words} words.`,
      "",
      FOOTER,
    ].join("\n"),
    toolCalls: [],
  };
}

class ScriptedDemoModel extends BaseChatModel<BaseChatModelCallOptions, AIMessageChunk> {
  _llmType(): string {
    return "bench-scripted-demo";
  }

  // Tools only ride along: the script knows which tool it calls at each step.
  override bindTools(tools: any[]): any {
    return this.withConfig({ tools } as never);
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const turn = planTurn(messages);
    const message = new AIMessage({ id: `bench-${turnCounter}`, content: turn.content, tool_calls: turn.toolCalls });
    return { generations: [{ text: turn.content, message }] };
  }

  async *_streamResponseChunks(
    messages: BaseMessage[],
    _options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    const turn = planTurn(messages);
    const id = `bench-${turnCounter}`;
    const chunks: AIMessageChunk[] = (turn.content.match(/\S+\s*/g) ?? []).map((word) => new AIMessageChunk({ id, content: word }));
    if (turn.toolCalls.length > 0) {
      chunks.push(
        new AIMessageChunk({
          id,
          content: "",
          tool_call_chunks: turn.toolCalls.map((call, index) => ({ type: "tool_call_chunk" as const, index, id: call.id, name: call.name, args: JSON.stringify(call.args) })),
        }),
      );
    }
    chunks.push(new AIMessageChunk({ id, content: "", response_metadata: { finish_reason: turn.toolCalls.length > 0 ? "tool_calls" : "stop" } }));
    for (const message of chunks) {
      const chunk = new ChatGenerationChunk({ message, text: typeof message.content === "string" ? message.content : "" });
      yield chunk;
      await runManager?.handleLLMNewToken(chunk.text, { prompt: 0, completion: 0 }, undefined, undefined, undefined, { chunk });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The graph

const model = new ScriptedDemoModel({}).bindTools(tools);

async function callModel(state: typeof MessagesAnnotation.State, config: RunnableConfig): Promise<{ messages: BaseMessage[] }> {
  return { messages: [await model.invoke(state.messages, config)] };
}

export const graph = new StateGraph(MessagesAnnotation)
  .addNode("model", callModel)
  .addNode("tools", new ToolNode(tools))
  .addEdge(START, "model")
  .addConditionalEdges("model", toolsCondition, ["tools", "__end__"])
  .addEdge("tools", "model")
  .compile();

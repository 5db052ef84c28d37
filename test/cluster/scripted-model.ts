// The model of the cluster's runs: an OpenAI-compatible chat-completions server in the test
// process (the one boundary the suite cannot reach for real is a paid model API), speaking the
// protocol over a real socket, streamed or not as the client asks. Stateless: what it answers
// follows from the request's messages alone, so any worker may make any call of any run.
//
// A run's human message (the last one in the request) may carry directives, each `#name=value`:
//   #steps=N    tool calls before the final answer (default 1), one per model call
//   #delay=MS   wait this long before answering each call (default: the server's delayMs)
//   #tool=NAME  the tool to call (default count_run; `none` answers at once)
// The model calls the tool with `{ "step": k }` (k = 1..N), then answers "done after N steps".
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { listenLoopback, readJson } from "./loopback.ts";

export interface ScriptedModelOptions {
  /** Wait before each answer unless a run's `#delay=` says otherwise (default 0). */
  readonly delayMs?: number;
}

export interface ScriptedModel {
  /** The base_url to configure (ends in /v1). */
  readonly baseUrl: string;
  /** Model calls answered so far. */
  calls(): number;
  /** Calls whose client went away before the answer (a run cancelled or a worker killed mid-call). */
  abandoned(): number;
  /** The whole prompt (every message's text) of each call whose last user message contains `text`: what a run was told, injected memory say. */
  promptsFor(text: string): string[];
  setDelay(ms: number): void;
  close(): Promise<void>;
}

interface ChatMessage {
  role: string;
  content?: unknown;
}

export interface Script {
  readonly steps: number;
  readonly delayMs: number | undefined;
  readonly tool: string;
}

/** The directives of the run's human message, the last one (a thread keeps earlier turns; see the file comment). */
export function scriptOf(messages: readonly ChatMessage[]): Script {
  const first = messages.findLast((m) => m.role === "user");
  const text = typeof first?.content === "string" ? first.content : Array.isArray(first?.content) ? JSON.stringify(first.content) : "";
  const directive = (name: string) => new RegExp(`#${name}=([\\w.-]+)`).exec(text)?.[1];
  const steps = Number(directive("steps") ?? 1);
  const delay = directive("delay");
  return { steps: Number.isInteger(steps) && steps >= 0 ? steps : 1, delayMs: delay === undefined ? undefined : Number(delay), tool: directive("tool") ?? "count_run" };
}

/** The input of a run the scripted model plays: a human message carrying the directives. */
export function scriptedInput(script: { steps?: number; delayMs?: number; tool?: string; text?: string } = {}): { messages: Array<{ type: string; content: string }> } {
  const parts = [script.text ?? "count this run"];
  if (script.steps !== undefined) parts.push(`#steps=${script.steps}`);
  if (script.delayMs !== undefined) parts.push(`#delay=${script.delayMs}`);
  if (script.tool !== undefined) parts.push(`#tool=${script.tool}`);
  return { messages: [{ type: "human", content: parts.join(" ") }] };
}

type Reply = { content: string; toolCall?: undefined } | { content: null; toolCall: { id: string; name: string; arguments: string } };

function replyTo(messages: readonly ChatMessage[], offersTools: boolean): Reply {
  const script = scriptOf(messages);
  // Only the messages after the last human turn belong to this run (a thread keeps older turns).
  const lastHuman = messages.map((m) => m.role).lastIndexOf("user");
  const done = messages.slice(lastHuman + 1).filter((m) => m.role === "tool").length;
  if (script.tool === "none" || !offersTools || done >= script.steps) return { content: `done after ${done} steps` };
  return {
    content: null,
    toolCall: { id: `call_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`, name: script.tool, arguments: JSON.stringify({ step: done + 1 }) },
  };
}

function completion(reply: Reply): Record<string, unknown> {
  const message = reply.toolCall
    ? { role: "assistant", content: null, tool_calls: [{ id: reply.toolCall.id, type: "function", function: { name: reply.toolCall.name, arguments: reply.toolCall.arguments } }] }
    : { role: "assistant", content: reply.content };
  return {
    // One id per completion: the messages reducer merges messages that share an id.
    id: `chatcmpl-${crypto.randomUUID()}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: "scripted",
    choices: [{ index: 0, message, finish_reason: reply.toolCall ? "tool_calls" : "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

/** The same answer as chat.completion.chunk events, the way a provider streams it. */
function chunks(reply: Reply): unknown[] {
  const id = `chatcmpl-${crypto.randomUUID()}`;
  const base = { id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: "scripted" };
  const delta = reply.toolCall
    ? { role: "assistant", content: null, tool_calls: [{ index: 0, id: reply.toolCall.id, type: "function", function: { name: reply.toolCall.name, arguments: reply.toolCall.arguments } }] }
    : { role: "assistant", content: reply.content };
  return [
    { ...base, choices: [{ index: 0, delta, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: reply.toolCall ? "tool_calls" : "stop" }] },
    { ...base, choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } },
  ];
}

export async function startScriptedModel(options: ScriptedModelOptions = {}): Promise<ScriptedModel> {
  let delayMs = options.delayMs ?? 0;
  let calls = 0;
  let abandoned = 0;
  const seen: Array<{ lastUser: string; prompt: string }> = [];
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}`, type: "test_error" } }));
      return;
    }
    const body = await readJson(req);
    const messages = (Array.isArray(body.messages) ? body.messages : []) as ChatMessage[];
    const reply = replyTo(messages, Array.isArray(body.tools) && body.tools.length > 0);
    const wait = scriptOf(messages).delayMs ?? delayMs;
    const text = (m: ChatMessage | undefined) => (typeof m?.content === "string" ? m.content : JSON.stringify(m?.content ?? ""));
    seen.push({ lastUser: text(messages.findLast((m) => m.role === "user")), prompt: messages.map(text).join("\n") });
    let gone = false;
    res.on("close", () => {
      if (!res.writableFinished) gone = true;
    });
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    if (gone || res.destroyed) {
      abandoned++;
      return;
    }
    calls++;
    if (body.stream === true) {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
      for (const event of chunks(reply)) res.write(`data: ${JSON.stringify(event)}\n\n`);
      res.end("data: [DONE]\n\n");
    } else {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(completion(reply)));
    }
  };
  const server: Server = createServer((req, res) => {
    answer(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: String(error), type: "test_error" } }));
    });
  });
  const listening = await listenLoopback(server);
  return {
    baseUrl: `${listening.url}/v1`,
    calls: () => calls,
    abandoned: () => abandoned,
    promptsFor: (text) => seen.filter((call) => call.lastUser.includes(text)).map((call) => call.prompt),
    setDelay: (ms) => void (delayMs = ms),
    close: listening.close,
  };
}

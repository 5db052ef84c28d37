/**
 * The load client's wire: create a thread and stream one run over raw fetch, parsing the SSE
 * response frame by frame. Raw fetch rather than the SDK Client so the client's own cost per frame
 * stays small and the first-frame time is the moment the frame's bytes arrive. Speaks the LangGraph
 * Platform API, so the same code drives deerflow-edge's gateway (under `/api`) and the official
 * API server (at the root).
 */

export interface Target {
  /** Base of the LangGraph API: `http://127.0.0.1:2026/api` or `http://127.0.0.1:<port>`. */
  readonly apiUrl: string;
  readonly assistantId: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** The one-line task every load run sends (the demo model writes notes on it, then counts their words). */
export const BENCH_TASK = "Compare the memory use of edge runtimes for agent harnesses and summarize the trade-offs.";

export interface RunOutcome {
  /** SSE events (comment-only heartbeats not counted). */
  readonly frames: number;
  readonly framesByEvent: Readonly<Record<string, number>>;
  /** Request sent → the first frame (the `metadata` frame on both servers). */
  readonly firstFrameMs: number;
  /** Request sent → the first frame carrying graph output (not `metadata`). */
  readonly firstDataFrameMs: number;
  readonly totalMs: number;
  /** Whether an `end` frame came (deerflow-edge sends it; the official server ends at EOF). */
  readonly ended: boolean;
  /** The last `values` frame's data, unparsed. */
  readonly lastValues: string | undefined;
  readonly errorFrame: string | undefined;
}

export class LoadError extends Error {
  override name = "LoadError";
}

function headersOf(target: Target): Record<string, string> {
  return { "content-type": "application/json", ...target.headers };
}

export async function createThread(target: Target): Promise<string> {
  const response = await fetch(`${target.apiUrl}/threads`, { method: "POST", headers: headersOf(target), body: JSON.stringify({ metadata: {} }) });
  const text = await response.text();
  if (!response.ok) throw new LoadError(`POST /threads answered ${response.status}: ${text.slice(0, 300)}`);
  const threadId = (JSON.parse(text) as { thread_id?: unknown }).thread_id;
  if (typeof threadId !== "string") throw new LoadError(`POST /threads answered without a thread_id: ${text.slice(0, 300)}`);
  return threadId;
}

/** `POST /threads/{id}/runs/stream`, read to the end. */
export async function streamRun(target: Target, threadId: string, body: Record<string, unknown>): Promise<RunOutcome> {
  const started = performance.now();
  const response = await fetch(`${target.apiUrl}/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { ...headersOf(target), accept: "text/event-stream" },
    body: JSON.stringify({ assistant_id: target.assistantId, ...body }),
  });
  if (!response.ok || response.body === null) {
    throw new LoadError(`POST /threads/{id}/runs/stream answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
  }
  const contentType = response.headers.get("content-type") ?? "";
  if (!contentType.includes("text/event-stream")) {
    await response.body.cancel();
    throw new LoadError(`the stream answered content-type ${JSON.stringify(contentType)}, not text/event-stream`);
  }

  let frames = 0;
  let firstFrameMs = NaN;
  let firstDataFrameMs = NaN;
  let ended = false;
  let lastValues: string | undefined;
  let errorFrame: string | undefined;
  const framesByEvent: Record<string, number> = {};

  const onFrame = (event: string, data: string): void => {
    const now = performance.now() - started;
    frames++;
    framesByEvent[event] = (framesByEvent[event] ?? 0) + 1;
    if (Number.isNaN(firstFrameMs)) firstFrameMs = now;
    if (Number.isNaN(firstDataFrameMs) && event !== "metadata") firstDataFrameMs = now;
    if (event === "values") lastValues = data;
    else if (event === "end") ended = true;
    else if (event === "error") errorFrame = data;
  };

  await readFrames(response.body, onFrame);

  return { frames, framesByEvent, firstFrameMs, firstDataFrameMs, totalMs: performance.now() - started, ended, lastValues, errorFrame };
}

/** Reads an SSE body to its end, handing each frame to `onFrame` as soon as its bytes arrived. */
export async function readFrames(body: ReadableStream<Uint8Array>, onFrame: (event: string, data: string, id: string | undefined) => void): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  const reader = body.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    buffer = parseFrames(buffer, onFrame);
  }
  buffer += decoder.decode();
  parseFrames(`${buffer}\n\n`, onFrame);
}

/** Hands every complete frame in `buffer` to `onFrame` (with its `id` line, if any); returns the incomplete rest. */
export function parseFrames(buffer: string, onFrame: (event: string, data: string, id: string | undefined) => void): string {
  const text = buffer.includes("\r") ? buffer.replace(/\r\n?/g, "\n") : buffer;
  let start = 0;
  for (;;) {
    const end = text.indexOf("\n\n", start);
    if (end < 0) break;
    const block = text.slice(start, end);
    start = end + 2;
    let event = "";
    const data: string[] = [];
    let fields = 0;
    let id: string | undefined;
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (name === "event") (event = value), fields++;
      else if (name === "data") data.push(value), fields++;
      else if (name === "id") (id = value), fields++;
      else if (name === "retry") fields++;
    }
    if (fields > 0 && (event !== "" || data.length > 0)) onFrame(event || "message", data.join("\n"), id);
  }
  return text.slice(start);
}

/** What both servers' final state must show for the demo conversation. */
export function checkFinalValues(lastValues: string | undefined): string | null {
  if (lastValues === undefined) return "no values frame";
  let values: { messages?: Array<Record<string, unknown>> };
  try {
    values = JSON.parse(lastValues);
  } catch {
    return `the last values frame is not JSON: ${lastValues.slice(0, 200)}`;
  }
  const messages = values.messages ?? [];
  const typeOf = (m: Record<string, unknown>): string => String(m["type"] ?? m["role"] ?? "");
  const tools = messages.filter((m) => typeOf(m) === "tool");
  const toolNames = tools.map((m) => String(m["name"] ?? ""));
  if (!toolNames.includes("write_file") || !toolNames.includes("bash")) return `tool messages [${toolNames}], expected write_file and bash`;
  const last = messages.at(-1);
  if (last === undefined || typeOf(last) !== "ai") return `the last message is ${last === undefined ? "missing" : typeOf(last)}, expected ai`;
  const content = typeof last["content"] === "string" ? last["content"] : JSON.stringify(last["content"]);
  if (!/the notes file holds \d+ words/.test(content)) return `the final answer does not report the word count: ${content.slice(0, 300)}`;
  return null;
}

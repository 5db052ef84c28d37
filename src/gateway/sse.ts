import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { systemClock } from "../core/clock.ts";
import { errorMessage } from "../core/errors.ts";
import type { Clock } from "../ports/runtime-ports.ts";
import { frameDataJson, serializedFrameData, type StreamFrame } from "../runtime/runs/stream-bridge.ts";

/*
 * Run frames as Server-Sent Events the LangGraph SDK accepts: `event:`, then `data:` that is
 * always JSON (the SDK parses every data line), then `id:` (none on a gap frame). A `: heartbeat`
 * comment goes out at a steady cadence from the first byte to the last: the SDK arms an idle
 * timeout after the first comment, and Bun drops a connection idle for 10 s.
 */

export const DEFAULT_HEARTBEAT_MS = 15_000;

export interface SseOptions {
  readonly clock?: Clock;
  readonly heartbeatMs?: number;
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * The client went away before the stream ended (Hono's onAbort: on every runtime it fires only
   * on a real disconnect). Never called after the stream ended by itself, a gap included.
   */
  readonly onDisconnect?: () => void;
}

/** Headers of a create-and-stream response: where the run lives, readable by cross-origin clients. */
export function runLocationHeaders(threadId: string, runId: string): Record<string, string> {
  return {
    "Content-Location": `/api/threads/${threadId}/runs/${runId}`,
    "Access-Control-Expose-Headers": "Content-Location",
  };
}

const LINE_BREAK = /[\r\n]/;

/**
 * One SSE frame. JSON.stringify escapes every line break, so the data is always one `data:` line
 * and needs no splitting (Hono's writeSSE splits each payload with a regex: a tenth of a demo
 * run's CPU went there). Event names and ids are the server's own; a line break in one is a bug.
 */
export function formatSseFrame(event: string, data: unknown, id?: string | null): string {
  return formatSseJson(event, frameDataJson(data), id);
}

/** One SSE frame whose data is JSON text already (one line: JSON.stringify made it). */
function formatSseJson(event: string, json: string, id?: string | null): string {
  if (LINE_BREAK.test(event) || (id != null && LINE_BREAK.test(id))) throw new Error("an SSE event name or id must not contain a line break");
  return id == null ? `event: ${event}\ndata: ${json}\n\n` : `event: ${event}\ndata: ${json}\nid: ${id}\n\n`;
}

export function sseResponse(c: Context, frames: (signal: AbortSignal) => AsyncIterable<StreamFrame>, options: SseOptions = {}): Response {
  const clock = options.clock ?? systemClock;
  const heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  c.header("X-Accel-Buffering", "no");
  for (const [name, value] of Object.entries(options.headers ?? {})) c.header(name, value);
  return streamSSE(c, async (stream) => {
    const reading = new AbortController();
    let ended = false;
    stream.onAbort(() => {
      reading.abort();
      if (!ended) options.onDisconnect?.();
    });
    const heartbeat = (async () => {
      while (!reading.signal.aborted) {
        try {
          await clock.sleep(heartbeatMs, reading.signal);
        } catch {
          return;
        }
        if (!reading.signal.aborted) await stream.write(": heartbeat\n\n");
      }
    })();
    try {
      for await (const frame of frames(reading.signal)) {
        if (stream.aborted) break;
        const json = serializedFrameData(frame);
        await stream.write(json === undefined ? formatSseFrame(frame.event, frame.data, frame.id) : formatSseJson(frame.event, json, frame.id));
      }
    } catch (error) {
      if (!stream.aborted) {
        const name = error instanceof Error ? error.name : "Error";
        await stream.write(formatSseFrame("error", { name, message: errorMessage(error) }));
      }
    } finally {
      ended = !stream.aborted;
      reading.abort();
      await heartbeat;
    }
  });
}

import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { systemClock } from "../core/clock.ts";
import { errorMessage } from "../core/errors.ts";
import type { Clock } from "../ports/runtime-ports.ts";
import type { StreamFrame } from "../runtime/runs/stream-bridge.ts";

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
        await stream.writeSSE({ event: frame.event, data: JSON.stringify(frame.data ?? null), ...(frame.id === undefined ? {} : { id: frame.id }) });
      }
    } catch (error) {
      if (!stream.aborted) {
        const name = error instanceof Error ? error.name : "Error";
        await stream.writeSSE({ event: "error", data: JSON.stringify({ name, message: errorMessage(error) }) });
      }
    } finally {
      ended = !stream.aborted;
      reading.abort();
      await heartbeat;
    }
  });
}

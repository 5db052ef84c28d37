import { createParser, type EventSourceMessage } from "eventsource-parser";
import { DeerflowError } from "../../core/errors.ts";

/** Reading the response body failed: the connection broke off mid-response. */
export class StreamReadError extends DeerflowError {
  constructor(cause: unknown) {
    super("response_body_unreadable", "reading the response body failed", { cause });
  }
}

/**
 * Iterates the `data:` payloads of a server-sent-events body, one per event. A body that ends
 * without the blank line after its last event still yields that event, so a stream cut off
 * mid-event reaches the caller (as a payload that is not JSON) instead of vanishing.
 */
export async function* readSseData(body: ReadableStream<Uint8Array>, onBytes: () => void): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const events: string[] = [];
  const parser = createParser({ onEvent: (event: EventSourceMessage) => events.push(event.data) });
  try {
    for (;;) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (error) {
        throw new StreamReadError(error);
      }
      const { done, value } = read;
      if (done) break;
      onBytes();
      parser.feed(decoder.decode(value, { stream: true }));
      yield* events.splice(0);
    }
    // End the last line and the last event, as if the server had sent them.
    parser.feed(`${decoder.decode()}\n\n`);
    yield* events.splice(0);
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

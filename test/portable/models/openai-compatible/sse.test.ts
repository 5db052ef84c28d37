// The server-sent-events reader under the OpenAI-compatible model: what a provider's stream may
// look like on the wire (line endings, chunk boundaries anywhere, a missing final blank line).
import { describe, expect, it } from "vitest";
import { readSseData } from "../../../../src/models/openai-compatible/sse.ts";

const encoder = new TextEncoder();

function bodyOf(chunks: readonly Uint8Array[]): { body: ReadableStream<Uint8Array>; cancelled: () => boolean } {
  let index = 0;
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (index < chunks.length) controller.enqueue(chunks[index++]!);
      else controller.close();
    },
    cancel() {
      cancelled = true;
    },
  });
  return { body, cancelled: () => cancelled };
}

async function events(chunks: readonly Uint8Array[], onBytes: () => void = () => undefined): Promise<string[]> {
  const out: string[] = [];
  for await (const data of readSseData(bodyOf(chunks).body, onBytes)) out.push(data);
  return out;
}

const text = (...parts: string[]): Uint8Array[] => parts.map((part) => encoder.encode(part));

describe("readSseData", () => {
  it("yields one payload per event, joining multi-line data with a newline", async () => {
    expect(await events(text("data: one\n\ndata: two\ndata: lines\n\n"))).toEqual(["one", "two\nlines"]);
  });

  it("accepts CRLF and lone CR line endings", async () => {
    expect(await events(text("data: a\r\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n"))).toEqual(["a\nb", "c", "d"]);
  });

  it("takes a data line without a space after the colon, and keeps any space beyond the first", async () => {
    expect(await events(text("data:x\n\ndata:  y\n\ndata\n\n"))).toEqual(["x", " y", ""]);
  });

  it("skips comments, other fields and events that carry no data", async () => {
    expect(await events(text(": keep-alive\n\nevent: ping\nid: 7\nretry: 10\n\nevent: message\ndata: z\n\n"))).toEqual(["z"]);
  });

  it("passes [DONE] through as a payload like any other", async () => {
    expect(await events(text("data: last\n\ndata: [DONE]\n\n"))).toEqual(["last", "[DONE]"]);
  });

  it("still yields the last event when the body ends without its blank line, or mid-line", async () => {
    expect(await events(text("data: a\n\ndata: b\n"))).toEqual(["a", "b"]);
    expect(await events(text("data: a\n\ndata: {\"cut"))).toEqual(["a", '{"cut']);
    expect(await events(text("data: a\r"))).toEqual(["a"]);
  });

  it("gives the same payloads wherever the body is cut into chunks, even inside a character", async () => {
    const wire =
      ': hello\r\n\r\nevent: message\r\ndata: {"content":"Grüße, 你好 🌍"}\r\n\r\n' +
      "data:first\ndata: second\n\n" +
      "data: [DONE]\n\n";
    const bytes = encoder.encode(wire);
    const expected = ['{"content":"Grüße, 你好 🌍"}', "first\nsecond", "[DONE]"];
    expect(await events([bytes])).toEqual(expected);
    expect(await events([...bytes].map((byte) => Uint8Array.of(byte)))).toEqual(expected);
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(await events([bytes.slice(0, cut), bytes.slice(cut)]), `cut at byte ${cut}`).toEqual(expected);
    }
  });

  it("reports every chunk read, so an idle timer can be reset", async () => {
    let reads = 0;
    await events(text("data: a\n", "\n", "data: b\n\n"), () => reads++);
    expect(reads).toBe(3);
  });

  it("cancels the body when the reader stops early", async () => {
    const { body, cancelled } = bodyOf(text("data: a\n\n", "data: b\n\n", "data: c\n\n"));
    for await (const data of readSseData(body, () => undefined)) if (data === "a") break;
    expect(cancelled()).toBe(true);
  });
});

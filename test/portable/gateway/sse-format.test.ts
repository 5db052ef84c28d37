import { describe, expect, it } from "vitest";
import { formatSseFrame } from "../../../src/gateway/sse.ts";

describe("formatSseFrame", () => {
  it("writes event, one JSON data line (line breaks escaped, non-ASCII kept) and the id", () => {
    expect(formatSseFrame("messages", [{ content: "a\nb\r\nc – ✓" }], "1796-3")).toBe(
      'event: messages\ndata: [{"content":"a\\nb\\r\\nc – ✓"}]\nid: 1796-3\n\n',
    );
  });

  it("sends null for undefined data and leaves the id out of a gap frame", () => {
    expect(formatSseFrame("end", undefined, "1-9")).toBe("event: end\ndata: null\nid: 1-9\n\n");
    expect(formatSseFrame("gap", { code: "stream_replay_gap" })).toBe('event: gap\ndata: {"code":"stream_replay_gap"}\n\n');
  });

  it("refuses a line break in an event name or id, which would split the frame", () => {
    expect(() => formatSseFrame("values\nevent: forged", {})).toThrow(/line break/);
    expect(() => formatSseFrame("values", {}, "1\n\ndata: x")).toThrow(/line break/);
  });
});

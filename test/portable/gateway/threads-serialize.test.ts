import { describe, expect, it } from "vitest";
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { serializeMessage, serializeValue, serializeValues } from "../../../src/runtime/serialize.ts";

describe("serializeValues: state as the LangGraph wire format", () => {
  it("turns messages into the dicts useStream parses, one shape per message kind", () => {
    const values = serializeValues({
      messages: [
        new HumanMessage({ content: "hi", id: "h1" }),
        new AIMessage({
          content: "",
          id: "a1",
          tool_calls: [{ name: "ls", args: { path: "/" }, id: "c1", type: "tool_call" }],
          usage_metadata: { input_tokens: 1, output_tokens: 2, total_tokens: 3 },
        }),
        new ToolMessage({ content: "ok", tool_call_id: "c1", name: "ls", id: "t1" }),
        new SystemMessage("sys"),
      ],
    });
    const [human, ai, tool, system] = values.messages as Record<string, unknown>[];
    expect(human).toEqual({ type: "human", content: "hi", id: "h1", name: null, additional_kwargs: {}, response_metadata: {} });
    expect(ai).toMatchObject({
      type: "ai",
      id: "a1",
      tool_calls: [{ name: "ls", args: { path: "/" }, id: "c1" }],
      invalid_tool_calls: [],
      usage_metadata: { input_tokens: 1, output_tokens: 2, total_tokens: 3 },
    });
    expect(tool).toMatchObject({ type: "tool", tool_call_id: "c1", name: "ls", status: "success", content: "ok" });
    expect(system).toMatchObject({ type: "system", content: "sys", id: null });
    // What goes on the wire is plain JSON, nothing else.
    expect(JSON.parse(JSON.stringify(values))).toEqual(values);
  });

  it("names chunks by their chunk type, as the Python server's messages frames do", () => {
    expect(serializeMessage(new AIMessageChunk({ content: "to", id: "a2" }))).toMatchObject({ type: "AIMessageChunk", content: "to", tool_call_chunks: [] });
  });

  it("leaves the engine's own channel out and keeps __interrupt__", () => {
    const values = serializeValues({ title: "t", jump_to: "end", __interrupt__: [{ id: "i1", value: "continue?" }] });
    expect(values).toEqual({ title: "t", __interrupt__: [{ id: "i1", value: "continue?" }] });
  });

  it("drops inline images from hidden messages only", () => {
    const blocks = [
      { type: "text", text: "images" },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
      { type: "image", data: "AAAA", mimeType: "image/png" },
      { type: "image_url", image_url: { url: "https://example.com/a.png" } },
    ];
    const hidden = new HumanMessage({ content: blocks, id: "x", additional_kwargs: { hide_from_ui: true } });
    const shown = new HumanMessage({ content: blocks, id: "y" });
    const [h, s] = serializeValues({ messages: [hidden, shown] }).messages as { content: unknown[] }[];
    expect(h!.content).toEqual([blocks[0], blocks[3]]);
    expect(s!.content).toHaveLength(4);
  });

  it("makes any value JSON-safe: dates, maps, sets, bigints, cycles, undefined fields", () => {
    const cyclic: Record<string, unknown> = { name: "loop" };
    cyclic.self = cyclic;
    expect(
      serializeValue({
        when: new Date(Date.UTC(2026, 0, 2)),
        map: new Map([["a", 1]]),
        set: new Set([1, 2]),
        big: 10n,
        gone: undefined,
        fn: () => 1,
        nan: Number.NaN,
        cyclic,
      }),
    ).toEqual({
      when: "2026-01-02T00:00:00.000Z",
      map: { a: 1 },
      set: [1, 2],
      big: "10",
      nan: null,
      cyclic: { name: "loop", self: null },
    });
  });

  it("cuts a cycle that runs through a message, and serializes a message held twice both times", () => {
    const message = new AIMessage({ content: "hi", id: "m1" });
    message.additional_kwargs = { holder: { message } };
    const out = serializeValue({ messages: [message, message] }) as { messages: { id: string; additional_kwargs: unknown }[] };
    expect(out.messages.map((m) => m.id)).toEqual(["m1", "m1"]);
    expect(out.messages[1]!.additional_kwargs).toEqual({ holder: { message: null } });
    expect(JSON.parse(JSON.stringify(out))).toEqual(out);
  });

  it("keeps a caller's __proto__ key as data", () => {
    const out = serializeValue(JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(["__proto__"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

import { describe, expect, it } from "vitest";
import { contentText } from "../../src/core/content.ts";

const image = { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } };

describe("contentText", () => {
  it("reads a string as-is and a list by its text blocks, bare strings included, one per line", () => {
    expect(contentText("hello")).toBe("hello");
    expect(contentText([{ type: "text", text: "a" }, "b", image, { text: "c" }])).toBe("a\nb\nc");
    expect(contentText([{ type: "text", text: "" }, { type: "text", text: "a" }])).toBe("\na");
    expect(contentText(undefined)).toBe("");
  });

  it("skipEmpty leaves empty blocks out, so they add no blank line", () => {
    expect(contentText(["a", { type: "text", text: "" }, "", "b"], { skipEmpty: true })).toBe("a\nb");
  });

  it("a separator runs the blocks together, as streamed text does", () => {
    expect(contentText([{ type: "text", text: "Hel" }, image, { type: "text", text: "lo" }], { separator: "" })).toBe("Hello");
  });

  it("typedOnly counts bare strings and blocks typed text, not other blocks that carry a text field", () => {
    const content = ["a", { type: "text", text: "b" }, { type: "text-plain", text: "file body" }, { text: "untyped" }];
    expect(contentText(content, { separator: "", typedOnly: true })).toBe("ab");
  });

  it("nonText json keeps what is not text, so merged content loses nothing", () => {
    expect(contentText(["a", image, 42, null], { nonText: "json" })).toBe(`a\n${JSON.stringify(image)}\n42\nnull`);
    expect(contentText(42, { nonText: "json" })).toBe("42");
  });

  it("nonText nested reads the text inside lists and { content } objects", () => {
    const options = { skipEmpty: true, nonText: "nested" } as const;
    expect(contentText({ content: [{ text: "Nested" }] }, options)).toBe("Nested");
    expect(contentText([["a", ""], { type: "tool_result", content: [{ type: "text", text: "b" }] }, image], options)).toBe("a\nb");
  });
});

import { describe, expect, it } from "vitest";
import { stripCodeFence, stripThinkBlocks } from "../../src/core/model-text.ts";
import { cleanPolishedDraft, parseSuggestions } from "../../src/gateway/routes/assist.ts";

describe("model answers used as data", () => {
  it("drops complete reasoning blocks, and cuts at an unclosed one only when asked", () => {
    expect(stripThinkBlocks("<think>hmm\nso</think> Answer")).toBe("Answer");
    expect(stripThinkBlocks("Answer <think>cut off")).toBe("Answer <think>cut off");
    expect(stripThinkBlocks("Answer <think>cut off", { truncateUnclosed: true })).toBe("Answer");
  });

  it("unwraps one code fence around the whole text only", () => {
    expect(stripCodeFence('```json\n["a"]\n```')).toBe('["a"]');
    expect(stripCodeFence("text ```x``` more")).toBe("text ```x``` more");
  });

  it("suggestions: the JSON list of strings in the answer, cleaned and capped; anything else is empty", () => {
    expect(parseSuggestions('<think>plan</think>```json\n["Why?", " ", 3, "How\\nso?", "Third", "Fourth"]\n```', 3)).toEqual(["Why?", "How so?", "Third"]);
    expect(parseSuggestions('Sure! Here: ["One", "Two"] hope that helps', 5)).toEqual(["One", "Two"]);
    expect(parseSuggestions("I cannot think of any.", 3)).toEqual([]);
    expect(parseSuggestions("[not json]", 3)).toEqual([]);
    expect(parseSuggestions('{"a": 1}', 3)).toEqual([]);
  });

  it("a polished draft keeps a literal <think> it mentions", () => {
    expect(cleanPolishedDraft("<think>x</think>\n```\nExplain the <think> tag.\n```")).toBe("Explain the <think> tag.");
  });
});

import { describe, expect, it } from "vitest";
import { CHARS_PER_TOKEN, CJK_CHARS_PER_TOKEN, estimateTokens } from "../../src/core/tokens.ts";
import { estimateTokens as memoryTokens } from "../../src/middlewares/memory/store.ts";
import { countTokensApproximately } from "../../src/middlewares/summarization/context.ts";
import { HumanMessage } from "@langchain/core/messages";

describe("the heuristic token count", () => {
  it("counts about 4 characters a token and 2 for CJK, unrounded", () => {
    expect(CHARS_PER_TOKEN).toBe(4);
    expect(CJK_CHARS_PER_TOKEN).toBe(2);
    expect(estimateTokens("")).toBe(0);
    expect(estimateTokens("abcdefgh")).toBe(2);
    expect(estimateTokens("abc")).toBe(0.75);
    expect(estimateTokens("我喜欢蟒蛇")).toBe(2.5);
    expect(estimateTokens("こんにちは")).toBe(2.5);
    expect(estimateTokens("안녕")).toBe(1);
    expect(estimateTokens("ab我")).toBe(1);
  });

  it("counts a character outside the BMP once, as upstream does", () => {
    expect(estimateTokens("😀😀😀😀")).toBe(1);
    expect(estimateTokens("a😀")).toBe(0.5);
  });

  it("is what memory's budget and summarization's trigger both measure with", () => {
    expect(memoryTokens("我喜欢蟒蛇abc")).toBe(Math.floor(estimateTokens("我喜欢蟒蛇abc")));
    // One message: its text plus 3 tokens of role markers, rounded up.
    expect(countTokensApproximately([new HumanMessage("我喜欢蟒蛇abc")])).toBe(Math.ceil(estimateTokens("我喜欢蟒蛇abc") + 3));
  });
});

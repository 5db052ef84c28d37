/*
 * The library's one heuristic token count, for wherever a figure is needed without a tokenizer
 * (the memory budget, when to compact, the demo model's usage, an externalised output's size):
 * about 4 characters a token, but 2 for CJK (Hiragana/Katakana, CJK ideographs, Hangul
 * syllables), whose density the plain ratio would underestimate. Characters are code points,
 * as upstream counts them (an emoji is one). The count is fractional so a caller summing many pieces
 * rounds once, the way its budget wants (floor to stay under a budget, ceil to not undercount).
 */

export const CHARS_PER_TOKEN = 4;
export const CJK_CHARS_PER_TOKEN = 2;

// CJK, or a surrogate (a code point outside the BMP takes two code units but is one character).
const NEEDS_SCAN = /[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7a3\ud800-\udfff]/;

function isCjk(code: number): boolean {
  return (code >= 0x4e00 && code <= 0x9fff) || (code >= 0x3040 && code <= 0x30ff) || (code >= 0xac00 && code <= 0xd7a3);
}

/** Estimated tokens of `text`, unrounded. */
export function estimateTokens(text: string): number {
  // Most text has neither; one native scan answers that without a loop per character.
  if (!NEEDS_SCAN.test(text)) return text.length / CHARS_PER_TOKEN;
  let cjk = 0;
  let other = 0;
  for (const ch of text) {
    if (isCjk(ch.codePointAt(0)!)) cjk++;
    else other++;
  }
  return other / CHARS_PER_TOKEN + cjk / CJK_CHARS_PER_TOKEN;
}

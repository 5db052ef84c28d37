/*
 * Cleaning a model's free-text answer before it is used as data: reasoning blocks some models
 * inline (`<think>...</think>`) and the markdown fence they like to wrap JSON or a rewrite in.
 */

const THINK_BLOCK = /<think\b[^>]*>[\s\S]*?<\/think\s*>/gi;
const OPEN_THINK = /<think\b[^>]*>/i;

/**
 * Removes complete `<think>` blocks. With `truncateUnclosed`, a dangling open tag (a model cut off
 * mid-thought) cuts the text there: right for answers parsed as data, wrong for prose that may
 * mention the tag itself.
 */
export function stripThinkBlocks(text: string, options: { truncateUnclosed?: boolean } = {}): string {
  let out = text.replace(THINK_BLOCK, "");
  if (options.truncateUnclosed) {
    const open = OPEN_THINK.exec(out);
    if (open) out = out.slice(0, open.index);
  }
  return out.trim();
}

/** The inside of one markdown code fence wrapping the whole text; the text itself otherwise. */
export function stripCodeFence(text: string): string {
  const trimmed = text.trim();
  if (!trimmed.startsWith("```")) return trimmed;
  const lines = trimmed.split(/\r?\n/);
  if (lines.length >= 3 && lines.at(-1)!.startsWith("```")) return lines.slice(1, -1).join("\n").trim();
  return trimmed;
}

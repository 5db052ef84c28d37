/** How {@link contentText} reads message content; every option defaults to the plainest reading. */
export interface ContentTextOptions {
  /** Between the texts of consecutive blocks; default a newline. */
  readonly separator?: string;
  /** Leave out blocks whose text is empty, so they add no blank line. */
  readonly skipEmpty?: boolean;
  /**
   * Only bare strings and blocks typed `text` count, as a provider reads them: a block that merely
   * carries a `text` field (a plain-text file, an untyped dict) is not message text.
   */
  readonly typedOnly?: boolean;
  /**
   * What a block without text becomes: `drop` leaves it out (images and the like); `json` keeps it
   * as its JSON (a primitive as its string), so merging content loses nothing; `nested` reads the
   * text inside it (a list, or a `{ content }` object), for whatever shape a provider returns.
   */
  readonly nonText?: "drop" | "json" | "nested";
}

function blockText(block: unknown, typedOnly: boolean): string | undefined {
  if (typeof block === "string") return block;
  if (typeof block !== "object" || block === null || Array.isArray(block)) return undefined;
  const { type, text } = block as { type?: unknown; text?: unknown };
  if (typeof text !== "string" || (typedOnly && type !== "text")) return undefined;
  return text;
}

function nonTextBlock(block: unknown, options: ContentTextOptions): string | undefined {
  switch (options.nonText) {
    case "json":
      return typeof block === "object" ? JSON.stringify(block) : String(block);
    case "nested":
      if (Array.isArray(block)) return contentText(block, options);
      if (typeof block === "object" && block !== null) {
        const inner = (block as { content?: unknown }).content;
        if (inner !== undefined) return contentText(inner, options);
      }
      return undefined;
    default:
      return undefined;
  }
}

/**
 * The text of message content: a string as-is, a list by the text of its blocks (bare strings
 * count) joined by `separator`. Anything else is read as a single block.
 */
export function contentText(content: unknown, options: ContentTextOptions = {}): string {
  if (typeof content === "string") return content;
  const blocks: readonly unknown[] = Array.isArray(content) ? content : [content];
  const typedOnly = options.typedOnly ?? false;
  const parts: string[] = [];
  for (const block of blocks) {
    const text = blockText(block, typedOnly) ?? nonTextBlock(block, options);
    if (text !== undefined && !(options.skipEmpty && text === "")) parts.push(text);
  }
  return parts.join(options.separator ?? "\n");
}

import type { MessageContent } from "@langchain/core/messages";
import { contentText } from "../core/content.ts";

/** The text of message content as a provider reads it: its text blocks run together, images and the like drop out. */
export function textOf(content: MessageContent): string {
  return contentText(content, { separator: "", typedOnly: true });
}

/** Whitespace collapsed to single spaces, cut to `max` characters with an ellipsis. */
export function oneLine(text: string, max = 500): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

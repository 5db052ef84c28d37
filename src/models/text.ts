import type { BaseMessage, MessageContent } from "@langchain/core/messages";
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

/** Middleware-injected human messages (reminders, data blocks) are not the user's turn. */
export function isUserTurn(message: BaseMessage): boolean {
  if (message.type !== "human") return false;
  const kwargs = message.additional_kwargs ?? {};
  return kwargs.hide_from_ui !== true && kwargs.deerflow_content_kind === undefined;
}

/**
 * The user's own words: the lead chain hands the model the latest input inside a
 * `--- BEGIN USER INPUT ---` guard, which a real model reads past, and so do the offline models.
 */
export function userInputOf(text: string): string {
  const guarded = /--- BEGIN USER INPUT ---\n([\s\S]*)\n--- END USER INPUT ---/.exec(text);
  return (guarded ? guarded[1]! : text).trim();
}

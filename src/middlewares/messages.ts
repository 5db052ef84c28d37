import { HumanMessage, type AIMessage, type BaseMessage } from "@langchain/core/messages";
import { contentText } from "../core/content.ts";
import { isRecord } from "../core/guards.ts";
import type { ModelHandler, ModelRequest } from "../engine/types.ts";

/**
 * Conventions every middleware shares for messages the framework itself adds to a conversation:
 * hidden messages carry `additional_kwargs.hide_from_ui = true` and a stable `name` saying what
 * they are (progress_hint, loop_warning, budget_warning, todo_reminder, ...).
 */
export const HIDE_FROM_UI = "hide_from_ui";

/** The legacy summary message name: never counts as real user input. */
export const SUMMARY_MESSAGE_NAME = "summary";

export function isHidden(message: BaseMessage): boolean {
  return message.additional_kwargs?.[HIDE_FROM_UI] === true;
}

/**
 * Names of the framework's own messages a conversation's history never shows, hidden flag or not:
 * the legacy summary, LoopDetection's warning, TodoList's reminders (their modules export the same
 * names: LOOP_WARNING_NAME, TODO_REMINDER_NAME, TODO_COMPLETION_REMINDER_NAME; a test holds them equal).
 */
export const HISTORY_HIDDEN_NAMES: ReadonlySet<string> = new Set([SUMMARY_MESSAGE_NAME, "loop_warning", "todo_reminder", "todo_completion_reminder"]);

/**
 * A message the web UI's history leaves out: system prompts, RemoveMessage markers, anything
 * flagged hidden, and the framework's named notices (HISTORY_HIDDEN_NAMES).
 */
export function isHiddenFromHistory(message: BaseMessage): boolean {
  const type = message.type;
  if (type === "system" || type === "remove") return true;
  if (isHidden(message)) return true;
  return message.name !== undefined && HISTORY_HIDDEN_NAMES.has(message.name);
}

/**
 * Sources of Human Input Card replies the history keeps although they are hidden: the spec's
 * allowlist ("RunJournal persists only allowlisted hidden sources (currently ask_clarification)").
 * A reply from any other source stays hidden like every other framework message.
 */
export const PERSISTED_HIDDEN_INPUT_SOURCES: ReadonlySet<string> = new Set(["ask_clarification"]);

/** A hidden HumanMessage answering a card of an allowlisted source (`human_input_response.source`). */
export function isPersistedHiddenInput(message: BaseMessage): boolean {
  if (message.type !== "human" || !isHidden(message)) return false;
  const response: unknown = message.additional_kwargs?.["human_input_response"];
  return isRecord(response) && typeof response["source"] === "string" && PERSISTED_HIDDEN_INPUT_SOURCES.has(response["source"]);
}

/**
 * A message the thread's history lists: every one not hidden from it, plus the user's hidden
 * replies to allowlisted cards, so an answered card still reads as answered after a reload.
 */
export function isListedInHistory(message: BaseMessage): boolean {
  return !isHiddenFromHistory(message) || isPersistedHiddenInput(message);
}

/**
 * A message the user really typed: a HumanMessage that is not the legacy summary and not hidden,
 * except a hidden reply to a clarification card (it carries `human_input_response`).
 */
export function isRealUserMessage(message: BaseMessage): boolean {
  if (!HumanMessage.isInstance(message)) return false;
  if (message.name === SUMMARY_MESSAGE_NAME) return false;
  if (isHidden(message)) return message.additional_kwargs?.human_input_response !== undefined;
  return true;
}

/** Index of the newest real user message, or -1. */
export function latestRealUserIndex(messages: readonly BaseMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (isRealUserMessage(messages[i]!)) return i;
  return -1;
}

/** A hidden HumanMessage the framework adds for the model only (a hint, a warning, a reminder). */
export function hiddenHumanMessage(name: string, content: string, kwargs: Record<string, unknown> = {}, id?: string): HumanMessage {
  return new HumanMessage({ content, name, ...(id ? { id } : {}), additional_kwargs: { ...kwargs, [HIDE_FROM_UI]: true } });
}

/**
 * Calls the model with the pending notices (a warning, a hint) delivered as one hidden HumanMessage
 * named `name` after the request's messages, the notices separated by a blank line. The caller
 * clears them only once this resolves, so a retried call (LLMErrorHandling sits outside) still
 * carries them.
 */
export function handleWithHiddenNotices(request: ModelRequest, handler: ModelHandler, name: string, notices: readonly string[]): Promise<AIMessage> {
  return handler({ ...request, messages: [...request.messages, hiddenHumanMessage(name, notices.join("\n\n"))] });
}

/** The text of a message's content, whether a string or a list of content blocks (joined by newlines). */
export function messageText(message: BaseMessage): string {
  return contentText(message.content);
}

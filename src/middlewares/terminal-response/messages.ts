import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { latestRealUserIndex } from "../messages.ts";
import { isRecord } from "../../core/guards.ts";

/*
 * Shared judgements about a model's terminal reply, used by the terminal-response,
 * model-length and safety guards so they agree on what "empty" and "wants a tool" mean.
 */

const TEXT_BLOCK_TYPES: ReadonlySet<string> = new Set(["text", "output_text"]);
const TOOL_CALL_FINISH_REASONS: ReadonlySet<string> = new Set(["tool_calls", "function_call"]);

function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (isRecord(value)) return Object.keys(value).length > 0;
  return Boolean(value);
}

export function isAIMessage(message: BaseMessage | undefined): message is AIMessage {
  return message !== undefined && AIMessage.isInstance(message);
}

/** Text a user would see: a non-blank string, or a non-blank text block (reasoning blocks do not count). */
export function hasVisibleContent(message: BaseMessage): boolean {
  const content: unknown = message.content;
  if (typeof content === "string") return content.trim() !== "";
  if (!Array.isArray(content)) return false;
  return content.some((block: unknown) => {
    if (typeof block === "string") return block.trim() !== "";
    if (!isRecord(block) || typeof block["type"] !== "string" || !TEXT_BLOCK_TYPES.has(block["type"])) return false;
    return typeof block["text"] === "string" && block["text"].trim() !== "";
  });
}

/**
 * Whether the reply still asks for a tool in any form a provider uses: structured or invalid calls,
 * raw `additional_kwargs.tool_calls`, a legacy `function_call`, and optionally a tool-call
 * finish_reason with the calls missing.
 */
export function hasToolCallIntent(message: AIMessage, options: { includeFinishReason?: boolean } = {}): boolean {
  if ((message.tool_calls?.length ?? 0) > 0 || (message.invalid_tool_calls?.length ?? 0) > 0) return true;
  const kwargs = message.additional_kwargs ?? {};
  if (truthy(kwargs["tool_calls"]) || truthy(kwargs["function_call"])) return true;
  if (!options.includeFinishReason) return false;
  const finishReason = message.response_metadata?.["finish_reason"];
  return typeof finishReason === "string" && TOOL_CALL_FINISH_REASONS.has(finishReason);
}

/**
 * Whether a tool ran in this turn: a ToolMessage after the newest real user message. Without a
 * real user message (a scheduled or internal run) nothing counts, because arbitrary old tool
 * history says nothing about this turn.
 */
export function toolResultInCurrentTurn(messages: readonly BaseMessage[]): boolean {
  const userIndex = latestRealUserIndex(messages);
  if (userIndex < 0) return false;
  return messages.slice(userIndex + 1).some((message) => ToolMessage.isInstance(message));
}

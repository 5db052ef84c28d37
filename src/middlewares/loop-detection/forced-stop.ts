import { AIMessage } from "@langchain/core/messages";

/*
 * How a guard (LoopDetection, TokenBudget) ends a run without raising: the model's last message
 * loses its tool calls and gains a closing note, so the agent loop ends on it as a final answer.
 */

type Dict = Record<string, unknown>;

/** AIMessage content with `text` appended as a new paragraph; list content gets a new text block. */
export function appendStopText(content: unknown, text: string): string | Array<Dict> {
  if (content === null || content === undefined) return text;
  if (typeof content === "string") return `${content}\n\n${text}`;
  // Thinking-mode providers answer with content blocks; a string glued onto a list would corrupt it.
  if (Array.isArray(content)) return [...(content as Dict[]), { type: "text", text: `\n\n${text}` }];
  return `${String(content)}\n\n${text}`;
}

/**
 * A copy of `message` with every trace of a tool call removed (structured calls, the provider's raw
 * `tool_calls` / `function_call` kwargs, `finish_reason: tool_calls`) and `text` appended. It keeps
 * the message id, so the state reducer replaces the original in place, and its usage metadata, so
 * token accounting still sees what the call cost.
 */
export function forceFinalAnswer(message: AIMessage, text: string): AIMessage {
  const { tool_calls: _rawCalls, function_call: _rawCall, ...additional_kwargs } = message.additional_kwargs ?? {};
  const response_metadata: Dict = { ...(message.response_metadata ?? {}) };
  if (response_metadata["finish_reason"] === "tool_calls") response_metadata["finish_reason"] = "stop";
  return new AIMessage({
    content: appendStopText(message.content, text) as AIMessage["content"],
    ...(message.id !== undefined ? { id: message.id } : {}),
    ...(message.name !== undefined ? { name: message.name } : {}),
    additional_kwargs,
    response_metadata,
    tool_calls: [],
    invalid_tool_calls: message.invalid_tool_calls ?? [],
    ...(message.usage_metadata !== undefined ? { usage_metadata: message.usage_metadata } : {}),
  });
}

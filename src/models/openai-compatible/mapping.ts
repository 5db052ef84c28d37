// LangChain messages <-> the OpenAI chat-completions wire format, both directions, no I/O.
import {
  AIMessage,
  AIMessageChunk,
  type BaseMessage,
  type InvalidToolCall,
  type MessageContent,
  type ToolCall,
  type ToolCallChunk,
  type UsageMetadata,
} from "@langchain/core/messages";
import { ChatGenerationChunk } from "@langchain/core/outputs";
import { isRecord } from "../../core/guards.ts";
import { textOf } from "../text.ts";
import {
  type OpenAIChatMessage,
  type WireChoice,
  type WireChunk,
  type WireCompletion,
  type WireToolCall,
  type WireUsage,
} from "./wire.ts";

// ---------------------------------------------------------------------------------------------
// LangChain messages -> OpenAI messages

function toUserContent(content: MessageContent): unknown {
  if (typeof content === "string") return content;
  return content.map((block): unknown => {
    const b = block as Record<string, unknown>;
    if (b.type === "image") {
      const mime = (b.mimeType ?? b.mime_type ?? "image/png") as string;
      if (typeof b.url === "string") return { type: "image_url", image_url: { url: b.url } };
      if (typeof b.data === "string") return { type: "image_url", image_url: { url: `data:${mime};base64,${b.data}` } };
    }
    return block;
  });
}

/** The OpenAI chat-completions form of LangChain messages. */
export function toOpenAIMessages(messages: readonly BaseMessage[]): OpenAIChatMessage[] {
  return messages.map((message): OpenAIChatMessage => {
    switch (message.type) {
      case "system":
        return { role: "system", content: textOf(message.content) };
      case "human":
        return { role: "user", content: toUserContent(message.content) };
      case "ai": {
        const ai = message as AIMessage;
        const text = textOf(ai.content);
        const toolCalls = (ai.tool_calls ?? []).map((call, index) => ({
          id: call.id ?? `call_${index}`,
          type: "function",
          function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) },
        }));
        if (toolCalls.length === 0) return { role: "assistant", content: text };
        return { role: "assistant", content: text === "" ? null : text, tool_calls: toolCalls };
      }
      case "tool": {
        const toolCallId = (message as BaseMessage & { tool_call_id?: string }).tool_call_id ?? "";
        return { role: "tool", tool_call_id: toolCallId, content: textOf(message.content) };
      }
      default: {
        const role = (message as BaseMessage & { role?: string }).role ?? "user";
        return { role, content: textOf(message.content) };
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// OpenAI responses -> LangChain messages

function parseToolCalls(raw: readonly WireToolCall[]): { toolCalls: ToolCall[]; invalid: InvalidToolCall[] } {
  const toolCalls: ToolCall[] = [];
  const invalid: InvalidToolCall[] = [];
  for (const call of raw) {
    const name = call.function?.name ?? "";
    const argsText = call.function?.arguments ?? "";
    let args: unknown;
    let error: string | undefined;
    try {
      args = argsText.trim() === "" ? {} : JSON.parse(argsText);
      if (!isRecord(args)) error = "arguments are not a JSON object";
    } catch (parseError) {
      error = `arguments are not valid JSON: ${parseError instanceof Error ? parseError.message : String(parseError)}`;
    }
    if (error === undefined && isRecord(args)) {
      toolCalls.push({ type: "tool_call", id: call.id ?? "", name, args });
    } else {
      invalid.push({ type: "invalid_tool_call", id: call.id ?? "", name, args: argsText, error });
    }
  }
  return { toolCalls, invalid };
}

function toUsageMetadata(usage: WireUsage | null | undefined): UsageMetadata | undefined {
  if (typeof usage !== "object" || usage === null) return undefined;
  const input = typeof usage.prompt_tokens === "number" ? usage.prompt_tokens : 0;
  const output = typeof usage.completion_tokens === "number" ? usage.completion_tokens : 0;
  const metadata: UsageMetadata = {
    input_tokens: input,
    output_tokens: output,
    total_tokens: typeof usage.total_tokens === "number" ? usage.total_tokens : input + output,
  };
  const cached = usage.prompt_tokens_details?.cached_tokens;
  if (typeof cached === "number") metadata.input_token_details = { cache_read: cached };
  const reasoning = usage.completion_tokens_details?.reasoning_tokens;
  if (typeof reasoning === "number") metadata.output_token_details = { reasoning };
  return metadata;
}

/** `modelName` stands in when the provider does not name the model that answered. */
function responseMetadata(
  data: { model?: string; system_fingerprint?: string | null },
  finishReason: string | null,
  modelName: string,
): Record<string, unknown> {
  const metadata: Record<string, unknown> = { finish_reason: finishReason, model_name: data.model ?? modelName };
  if (typeof data.system_fingerprint === "string") metadata.system_fingerprint = data.system_fingerprint;
  return metadata;
}

/** The AIMessage a JSON completion's choice makes. */
export function toAIMessage(data: WireCompletion, choice: WireChoice, modelName: string): AIMessage {
  const raw = choice.message ?? {};
  const rawToolCalls = Array.isArray(raw.tool_calls) ? raw.tool_calls : [];
  const { toolCalls, invalid } = parseToolCalls(rawToolCalls);
  const additional: Record<string, unknown> = {};
  // Raw calls are kept for middlewares that need the provider payload; core warns about legacy
  // providers when they are present without any parsed call, so an all-invalid reply omits them.
  if (toolCalls.length > 0) additional.tool_calls = rawToolCalls;
  if (typeof raw.reasoning_content === "string") additional.reasoning_content = raw.reasoning_content;
  if (typeof raw.refusal === "string") additional.refusal = raw.refusal;
  const usage = toUsageMetadata(data.usage);
  return new AIMessage({
    ...(data.id === undefined ? {} : { id: data.id }),
    content: typeof raw.content === "string" ? raw.content : "",
    tool_calls: toolCalls,
    invalid_tool_calls: invalid,
    additional_kwargs: additional,
    response_metadata: responseMetadata(data, choice.finish_reason ?? null, modelName),
    ...(usage === undefined ? {} : { usage_metadata: usage }),
  });
}

/** A whole JSON completion as the one chunk of a stream (for servers that ignore `stream: true`). */
export function toSingleGenerationChunk(message: AIMessage, choice: WireChoice): ChatGenerationChunk {
  const rawToolCalls = choice.message?.tool_calls ?? [];
  const chunk = new AIMessageChunk({
    ...(message.id === undefined ? {} : { id: message.id }),
    content: message.content,
    tool_call_chunks: rawToolCalls.map((call, index) => ({
      type: "tool_call_chunk" as const,
      index,
      ...(call.id === undefined ? {} : { id: call.id }),
      ...(call.function?.name === undefined ? {} : { name: call.function.name }),
      args: call.function?.arguments ?? "",
    })),
    additional_kwargs: message.additional_kwargs,
    response_metadata: message.response_metadata,
    ...(message.usage_metadata === undefined ? {} : { usage_metadata: message.usage_metadata }),
  });
  return new ChatGenerationChunk({
    message: chunk,
    text: typeof message.content === "string" ? message.content : "",
    generationInfo: { finish_reason: choice.finish_reason ?? null },
  });
}

/**
 * One stream chunk as a generation chunk, or undefined for a chunk with neither a choice nor
 * usage. `state.finished` records that the finish reason (and the response metadata) went out.
 */
export function toGenerationChunk(
  chunk: WireChunk,
  state: { finished: boolean },
  modelName: string,
): ChatGenerationChunk | undefined {
  const choice = chunk.choices?.[0];
  const usage = toUsageMetadata(chunk.usage);
  if (choice === undefined && usage === undefined) return undefined;
  const delta = choice?.delta ?? {};
  const content = typeof delta.content === "string" ? delta.content : "";
  const toolCallChunks: ToolCallChunk[] = (Array.isArray(delta.tool_calls) ? delta.tool_calls : []).map(
    (call, position) => {
      const piece: ToolCallChunk = {
        type: "tool_call_chunk",
        index: typeof call.index === "number" ? call.index : position,
        args: call.function?.arguments ?? "",
      };
      if (call.id !== undefined) piece.id = call.id;
      if (call.function?.name !== undefined) piece.name = call.function.name;
      return piece;
    },
  );
  const additional: Record<string, unknown> = {};
  if (typeof delta.reasoning_content === "string" && delta.reasoning_content !== "") {
    additional.reasoning_content = delta.reasoning_content;
  }
  // response_metadata strings concatenate when chunks merge, so they are sent exactly once.
  let metadata: Record<string, unknown> = {};
  const finishReason = choice?.finish_reason;
  if (typeof finishReason === "string" && !state.finished) {
    state.finished = true;
    metadata = responseMetadata(chunk, finishReason, modelName);
  }
  const message = new AIMessageChunk({
    ...(chunk.id === undefined ? {} : { id: chunk.id }),
    content,
    tool_call_chunks: toolCallChunks,
    additional_kwargs: additional,
    response_metadata: metadata,
    ...(usage === undefined ? {} : { usage_metadata: usage }),
  });
  return new ChatGenerationChunk({
    message,
    text: content,
    ...(typeof finishReason === "string" ? { generationInfo: { finish_reason: finishReason } } : {}),
  });
}

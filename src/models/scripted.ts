// What the offline models (demo, replay) share: a turn decided from the conversation, answered
// whole or streamed word by word with its tool calls, exactly as a provider's stream arrives.
import { newId } from "../core/ids.ts";
import { yieldToEventLoop } from "../core/yield.ts";
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import {
  BaseChatModel,
  type BaseChatModelCallOptions,
  type BaseChatModelParams,
  type BindToolsInput,
} from "@langchain/core/language_models/chat_models";
import { AIMessage, AIMessageChunk, type BaseMessage, type ToolCall, type UsageMetadata } from "@langchain/core/messages";
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs";
import type { Runnable } from "@langchain/core/runnables";
import { toOpenAITool, type OpenAIFunctionTool } from "./tools.ts";

export interface ScriptedChatModelFields extends BaseChatModelParams {
  /** Pause between streamed words, for a session that looks like a live model. Default 0. */
  tokenDelayMs?: number;
}

export interface ScriptedChatModelCallOptions extends BaseChatModelCallOptions {
  tools?: (OpenAIFunctionTool | BindToolsInput)[];
}

/** One answer of a scripted model: its text, the tool calls it makes, and what it reports. */
export interface ScriptedTurn {
  /**
   * The stable head of the message's id (from the conversation). Every call appends a fresh part
   * (`callNonce`), as a provider's ids are fresh per call.
   */
  id: string;
  /** Text said before the tool calls, or the final answer. */
  content: string;
  toolCalls: ToolCall[];
  finishReason: "stop" | "tool_calls";
  usage: UsageMetadata;
}

/**
 * A fresh id part for one model call. A scripted answer repeats for equal input, its ids must not:
 * a regenerated turn (the same prompt from the same checkpoint) would otherwise say the old answer's
 * message and tool-call ids again. A client that keys messages by id or by tool_call_id (DeerFlow's
 * UI merges the stream with the history by both) would take the new answer for the old one, and a
 * subagent's thread, derived from its tool call's id, would be reused.
 */
export function callNonce(): string {
  return newId().slice(0, 8);
}

/** The id of one call's answer: the turn's stable head and a fresh part. */
function answerId(turn: ScriptedTurn): string {
  return `${turn.id}-${callNonce()}`;
}

/** A small, stable string hash (cyrb53), so equal inputs give equal id heads on every runtime. */
export function stableHash(text: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (h2 >>> 0).toString(16).padStart(8, "0") + (h1 >>> 0).toString(16).padStart(8, "0");
}

/**
 * A chat model that answers from a script instead of a provider. A subclass decides the turn; this
 * base returns it whole (`invoke`) or streams it (words, then the tool calls, then usage and the
 * finish reason on the last chunk), marking every message with `marker` so a UI can label it.
 */
export abstract class ScriptedChatModel extends BaseChatModel<ScriptedChatModelCallOptions, AIMessageChunk> {
  readonly tokenDelayMs: number;

  /** The `additional_kwargs` key set to true on every message this model says. */
  protected abstract readonly marker: string;
  /** response_metadata.model_name of its messages. */
  protected abstract readonly reportedModelName: string;

  constructor(fields: ScriptedChatModelFields = {}) {
    const { tokenDelayMs, ...base } = fields;
    super(base);
    this.tokenDelayMs = tokenDelayMs ?? 0;
  }

  /** The turn for this conversation; thrown errors fail the model call as a provider's would. */
  protected abstract planTurn(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager: CallbackManagerForLLMRun | undefined,
  ): ScriptedTurn | Promise<ScriptedTurn>;

  override bindTools(
    tools: (BindToolsInput | OpenAIFunctionTool)[],
    kwargs?: Partial<ScriptedChatModelCallOptions>,
  ): Runnable<BaseLanguageModelInput, AIMessageChunk, ScriptedChatModelCallOptions> {
    return this.withConfig({ tools: tools.map(toOpenAITool), ...kwargs });
  }

  async _generate(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): Promise<ChatResult> {
    options.signal?.throwIfAborted();
    const turn = await this.planTurn(messages, options, runManager);
    const message = new AIMessage({
      id: answerId(turn),
      content: turn.content,
      tool_calls: turn.toolCalls,
      additional_kwargs: { [this.marker]: true },
      response_metadata: { model_name: this.reportedModelName, finish_reason: turn.finishReason },
      usage_metadata: turn.usage,
    });
    return {
      generations: [{ text: turn.content, message, generationInfo: { finish_reason: turn.finishReason } }],
      llmOutput: {
        tokenUsage: {
          promptTokens: turn.usage.input_tokens,
          completionTokens: turn.usage.output_tokens,
          totalTokens: turn.usage.total_tokens,
        },
      },
    };
  }

  override async *_streamResponseChunks(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    options.signal?.throwIfAborted();
    const turn = await this.planTurn(messages, options, runManager);
    const marker = this.marker;
    // One id for every chunk of this answer.
    const id = answerId(turn);
    const chunkOf = (fields: Partial<ConstructorParameters<typeof AIMessageChunk>[0] & object>): ChatGenerationChunk => {
      const message = new AIMessageChunk({ id, content: "", additional_kwargs: { [marker]: true }, ...fields });
      return new ChatGenerationChunk({ message, text: typeof message.content === "string" ? message.content : "" });
    };
    const emit = async (chunk: ChatGenerationChunk): Promise<void> => {
      await runManager?.handleLLMNewToken(chunk.text, { prompt: 0, completion: 0 }, undefined, undefined, undefined, {
        chunk,
      });
    };
    let index = 0;
    for (const word of turn.content.match(/\s*\S+\s*|\s+/g) ?? []) {
      options.signal?.throwIfAborted();
      if (this.tokenDelayMs > 0) await sleep(this.tokenDelayMs, options.signal);
      else if (index++ % 8 === 0) await yieldToEventLoop();
      const chunk = chunkOf({ content: word });
      yield chunk;
      await emit(chunk);
    }
    options.signal?.throwIfAborted();
    if (turn.toolCalls.length > 0) {
      const chunk = chunkOf({
        tool_call_chunks: turn.toolCalls.map((call, index) => ({
          type: "tool_call_chunk" as const,
          index,
          ...(call.id === undefined ? {} : { id: call.id }),
          name: call.name,
          args: JSON.stringify(call.args),
        })),
      });
      yield chunk;
      await emit(chunk);
    }
    // model_name and finish_reason go on one chunk only: string metadata concatenates on merge.
    const last = chunkOf({
      response_metadata: { model_name: this.reportedModelName, finish_reason: turn.finishReason },
      usage_metadata: turn.usage,
    });
    last.generationInfo = { finish_reason: turn.finishReason };
    yield last;
    await emit(last);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// The chat model for OpenAI-compatible endpoints: request, response and stream handling over
// fetch. Mapping, stream reading, the deadline and error shaping live beside it.
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import {
  BaseChatModel,
  type BaseChatModelCallOptions,
  type BaseChatModelParams,
  type BindToolsInput,
  type LangSmithParams,
} from "@langchain/core/language_models/chat_models";
import type { AIMessage, AIMessageChunk, BaseMessage } from "@langchain/core/messages";
import type { ChatGenerationChunk, ChatResult } from "@langchain/core/outputs";
import type { Runnable } from "@langchain/core/runnables";
import { ModelError } from "../errors.ts";
import { toOpenAITool, toOpenAIToolChoice, type OpenAIFunctionTool } from "../tools.ts";
import { Deadline } from "./deadline.ts";
import { toAIMessage, toGenerationChunk, toOpenAIMessages, toSingleGenerationChunk } from "./mapping.ts";
import { badResponse, describeCause, errorFromBody, headersRecord, normalizeError } from "./provider-errors.ts";
import { readSseData } from "./sse.ts";
import type { WireChoice, WireChunk, WireCompletion } from "./wire.ts";

export const DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1";
const DEFAULT_TIMEOUT_MS = 120_000;

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface ChatOpenAICompatibleFields extends BaseChatModelParams {
  /** Provider model id, e.g. "gpt-4o-mini". */
  model: string;
  /** Up to and including the version segment; `/chat/completions` is appended. */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer …`; omitted when undefined (local servers). Never read from env here. */
  apiKey?: string;
  /** Named in the message of a 401/403, so the user knows which variable to fix. */
  apiKeyEnv?: string;
  temperature?: number;
  maxTokens?: number;
  /** Whole-request limit for JSON responses; the longest silence allowed while streaming. */
  timeoutMs?: number;
  extraHeaders?: Record<string, string>;
  /** Ask for the usage chunk at the end of a stream (`stream_options.include_usage`). Default true. */
  streamUsage?: boolean;
  /** Injected in tests; defaults to the global fetch. */
  fetch?: FetchLike;
}

export interface ChatOpenAICompatibleCallOptions extends BaseChatModelCallOptions {
  tools?: (OpenAIFunctionTool | BindToolsInput)[];
  parallel_tool_calls?: boolean;
}

/** Hands a streamed chunk to the callback handlers, the way LangChain's own chat models do. */
async function reportChunk(
  runManager: CallbackManagerForLLMRun | undefined,
  generation: ChatGenerationChunk,
  promptIndex: number,
  completion: number,
): Promise<void> {
  await runManager?.handleLLMNewToken(generation.text, { prompt: promptIndex, completion }, undefined, undefined, undefined, {
    chunk: generation,
  });
}

// ---------------------------------------------------------------------------------------------

/**
 * A chat model for any OpenAI-compatible `/chat/completions` endpoint, over fetch only.
 *
 * It never retries: the LLMErrorHandling middleware owns retries, so a 429 surfaces at once as a
 * ModelError with status, code and the retry-after headers.
 */
export class ChatOpenAICompatible extends BaseChatModel<ChatOpenAICompatibleCallOptions, AIMessageChunk> {
  readonly model: string;
  readonly baseUrl: string;
  readonly temperature: number | undefined;
  readonly maxTokens: number | undefined;
  readonly timeoutMs: number;
  readonly streamUsage: boolean;
  readonly apiKeyEnv: string | undefined;
  readonly #apiKey: string | undefined;
  readonly #extraHeaders: Record<string, string>;
  readonly #fetch: FetchLike;

  static override lc_name(): string {
    return "ChatOpenAICompatible";
  }

  constructor(fields: ChatOpenAICompatibleFields) {
    const {
      model,
      baseUrl,
      apiKey,
      apiKeyEnv,
      temperature,
      maxTokens,
      timeoutMs,
      extraHeaders,
      streamUsage,
      fetch: fetchImpl,
      ...base
    } = fields;
    // The key and fetch stay out of super(): BaseChatModel keeps its arguments as lc_kwargs.
    // maxRetries 0: BaseLanguageModel's AsyncCaller would otherwise retry a 429 silently.
    super({ ...base, maxRetries: 0 });
    this.model = model;
    this.baseUrl = (baseUrl ?? DEFAULT_OPENAI_BASE_URL).replace(/\/+$/, "");
    this.#apiKey = apiKey;
    this.apiKeyEnv = apiKeyEnv;
    this.temperature = temperature;
    this.maxTokens = maxTokens;
    this.timeoutMs = timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#extraHeaders = { ...extraHeaders };
    this.streamUsage = streamUsage ?? true;
    this.#fetch = fetchImpl ?? ((input, init) => fetch(input, init));
  }

  _llmType(): string {
    return "openai-compatible";
  }

  override getLsParams(options: this["ParsedCallOptions"]): LangSmithParams {
    const params: LangSmithParams = {
      ls_provider: "openai-compatible",
      ls_model_name: this.model,
      ls_model_type: "chat",
    };
    if (this.temperature !== undefined) params.ls_temperature = this.temperature;
    if (this.maxTokens !== undefined) params.ls_max_tokens = this.maxTokens;
    if (options.stop !== undefined) params.ls_stop = options.stop;
    return params;
  }

  override bindTools(
    tools: (BindToolsInput | OpenAIFunctionTool)[],
    kwargs?: Partial<ChatOpenAICompatibleCallOptions>,
  ): Runnable<BaseLanguageModelInput, AIMessageChunk, ChatOpenAICompatibleCallOptions> {
    return this.withConfig({ tools: tools.map(toOpenAITool), ...kwargs });
  }

  /** The request body without messages: what tracing shows as invocation params. */
  override invocationParams(options?: this["ParsedCallOptions"]): Record<string, unknown> {
    const params: Record<string, unknown> = { model: this.model };
    const tools = options?.tools?.map(toOpenAITool);
    if (tools !== undefined && tools.length > 0) params.tools = tools;
    if (options?.tool_choice !== undefined) params.tool_choice = toOpenAIToolChoice(options.tool_choice);
    if (options?.parallel_tool_calls !== undefined) params.parallel_tool_calls = options.parallel_tool_calls;
    if (this.temperature !== undefined) params.temperature = this.temperature;
    if (this.maxTokens !== undefined) params.max_tokens = this.maxTokens;
    if (options?.stop !== undefined && options.stop.length > 0) params.stop = options.stop;
    return params;
  }

  async _generate(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    _runManager?: CallbackManagerForLLMRun,
  ): Promise<ChatResult> {
    const deadline = new Deadline(this.timeoutMs, options.signal);
    try {
      const body = { ...this.invocationParams(options), messages: toOpenAIMessages(messages) };
      const response = await this.#post(body, deadline, false);
      const { message, choice } = await this.#completionFromJson(response, deadline);
      const usage = message.usage_metadata;
      return {
        generations: [
          {
            text: typeof message.content === "string" ? message.content : "",
            message,
            generationInfo: { finish_reason: choice.finish_reason ?? null },
          },
        ],
        llmOutput:
          usage === undefined
            ? {}
            : {
                tokenUsage: {
                  promptTokens: usage.input_tokens,
                  completionTokens: usage.output_tokens,
                  totalTokens: usage.total_tokens,
                },
              },
      };
    } catch (error) {
      throw normalizeError(this, error, deadline);
    } finally {
      deadline.dispose();
    }
  }

  override async *_streamResponseChunks(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    const deadline = new Deadline(this.timeoutMs, options.signal);
    const promptIndex = (options as { promptIndex?: number }).promptIndex ?? 0;
    try {
      const body: Record<string, unknown> = {
        ...this.invocationParams(options),
        messages: toOpenAIMessages(messages),
        stream: true,
      };
      if (this.streamUsage) body.stream_options = { include_usage: true };
      const response = await this.#post(body, deadline, true);
      if (response.body === null) throw badResponse(this, "an empty body");
      if ((response.headers.get("content-type") ?? "").includes("application/json")) {
        // Some OpenAI-compatible servers ignore `stream: true` and answer with one JSON completion.
        const { message, choice } = await this.#completionFromJson(response, deadline);
        const generation = toSingleGenerationChunk(message, choice);
        yield generation;
        await reportChunk(runManager, generation, promptIndex, 0);
        return;
      }
      const state = { finished: false };
      for await (const data of readSseData(response.body, () => deadline.reset())) {
        if (data === "[DONE]") break;
        let chunk: WireChunk;
        try {
          chunk = JSON.parse(data) as WireChunk;
        } catch (error) {
          throw badResponse(this, "a stream event that is not JSON", error);
        }
        if (chunk.error !== undefined && chunk.error !== null) throw errorFromBody(this, response.status, {}, chunk);
        const generation = toGenerationChunk(chunk, state, this.model);
        if (generation === undefined) continue;
        yield generation;
        // Every chunk goes to the handlers (text "" for tool-call and usage chunks): LangGraph's
        // "messages" stream mode forwards `fields.chunk`, so tool-call deltas reach the UI too.
        await reportChunk(runManager, generation, promptIndex, chunk.choices?.[0]?.index ?? 0);
      }
    } catch (error) {
      throw normalizeError(this, error, deadline);
    } finally {
      deadline.dispose();
    }
  }

  // -------------------------------------------------------------------------------------------

  async #post(body: Record<string, unknown>, deadline: Deadline, stream: boolean): Promise<Response> {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: stream ? "text/event-stream" : "application/json",
      ...this.#extraHeaders,
    };
    if (this.#apiKey !== undefined && this.#apiKey !== "") headers.authorization = `Bearer ${this.#apiKey}`;
    let response: Response;
    try {
      response = await this.#fetch(`${this.baseUrl}/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
        signal: deadline.signal,
      });
    } catch (error) {
      if (deadline.callerAborted || deadline.timedOut) throw error;
      throw new ModelError(
        `Could not reach the model provider at ${this.baseUrl} (${describeCause(error)}); check base_url and that the server is running and reachable`,
        { code: "provider_unreachable", cause: error },
      );
    }
    if (!response.ok) {
      const text = await response.text().catch(() => "");
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
      throw errorFromBody(this, response.status, headersRecord(response.headers), parsed, response.statusText);
    }
    return response;
  }

  /** The first choice of a JSON completion body, and the AIMessage it makes. */
  async #completionFromJson(response: Response, deadline: Deadline): Promise<{ message: AIMessage; choice: WireChoice }> {
    let data: WireCompletion;
    try {
      data = (await response.json()) as WireCompletion;
    } catch (error) {
      if (deadline.timedOut || deadline.callerAborted) throw error;
      throw badResponse(this, "a body that is not JSON", error);
    }
    if (data.error !== undefined && data.error !== null) throw errorFromBody(this, response.status, {}, data);
    const choice = data.choices?.[0];
    if (choice === undefined) throw badResponse(this, "a completion without choices");
    return { message: toAIMessage(data, choice, this.model), choice };
  }
}

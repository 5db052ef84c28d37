import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import {
  BaseChatModel,
  type BaseChatModelCallOptions,
  type BaseChatModelParams,
  type BindToolsInput,
  type LangSmithParams,
} from "@langchain/core/language_models/chat_models";
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
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs";
import type { Runnable } from "@langchain/core/runnables";
import { DeerflowError } from "../core/errors.ts";
import { ModelError } from "./errors.ts";
import { oneLine, textOf } from "./text.ts";
import { toOpenAITool, toOpenAIToolChoice, type OpenAIFunctionTool } from "./tools.ts";

export const DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1";
const DEFAULT_TIMEOUT_MS = 120_000;
/** Headers worth keeping on an error: the retry policy reads these. */
const DROPPED_ERROR_HEADERS = new Set(["set-cookie"]);

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

// ---------------------------------------------------------------------------------------------
// OpenAI wire shapes (only the fields read here)

interface WireToolCall {
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}
interface WireToolCallDelta extends WireToolCall {
  index?: number;
}
interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
}
/** What a completion and a stream chunk share; they differ in what a choice carries. */
interface WireEnvelope<Choice> {
  id?: string;
  model?: string;
  system_fingerprint?: string | null;
  choices?: ({ index?: number; finish_reason?: string | null } & Choice)[];
  usage?: WireUsage | null;
  error?: unknown;
}
type WireCompletion = WireEnvelope<{
  message?: {
    content?: string | null;
    refusal?: string | null;
    reasoning_content?: string | null;
    tool_calls?: WireToolCall[] | null;
  };
}>;
type WireChoice = NonNullable<WireCompletion["choices"]>[number];
type WireChunk = WireEnvelope<{
  delta?: { content?: string | null; reasoning_content?: string | null; tool_calls?: WireToolCallDelta[] | null };
}>;

export type OpenAIChatMessage = Record<string, unknown> & { role: string };

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

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

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

// ---------------------------------------------------------------------------------------------
// Transport helpers

/** One abort signal for the caller's signal and our own (idle) timeout. */
class Deadline {
  readonly #controller = new AbortController();
  readonly #outer: AbortSignal | undefined;
  readonly #ms: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  timedOut = false;

  constructor(ms: number, outer: AbortSignal | undefined) {
    this.#ms = ms;
    this.#outer = outer;
    if (outer?.aborted) this.#controller.abort(outer.reason);
    else outer?.addEventListener("abort", this.#onOuterAbort, { once: true });
    this.reset();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get callerAborted(): boolean {
    return this.#outer?.aborted === true;
  }

  reset(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.timedOut = true;
      this.#controller.abort(new DOMException("model call timed out", "TimeoutError"));
    }, this.#ms);
  }

  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#outer?.removeEventListener("abort", this.#onOuterAbort);
  }

  #onOuterAbort = (): void => {
    this.#controller.abort(this.#outer?.reason);
  };
}

function describeCause(error: unknown): string {
  if (!(error instanceof Error)) return oneLine(String(error), 200);
  const cause = (error as Error & { cause?: unknown }).cause;
  const code = (error as Error & { code?: unknown }).code;
  if (isRecord(cause) && typeof cause.code === "string") return cause.code;
  if (cause instanceof Error && cause.message !== "") return oneLine(cause.message, 200);
  if (typeof code === "string" && code !== "") return code;
  return oneLine(error.message, 200);
}

function headersRecord(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, key) => {
    if (!DROPPED_ERROR_HEADERS.has(key)) out[key.toLowerCase()] = value;
  });
  return out;
}

function retryAfterMs(headers: Record<string, string>): number | undefined {
  const ms = Number(headers["retry-after-ms"]);
  if (headers["retry-after-ms"] !== undefined && Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers["retry-after"];
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function fallbackCode(status: number): string {
  if (status === 400 || status === 422) return "provider_bad_request";
  if (status === 401 || status === 403) return "provider_auth_failed";
  if (status === 404) return "provider_not_found";
  if (status === 408) return "provider_timeout";
  if (status === 429) return "rate_limit_exceeded";
  if (status >= 500) return "provider_unavailable";
  return "provider_http_error";
}

/** Reading the response body failed: the connection broke off mid-response. */
class StreamReadError extends DeerflowError {
  constructor(cause: unknown) {
    super("response_body_unreadable", "reading the response body failed", { cause });
  }
}

/** Iterates the `data:` payloads of a server-sent-events body, one per event. */
async function* readSseData(body: ReadableStream<Uint8Array>, onBytes: () => void): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  const takeLine = (rawLine: string): string | undefined => {
    const line = rawLine.endsWith("\r") ? rawLine.slice(0, -1) : rawLine;
    if (line === "") {
      if (data.length === 0) return undefined;
      const event = data.join("\n");
      data = [];
      return event;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    return undefined;
  };
  try {
    for (;;) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (error) {
        throw new StreamReadError(error);
      }
      const { done, value } = read;
      if (done) break;
      onBytes();
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const event = takeLine(buffer.slice(0, newline));
        buffer = buffer.slice(newline + 1);
        if (event !== undefined) yield event;
        newline = buffer.indexOf("\n");
      }
    }
    buffer += decoder.decode();
    for (const line of [...buffer.split("\n"), ""]) {
      const event = takeLine(line);
      if (event !== undefined) yield event;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
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
      throw this.#normalizeError(error, deadline);
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
      if (response.body === null) throw this.#badResponse("an empty body");
      if ((response.headers.get("content-type") ?? "").includes("application/json")) {
        // Some OpenAI-compatible servers ignore `stream: true` and answer with one JSON completion.
        const generation = await this.#singleChunkFromJson(response, deadline);
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
          throw this.#badResponse("a stream event that is not JSON", error);
        }
        if (chunk.error !== undefined && chunk.error !== null) throw this.#errorFromBody(response.status, {}, chunk);
        const generation = this.#toGenerationChunk(chunk, state);
        if (generation === undefined) continue;
        yield generation;
        // Every chunk goes to the handlers (text "" for tool-call and usage chunks): LangGraph's
        // "messages" stream mode forwards `fields.chunk`, so tool-call deltas reach the UI too.
        await reportChunk(runManager, generation, promptIndex, chunk.choices?.[0]?.index ?? 0);
      }
    } catch (error) {
      throw this.#normalizeError(error, deadline);
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
      throw this.#errorFromBody(response.status, headersRecord(response.headers), parsed, response.statusText);
    }
    return response;
  }

  #errorFromBody(status: number, headers: Record<string, string>, body: unknown, statusText = ""): ModelError {
    const errorField = isRecord(body) ? body.error : undefined;
    const detail = isRecord(errorField) ? errorField : isRecord(body) ? body : {};
    const pick = (key: string): string | undefined =>
      typeof detail[key] === "string" && detail[key] !== "" ? (detail[key] as string) : undefined;
    const providerMessage = oneLine(
      typeof errorField === "string"
        ? errorField
        : (pick("message") ?? pick("detail") ?? (typeof body === "string" && body !== "" ? body : statusText)),
      300,
    );
    const providerType = pick("type");
    const code = pick("code") ?? providerType ?? fallbackCode(status);
    const wait = retryAfterMs(headers);
    const what = status >= 400 ? `returned HTTP ${status}` : "sent an error";
    const fields: ConstructorParameters<typeof ModelError>[1] = { code, status, headers, providerMessage };
    if (providerType !== undefined) fields.providerType = providerType;
    if (wait !== undefined) fields.retryAfterMs = wait;
    const said = providerMessage === "" ? "" : `: ${providerMessage}`;
    return new ModelError(
      `Model provider at ${this.baseUrl} ${what} (${code})${said.replace(/[.;]+$/, "")}; ${this.#hint(status, code, wait)}`,
      fields,
    );
  }

  #hint(status: number, code: string, waitMs: number | undefined): string {
    const keyName = this.apiKeyEnv === undefined ? "the API key" : `the API key in ${this.apiKeyEnv}`;
    if (code === "insufficient_quota") return "add credit or raise the quota with the provider, or switch to another model";
    if (status === 401) return `check ${keyName}`;
    if (status === 403) return `check ${keyName} and that it may use model "${this.model}"`;
    if (status === 404) return `check base_url and the model id "${this.model}"`;
    if (status === 429) {
      const after = waitMs === undefined ? "" : ` ${Math.ceil(waitMs / 1000)} s`;
      return `wait${after} and retry, or check the provider's rate limits`;
    }
    if (status >= 500) return "the provider is having trouble; retry later or switch to another model";
    if (status === 400 || status === 422) return "the provider rejected the request; check this model's settings in config.yaml";
    return "check the provider's status and this model's settings in config.yaml";
  }

  #badResponse(what: string, cause?: unknown): ModelError {
    return new ModelError(
      `Model provider at ${this.baseUrl} sent ${what}; check that base_url points to an OpenAI-compatible API`,
      { code: "provider_bad_response", cause },
    );
  }

  #normalizeError(error: unknown, deadline: Deadline): unknown {
    if (error instanceof ModelError) return error;
    if (deadline.callerAborted) return error instanceof StreamReadError ? error.cause : error;
    if (deadline.timedOut) {
      return new ModelError(
        `Model provider at ${this.baseUrl} did not respond within ${this.timeoutMs} ms; retry, or raise timeout_ms for this model`,
        { code: "provider_timeout", cause: error },
      );
    }
    if (error instanceof StreamReadError) {
      return new ModelError(
        `The connection to the model provider at ${this.baseUrl} broke off mid-response (${describeCause(error.cause)}); retry, and check the server if it keeps happening`,
        { code: "provider_unreachable", cause: error.cause },
      );
    }
    return error;
  }

  /** The first choice of a JSON completion body, and the AIMessage it makes. */
  async #completionFromJson(response: Response, deadline: Deadline): Promise<{ message: AIMessage; choice: WireChoice }> {
    let data: WireCompletion;
    try {
      data = (await response.json()) as WireCompletion;
    } catch (error) {
      if (deadline.timedOut || deadline.callerAborted) throw error;
      throw this.#badResponse("a body that is not JSON", error);
    }
    if (data.error !== undefined && data.error !== null) throw this.#errorFromBody(response.status, {}, data);
    const choice = data.choices?.[0];
    if (choice === undefined) throw this.#badResponse("a completion without choices");
    return { message: this.#toAIMessage(data, choice), choice };
  }

  async #singleChunkFromJson(response: Response, deadline: Deadline): Promise<ChatGenerationChunk> {
    const { message, choice } = await this.#completionFromJson(response, deadline);
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

  #toAIMessage(data: WireCompletion, choice: WireChoice): AIMessage {
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
      response_metadata: this.#responseMetadata(data, choice.finish_reason ?? null),
      ...(usage === undefined ? {} : { usage_metadata: usage }),
    });
  }

  #responseMetadata(
    data: { model?: string; system_fingerprint?: string | null },
    finishReason: string | null,
  ): Record<string, unknown> {
    const metadata: Record<string, unknown> = { finish_reason: finishReason, model_name: data.model ?? this.model };
    if (typeof data.system_fingerprint === "string") metadata.system_fingerprint = data.system_fingerprint;
    return metadata;
  }

  #toGenerationChunk(chunk: WireChunk, state: { finished: boolean }): ChatGenerationChunk | undefined {
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
    let responseMetadata: Record<string, unknown> = {};
    const finishReason = choice?.finish_reason;
    if (typeof finishReason === "string" && !state.finished) {
      state.finished = true;
      responseMetadata = this.#responseMetadata(chunk, finishReason);
    }
    const message = new AIMessageChunk({
      ...(chunk.id === undefined ? {} : { id: chunk.id }),
      content,
      tool_call_chunks: toolCallChunks,
      additional_kwargs: additional,
      response_metadata: responseMetadata,
      ...(usage === undefined ? {} : { usage_metadata: usage }),
    });
    return new ChatGenerationChunk({
      message,
      text: content,
      ...(typeof finishReason === "string" ? { generationInfo: { finish_reason: finishReason } } : {}),
    });
  }
}

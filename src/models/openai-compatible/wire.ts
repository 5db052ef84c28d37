// The OpenAI chat-completions wire shapes: only the fields this model reads or sends.

export interface WireToolCall {
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}
export interface WireToolCallDelta extends WireToolCall {
  index?: number;
}
export interface WireUsage {
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
export type WireCompletion = WireEnvelope<{
  message?: {
    content?: string | null;
    refusal?: string | null;
    reasoning_content?: string | null;
    tool_calls?: WireToolCall[] | null;
  };
}>;
export type WireChoice = NonNullable<WireCompletion["choices"]>[number];
export type WireChunk = WireEnvelope<{
  delta?: { content?: string | null; reasoning_content?: string | null; tool_calls?: WireToolCallDelta[] | null };
}>;

export type OpenAIChatMessage = Record<string, unknown> & { role: string };

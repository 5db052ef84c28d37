import type { AIMessage } from "@langchain/core/messages";

/*
 * Providers say "the output budget ran out" in different fields and spellings. Each detector knows
 * one provider's form; the middleware only decides when a hit matters.
 */

export interface FinishReasonHit {
  /** The detector that matched, for observability. */
  readonly detector: string;
  /** The metadata field that carried the signal (`finish_reason`, `stop_reason`). */
  readonly reasonField: string;
  /** That field's value as the provider sent it. */
  readonly reasonValue: string;
  /** Provider detail worth keeping (filter results, safety ratings). */
  readonly extras: Readonly<Record<string, unknown>>;
}

/** A provider-specific rule over one AIMessage; it must not throw on odd metadata, and never mutates. */
export interface FinishReasonDetector {
  readonly name: string;
  detect(message: AIMessage): FinishReasonHit | null;
  /** What the detector matches, for releasePolicyParameters. */
  parameters?(): Record<string, unknown>;
}

/** A detector as a release-policy declaration names it. */
export function describeDetector(detector: FinishReasonDetector): { class: string; name: string; parameters: Record<string, unknown> } {
  const ctor = (detector as { constructor?: { name?: unknown } }).constructor?.name;
  return {
    class: typeof ctor === "string" && ctor !== "" && ctor !== "Object" ? ctor : "CustomDetector",
    name: detector.name,
    parameters: detector.parameters?.() ?? {},
  };
}

/**
 * A non-empty string from `response_metadata`, else from `additional_kwargs`: adapters disagree
 * on where they put stop signals, and anything that is not a string is ignored rather than thrown on.
 */
export function metadataString(message: AIMessage, field: string): string | undefined {
  for (const container of [message.response_metadata, message.additional_kwargs] as unknown[]) {
    if (typeof container !== "object" || container === null || Array.isArray(container)) continue;
    const value = (container as Record<string, unknown>)[field];
    if (typeof value === "string" && value !== "") return value;
  }
  return undefined;
}

/** Matches one metadata field against a value set, compared case-insensitively in the given direction. */
export abstract class FieldValueDetector implements FinishReasonDetector {
  abstract readonly name: string;
  readonly #field: string;
  readonly #parameter: string;
  readonly #values: readonly string[];
  readonly #normalize: (value: string) => string;

  protected constructor(field: string, parameter: string, values: readonly string[], upper: boolean) {
    this.#field = field;
    this.#parameter = parameter;
    this.#normalize = upper ? (s) => s.toUpperCase() : (s) => s.toLowerCase();
    this.#values = [...new Set(values.map(this.#normalize))];
  }

  detect(message: AIMessage): FinishReasonHit | null {
    const value = metadataString(message, this.#field);
    if (value === undefined || !this.#values.includes(this.#normalize(value))) return null;
    return { detector: this.name, reasonField: this.#field, reasonValue: value, extras: this.extras(message) };
  }

  protected extras(_message: AIMessage): Record<string, unknown> {
    return {};
  }

  parameters(): Record<string, unknown> {
    return { [this.#parameter]: [...this.#values] };
  }
}

/** OpenAI-compatible `finish_reason: "length"`. */
export class OpenAICompatibleLengthDetector extends FieldValueDetector {
  readonly name = "openai_compatible_length";
  constructor(finishReasons: readonly string[] = ["length"]) {
    super("finish_reason", "finish_reasons", finishReasons, false);
  }
}

/** Anthropic `stop_reason: "max_tokens"`. */
export class AnthropicMaxTokensDetector extends FieldValueDetector {
  readonly name = "anthropic_max_tokens";
  constructor(stopReasons: readonly string[] = ["max_tokens"]) {
    super("stop_reason", "stop_reasons", stopReasons, false);
  }
}

/** Gemini / Vertex AI `finish_reason: "MAX_TOKENS"`. */
export class GeminiMaxTokensDetector extends FieldValueDetector {
  readonly name = "gemini_max_tokens";
  constructor(finishReasons: readonly string[] = ["MAX_TOKENS"]) {
    super("finish_reason", "finish_reasons", finishReasons, true);
  }
}

export function defaultLengthDetectors(): FinishReasonDetector[] {
  return [new OpenAICompatibleLengthDetector(), new AnthropicMaxTokensDetector(), new GeminiMaxTokensDetector()];
}

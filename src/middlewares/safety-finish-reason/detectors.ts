import type { AIMessage } from "@langchain/core/messages";
import * as v from "valibot";
import { DeerflowError } from "../../core/errors.ts";
import { FieldValueDetector, type FinishReasonDetector } from "../model-length-finish-reason/detectors.ts";

/*
 * Providers say "I stopped this for safety" in different fields and spellings: OpenAI-compatible
 * `finish_reason: content_filter`, Anthropic `stop_reason: refusal`, Gemini's upper-case taxonomy.
 * A gateway with its own tokens (`sensitive`, `violation`) is covered by configuring the values.
 */

function metadataField(message: AIMessage, field: string): unknown {
  const metadata: unknown = message.response_metadata;
  return typeof metadata === "object" && metadata !== null ? (metadata as Record<string, unknown>)[field] : undefined;
}

function present(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === "object" && value !== null) return Object.keys(value).length > 0;
  return Boolean(value);
}

/** OpenAI, Azure OpenAI, Moonshot/Kimi, DeepSeek, vLLM, Qwen and every adapter using OpenAI's finish_reason. */
export class OpenAICompatibleContentFilterDetector extends FieldValueDetector {
  readonly name = "openai_compatible_content_filter";
  constructor(finishReasons: readonly string[] = ["content_filter"]) {
    super("finish_reason", "finish_reasons", finishReasons, false);
  }

  // Azure says what was filtered; carrying it saves a re-trace.
  protected override extras(message: AIMessage): Record<string, unknown> {
    const results = metadataField(message, "content_filter_results");
    return present(results) ? { content_filter_results: results } : {};
  }
}

/** Anthropic reports refusals through stop_reason, not finish_reason. */
export class AnthropicRefusalDetector extends FieldValueDetector {
  readonly name = "anthropic_refusal";
  constructor(stopReasons: readonly string[] = ["refusal"]) {
    super("stop_reason", "stop_reasons", stopReasons, false);
  }
}

/**
 * Gemini / Vertex AI finish reasons that mean a safety, blocklist, recitation or PII filter fired.
 * MAX_TOKENS is a length cap (ModelLengthFinishReason's), and tool-protocol or catch-all reasons
 * (MALFORMED_FUNCTION_CALL, OTHER) are not safety and stay out unless configured.
 */
export const GEMINI_SAFETY_FINISH_REASONS: readonly string[] = Object.freeze([
  "SAFETY",
  "BLOCKLIST",
  "PROHIBITED_CONTENT",
  "SPII",
  "RECITATION",
  "IMAGE_SAFETY",
  "IMAGE_PROHIBITED_CONTENT",
  "IMAGE_RECITATION",
]);

export class GeminiSafetyDetector extends FieldValueDetector {
  readonly name = "gemini_safety";
  constructor(finishReasons: readonly string[] = GEMINI_SAFETY_FINISH_REASONS) {
    super("finish_reason", "finish_reasons", finishReasons, true);
  }

  protected override extras(message: AIMessage): Record<string, unknown> {
    const ratings = metadataField(message, "safety_ratings");
    return present(ratings) ? { safety_ratings: ratings } : {};
  }
}

export function defaultSafetyDetectors(): FinishReasonDetector[] {
  return [new OpenAICompatibleContentFilterDetector(), new AnthropicRefusalDetector(), new GeminiSafetyDetector()];
}

interface BuiltinDetector {
  /** The one constructor option: the field values that count as a safety stop. */
  readonly parameter: "finish_reasons" | "stop_reasons";
  build(values: readonly string[] | undefined): FinishReasonDetector;
}

const BUILTIN_DETECTORS: Readonly<Record<string, BuiltinDetector>> = Object.freeze({
  OpenAICompatibleContentFilterDetector: {
    parameter: "finish_reasons",
    build: (values) => new OpenAICompatibleContentFilterDetector(values),
  },
  AnthropicRefusalDetector: { parameter: "stop_reasons", build: (values) => new AnthropicRefusalDetector(values) },
  GeminiSafetyDetector: { parameter: "finish_reasons", build: (values) => new GeminiSafetyDetector(values) },
});

export const BUILTIN_SAFETY_DETECTOR_CLASSES: readonly string[] = Object.freeze(Object.keys(BUILTIN_DETECTORS));

/**
 * A configured `{use, config}` entry as a detector. `use` names a built-in class, bare or as
 * upstream's module path (`deerflow.agents.middlewares.safety_termination_detectors:GeminiSafetyDetector`);
 * a detector of one's own is passed as an object through the middleware's deps instead.
 */
export function detectorFromConfig(entry: { use: string; config?: Record<string, unknown> | undefined }, path: string): FinishReasonDetector {
  const className = entry.use.split(/[:.]/).at(-1) ?? entry.use;
  const builtin = BUILTIN_DETECTORS[className];
  if (!builtin) {
    throw new DeerflowError(
      "invalid_middleware_config",
      `SafetyFinishReason.${path}.use: unknown detector "${entry.use}". Use one of ${BUILTIN_SAFETY_DETECTOR_CLASSES.join(", ")}, or pass a detector object in code.`,
    );
  }
  const schema = v.strictObject({ [builtin.parameter]: v.optional(v.array(v.string())) });
  const parsed = v.safeParse(schema, entry.config ?? {});
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const key = v.getDotPath(issue);
    throw new DeerflowError(
      "invalid_middleware_config",
      `SafetyFinishReason.${path}.config${key ? `.${key}` : ""}: ${issue.message}. ${className} takes only ${builtin.parameter} (a list of strings).`,
    );
  }
  return builtin.build(parsed.output[builtin.parameter] as string[] | undefined);
}

/** Rejects anything that cannot act as a detector, naming what is missing. */
export function assertDetector(candidate: unknown, index: number): FinishReasonDetector {
  const ok =
    typeof candidate === "object" &&
    candidate !== null &&
    typeof (candidate as { name?: unknown }).name === "string" &&
    typeof (candidate as { detect?: unknown }).detect === "function";
  if (!ok) {
    throw new DeerflowError(
      "invalid_safety_detector",
      `SafetyFinishReason detectors[${index}] is not a detector; give it a string \`name\` and a \`detect(message)\` method.`,
    );
  }
  return candidate as FinishReasonDetector;
}

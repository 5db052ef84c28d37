import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { mapping } from "./schema.ts";

/*
 * The `suggestions:` and `input_polish:` sections of config.yaml: the gateway's two one-shot model
 * calls for DeerFlow's UI (follow-up questions after an answer, a rewrite of the composer's draft).
 * Key names as upstream's, so an upstream config.yaml carries over. `model_name` null: the
 * deployment's default model.
 */

export const DEFAULT_MAX_SUGGESTIONS = 3;
export const MAX_SUGGESTIONS_LIMIT = 5;
export const DEFAULT_INPUT_POLISH_MAX_CHARS = 4000;

const wholeFrom = (min: number, max: number) =>
  v.pipe(
    v.number(),
    v.integer((issue) => `expected a whole number, got ${issue.received}`),
    v.minValue(min, (issue) => `expected a number from ${min} to ${max}, got ${issue.received}`),
    v.maxValue(max, (issue) => `expected a number from ${min} to ${max}, got ${issue.received}`),
  );

const modelName = v.optional(v.nullable(v.pipe(v.string(), v.minLength(1, 'expected a model name, got ""'))), null);

export const SuggestionsConfigSchema = mapping({
  enabled: v.optional(v.boolean(), true),
  /** How many follow-up questions at most; a request asking for more gets this many. */
  max_suggestions: v.optional(wholeFrom(1, MAX_SUGGESTIONS_LIMIT), DEFAULT_MAX_SUGGESTIONS),
  model_name: modelName,
});
export interface SuggestionsConfig {
  enabled: boolean;
  max_suggestions: number;
  model_name: string | null;
}
type _SuggestionsConfigMatches = Assert<SameType<SuggestionsConfig, v.InferOutput<typeof SuggestionsConfigSchema>>>;

export const InputPolishConfigSchema = mapping({
  enabled: v.optional(v.boolean(), true),
  /** The longest draft accepted, in characters, after trimming. */
  max_chars: v.optional(wholeFrom(1, 100_000), DEFAULT_INPUT_POLISH_MAX_CHARS),
  model_name: modelName,
});
export interface InputPolishConfig {
  enabled: boolean;
  max_chars: number;
  model_name: string | null;
}
type _InputPolishConfigMatches = Assert<SameType<InputPolishConfig, v.InferOutput<typeof InputPolishConfigSchema>>>;

export const SUGGESTIONS_DEFAULTS: SuggestionsConfig = Object.freeze(v.parse(SuggestionsConfigSchema, {}));
export const INPUT_POLISH_DEFAULTS: InputPolishConfig = Object.freeze(v.parse(InputPolishConfigSchema, {}));

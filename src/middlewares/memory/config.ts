import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";

/*
 * config.yaml's `memory` section, shared by Memory (the writer) and DynamicContext (the reader).
 * Upstream keeps queue and fact knobs under a pluggable backend's `backend_config`; deerflow-edge
 * has one built-in backend, so those knobs sit at the top level, where upstream's pre-backend
 * configs had them (debounce_seconds, max_facts, fact_confidence_threshold, max_injection_tokens,
 * model_name).
 */

function integerBetween(min: number, max: number) {
  return v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(max));
}

export const MEMORY_MAX_INJECTION_TOKENS = v.optional(integerBetween(100, 8000), 2000);

export const MemoryConfigSchema = v.strictObject({
  /** Whether memory is captured and recalled at all. */
  enabled: v.optional(v.boolean(), true),
  /** Upstream's "tool" mode lets the model call memory tools; deerflow-edge has none yet. */
  mode: v.optional(
    v.picklist(["middleware"], 'only "middleware" is available: deerflow-edge has no memory tools yet'),
    "middleware",
  ),
  /** Whether recalled memory is injected into a conversation's first turn. */
  injection_enabled: v.optional(v.boolean(), true),
  /** Quiet time after a thread's last turn before its conversation is processed. */
  debounce_seconds: v.optional(integerBetween(1, 300), 30),
  /** Facts kept per user; beyond it the least confident (then least recently confirmed) go. */
  max_facts: v.optional(integerBetween(10, 500), 100),
  /** Extracted facts below this confidence are not stored. */
  fact_confidence_threshold: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1)), 0.7),
  /** Token budget (a network-free estimate) of the injected memory block. */
  max_injection_tokens: MEMORY_MAX_INJECTION_TOKENS,
  /**
   * A configured model that extracts facts from conversations; the assembler resolves it and
   * passes the model in. Unset: only explicit "remember ..." statements are kept.
   */
  model_name: v.optional(v.nullable(v.pipe(v.string(), v.minLength(1))), null),
  /** Time budget for draining pending updates on shutdown. */
  shutdown_flush_timeout_seconds: v.optional(v.pipe(v.number(), v.minValue(1), v.maxValue(300)), 30),
});
export interface MemoryConfig {
  enabled: boolean;
  mode: "middleware";
  injection_enabled: boolean;
  debounce_seconds: number;
  max_facts: number;
  fact_confidence_threshold: number;
  max_injection_tokens: number;
  model_name: string | null;
  shutdown_flush_timeout_seconds: number;
}
type _MemoryConfigMatches = Assert<SameType<MemoryConfig, v.InferOutput<typeof MemoryConfigSchema>>>;
export type MemoryConfigInput = Partial<MemoryConfig>;
type _MemoryConfigInputMatches = Assert<SameType<MemoryConfigInput, v.InferInput<typeof MemoryConfigSchema>>>;

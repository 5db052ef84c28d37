import { AIMessage, type MessageContent } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import { DeerflowError } from "../../core/errors.ts";
import { runThreadId } from "../../engine/run-identity.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../../engine/types.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { emitEvent } from "../../engine/events.ts";
import { messageText } from "../messages.ts";
import { detectFirst } from "../model-length-finish-reason/model-length-finish-reason.ts";
import { describeDetector, type FinishReasonDetector, type FinishReasonHit } from "../model-length-finish-reason/detectors.ts";
import { assertDetector, defaultSafetyDetectors, detectorFromConfig } from "./detectors.ts";
import { recordStopReason } from "../stop-reason.ts";
import { isAIMessage } from "../terminal-response/messages.ts";

/*
 * A provider can stop a response for safety mid-stream and still hand back tool calls whose
 * arguments were cut off (a write_file ending mid-sentence). The engine would run them as if they
 * were whole. When a detector says the provider safety-stopped, the calls are stripped before any
 * later guard or the tool router sees them, and the user is told why. A safety stop with no calls
 * and no text is given the same explanation, because an empty assistant message is rejected by
 * strict providers on every later request of the thread. Visible text without calls is the partial
 * answer the user should get, and is left alone.
 *
 * Placement: registered after TerminalResponse, custom and configured middlewares, so that the
 * reverse after-model order runs it first and LoopDetection counts the cleaned message.
 */

export const SAFETY_FINISH_REASON_NAME = "SafetyFinishReason";
export const SAFETY_TERMINATION_KEY = "safety_termination";
export const SAFETY_TERMINATION_EVENT_TYPE = "safety_termination";
export const SAFETY_CAPPED_STOP_REASON = "safety_capped";

const DetectorEntrySchema = v.strictObject({
  use: v.pipe(v.string(), v.minLength(1, "needs the detector's class name")),
  config: v.optional(v.record(v.string(), v.unknown())),
});

export const SafetyFinishReasonConfigSchema = v.strictObject({
  enabled: v.optional(v.boolean()),
  // An empty list would keep the middleware in the chain while detecting nothing: the worst of both.
  detectors: v.optional(
    v.nullable(
      v.pipe(
        v.array(DetectorEntrySchema),
        v.minLength(1, "must be omitted (built-in detectors) or list at least one detector; set enabled: false to turn the middleware off"),
      ),
    ),
  ),
});
export type SafetyFinishReasonConfigInput = Partial<SafetyFinishReasonConfig>;
type _SafetyFinishReasonConfigInputMatches = Assert<SameType<SafetyFinishReasonConfigInput, v.InferInput<typeof SafetyFinishReasonConfigSchema>>>;
export interface SafetyFinishReasonConfig {
  enabled?: boolean;
  detectors?: { use: string; config?: Record<string, unknown> }[] | null;
}
type _SafetyFinishReasonConfigMatches = Assert<SameType<SafetyFinishReasonConfig, v.InferOutput<typeof SafetyFinishReasonConfigSchema>>>;
export const SAFETY_FINISH_REASON_DEFAULTS: Readonly<{ enabled: boolean; detectors: null }> = Object.freeze({ enabled: true, detectors: null });

export interface SafetyFinishReasonDeps {
  /** Detector objects of one's own; they replace both the built-ins and `config.detectors`. */
  readonly detectors?: readonly FinishReasonDetector[];
}

/** What `additional_kwargs.safety_termination` records: names only, never the suppressed arguments. */
export interface SafetyTerminationRecord {
  detector: string;
  reason_field: string;
  reason_value: string;
  suppressed_tool_call_count: number;
  suppressed_tool_call_names: string[];
  extras: Record<string, unknown>;
}

/** Python's repr of a string, so the explanation reads exactly as upstream's. */
function pyRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escaped = text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t");
  return quote + (quote === "'" ? escaped.replace(/'/g, "\\'") : escaped) + quote;
}

export function safetyExplanation(hit: FinishReasonHit, suppressedCalls: number): string {
  const signal = `${hit.reasonField}=${pyRepr(hit.reasonValue)}, detector=${pyRepr(hit.detector)}`;
  return suppressedCalls > 0
    ? `The model provider stopped this response with a safety-related signal (${signal}). Any tool calls produced in this turn were suppressed because their arguments may be truncated and unsafe to execute. Please rephrase the request or ask for a narrower output.`
    : `The model provider stopped this response with a safety-related signal (${signal}) and returned no content. Please rephrase your request or start a new conversation.`;
}

/** Appends a paragraph, keeping list content (reasoning blocks) a list. */
function appendText(content: MessageContent | null | undefined, text: string): MessageContent {
  if (content === null || content === undefined || content === "") return text;
  if (Array.isArray(content)) return [...content, { type: "text", text: `\n\n${text}` }] as MessageContent;
  return `${String(content)}\n\n${text}`;
}

/**
 * The message with every call removed (structured, raw provider payload, legacy function_call),
 * the explanation appended and the record stamped. The id is kept so the reducer replaces the
 * message in place; the provider's finish_reason is kept so downstream readers see the real cause.
 */
function suppressedMessage(message: AIMessage, hit: FinishReasonHit): { message: AIMessage; record: SafetyTerminationRecord } {
  const calls = message.tool_calls ?? [];
  const names = calls.map((call) => call.name || "unknown");
  const record: SafetyTerminationRecord = {
    detector: hit.detector,
    reason_field: hit.reasonField,
    reason_value: hit.reasonValue,
    suppressed_tool_call_count: names.length,
    suppressed_tool_call_names: names,
    extras: { ...hit.extras },
  };
  const { tool_calls: _raw, function_call: _legacy, ...kwargs } = message.additional_kwargs ?? {};
  const responseMetadata = { ...message.response_metadata };
  if (responseMetadata["finish_reason"] === "tool_calls") responseMetadata["finish_reason"] = "stop";
  const patched = new AIMessage({
    content: appendText(message.content as MessageContent | null | undefined, safetyExplanation(hit, names.length)),
    ...(message.id !== undefined ? { id: message.id } : {}),
    ...(message.name !== undefined ? { name: message.name } : {}),
    tool_calls: [],
    invalid_tool_calls: [...(message.invalid_tool_calls ?? [])],
    additional_kwargs: { ...kwargs, [SAFETY_TERMINATION_KEY]: record },
    response_metadata: responseMetadata,
    ...(message.usage_metadata !== undefined ? { usage_metadata: message.usage_metadata } : {}),
  });
  return { message: patched, record };
}

function threadIdOf(runtime: AgentRuntime): string | null {
  return runThreadId(runtime) ?? null;
}

/** Strips the tool calls of a response the provider safety-terminated and records `safety_capped`. */
export function createSafetyFinishReasonMiddleware(config?: SafetyFinishReasonConfigInput, deps: SafetyFinishReasonDeps = {}): AgentMiddleware {
  const parsed = parseMiddlewareConfig(SafetyFinishReasonConfigSchema, config, SAFETY_FINISH_REASON_NAME);
  const enabled = parsed.enabled ?? SAFETY_FINISH_REASON_DEFAULTS.enabled;
  // Copied, so a caller mutating its list afterwards cannot change a built agent.
  const detectors: FinishReasonDetector[] =
    deps.detectors !== undefined
      ? deps.detectors.map(assertDetector)
      : parsed.detectors
        ? parsed.detectors.map((entry, index) => detectorFromConfig(entry, `detectors[${index}]`))
        : defaultSafetyDetectors();
  if (detectors.length === 0) {
    throw new DeerflowError(
      "invalid_safety_detector",
      "SafetyFinishReason was given an empty detector list; pass at least one detector, or leave the middleware out of the chain.",
    );
  }

  const middleware: AgentMiddleware = {
    name: SAFETY_FINISH_REASON_NAME,
    releasePolicyParameters() {
      return { enabled, detectors: detectors.map(describeDetector) };
    },
  };
  // Disabled, the chain builder should leave it out; if it is built anyway it does nothing.
  if (!enabled) return middleware;

  return {
    ...middleware,
    afterModel(state: AgentState, runtime: AgentRuntime): HookResult {
      const last = state.messages.at(-1);
      if (!isAIMessage(last)) return;
      const calls = last.tool_calls ?? [];
      const blank = messageText(last).trim() === "";
      if (calls.length === 0 && !blank) return;

      const hit = detectFirst(detectors, last, runtime);
      if (!hit) return;

      recordStopReason(runtime, SAFETY_CAPPED_STOP_REASON);
      const { message, record } = suppressedMessage(last, hit);
      emitEvent(runtime, {
        type: SAFETY_TERMINATION_EVENT_TYPE,
        detector: record.detector,
        reason_field: record.reason_field,
        reason_value: record.reason_value,
        suppressed_tool_call_count: record.suppressed_tool_call_count,
        suppressed_tool_call_names: record.suppressed_tool_call_names,
        thread_id: threadIdOf(runtime),
      });
      return { messages: [message] };
    },
  };
}

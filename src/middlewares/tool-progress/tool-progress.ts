import { ToolMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type {
  AgentMiddleware,
  AgentRuntime,
  ModelHandler,
  ModelRequest,
  ToolCallRequest,
  ToolHandler,
  ToolResult,
} from "../../engine/types.ts";
import { touchRecent } from "../../core/recent-map.ts";
import { threadHistoryKey } from "../../engine/run-identity.ts";
import { canonicalHashSync } from "../../extension-api/sha256-sync.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { emitEvent } from "../../engine/events.ts";
import { handleWithHiddenNotices, messageText } from "../messages.ts";
import {
  INITIAL_TOOL_PHASE_STATE,
  PROGRESS_TEXTS,
  RECENT_RESULT_WINDOW,
  WORD_SET_MAX_CHARS,
  assessResult,
  parseProgressMeta,
  type ProgressThresholds,
  type ToolPhaseState,
} from "./state.ts";
import { TOOL_META_KEY, type ToolResultMeta } from "../tool-result-meta.ts";

/*
 * A result-quality guard (RFC #3177): after each tool call it reads the deerflow_tool_meta that
 * ToolErrorHandling stamped on the inner return path, and per tool tracks how many calls in a row
 * brought nothing new. Stagnation earns the model a hidden `progress_hint` before its next call; a
 * tool that cannot recover is blocked and answers `[TOOL_BLOCKED] ...` without running.
 *
 * LoopDetection is the complementary call-pattern guard: it looks at the tool calls a response
 * makes and stops the whole turn; this looks at what came back and blocks single tools. Neither
 * reads the other's state, and both may add a hint to the same request.
 *
 * The spec tracks "per-(thread, tool)": each tool's phase lives in this instance under its thread
 * and carries over to the thread's next run, so a blocked tool stays blocked there; threads never
 * see each other's phases, a run without a thread keeps its own, and beyond max_tracked_threads the
 * least recently active thread is forgotten (as LoopDetection keeps its windows). Pending hints
 * live in the run scope: a hint is about the request that follows its result, never a later run's.
 */

export const TOOL_PROGRESS_NAME = "ToolProgress";
export const PROGRESS_HINT_NAME = "progress_hint";
export const TOOL_PROGRESS_EVENT = "middleware:tool_progress";
export const TOOL_BLOCKED_PREFIX = "[TOOL_BLOCKED]";
/** At most this many hints wait for one model request; the rest would only repeat them. */
export const MAX_PENDING_PROGRESS_HINTS = 3;

export const DEFAULT_EXEMPT_TOOLS: readonly string[] = Object.freeze(["ask_clarification", "write_todos", "present_files", "task", "batch_task"]);

const PENDING_HINTS_KEY = `${TOOL_PROGRESS_NAME}:pending_hints`;

const wholeNumber = (min: number, what: string) =>
  v.pipe(v.number(), v.integer(`expected a whole number of ${what}`), v.minValue(min, `expected at least ${min}`));

export const ToolProgressConfigSchema = v.strictObject({
  enabled: v.optional(v.boolean(), false),
  /** Problem calls in a row before the model gets a hint (WARNED). */
  stagnation_threshold: v.optional(wholeNumber(1, "calls"), 3),
  /** Further problem calls after WARNED before an unrecoverable tool is BLOCKED. */
  warn_escalation_count: v.optional(wholeNumber(1, "calls"), 2),
  /** Whether hints reach the model; states and blocks apply either way. */
  inject_assessment: v.optional(v.boolean(), true),
  /** Word-set Jaccard overlap at which a success counts as a repeat of a recent one. */
  jaccard_similarity_threshold: v.optional(
    v.pipe(v.number(), v.minValue(0, "expected a ratio from 0 to 1"), v.maxValue(1, "expected a ratio from 0 to 1")),
    0.8,
  ),
  /** Results with fewer distinct words are never treated as repeats. */
  min_word_count_for_similarity: v.optional(wholeNumber(0, "words"), 10),
  /** Tools never tracked or blocked. */
  exempt_tools: v.optional(v.array(v.string()), () => [...DEFAULT_EXEMPT_TOOLS]),
  /** Threads whose tool phases this instance keeps; the least recently active is forgotten first. */
  max_tracked_threads: v.optional(wholeNumber(1, "threads"), 100),
});
export interface ToolProgressConfig {
  enabled: boolean;
  stagnation_threshold: number;
  warn_escalation_count: number;
  inject_assessment: boolean;
  jaccard_similarity_threshold: number;
  min_word_count_for_similarity: number;
  exempt_tools: string[];
  max_tracked_threads: number;
}
type _ToolProgressConfigMatches = Assert<SameType<ToolProgressConfig, v.InferOutput<typeof ToolProgressConfigSchema>>>;
export type ToolProgressConfigInput = Partial<ToolProgressConfig>;
type _ToolProgressConfigInputMatches = Assert<SameType<ToolProgressConfigInput, v.InferInput<typeof ToolProgressConfigSchema>>>;

/** Hints waiting for the run's next model call. */
function pendingHints(runtime: AgentRuntime): string[] {
  let pending = runtime.scope.get<string[]>(PENDING_HINTS_KEY);
  if (!pending) {
    pending = [];
    runtime.scope.set(PENDING_HINTS_KEY, pending);
  }
  return pending;
}

/** The meta a blocked call's answer carries: recoverable, since the model can still summarise. */
const BLOCKED_META: ToolResultMeta = Object.freeze({
  status: "error",
  error_type: "blocked_by_progress_guard",
  recoverable_by_model: true,
  recommended_next_action: "summarize",
  source: "progress_middleware",
});

export function blockedToolMessage(toolCallId: string, toolName: string, reason: string): ToolMessage {
  return new ToolMessage({
    content: `${TOOL_BLOCKED_PREFIX} ${reason}`,
    tool_call_id: toolCallId,
    name: toolName,
    status: "error",
    additional_kwargs: { [TOOL_META_KEY]: { ...BLOCKED_META } },
  });
}

/**
 * Tracks per-(thread, tool) stagnation, hints the model at the next call and blocks tools that
 * cannot recover. Must wrap ToolErrorHandling (it reads the meta stamped there).
 */
export function createToolProgressMiddleware(config?: ToolProgressConfigInput): AgentMiddleware {
  const settings = parseMiddlewareConfig(
    ToolProgressConfigSchema,
    config,
    TOOL_PROGRESS_NAME,
    "Fix this key under tool_progress (thresholds are whole numbers of at least 1, jaccard_similarity_threshold a ratio from 0 to 1).",
  );
  const exempt: ReadonlySet<string> = new Set(settings.exempt_tools);
  const thresholds: ProgressThresholds = {
    stagnationThreshold: settings.stagnation_threshold,
    warnEscalationCount: settings.warn_escalation_count,
    jaccardThreshold: settings.jaccard_similarity_threshold,
    minWords: settings.min_word_count_for_similarity,
  };
  /** Thread key -> tool name -> phase. */
  const threads = new Map<string, Map<string, ToolPhaseState>>();

  function toolsOf(runtime: AgentRuntime): Map<string, ToolPhaseState> {
    return touchRecent(threads, threadHistoryKey(runtime), () => new Map<string, ToolPhaseState>(), settings.max_tracked_threads);
  }

  function record(runtime: AgentRuntime, toolName: string, action: string, state: ToolPhaseState, meta?: ToolResultMeta): void {
    // Names, phases and counts only: a result's content could carry what a fetched page wrote.
    emitEvent(runtime, {
      type: TOOL_PROGRESS_EVENT,
      middleware: TOOL_PROGRESS_NAME,
      action,
      tool_name: toolName,
      phase: state.phase,
      consecutive_problems: state.consecutiveProblems,
      ...(meta ? { error_type: meta.error_type, status: meta.status } : {}),
      run_id: runtime.runId,
    });
  }

  function observe(result: ToolResult, toolName: string, runtime: AgentRuntime): void {
    // A Command carries its own state update; upstream tracks ToolMessages only.
    if (!ToolMessage.isInstance(result)) return;
    const meta = parseProgressMeta(result.additional_kwargs?.[TOOL_META_KEY]);
    if (!meta) return;
    const tools = toolsOf(runtime);
    const before = tools.get(toolName) ?? INITIAL_TOOL_PHASE_STATE;
    const { state: after, hint } = assessResult(before, meta, messageText(result), thresholds);
    tools.set(toolName, after);
    if (after.phase !== before.phase) record(runtime, toolName, after.phase, after, meta);
    const pending = pendingHints(runtime);
    if (hint !== null && settings.inject_assessment && pending.length < MAX_PENDING_PROGRESS_HINTS) {
      pending.push(hint);
    }
  }

  return {
    name: TOOL_PROGRESS_NAME,

    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      const toolName = request.toolCall.name ?? "";
      if (!settings.enabled || toolName === "" || exempt.has(toolName)) return handler(request);
      const state = toolsOf(request.runtime).get(toolName);
      if (state?.phase === "blocked" && state.blockReason !== null) {
        record(request.runtime, toolName, "intercepted", state);
        return blockedToolMessage(request.toolCall.id ?? "", toolName, state.blockReason);
      }
      const result = await handler(request);
      observe(result, toolName, request.runtime);
      return result;
    },

    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      if (!settings.enabled) return handler(request);
      const pending = pendingHints(request.runtime);
      if (pending.length === 0) return handler(request);
      const delivered = [...pending];
      const response = await handleWithHiddenNotices(request, handler, PROGRESS_HINT_NAME, [...new Set(delivered)]);
      pending.splice(0, delivered.length);
      return response;
    },

    releasePolicyParameters() {
      return {
        enabled: settings.enabled,
        stagnation_threshold: settings.stagnation_threshold,
        warn_escalation_count: settings.warn_escalation_count,
        inject_assessment: settings.inject_assessment,
        jaccard_similarity_threshold: settings.jaccard_similarity_threshold,
        min_word_count_for_similarity: settings.min_word_count_for_similarity,
        exempt_tools: [...exempt].sort(),
        max_pending_hints: MAX_PENDING_PROGRESS_HINTS,
        recent_result_window: RECENT_RESULT_WINDOW,
        word_set_max_chars: WORD_SET_MAX_CHARS,
        max_tracked_threads: settings.max_tracked_threads,
        state_scope: "thread",
        hint_message_name: PROGRESS_HINT_NAME,
        texts_hash: canonicalHashSync(PROGRESS_TEXTS),
      };
    },
  };
}

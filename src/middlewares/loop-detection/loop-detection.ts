import { AIMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import { touchRecent } from "../../core/recent-map.ts";
import { threadHistoryKey } from "../../engine/run-identity.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult, ModelHandler, ModelRequest } from "../../engine/types.ts";
import { notBelow, parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { emitEvent } from "../../engine/events.ts";
import { forceFinalAnswer } from "./forced-stop.ts";
import { hashToolCalls } from "./hash.ts";
import { handleWithHiddenNotices } from "../messages.ts";
import { recordStopReason } from "../stop-reason.ts";

/*
 * A call-pattern guard: after each model response it compares the response's tool-call set with
 * the thread's recent ones. Layer 1 catches the same set repeated; layer 2 catches one tool called
 * over and over with varying arguments (read_file on fifty different files). Crossing a warn
 * threshold queues a hidden `loop_warning` for the next model request; crossing a hard limit turns
 * the response into a final answer.
 *
 * The warning cannot be added in afterModel: the tools have not answered yet, so any message there
 * would sit between the assistant's tool calls and their results, which OpenAI-compatible providers
 * reject. It is appended at the end of the next request instead, after every tool result, and never
 * written to state.
 */

export const LOOP_DETECTION_NAME = "LoopDetection";
export const LOOP_WARNING_NAME = "loop_warning";
export const LOOP_DETECTION_EVENT = "middleware:loop_detection";

export const LOOP_WARNING_TEXT =
  "[LOOP DETECTED] You are repeating the same tool calls. Stop calling tools and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far.";
export const LOOP_HARD_STOP_TEXT =
  "[FORCED STOP] Repeated tool calls exceeded the safety limit. Producing final answer with results collected so far.";

export function toolFrequencyWarningText(toolName: string, count: number): string {
  return `[LOOP DETECTED] You have called ${toolName} ${count} times without producing a final answer. Stop calling tools and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far.`;
}

export function toolFrequencyHardStopText(toolName: string, count: number): string {
  return `[FORCED STOP] Tool ${toolName} called ${count} times — exceeded the per-tool safety limit. Producing final answer with results collected so far.`;
}

/** At most this many distinct warnings wait for one model request; older ones give way. */
export const MAX_PENDING_LOOP_WARNINGS = 4;
const PENDING_WARNINGS_KEY = `${LOOP_DETECTION_NAME}:pending_warnings`;

const positiveInt = (what: string) => v.pipe(v.number(), v.integer(`expected a whole number of ${what}`), v.minValue(1, "expected at least 1"));

const ToolFreqOverrideSchema = v.pipe(
  v.strictObject({ warn: positiveInt("calls"), hard_limit: positiveInt("calls") }),
  v.forward(
    v.check((o) => o.hard_limit >= o.warn, "hard_limit must be greater than or equal to warn"),
    ["hard_limit"],
  ),
);

export const LoopDetectionConfigSchema = v.pipe(
  v.strictObject({
    enabled: v.optional(v.boolean(), true),
    /** Identical tool-call sets in the window before the model is warned. */
    warn_threshold: v.optional(positiveInt("repeats"), 3),
    /** Identical tool-call sets in the window before the response is forced to a final answer. */
    hard_limit: v.optional(positiveInt("repeats"), 5),
    /** Recent tool-call sets remembered per thread. */
    window_size: v.optional(positiveInt("tool-call sets"), 20),
    /** Threads whose history this instance keeps; the least recently active is forgotten first. */
    max_tracked_threads: v.optional(positiveInt("threads"), 100),
    tool_freq_warn: v.optional(positiveInt("calls"), 30),
    tool_freq_hard_limit: v.optional(positiveInt("calls"), 50),
    /** Per-tool `{ warn, hard_limit }` replacing tool_freq_warn / tool_freq_hard_limit for that tool. */
    tool_freq_overrides: v.optional(v.record(v.string(), ToolFreqOverrideSchema), {}),
  }),
  notBelow("hard_limit", "warn_threshold"),
  notBelow("tool_freq_hard_limit", "tool_freq_warn"),
);
export interface LoopDetectionConfig {
  enabled: boolean;
  warn_threshold: number;
  hard_limit: number;
  window_size: number;
  max_tracked_threads: number;
  tool_freq_warn: number;
  tool_freq_hard_limit: number;
  tool_freq_overrides: Record<string, { warn: number; hard_limit: number }>;
}
type _LoopDetectionConfigMatches = Assert<SameType<LoopDetectionConfig, v.InferOutput<typeof LoopDetectionConfigSchema>>>;
export type LoopDetectionConfigInput = Partial<LoopDetectionConfig>;
type _LoopDetectionConfigInputMatches = Assert<SameType<LoopDetectionConfigInput, v.InferInput<typeof LoopDetectionConfigSchema>>>;

/** One thread's recent tool-call history. */
interface ThreadTrack {
  /** Hashes of recent tool-call sets, newest last, at most window_size. */
  readonly hashes: string[];
  /** Hashes already warned about; pruned to those still in the window. */
  readonly warned: Set<string>;
  /** Names of recent individual tool calls, newest last, at most the frequency window. */
  readonly names: string[];
  readonly nameCounts: Map<string, number>;
  /** Tools warned about in their current burst. */
  readonly freqWarned: Set<string>;
}

export type LoopDetector = "repeated_tool_calls" | "tool_frequency";

type Verdict =
  | { readonly kind: "none" }
  | {
      readonly kind: "warn" | "hard_stop";
      readonly text: string;
      readonly detector: LoopDetector;
      readonly count: number;
      readonly threshold: number;
      readonly toolName?: string;
    };

const NO_VERDICT: Verdict = { kind: "none" };

/**
 * Detects repeated tool-call loops and breaks them: a hidden warning at the next model request,
 * then a forced final answer with `stop_reason=loop_capped`. Thread histories live in this
 * instance (windows continue across a thread's runs, as upstream); pending warnings live in the
 * run scope, so they never outlive or cross a run.
 */
export function createLoopDetectionMiddleware(config?: LoopDetectionConfigInput): AgentMiddleware {
  const settings = parseMiddlewareConfig(
    LoopDetectionConfigSchema,
    config,
    LOOP_DETECTION_NAME,
    "Fix this key under loop_detection (thresholds are whole numbers of at least 1, hard limits at least their warn thresholds).",
  );
  const overrides = new Map(Object.entries(settings.tool_freq_overrides).map(([name, o]) => [name, o] as const));
  // The frequency count can never exceed its window, so the window must hold the largest hard
  // limit in play or that limit could never fire; window_size alone (20) is below the default (50).
  const frequencyWindow = Math.max(
    settings.window_size,
    settings.tool_freq_hard_limit,
    ...[...overrides.values()].map((o) => o.hard_limit),
  );
  const threads = new Map<string, ThreadTrack>();

  function track(key: string): ThreadTrack {
    return touchRecent(
      threads,
      key,
      () => ({ hashes: [], warned: new Set<string>(), names: [], nameCounts: new Map<string, number>(), freqWarned: new Set<string>() }),
      settings.max_tracked_threads,
    );
  }

  function check(key: string, calls: readonly { name?: unknown; args?: unknown }[]): Verdict {
    const entry = track(key);
    const hash = hashToolCalls(calls);
    entry.hashes.push(hash);
    if (entry.hashes.length > settings.window_size) entry.hashes.splice(0, entry.hashes.length - settings.window_size);
    for (const warned of [...entry.warned]) if (!entry.hashes.includes(warned)) entry.warned.delete(warned);

    const count = entry.hashes.filter((h) => h === hash).length;
    if (count >= settings.hard_limit) {
      return { kind: "hard_stop", text: LOOP_HARD_STOP_TEXT, detector: "repeated_tool_calls", count, threshold: settings.hard_limit };
    }
    if (count >= settings.warn_threshold && !entry.warned.has(hash)) {
      entry.warned.add(hash);
      return { kind: "warn", text: LOOP_WARNING_TEXT, detector: "repeated_tool_calls", count, threshold: settings.warn_threshold };
    }

    for (const call of calls) {
      const name = typeof call.name === "string" ? call.name : "";
      if (name === "") continue;
      entry.names.push(name);
      entry.nameCounts.set(name, (entry.nameCounts.get(name) ?? 0) + 1);
      while (entry.names.length > frequencyWindow) {
        const old = entry.names.shift()!;
        const left = (entry.nameCounts.get(old) ?? 1) - 1;
        if (left <= 0) entry.nameCounts.delete(old);
        else entry.nameCounts.set(old, left);
      }
      const frequency = entry.nameCounts.get(name) ?? 0;
      const limits = overrides.get(name) ?? { warn: settings.tool_freq_warn, hard_limit: settings.tool_freq_hard_limit };
      if (frequency >= limits.hard_limit) {
        return {
          kind: "hard_stop",
          text: toolFrequencyHardStopText(name, frequency),
          detector: "tool_frequency",
          count: frequency,
          threshold: limits.hard_limit,
          toolName: name,
        };
      }
      if (frequency >= limits.warn) {
        if (!entry.freqWarned.has(name)) {
          entry.freqWarned.add(name);
          return {
            kind: "warn",
            text: toolFrequencyWarningText(name, frequency),
            detector: "tool_frequency",
            count: frequency,
            threshold: limits.warn,
            toolName: name,
          };
        }
      } else {
        // The burst decayed out of the window; a later burst deserves its own warning.
        entry.freqWarned.delete(name);
      }
    }
    return NO_VERDICT;
  }

  function queueWarning(runtime: AgentRuntime, text: string): void {
    const pending = runtime.scope.get<string[]>(PENDING_WARNINGS_KEY) ?? [];
    if (!pending.includes(text)) pending.push(text);
    if (pending.length > MAX_PENDING_LOOP_WARNINGS) pending.splice(0, pending.length - MAX_PENDING_LOOP_WARNINGS);
    runtime.scope.set(PENDING_WARNINGS_KEY, pending);
  }

  function record(runtime: AgentRuntime, verdict: Exclude<Verdict, { kind: "none" }>, message: AIMessage): void {
    const agentId = runtime.context["agent_id"];
    const toolNames = (message.tool_calls ?? []).map((call) => call.name || "unknown");
    // Names and counts only: arguments, content, results and anything hashed from arguments could
    // carry what the user or a fetched page wrote.
    emitEvent(runtime, {
      type: LOOP_DETECTION_EVENT,
      middleware: LOOP_DETECTION_NAME,
      hook: "after_model",
      action: verdict.kind,
      detector: verdict.detector,
      count: verdict.count,
      threshold: verdict.threshold,
      ...(verdict.toolName !== undefined ? { tool_name: verdict.toolName } : {}),
      tool_names: toolNames,
      tool_call_count: toolNames.length,
      run_id: runtime.runId,
      is_subagent: runtime.context["is_subagent"] === true,
      ...(typeof agentId === "string" && agentId !== "" ? { agent_id: agentId } : {}),
    });
  }

  return {
    name: LOOP_DETECTION_NAME,

    afterModel(state: AgentState, runtime: AgentRuntime): HookResult {
      if (!settings.enabled) return undefined;
      const last = state.messages.at(-1);
      if (!last || !AIMessage.isInstance(last)) return undefined;
      const calls = last.tool_calls ?? [];
      if (calls.length === 0) return undefined;

      const verdict = check(threadHistoryKey(runtime), calls);
      if (verdict.kind === "none") return undefined;
      record(runtime, verdict, last);
      if (verdict.kind === "warn") {
        queueWarning(runtime, verdict.text);
        return undefined;
      }
      recordStopReason(runtime, "loop_capped");
      return { messages: [forceFinalAnswer(last, verdict.text)] };
    },

    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      const pending = request.runtime.scope.get<string[]>(PENDING_WARNINGS_KEY);
      if (!settings.enabled || !pending || pending.length === 0) return handler(request);
      const response = await handleWithHiddenNotices(request, handler, LOOP_WARNING_NAME, [...new Set(pending)]);
      request.runtime.scope.delete(PENDING_WARNINGS_KEY);
      return response;
    },

    afterAgent(_state: AgentState, runtime: AgentRuntime): HookResult {
      // A warning the run never got to deliver is stale for whatever comes next.
      runtime.scope.delete(PENDING_WARNINGS_KEY);
      return undefined;
    },

    releasePolicyParameters() {
      return {
        enabled: settings.enabled,
        warn_threshold: settings.warn_threshold,
        hard_limit: settings.hard_limit,
        window_size: settings.window_size,
        max_tracked_threads: settings.max_tracked_threads,
        tool_freq_warn: settings.tool_freq_warn,
        tool_freq_hard_limit: settings.tool_freq_hard_limit,
        tool_freq_overrides: Object.fromEntries([...overrides].map(([name, o]) => [name, { warn: o.warn, hard_limit: o.hard_limit }])),
        tool_freq_window: frequencyWindow,
      };
    },
  };
}

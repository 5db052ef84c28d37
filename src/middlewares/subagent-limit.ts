import { AIMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import * as v from "valibot";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../engine/types.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { appendStopText } from "./loop-detection/forced-stop.ts";
import { recordStopReason } from "./stop-reason.ts";

export const SUBAGENT_LIMIT_NAME = "SubagentLimit";
export const TASK_TOOL_NAME = "task";

export const MIN_CONCURRENT_SUBAGENTS = 1;
/** The safety range's ceiling: more parallel subagents than this is never a sane request. */
export const MAX_CONCURRENT_SUBAGENTS = 64;
export const DEFAULT_MAX_CONCURRENT_SUBAGENTS = 3;
export const MIN_TOTAL_SUBAGENTS_PER_RUN = 1;
export const MAX_TOTAL_SUBAGENTS_PER_RUN = 50;
export const DEFAULT_MAX_TOTAL_SUBAGENTS_PER_RUN = 6;

/** Caller context keys that override the configured limits for one run. */
export const MAX_CONCURRENT_CONTEXT_KEY = "max_concurrent_subagents";
export const MAX_TOTAL_CONTEXT_KEY = "max_total_subagents";

export const SUBAGENT_LIMIT_REACHED_TEXT =
  "[SUBAGENT LIMIT REACHED] The subagent delegation limit for this run has been reached. " +
  "Continue using the subagent results already collected, execute remaining simple work " +
  "directly, or summarize the remaining work instead of launching more subagents.";

const wholeNumber = v.pipe(v.number(), v.integer("expected a whole number"));

/** The `subagents` keys this middleware reads (the rest of that section belongs to the task tool). */
/** `subagents.max_total_per_run`: ordinary task delegations one run may start. */
export const MaxTotalPerRunSchema = v.optional(
    v.pipe(
      wholeNumber,
      v.minValue(MIN_TOTAL_SUBAGENTS_PER_RUN, `expected at least ${MIN_TOTAL_SUBAGENTS_PER_RUN}`),
      v.maxValue(MAX_TOTAL_SUBAGENTS_PER_RUN, `expected at most ${MAX_TOTAL_SUBAGENTS_PER_RUN}`),
    ),
    DEFAULT_MAX_TOTAL_SUBAGENTS_PER_RUN,
  );

export const SubagentLimitConfigSchema = v.strictObject({
  /** Task calls kept from one model response; clamped to 1-64 and to the startup maximum. */
  max_concurrent: v.optional(wholeNumber, DEFAULT_MAX_CONCURRENT_SUBAGENTS),
  /** Task delegations one run may start, counted in the durable delegation ledger. */
  max_total_per_run: MaxTotalPerRunSchema,
});
export type SubagentLimitConfig = v.InferOutput<typeof SubagentLimitConfigSchema>;
export type SubagentLimitConfigInput = v.InferInput<typeof SubagentLimitConfigSchema>;

export interface SubagentLimitDeps {
  /** The subagent runtime's startup maximum of running subagents (`subagent_runtime.max_running`). */
  readonly maxRunning?: number;
}

function clamp(value: number, low: number, high: number): number {
  return Math.max(low, Math.min(high, Math.trunc(value)));
}

export function clampConcurrentSubagents(value: number, maxRunning?: number): number {
  const ceiling = maxRunning !== undefined && Number.isFinite(maxRunning) ? Math.min(MAX_CONCURRENT_SUBAGENTS, maxRunning) : MAX_CONCURRENT_SUBAGENTS;
  return clamp(Math.min(value, ceiling), MIN_CONCURRENT_SUBAGENTS, MAX_CONCURRENT_SUBAGENTS);
}

export function clampTotalSubagents(value: number): number {
  return clamp(value, MIN_TOTAL_SUBAGENTS_PER_RUN, MAX_TOTAL_SUBAGENTS_PER_RUN);
}

function contextLimit(runtime: AgentRuntime, key: string): number | undefined {
  const value = runtime.context[key];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/**
 * Distinct delegations this run already started. Entries carry the run id they were captured in;
 * with no run id to match, every delegation of the thread counts, which can only cap earlier.
 */
export function countRunDelegations(delegations: unknown, runId: string | undefined): number {
  if (!Array.isArray(delegations)) return 0;
  const ids = new Set<string>();
  for (const entry of delegations) {
    if (typeof entry !== "object" || entry === null) continue;
    const { id, run_id: entryRunId } = entry as { id?: unknown; run_id?: unknown };
    if (runId && String(entryRunId ?? "") !== runId) continue;
    if (id !== undefined && id !== null && id !== "") ids.add(String(id));
  }
  return ids.size;
}

/**
 * A copy of `message` keeping only `toolCalls`, with the provider's raw `tool_calls` kwargs synced
 * to them: a raw call left behind would be replayed to the provider next turn without its result.
 */
export function withToolCalls(message: AIMessage, toolCalls: readonly ToolCall[], content?: unknown): AIMessage {
  const kept = new Set(toolCalls.map((call) => call.id).filter((id): id is string => typeof id === "string" && id !== ""));
  const additional_kwargs: Record<string, unknown> = { ...(message.additional_kwargs ?? {}) };
  const raw = additional_kwargs["tool_calls"];
  if (Array.isArray(raw)) {
    const synced = raw.filter((call) => typeof call === "object" && call !== null && kept.has((call as { id?: unknown }).id as string));
    if (synced.length > 0) additional_kwargs["tool_calls"] = synced;
    else delete additional_kwargs["tool_calls"];
  }
  if (toolCalls.length === 0) delete additional_kwargs["function_call"];
  const response_metadata: Record<string, unknown> = { ...(message.response_metadata ?? {}) };
  if (toolCalls.length === 0 && response_metadata["finish_reason"] === "tool_calls") response_metadata["finish_reason"] = "stop";
  return new AIMessage({
    content: (content === undefined ? message.content : content) as AIMessage["content"],
    ...(message.id !== undefined ? { id: message.id } : {}),
    ...(message.name !== undefined ? { name: message.name } : {}),
    additional_kwargs,
    response_metadata,
    tool_calls: [...toolCalls],
    invalid_tool_calls: message.invalid_tool_calls ?? [],
    ...(message.usage_metadata !== undefined ? { usage_metadata: message.usage_metadata } : {}),
  });
}

/**
 * Keeps at most min(concurrent, total − this run's delegations) ordinary `task` calls per model
 * response, so neither one wide batch nor many legal-sized batches in one run can fan out without
 * bound. `batch_task` is a separate, durably limited mode and passes untouched. When the run's total
 * is spent the response gets a visible note so the model synthesizes what it has instead of
 * ending on an empty tool-call turn.
 */
export function createSubagentLimitMiddleware(config?: SubagentLimitConfigInput, deps: SubagentLimitDeps = {}): AgentMiddleware {
  const settings = parseMiddlewareConfig(
    SubagentLimitConfigSchema,
    config,
    SUBAGENT_LIMIT_NAME,
    "Fix this key under subagents (max_concurrent is a whole number; max_total_per_run is 1-50).",
  );
  const maxConcurrent = clampConcurrentSubagents(settings.max_concurrent, deps.maxRunning);
  const maxTotal = clampTotalSubagents(settings.max_total_per_run);

  function afterModel(state: AgentState, runtime: AgentRuntime): HookResult {
    const last = state.messages.at(-1);
    if (!last || !AIMessage.isInstance(last)) return undefined;
    const toolCalls = last.tool_calls ?? [];
    const taskIndices = toolCalls.flatMap((call, index) => (call.name === TASK_TOOL_NAME ? [index] : []));
    if (taskIndices.length === 0) return undefined;

    const requestedConcurrent = contextLimit(runtime, MAX_CONCURRENT_CONTEXT_KEY);
    const concurrent = requestedConcurrent === undefined ? maxConcurrent : clampConcurrentSubagents(requestedConcurrent, deps.maxRunning);
    const requestedTotal = contextLimit(runtime, MAX_TOTAL_CONTEXT_KEY);
    const total = requestedTotal === undefined ? maxTotal : clampTotalSubagents(requestedTotal);
    const remaining = Math.max(0, total - countRunDelegations(state.delegations, runtime.runId || undefined));
    const allowed = Math.min(concurrent, remaining);
    if (taskIndices.length <= allowed) return undefined;

    const dropped = new Set(taskIndices.slice(allowed));
    const kept = toolCalls.filter((_, index) => !dropped.has(index));
    const exhausted = remaining === 0;
    if (exhausted) recordStopReason(runtime, "subagent_limit_capped");
    // An empty reply gets the note alone, not a note behind a blank paragraph.
    const content = exhausted ? (last.content === "" ? SUBAGENT_LIMIT_REACHED_TEXT : appendStopText(last.content, SUBAGENT_LIMIT_REACHED_TEXT)) : undefined;
    return { messages: [withToolCalls(last, kept, content)] };
  }

  return {
    name: SUBAGENT_LIMIT_NAME,
    afterModel,
    releasePolicyParameters: () => ({ max_concurrent: maxConcurrent, max_total: maxTotal }),
  };
}

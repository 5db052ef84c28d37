import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult, ModelHandler, ModelRequest } from "../engine/types.ts";
import { notBelow, parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { forceFinalAnswer } from "./loop-detection/forced-stop.ts";
import { handleWithHiddenNotices } from "./messages.ts";
import { recordStopReason } from "./stop-reason.ts";

/*
 * Enforces a token budget per run. Only usage produced in this run counts: beforeAgent marks what
 * the thread already carries as seen, and afterModel adds each AI message's usage *growth* since it
 * was last seen, so a subagent's usage merged into an earlier message later on still counts.
 * Like LoopDetection, the warning goes into the next request (never state) and the hard stop turns
 * the response into a final answer instead of raising.
 */

export const TOKEN_BUDGET_NAME = "TokenBudget";
export const BUDGET_WARNING_NAME = "budget_warning";

const SCOPE_KEY = `${TOKEN_BUDGET_NAME}:run`;

const ratio = v.pipe(v.number(), v.minValue(0, "expected a fraction from 0 to 1"), v.maxValue(1, "expected a fraction from 0 to 1"));
const optionalLimit = v.optional(v.nullable(v.pipe(v.number(), v.integer("expected a whole number of tokens"), v.minValue(1, "expected at least 1"))), null);

export const TokenBudgetConfigSchema = v.pipe(
  v.strictObject({
    enabled: v.optional(v.boolean(), false),
    /** Total (input + output) tokens one run may use. */
    max_tokens: v.optional(v.pipe(v.number(), v.integer("expected a whole number of tokens"), v.minValue(1000, "expected at least 1000")), 200_000),
    /** A separate limit on input tokens, or null for none. */
    max_input_tokens: optionalLimit,
    /** A separate limit on output tokens, or null for none. */
    max_output_tokens: optionalLimit,
    /** Fraction of a limit at which the model is told to wrap up (once per run). */
    warn_threshold: v.optional(ratio, 0.8),
    /** Fraction of a limit at which tool calls are stripped and the run ends. */
    hard_stop_threshold: v.optional(ratio, 1),
  }),
  notBelow("hard_stop_threshold", "warn_threshold"),
);
export interface TokenBudgetConfig {
  enabled: boolean;
  max_tokens: number;
  max_input_tokens: number | null;
  max_output_tokens: number | null;
  warn_threshold: number;
  hard_stop_threshold: number;
}
type _TokenBudgetConfigMatches = Assert<SameType<TokenBudgetConfig, v.InferOutput<typeof TokenBudgetConfigSchema>>>;
export type TokenBudgetConfigInput = Partial<TokenBudgetConfig>;
type _TokenBudgetConfigInputMatches = Assert<SameType<TokenBudgetConfigInput, v.InferInput<typeof TokenBudgetConfigSchema>>>;

export type BudgetDimension = "total" | "input" | "output";

/** What one run has spent, and which messages' usage it has already taken in. */
interface RunUsage {
  input: number;
  output: number;
  total: number;
  /** Usage last seen per message id; id-less messages (unit inputs) by identity. */
  readonly seen: Map<string, readonly [number, number]>;
  readonly seenById: WeakMap<BaseMessage, readonly [number, number]>;
  warned: boolean;
  pending: string[];
}

/** Thousands separated by commas, as Python's `{:,}` writes them, whatever the host locale. */
function grouped(n: number): string {
  return String(Math.trunc(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

export function budgetWarningText(dimension: BudgetDimension, used: number, budget: number, fraction: number): string {
  return `[TOKEN BUDGET WARNING] You have used ${grouped(used)} of your ${grouped(budget)} ${dimension} token budget (${(fraction * 100).toFixed(0)}%). Wrap up your current work and produce a final answer. Avoid starting new tool calls unless absolutely necessary.`;
}

export function budgetExceededText(dimension: BudgetDimension, used: number, budget: number): string {
  return `[TOKEN BUDGET EXCEEDED] The ${dimension} token usage (${grouped(used)}) has exceeded the safety limit (${grouped(budget)}). Producing final answer with results collected so far.`;
}

function tokens(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : 0;
}

function usageOf(message: AIMessage): readonly [number, number] {
  const usage = message.usage_metadata;
  return [tokens(usage?.input_tokens), tokens(usage?.output_tokens)];
}

function newRunUsage(): RunUsage {
  return { input: 0, output: 0, total: 0, seen: new Map(), seenById: new WeakMap(), warned: false, pending: [] };
}

function lastSeen(run: RunUsage, message: AIMessage): readonly [number, number] | undefined {
  return message.id ? run.seen.get(message.id) : run.seenById.get(message);
}

function markSeen(run: RunUsage, message: AIMessage, usage: readonly [number, number]): void {
  if (message.id) run.seen.set(message.id, usage);
  else run.seenById.set(message, usage);
}

/** Marks every AI message's current usage as belonging to an earlier run. */
function markExisting(run: RunUsage, messages: readonly BaseMessage[]): void {
  for (const message of messages) if (AIMessage.isInstance(message)) markSeen(run, message, usageOf(message));
}

/**
 * Per-run token limits: one hidden `[TOKEN BUDGET WARNING]` at the next request once a limit's
 * warn fraction is reached, and at the hard-stop fraction a forced final answer with
 * `stop_reason=token_capped`. Every fact lives in the run scope; the instance holds only config.
 */
export function createTokenBudgetMiddleware(config?: TokenBudgetConfigInput): AgentMiddleware {
  const settings = parseMiddlewareConfig(
    TokenBudgetConfigSchema,
    config,
    TOKEN_BUDGET_NAME,
    "Fix this key under token_budget (max_tokens is at least 1000; thresholds are fractions with hard_stop_threshold >= warn_threshold).",
  );

  function limits(): Array<readonly [BudgetDimension, number]> {
    const out: Array<readonly [BudgetDimension, number]> = [["total", settings.max_tokens]];
    if (settings.max_input_tokens !== null) out.push(["input", settings.max_input_tokens]);
    if (settings.max_output_tokens !== null) out.push(["output", settings.max_output_tokens]);
    return out;
  }

  return {
    name: TOKEN_BUDGET_NAME,

    beforeAgent(state: AgentState, runtime: AgentRuntime): HookResult {
      if (!settings.enabled) return undefined;
      const run = newRunUsage();
      markExisting(run, state.messages);
      runtime.scope.set(SCOPE_KEY, run);
      return undefined;
    },

    afterModel(state: AgentState, runtime: AgentRuntime): HookResult {
      if (!settings.enabled) return undefined;
      const last = state.messages.at(-1);
      if (!last || !AIMessage.isInstance(last)) return undefined;

      let run = runtime.scope.get<RunUsage>(SCOPE_KEY);
      if (!run) {
        // A run resumed past beforeAgent (an interrupt's resume) still owns only what it produced:
        // everything before this response belongs to earlier runs.
        run = newRunUsage();
        markExisting(run, state.messages.slice(0, -1));
        runtime.scope.set(SCOPE_KEY, run);
      }

      for (const message of state.messages) {
        if (!AIMessage.isInstance(message)) continue;
        const [input, output] = usageOf(message);
        const [seenInput, seenOutput] = lastSeen(run, message) ?? [0, 0];
        const addedInput = Math.max(0, input - seenInput);
        const addedOutput = Math.max(0, output - seenOutput);
        if (addedInput === 0 && addedOutput === 0) continue;
        run.input += addedInput;
        run.output += addedOutput;
        run.total += addedInput + addedOutput;
        markSeen(run, message, [input, output]);
      }
      if (run.total <= 0) return undefined;

      let worst: { dimension: BudgetDimension; used: number; budget: number; fraction: number } | undefined;
      for (const [dimension, budget] of limits()) {
        const used = run[dimension];
        const fraction = used / budget;
        if (fraction > (worst?.fraction ?? 0)) worst = { dimension, used, budget, fraction };
      }
      if (!worst) return undefined;

      if (worst.fraction >= settings.hard_stop_threshold) {
        recordStopReason(runtime, "token_capped");
        return { messages: [forceFinalAnswer(last, budgetExceededText(worst.dimension, worst.used, worst.budget))] };
      }
      if (worst.fraction >= settings.warn_threshold && !run.warned) {
        run.warned = true;
        run.pending.push(budgetWarningText(worst.dimension, worst.used, worst.budget, worst.fraction));
      }
      return undefined;
    },

    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      const run = request.runtime.scope.get<RunUsage>(SCOPE_KEY);
      if (!settings.enabled || !run || run.pending.length === 0) return handler(request);
      const response = await handleWithHiddenNotices(request, handler, BUDGET_WARNING_NAME, run.pending);
      run.pending = [];
      return response;
    },

    afterAgent(_state: AgentState, runtime: AgentRuntime): HookResult {
      runtime.scope.delete(SCOPE_KEY);
      return undefined;
    },

    releasePolicyParameters() {
      return {
        config: {
          enabled: settings.enabled,
          max_tokens: settings.max_tokens,
          max_input_tokens: settings.max_input_tokens,
          max_output_tokens: settings.max_output_tokens,
          warn_threshold: settings.warn_threshold,
          hard_stop_threshold: settings.hard_stop_threshold,
        },
      };
    },
  };
}

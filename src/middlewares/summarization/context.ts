import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { estimateTokens } from "../../core/tokens.ts";
import { isDynamicContextReminder } from "../dynamic-context.ts";
import { latestRealUserIndex, messageText } from "../messages.ts";

/*
 * How much context there is, when it is too much, and where history may be cut: the measuring half
 * of Summarization, kept free of models and state updates so each rule can be pinned on its own.
 */

/** Counts the tokens a list of messages costs; sync or async, so a real tokenizer can be plugged in. */
export type TokenCounter = (messages: readonly BaseMessage[]) => number | Promise<number>;

/** One trigger condition: every threshold it names must be reached (AND). */
export interface TriggerThresholds {
  readonly tokens?: number;
  readonly messages?: number;
  /** A fraction of the model's context window, in tokens. */
  readonly fraction?: number;
}

/** How much of the tail survives a compaction: exactly one measure. */
export type KeepPolicy =
  | { readonly messages: number; readonly tokens?: undefined; readonly fraction?: undefined }
  | { readonly tokens: number; readonly messages?: undefined; readonly fraction?: undefined }
  | { readonly fraction: number; readonly messages?: undefined; readonly tokens?: undefined };

export const DEFAULT_MESSAGES_TO_KEEP = 20;

// Role markers and separators cost tokens too; without this a flood of tiny messages would look free.
const TOKENS_PER_MESSAGE = 3;

/**
 * The library's heuristic (core/tokens.ts: about four characters per token, two for CJK) plus a
 * small per-message overhead: close enough to decide when to compact without shipping a tokenizer
 * to every runtime. Tool calls and tool-call ids count,
 * since they are sent to the provider too.
 */
export function countTokensApproximately(messages: readonly BaseMessage[]): number {
  let tokens = 0;
  for (const message of messages) {
    tokens += estimateTokens(messageText(message)) + TOKENS_PER_MESSAGE;
    if (typeof message.name === "string") tokens += estimateTokens(message.name);
    if (AIMessage.isInstance(message) && (message.tool_calls?.length ?? 0) > 0) tokens += estimateTokens(JSON.stringify(message.tool_calls));
    if (ToolMessage.isInstance(message)) tokens += estimateTokens(message.tool_call_id ?? "");
  }
  return Math.ceil(tokens);
}

/**
 * Whether any condition is met (OR across conditions, AND within one). A fraction needs the
 * model's context window; without one that condition cannot be met.
 */
export function shouldSummarize(
  messageCount: number,
  totalTokens: number,
  conditions: readonly TriggerThresholds[],
  contextWindow: number | undefined,
): boolean {
  return conditions.some((condition) => {
    let named = false;
    if (condition.messages !== undefined) {
      named = true;
      if (messageCount < condition.messages) return false;
    }
    if (condition.tokens !== undefined) {
      named = true;
      if (totalTokens < condition.tokens) return false;
    }
    if (condition.fraction !== undefined) {
      named = true;
      if (contextWindow === undefined || totalTokens < Math.floor(contextWindow * condition.fraction)) return false;
    }
    return named;
  });
}

function toolCallIds(message: BaseMessage): Set<string> {
  const ids = new Set<string>();
  if (!AIMessage.isInstance(message)) return ids;
  for (const call of message.tool_calls ?? []) if (call.id) ids.add(call.id);
  return ids;
}

/**
 * A cut that lands on a tool result moves back to the AI message that called it, so the call and
 * all its results stay on the same side; strict providers reject a result without its call.
 */
function moveOffToolResults(messages: readonly BaseMessage[], cutoff: number): number {
  if (cutoff >= messages.length || !ToolMessage.isInstance(messages[cutoff])) return cutoff;
  const answered = new Set<string>();
  let end = cutoff;
  while (end < messages.length && ToolMessage.isInstance(messages[end])) {
    answered.add((messages[end] as ToolMessage).tool_call_id);
    end += 1;
  }
  for (let i = cutoff - 1; i >= 0; i--) {
    const ids = toolCallIds(messages[i]!);
    for (const id of answered) if (ids.has(id)) return i;
  }
  // Orphan results (their call is long gone): skipping past them is the only cut that pairs nothing wrongly.
  return end;
}

/** True when no AI tool call sits on one side of the cut and one of its results on the other. */
export function isSafeCutoff(messages: readonly BaseMessage[], cutoff: number): boolean {
  for (let i = 0; i < messages.length; i++) {
    const ids = toolCallIds(messages[i]!);
    if (ids.size === 0) continue;
    for (let j = i + 1; j < messages.length; j++) {
      const later = messages[j]!;
      if (ToolMessage.isInstance(later) && ids.has(later.tool_call_id) && i < cutoff !== j < cutoff) return false;
    }
  }
  return true;
}

function safeCutoff(messages: readonly BaseMessage[], target: number): number {
  const moved = moveOffToolResults(messages, target);
  if (moved <= target) return moved;
  // Moving forward would compact more than asked; walk back to the nearest cut that splits no pair.
  for (let i = target; i >= 0; i--) if (isSafeCutoff(messages, i)) return i;
  return 0;
}

/**
 * The earliest start whose tail costs at most `budget`; `messages.length` when not even the newest
 * message fits. A longer tail never costs less, so it is found by bisection.
 */
export async function earliestStartWithin(messages: readonly BaseMessage[], budget: number, counter: TokenCounter): Promise<number> {
  let low = 0;
  let high = messages.length;
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    if ((await counter(messages.slice(mid))) <= budget) high = mid;
    else low = mid + 1;
  }
  return low;
}

async function tokenBudgetCutoff(messages: readonly BaseMessage[], budget: number, counter: TokenCounter): Promise<number> {
  if (messages.length === 0 || (await counter(messages)) <= budget) return 0;
  let cutoff = await earliestStartWithin(messages, budget, counter);
  if (cutoff >= messages.length) {
    // Even the newest message alone is over budget: keep it anyway, a summary cannot stand in for it.
    if (messages.length === 1) return 0;
    cutoff = messages.length - 1;
  }
  return safeCutoff(messages, cutoff);
}

/**
 * Index of the first message kept; everything before it is compacted. 0 means nothing to compact.
 * A token or fraction budget that cannot be resolved (no context window) falls back to keeping
 * the default number of messages.
 */
export async function determineCutoffIndex(
  messages: readonly BaseMessage[],
  keep: KeepPolicy,
  counter: TokenCounter,
  contextWindow: number | undefined,
): Promise<number> {
  let budget: number | undefined;
  if (keep.tokens !== undefined) budget = Math.floor(keep.tokens);
  else if (keep.fraction !== undefined && contextWindow !== undefined) budget = Math.floor(contextWindow * keep.fraction);
  if (budget !== undefined) return tokenBudgetCutoff(messages, Math.max(1, budget), counter);

  const toKeep = keep.messages ?? DEFAULT_MESSAGES_TO_KEEP;
  if (messages.length <= toKeep) return 0;
  return safeCutoff(messages, messages.length - toKeep);
}

export interface CompactionPartition {
  readonly toSummarize: BaseMessage[];
  readonly preserved: BaseMessage[];
}

/**
 * Splits history at the cutoff, then rescues from the compacted side the tagged dynamic-context
 * reminders and the latest real user message (matched by exact id). The cutoff itself never moves
 * back for the user's request: that would also keep the early AI and tool turns of a long first
 * turn, and compaction would become a no-op. A stale earlier request is compacted like any turn.
 */
export function partitionForCompaction(messages: readonly BaseMessage[], cutoff: number): CompactionPartition {
  const latestIndex = latestRealUserIndex(messages);
  const latest = latestIndex === -1 ? undefined : messages[latestIndex];
  const isLatestRequest = (message: BaseMessage) =>
    latest !== undefined && (latest.id !== undefined ? message.id === latest.id : message === latest);

  const rescued: BaseMessage[] = [];
  const toSummarize: BaseMessage[] = [];
  for (const message of messages.slice(0, cutoff)) {
    if (isDynamicContextReminder(message) || isLatestRequest(message)) rescued.push(message);
    else toSummarize.push(message);
  }
  return { toSummarize, preserved: [...rescued, ...messages.slice(cutoff)] };
}

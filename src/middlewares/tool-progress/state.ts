import type { ToolResultMeta } from "../tool-result-meta.ts";

/*
 * The pure half of ToolProgress: the per-tool state machine, the near-duplicate test and the texts
 * the model sees. No runtime, no clock, no I/O, so every transition can be pinned by a unit test.
 */

export type ToolPhase = "active" | "warned" | "blocked";

/** One tool's standing within a run. Immutable: each transition returns a new value. */
export interface ToolPhaseState {
  readonly phase: ToolPhase;
  readonly consecutiveProblems: number;
  readonly blockReason: string | null;
  /** Word sets of the most recent good results, newest last, at most {@link RECENT_RESULT_WINDOW}. */
  readonly recentWordSets: readonly ReadonlySet<string>[];
}

export const INITIAL_TOOL_PHASE_STATE: ToolPhaseState = Object.freeze({
  phase: "active",
  consecutiveProblems: 0,
  blockReason: null,
  recentWordSets: Object.freeze([]) as readonly ReadonlySet<string>[],
});

/** Good results a new one is compared against. */
export const RECENT_RESULT_WINDOW = 3;
/** A web page can be megabytes; the duplicate test is a heuristic, so its head is enough. */
export const WORD_SET_MAX_CHARS = 8192;
const MIN_WORD_CHARS = 3;

export interface ProgressThresholds {
  readonly stagnationThreshold: number;
  readonly warnEscalationCount: number;
  readonly jaccardThreshold: number;
  readonly minWords: number;
}

export interface Transition {
  readonly state: ToolPhaseState;
  /** A hint for the next model call, when this result warrants one. */
  readonly hint: string | null;
}

// Letters and digits of any script plus "_", the same class Python's `\w` covers, so a result's
// word set matches the one the upstream guard computes for the same text.
const WORD = /[\p{L}\p{N}_]+/gu;

/** Lower-cased words of at least three characters from the head of a result. */
export function wordSet(content: string): Set<string> {
  const head = Array.from(content).slice(0, WORD_SET_MAX_CHARS).join("").toLowerCase();
  const words = new Set<string>();
  for (const match of head.matchAll(WORD)) {
    if (Array.from(match[0]).length >= MIN_WORD_CHARS) words.add(match[0]);
  }
  return words;
}

/**
 * True when `current` overlaps one of the last three good results by at least `threshold` (Jaccard).
 * Short results are never duplicates: "OK" or "Saved." repeat legitimately.
 */
export function isNearDuplicate(
  current: ReadonlySet<string>,
  recent: readonly ReadonlySet<string>[],
  threshold: number,
  minWords: number,
): boolean {
  if (current.size < minWords) return false;
  for (const previous of recent.slice(-RECENT_RESULT_WINDOW)) {
    if (previous.size < minWords) continue;
    let shared = 0;
    for (const word of current) if (previous.has(word)) shared += 1;
    const union = current.size + previous.size - shared;
    if (union > 0 && shared / union >= threshold) return true;
  }
  return false;
}

const HINT_BY_KIND: Readonly<Record<string, string>> = Object.freeze({
  no_results: "[PROGRESS HINT] Your search returned no results.",
  not_found: "[PROGRESS HINT] The resource was not found repeatedly.",
  rate_limited: "[PROGRESS HINT] The tool is being rate-limited.",
  transient: "[PROGRESS HINT] The tool encountered repeated transient failures.",
  partial_success: "[PROGRESS HINT] The tool has returned incomplete results multiple times.",
  success: "[PROGRESS HINT] The tool is returning duplicate results.",
});
const GENERIC_HINT = "[PROGRESS HINT] The tool is not producing new information.";

const HINT_ACTION: Readonly<Record<string, string>> = Object.freeze({
  rewrite_query: "Try rephrasing your search query with different keywords or approach.",
  try_alternative: "Consider using a different tool or strategy.",
  summarize: "Consider summarizing your current findings and moving forward.",
  stop: "Do not retry this operation — it is not recoverable.",
  // A near-duplicate success recommends "continue", yet the model should still change course.
  continue: "Try rephrasing your query or using a different search term.",
});

const BLOCK_REASON_BY_ERROR: Readonly<Record<string, string>> = Object.freeze({
  no_results: "Repeated no-results — rewrite your query or try a different tool.",
  not_found: "Repeated not-found — rewrite your query or try a different resource.",
  rate_limited: "Repeated rate-limiting — summarize current findings and proceed.",
  transient: "Repeated transient failures — try a different approach.",
  auth: "Authentication failure — this tool cannot be used.",
  config: "Tool is not configured — this tool cannot be used.",
  internal: "Repeated internal errors — this tool is unavailable.",
});
const GENERIC_BLOCK_REASON = "Tool has not produced new information after multiple attempts — summarize and move on.";

/** Every text the model can receive from ToolProgress, for the release-policy hash. */
export const PROGRESS_TEXTS = Object.freeze({
  hints: HINT_BY_KIND,
  generic_hint: GENERIC_HINT,
  hint_actions: HINT_ACTION,
  block_reasons: BLOCK_REASON_BY_ERROR,
  generic_block_reason: GENERIC_BLOCK_REASON,
});

function own(table: Readonly<Record<string, string>>, key: string | null): string | undefined {
  return key !== null && Object.hasOwn(table, key) ? table[key] : undefined;
}

export function progressHintText(meta: ToolResultMeta): string {
  const base = own(HINT_BY_KIND, meta.error_type || meta.status) ?? GENERIC_HINT;
  const action = own(HINT_ACTION, meta.recommended_next_action) ?? "";
  return `${base} ${action}`.trim();
}

export function blockReasonText(meta: ToolResultMeta): string {
  return own(BLOCK_REASON_BY_ERROR, meta.error_type) ?? GENERIC_BLOCK_REASON;
}

/**
 * Folds one tool result into the tool's state. A problem is an error, a partial result, or a
 * success that repeats a recent one. Three kinds of problem move differently:
 * - recoverable by the model: WARNED is terminal, and every later problem re-hints, because a
 *   retry with different arguments can still work;
 * - not recoverable, not "stop" (rate limits, transient failures): WARNED, then BLOCKED after
 *   warn_escalation_count more problems, because retrying the same tool only burns calls;
 * - not recoverable and "stop" (auth, config, internal): BLOCKED at once.
 * A good result puts the tool back to ACTIVE.
 */
export function assessResult(
  state: ToolPhaseState,
  meta: ToolResultMeta,
  content: string,
  thresholds: ProgressThresholds,
): Transition {
  // Blocked is terminal within a run; a straggling result of a parallel call must not demote it.
  if (state.phase === "blocked") return { state, hint: null };

  // Counted before branching so no exit path leaves a failed tool at zero problems.
  const count = state.consecutiveProblems + 1;

  if (!meta.recoverable_by_model && meta.recommended_next_action === "stop") {
    return { state: { ...state, phase: "blocked", consecutiveProblems: count, blockReason: blockReasonText(meta) }, hint: null };
  }

  // Errors and partial results are problems by definition; only a success needs the word set.
  const words = meta.status === "success" ? wordSet(content) : new Set<string>();
  const problem =
    meta.status === "error" ||
    meta.status === "partial_success" ||
    (meta.status === "success" &&
      isNearDuplicate(words, state.recentWordSets, thresholds.jaccardThreshold, thresholds.minWords));

  if (!problem) {
    return {
      state: { ...state, phase: "active", consecutiveProblems: 0, recentWordSets: [...state.recentWordSets, words].slice(-RECENT_RESULT_WINDOW) },
      hint: null,
    };
  }

  if (count >= thresholds.stagnationThreshold + thresholds.warnEscalationCount) {
    if (meta.recoverable_by_model) {
      return { state: { ...state, phase: "warned", consecutiveProblems: count }, hint: progressHintText(meta) };
    }
    return { state: { ...state, phase: "blocked", consecutiveProblems: count, blockReason: blockReasonText(meta) }, hint: null };
  }
  if (count >= thresholds.stagnationThreshold) {
    return { state: { ...state, phase: "warned", consecutiveProblems: count }, hint: progressHintText(meta) };
  }
  return { state: { ...state, consecutiveProblems: count }, hint: null };
}

const STATUSES: ReadonlySet<string> = new Set(["success", "error", "partial_success"]);

/**
 * The meta a result carries, or undefined when it is absent or not shaped like deerflow_tool_meta
 * (a foreign producer, an older checkpoint): such a result is not tracked rather than misread.
 */
export function parseProgressMeta(value: unknown): ToolResultMeta | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const meta = value as Record<string, unknown>;
  if (typeof meta["status"] !== "string" || !STATUSES.has(meta["status"])) return undefined;
  if (meta["error_type"] !== null && typeof meta["error_type"] !== "string") return undefined;
  if (typeof meta["recoverable_by_model"] !== "boolean") return undefined;
  if (typeof meta["recommended_next_action"] !== "string") return undefined;
  if (typeof meta["source"] !== "string") return undefined;
  return value as ToolResultMeta;
}

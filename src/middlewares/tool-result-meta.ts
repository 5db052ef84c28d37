import type { ToolMessage } from "@langchain/core/messages";
import { contentText } from "../core/content.ts";
import { isRecord } from "../core/guards.ts";

/**
 * Structured meaning of one tool result, stamped onto `additional_kwargs.deerflow_tool_meta` so that
 * downstream consumers (ToolProgress, receipts, the UI) read a field instead of re-parsing text.
 * Keys stay snake_case: they are the wire format checkpoints and clients already carry.
 */
export const TOOL_META_KEY = "deerflow_tool_meta";

export type ToolResultStatus = "success" | "error" | "partial_success";
export type ToolErrorType =
  | "auth"
  | "rate_limited"
  | "transient"
  | "config"
  | "permission"
  | "no_results"
  | "not_found"
  | "internal"
  | "unknown"
  | "blocked_by_progress_guard";
export type RecommendedNextAction = "continue" | "rewrite_query" | "try_alternative" | "summarize" | "stop";
export type ToolMetaSource = "exception" | "tool_return" | "content_analysis" | "progress_middleware";

export interface ToolResultMeta {
  status: ToolResultStatus;
  error_type: ToolErrorType | null;
  recoverable_by_model: boolean;
  recommended_next_action: RecommendedNextAction;
  source: ToolMetaSource;
}

/** What a keyword rule decides about an error. */
export interface ToolErrorClass {
  error_type: ToolErrorType;
  recoverable_by_model: boolean;
  recommended_next_action: RecommendedNextAction;
}

const ERROR_PREFIX = "Error:";

const PARTIAL_MARKERS = [
  "partial results",
  "limited results",
  "truncated",
  "results may be incomplete",
  // A tool that reports "no results" with status success must still look like stagnation to
  // ToolProgress, or the model keeps re-running the same query.
  "no results found",
  "no content found",
  "no images found",
] as const;

interface ErrorRule {
  keywords: readonly string[];
  attrs: ToolErrorClass;
}

// Order is the contract: the first matching rule wins.
const ERROR_RULES: readonly ErrorRule[] = [
  {
    keywords: ["401", "403", "unauthorized", "authentication", "invalid api key"],
    attrs: { error_type: "auth", recoverable_by_model: false, recommended_next_action: "stop" },
  },
  {
    keywords: ["rate limit", "rate limited", "rate_limit"],
    attrs: { error_type: "rate_limited", recoverable_by_model: false, recommended_next_action: "summarize" },
  },
  {
    keywords: ["timeout", "timed out", "connection", "network error", "temporarily unavailable"],
    attrs: { error_type: "transient", recoverable_by_model: false, recommended_next_action: "try_alternative" },
  },
  {
    keywords: ["not configured", "not installed", "missing required", "disabled", "no api key"],
    attrs: { error_type: "config", recoverable_by_model: false, recommended_next_action: "stop" },
  },
  {
    keywords: ["permission denied", "access denied", "path traversal", "forbidden"],
    attrs: { error_type: "permission", recoverable_by_model: true, recommended_next_action: "try_alternative" },
  },
  {
    keywords: ["no results found", "no content found", "no images found", "no results"],
    attrs: { error_type: "no_results", recoverable_by_model: true, recommended_next_action: "rewrite_query" },
  },
  {
    keywords: ["not found", "no such file", "does not exist", "404"],
    attrs: { error_type: "not_found", recoverable_by_model: true, recommended_next_action: "rewrite_query" },
  },
  {
    keywords: ["unexpected error", "internal error", "500"],
    attrs: { error_type: "internal", recoverable_by_model: false, recommended_next_action: "stop" },
  },
];

const UNKNOWN_ERROR: ToolErrorClass = {
  error_type: "unknown",
  recoverable_by_model: true,
  recommended_next_action: "try_alternative",
};

// Only a rendered remote page can be an HTTP error page; many local tools legitimately print a
// short "not found" line, so the title rule must not see them.
const PAGE_CONTENT_TOOL_NAMES: ReadonlySet<string> = new Set(["web_fetch"]);

const ATTRS_BY_ERROR_TYPE: ReadonlyMap<ToolErrorType, ToolErrorClass> = new Map(
  ERROR_RULES.map((rule) => [rule.attrs.error_type, rule.attrs]),
);

// Reason phrases map onto categories the keyword rules already own, so an error page can never
// disagree with the same words classified as text (502/503/504 are transient there too).
const ERROR_SHELL_PHRASES: ReadonlyMap<string, ToolErrorType> = new Map([
  ["unauthorized", "auth"],
  ["proxy authentication required", "auth"],
  ["forbidden", "permission"],
  ["access denied", "permission"],
  ["permission denied", "permission"],
  ["not found", "not_found"],
  ["too many requests", "rate_limited"],
  ["internal server error", "internal"],
  ["not implemented", "internal"],
  ["bad gateway", "transient"],
  ["service unavailable", "transient"],
  ["service temporarily unavailable", "transient"],
  ["gateway timeout", "transient"],
]);

// Stripped from the front only, so a word left after the phrase still marks a real document.
const STATUS_TITLE_FILLER: ReadonlySet<string> = new Set([
  "http",
  "error",
  "page",
  "the",
  "file",
  "or",
  "directory",
  "url",
  "resource",
]);

// A bare code must be a whole word: "took 500ms" or "4010 rows" are not HTTP statuses. Unicode
// letters count as word characters, as they do for the upstream classifier.
const NUMERIC_KEYWORD_PATTERNS: ReadonlyMap<string, RegExp> = new Map(
  ERROR_RULES.flatMap((rule) => rule.keywords)
    .filter((keyword) => /^\d+$/.test(keyword))
    .map((keyword) => [keyword, new RegExp(`(?<![\\p{L}\\p{N}_])${keyword}(?![\\p{L}\\p{N}_])`, "u")]),
);

// Tools that answer `{"error": "none", ...}` on success must not count as failures.
const SEMANTIC_ZERO_ERROR_STRINGS: ReadonlySet<string> = new Set(["none", "null", "false", "no", "ok", "success", "n/a", ""]);

function matchesKeyword(keyword: string, lower: string): boolean {
  const pattern = NUMERIC_KEYWORD_PATTERNS.get(keyword);
  return pattern ? pattern.test(lower) : lower.includes(keyword);
}

/** Classifies free error text by the keyword rules (first match wins, unknown otherwise). */
export function classifyToolError(text: string): ToolErrorClass {
  const lower = text.toLowerCase();
  for (const rule of ERROR_RULES) {
    if (rule.keywords.some((keyword) => matchesKeyword(keyword, lower))) return { ...rule.attrs };
  }
  return { ...UNKNOWN_ERROR };
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}

// Python truthiness, because the wire contract was defined there: empty lists and objects, 0 and
// "" all mean "no error".
function isTruthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === 0 || value === "") return false;
  if (Array.isArray(value)) return value.length > 0;
  if (isRecord(value)) return Object.keys(value).length > 0;
  return true;
}

function jsonErrorText(content: string): string | null {
  const parsed = parseJson(content);
  if (!parsed.ok || !isRecord(parsed.value)) return null;
  const error = parsed.value["error"];
  if (!isTruthy(error)) return null;
  if (typeof error === "string") {
    return SEMANTIC_ZERO_ERROR_STRINGS.has(error.toLowerCase().trim()) ? null : error;
  }
  // Serialised rather than String()-ed: `[object Object]` or a repr could match a keyword by accident.
  return JSON.stringify(error);
}

// Python's str.splitlines() boundaries, so the "first line" is the same line upstream sees.
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;

function asStatusLine(title: string): string | null {
  const words = title
    .toLowerCase()
    .replace(/[^0-9a-z]+/g, " ")
    .split(" ")
    .filter((word) => word.length > 0);
  let start = 0;
  while (start < words.length) {
    const word = words[start]!;
    const isStatusCode = /^\d{3}$/.test(word) && Number(word) >= 400 && Number(word) <= 599;
    if (!STATUS_TITLE_FILLER.has(word) && !isStatusCode) break;
    start += 1;
  }
  const phrase = words.slice(start).join(" ");
  return phrase.length > 0 ? phrase : null;
}

/**
 * A fetch of a dead URL succeeds at the transport layer, so its error page would otherwise reach
 * the model as a success. The extracted title must *equal* a reason phrase: "404 Ways to Cook Rice"
 * keeps words after stripping and stays a document.
 */
function classifyErrorShell(toolName: string | undefined, content: string): ToolErrorClass | null {
  if (toolName === undefined || !PAGE_CONTENT_TOOL_NAMES.has(toolName)) return null;
  const title = content.split(LINE_BREAK).find((line) => line.trim().length > 0) ?? "";
  const phrase = asStatusLine(title.replace(/^#+/, "").trim());
  const errorType = phrase === null ? undefined : ERROR_SHELL_PHRASES.get(phrase);
  if (errorType === undefined) return null;
  const attrs = ATTRS_BY_ERROR_TYPE.get(errorType);
  return attrs ? { ...attrs } : null;
}

function makeMeta(
  status: ToolResultStatus,
  source: ToolMetaSource,
  attrs?: Partial<ToolErrorClass>,
): ToolResultMeta {
  return {
    status,
    error_type: attrs?.error_type ?? null,
    recoverable_by_model: attrs?.recoverable_by_model ?? true,
    recommended_next_action: attrs?.recommended_next_action ?? "continue",
    source,
  };
}

export interface NormalizeToolResultInput {
  toolName: string | undefined;
  content: unknown;
  status?: "success" | "error" | undefined;
}

/** Derives the meta of a tool's own return value (never of an exception). */
export function normalizeToolResult(input: NormalizeToolResultInput): ToolResultMeta {
  const content = contentText(input.content);

  // A tool that flags status=error without the "Error:" convention: when the body is JSON, only its
  // `error` field may classify it, never incidental fields such as {"user_id": 401}.
  if (input.status === "error" && !content.startsWith(ERROR_PREFIX)) {
    const fieldText = jsonErrorText(content);
    if (fieldText !== null) return makeMeta("error", "tool_return", classifyToolError(fieldText));
    const parsed = parseJson(content);
    const isJsonObject = parsed.ok && isRecord(parsed.value);
    return makeMeta("error", "tool_return", isJsonObject ? { ...UNKNOWN_ERROR } : classifyToolError(content));
  }
  if (content.startsWith(ERROR_PREFIX)) {
    return makeMeta("error", "tool_return", classifyToolError(content.slice(ERROR_PREFIX.length)));
  }
  const fieldText = jsonErrorText(content);
  if (fieldText !== null) return makeMeta("error", "tool_return", classifyToolError(fieldText));

  const shell = classifyErrorShell(input.toolName, content);
  if (shell !== null) return makeMeta("error", "content_analysis", shell);

  const lower = content.toLowerCase();
  if (PARTIAL_MARKERS.some((marker) => lower.includes(marker))) {
    return makeMeta("partial_success", "content_analysis", { recommended_next_action: "rewrite_query" });
  }
  return makeMeta("success", "content_analysis");
}

/**
 * Stamps meta onto a tool's own result. A producer that already stamped (ToolProgress, a tool that
 * knows better) wins, so this is a no-op when the key is present.
 */
export function stampToolMeta(message: ToolMessage): ToolMessage {
  const existing = message.additional_kwargs?.[TOOL_META_KEY];
  if (existing !== undefined && existing !== null) return message;
  const meta = normalizeToolResult({ toolName: message.name, content: message.content, status: message.status });
  message.additional_kwargs = { ...message.additional_kwargs, [TOOL_META_KEY]: meta };
  return message;
}

/**
 * Stamps meta onto an exception-derived result. The exception is more authoritative than whatever
 * the message carried, so this always overwrites.
 */
export function stampExceptionMeta(message: ToolMessage, errorText: string): ToolMessage {
  const meta = makeMeta("error", "exception", classifyToolError(errorText));
  message.additional_kwargs = { ...message.additional_kwargs, [TOOL_META_KEY]: meta };
  return message;
}

/** The meta a message carries, if any (for readers such as ToolProgress and receipts). */
export function readToolMeta(message: ToolMessage): ToolResultMeta | undefined {
  const value = message.additional_kwargs?.[TOOL_META_KEY];
  return isRecord(value) ? (value as unknown as ToolResultMeta) : undefined;
}

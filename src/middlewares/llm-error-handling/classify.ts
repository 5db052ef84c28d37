import { isModelError } from "../../models/errors.ts";

/*
 * What a failed model call means for the retry loop: whether another attempt can help, and which
 * user-facing story to tell when it cannot. The pattern lists follow the upstream harness (EN and
 * ZH provider wordings); our own ModelError adds stable codes, so it is classified by those and by
 * the provider's own words, never by the hint text we wrap around them (a base URL such as
 * `credit-union.example` must not read as a quota problem).
 */

export type LlmErrorReason = "quota" | "auth" | "burst_rate" | "transient" | "busy" | "generic";

export interface LlmErrorClass {
  readonly retriable: boolean;
  readonly reason: LlmErrorReason;
}

export const RETRIABLE_STATUS_CODES: readonly number[] = Object.freeze([408, 409, 425, 429, 500, 502, 503, 504]);

const BUSY_PATTERNS = [
  "server busy",
  "temporarily unavailable",
  "try again later",
  "please retry",
  "please try again",
  "overloaded",
  "high demand",
  "rate limit",
  "负载较高",
  "服务繁忙",
  "稍后重试",
  "请稍后重试",
] as const;

const QUOTA_PATTERNS = ["insufficient_quota", "quota", "billing", "credit", "payment", "余额不足", "超出限额", "额度不足", "欠费"] as const;

const AUTH_PATTERNS = [
  "authentication",
  "unauthorized",
  "invalid api key",
  "invalid_api_key",
  "permission",
  "forbidden",
  "access denied",
  "无权",
  "未授权",
] as const;

// A provider throttling the slope of the request rate, not the volume: retrying into it adds to
// the very slope being throttled, so it gets its own budget and a longer backoff.
const BURST_PATTERNS = ["limit_burst_rate", "rate increased too quickly", "burst rate", "请求速率增长过快", "突发速率"] as const;

/** Error classes (by name, so no SDK is imported) that mean the connection, not the request, failed. */
const TRANSIENT_ERROR_NAMES: ReadonlySet<string> = new Set([
  "APITimeoutError",
  "APIConnectionError",
  "APIConnectionTimeoutError",
  "InternalServerError",
  "ReadError",
  "RemoteProtocolError",
  "StreamChunkTimeoutError",
  "TimeoutError",
]);

/** Our ModelError codes that say the provider could not be reached or answered nonsense. */
const TRANSIENT_MODEL_CODES: ReadonlySet<string> = new Set([
  "provider_unreachable",
  "provider_timeout",
  // The provider's 200 with an unusable body (no choices): the analog of upstream's IndexError on
  // empty generations, a payload glitch worth another attempt.
  "provider_bad_response",
  "provider_unavailable",
  // Errors a provider reports inside a 200 stream carry no retriable status, only these codes.
  "rate_limit_exceeded",
  "server_error",
]);

const AUTH_MODEL_CODES: ReadonlySet<string> = new Set(["provider_auth_failed", "missing_api_key", "invalid_api_key"]);

/**
 * Absolute attempt budgets that only ever tighten `retry_max_attempts`. A stalled stream has
 * already cost minutes before it fails, so it keeps one reconnect and then gives up.
 */
export const RETRY_BUDGET_BY_ERROR_NAME: Readonly<Record<string, number>> = Object.freeze({ StreamChunkTimeoutError: 2 });
export const RETRY_BUDGET_BY_REASON: Readonly<Partial<Record<LlmErrorReason, number>>> = Object.freeze({ burst_rate: 2 });

/** Errors whose copy points at an oversized response rather than at the provider. */
const STREAM_DROP_ERROR_NAMES: ReadonlySet<string> = new Set(["StreamChunkTimeoutError"]);

type Dict = Record<string, unknown>;

function isDict(value: unknown): value is Dict {
  return typeof value === "object" && value !== null;
}

function matchesAny(text: string, patterns: readonly string[]): boolean {
  return patterns.some((pattern) => text.includes(pattern));
}

/** The class name of what was thrown, the way a Python traceback would name it. */
export function errorTypeName(error: unknown): string {
  if (!isDict(error)) return "Error";
  const name = (error as { name?: unknown }).name;
  if (typeof name === "string" && name !== "" && name !== "Error") return name;
  const ctor = (error as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof ctor === "string" && ctor !== "" && ctor !== "Object") return ctor;
  return "Error";
}

/** The error's own words: its message, else its class name. */
export function errorDetail(error: unknown): string {
  if (typeof error === "string") return error.trim() || "Error";
  if (error instanceof Error) return error.message.trim() || errorTypeName(error);
  if (isDict(error) && typeof error["message"] === "string" && error["message"].trim() !== "") return error["message"].trim();
  const text = String(error).trim();
  return text === "" || text === "[object Object]" ? errorTypeName(error) : text;
}

function nonEmpty(value: unknown): value is string | number {
  return (typeof value === "string" && value !== "") || typeof value === "number";
}

/** The provider's error code: `code` / `error_code`, else `body.error.code|type`, else `error.code|type`. */
export function errorCode(error: unknown): string | undefined {
  if (!isDict(error)) return undefined;
  for (const key of ["code", "error_code"]) if (nonEmpty(error[key])) return String(error[key]);
  for (const holder of [isDict(error["body"]) ? error["body"]["error"] : undefined, error["error"]]) {
    if (!isDict(holder)) continue;
    for (const key of ["code", "type"]) if (nonEmpty(holder[key])) return String(holder[key]);
  }
  return undefined;
}

export function errorStatus(error: unknown): number | undefined {
  if (!isDict(error)) return undefined;
  for (const key of ["status", "status_code", "statusCode"]) {
    if (typeof error[key] === "number") return error[key] as number;
  }
  const response = error["response"];
  if (isDict(response)) {
    for (const key of ["status", "status_code"]) if (typeof response[key] === "number") return response[key] as number;
  }
  return undefined;
}

/** The texts the pattern rules read, lower-cased. */
function classificationText(error: unknown): string {
  if (isModelError(error)) {
    const own = [error.providerMessage, error.providerType].filter((part): part is string => typeof part === "string" && part !== "");
    // A ModelError without the provider's words (a transport failure) is classified by its code.
    return own.join(" ").toLowerCase();
  }
  return errorDetail(error).toLowerCase();
}

/** Whether another attempt can help, and why the call failed. Order is the contract: the first rule wins. */
export function classifyLlmError(error: unknown): LlmErrorClass {
  const text = classificationText(error);
  const code = (errorCode(error) ?? "").toLowerCase();
  const status = errorStatus(error);

  if (matchesAny(text, QUOTA_PATTERNS) || matchesAny(code, QUOTA_PATTERNS)) return { retriable: false, reason: "quota" };
  if (matchesAny(text, AUTH_PATTERNS) || AUTH_MODEL_CODES.has(code) || status === 401 || status === 403) {
    return { retriable: false, reason: "auth" };
  }
  if (matchesAny(text, BURST_PATTERNS) || matchesAny(code, BURST_PATTERNS)) return { retriable: true, reason: "burst_rate" };
  if (TRANSIENT_ERROR_NAMES.has(errorTypeName(error))) return { retriable: true, reason: "transient" };
  if (isModelError(error) && TRANSIENT_MODEL_CODES.has(code)) return { retriable: true, reason: "transient" };
  if (status !== undefined && RETRIABLE_STATUS_CODES.includes(status)) return { retriable: true, reason: "transient" };
  if (matchesAny(text, BUSY_PATTERNS)) return { retriable: true, reason: "busy" };
  return { retriable: false, reason: "generic" };
}

/** The tightest of the configured ceiling and the per-class and per-reason budgets. */
export function maxAttemptsFor(error: unknown, reason: LlmErrorReason, configured: number): number {
  const candidates = [configured];
  const byName = RETRY_BUDGET_BY_ERROR_NAME[errorTypeName(error)];
  if (byName !== undefined) candidates.push(byName);
  const byReason = RETRY_BUDGET_BY_REASON[reason];
  if (byReason !== undefined) candidates.push(byReason);
  return Math.min(...candidates);
}

function headerValue(headers: unknown, name: string): string | undefined {
  if (typeof Headers !== "undefined" && headers instanceof Headers) return headers.get(name) ?? undefined;
  if (!isDict(headers)) return undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted && (typeof value === "string" || typeof value === "number")) return String(value);
  }
  return undefined;
}

/**
 * The wait the provider asked for, in ms: `retry-after-ms`, else `retry-after` (seconds or an
 * HTTP date, measured against `nowMs`). Undefined when it asked for nothing readable.
 */
export function retryAfterMsOf(error: unknown, nowMs: number): number | undefined {
  if (!isDict(error)) return undefined;
  if (isModelError(error) && typeof error.retryAfterMs === "number" && Number.isFinite(error.retryAfterMs)) {
    return Math.max(0, Math.floor(error.retryAfterMs));
  }
  const response = error["response"];
  const sources = [error["headers"], isDict(response) ? response["headers"] : undefined];
  for (const headers of sources) {
    for (const [name, multiplier] of [["retry-after-ms", 1], ["retry-after", 1000]] as const) {
      const raw = headerValue(headers, name)?.trim();
      if (!raw) continue;
      const amount = Number(raw);
      if (Number.isFinite(amount)) return Math.max(0, Math.floor(amount * multiplier));
      const date = Date.parse(raw);
      return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
    }
  }
  return undefined;
}

/** What the user reads when the call finally failed. */
export function userMessageFor(error: unknown, reason: LlmErrorReason | "circuit_open"): string {
  switch (reason) {
    case "quota":
      return "The configured LLM provider rejected the request because the account is out of quota, billing is unavailable, or usage is restricted. Please fix the provider account and try again.";
    case "auth":
      return "The configured LLM provider rejected the request because authentication or access is invalid. Please check the provider credentials and try again.";
    case "burst_rate":
      return "The configured LLM provider is temporarily throttling requests because the request rate increased too quickly (burst-rate limit). Please wait a moment and try again.";
    case "busy":
    case "transient":
      if (STREAM_DROP_ERROR_NAMES.has(errorTypeName(error))) {
        return "The model's streaming response was interrupted before it could finish. This usually happens when a single response or tool call is very large — please ask the assistant to split the work into smaller steps, or shorten the requested output, and try again.";
      }
      return "The configured LLM provider is temporarily unavailable after multiple retries. Please wait a moment and continue the conversation.";
    case "circuit_open":
      return CIRCUIT_OPEN_MESSAGE;
    default:
      return `LLM request failed: ${errorDetail(error)}`;
  }
}

export const CIRCUIT_OPEN_MESSAGE =
  "The configured LLM provider is currently unavailable due to continuous failures. Circuit breaker is engaged to protect the system. Please wait a moment before trying again.";

/** Python's round(): halves go to the even neighbour, so "Retrying in Ns" reads as upstream's. */
function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const diff = value - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** The retry notice; `maxAttempts` is the effective budget, so a burst-rate call reads 1/2, not 1/3. */
export function retryMessage(attempt: number, maxAttempts: number, waitMs: number, reason: LlmErrorReason): string {
  const seconds = Math.max(1, roundHalfEven(waitMs / 1000));
  const reasonText =
    reason === "busy"
      ? "provider is busy"
      : reason === "burst_rate"
        ? "provider is throttling request burst rate"
        : "provider request failed temporarily";
  return `LLM request retry ${attempt}/${maxAttempts}: ${reasonText}. Retrying in ${seconds}s.`;
}

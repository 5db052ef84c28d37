// What went wrong with a provider call, as a ModelError whose code the retry policy reads and
// whose message names the setting to fix.
import { ModelError } from "../errors.ts";
import { oneLine } from "../text.ts";
import type { Deadline } from "./deadline.ts";
import { StreamReadError } from "./sse.ts";
import { isRecord } from "../../core/guards.ts";

/** Headers worth keeping on an error: the retry policy reads these. */
const DROPPED_ERROR_HEADERS = new Set(["set-cookie"]);

/** The model settings an error message names. */
export interface ProviderTarget {
  readonly baseUrl: string;
  readonly model: string;
  readonly apiKeyEnv: string | undefined;
  readonly timeoutMs: number;
}

export function describeCause(error: unknown): string {
  if (!(error instanceof Error)) return oneLine(String(error), 200);
  const cause = (error as Error & { cause?: unknown }).cause;
  const code = (error as Error & { code?: unknown }).code;
  if (isRecord(cause) && typeof cause.code === "string") return cause.code;
  if (cause instanceof Error && cause.message !== "") return oneLine(cause.message, 200);
  if (typeof code === "string" && code !== "") return code;
  return oneLine(error.message, 200);
}

export function headersRecord(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, key) => {
    if (!DROPPED_ERROR_HEADERS.has(key)) out[key.toLowerCase()] = value;
  });
  return out;
}

function retryAfterMs(headers: Record<string, string>): number | undefined {
  const ms = Number(headers["retry-after-ms"]);
  if (headers["retry-after-ms"] !== undefined && Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers["retry-after"];
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function fallbackCode(status: number): string {
  if (status === 400 || status === 422) return "provider_bad_request";
  if (status === 401 || status === 403) return "provider_auth_failed";
  if (status === 404) return "provider_not_found";
  if (status === 408) return "provider_timeout";
  if (status === 429) return "rate_limit_exceeded";
  if (status >= 500) return "provider_unavailable";
  return "provider_http_error";
}

function hint(target: ProviderTarget, status: number, code: string, waitMs: number | undefined): string {
  const keyName = target.apiKeyEnv === undefined ? "the API key" : `the API key in ${target.apiKeyEnv}`;
  if (code === "insufficient_quota") return "add credit or raise the quota with the provider, or switch to another model";
  if (status === 401) return `check ${keyName}`;
  if (status === 403) return `check ${keyName} and that it may use model "${target.model}"`;
  if (status === 404) return `check base_url and the model id "${target.model}"`;
  if (status === 429) {
    const after = waitMs === undefined ? "" : ` ${Math.ceil(waitMs / 1000)} s`;
    return `wait${after} and retry, or check the provider's rate limits`;
  }
  if (status >= 500) return "the provider is having trouble; retry later or switch to another model";
  if (status === 400 || status === 422) return "the provider rejected the request; check this model's settings in config.yaml";
  return "check the provider's status and this model's settings in config.yaml";
}

/** An HTTP error response, or an error object inside a 200 body or stream event. */
export function errorFromBody(
  target: ProviderTarget,
  status: number,
  headers: Record<string, string>,
  body: unknown,
  statusText = "",
): ModelError {
  const errorField = isRecord(body) ? body.error : undefined;
  const detail = isRecord(errorField) ? errorField : isRecord(body) ? body : {};
  const pick = (key: string): string | undefined =>
    typeof detail[key] === "string" && detail[key] !== "" ? (detail[key] as string) : undefined;
  const providerMessage = oneLine(
    typeof errorField === "string"
      ? errorField
      : (pick("message") ?? pick("detail") ?? (typeof body === "string" && body !== "" ? body : statusText)),
    300,
  );
  const providerType = pick("type");
  const code = pick("code") ?? providerType ?? fallbackCode(status);
  const wait = retryAfterMs(headers);
  const what = status >= 400 ? `returned HTTP ${status}` : "sent an error";
  const fields: ConstructorParameters<typeof ModelError>[1] = { code, status, headers, providerMessage };
  if (providerType !== undefined) fields.providerType = providerType;
  if (wait !== undefined) fields.retryAfterMs = wait;
  const said = providerMessage === "" ? "" : `: ${providerMessage}`;
  return new ModelError(
    `Model provider at ${target.baseUrl} ${what} (${code})${said.replace(/[.;]+$/, "")}; ${hint(target, status, code, wait)}`,
    fields,
  );
}

export function badResponse(target: ProviderTarget, what: string, cause?: unknown): ModelError {
  return new ModelError(
    `Model provider at ${target.baseUrl} sent ${what}; check that base_url points to an OpenAI-compatible API`,
    { code: "provider_bad_response", cause },
  );
}

/** What a call's failure surfaces as: the caller's own abort stays itself, the rest a ModelError. */
export function normalizeError(target: ProviderTarget, error: unknown, deadline: Deadline): unknown {
  if (error instanceof ModelError) return error;
  if (deadline.callerAborted) return error instanceof StreamReadError ? error.cause : error;
  if (deadline.timedOut) {
    return new ModelError(
      `Model provider at ${target.baseUrl} did not respond within ${target.timeoutMs} ms; retry, or raise timeout_ms for this model`,
      { code: "provider_timeout", cause: error },
    );
  }
  if (error instanceof StreamReadError) {
    return new ModelError(
      `The connection to the model provider at ${target.baseUrl} broke off mid-response (${describeCause(error.cause)}); retry, and check the server if it keeps happening`,
      { code: "provider_unreachable", cause: error.cause },
    );
  }
  return error;
}

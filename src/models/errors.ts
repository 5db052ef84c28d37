import { DeerflowError } from "../core/errors.ts";

/**
 * Stable codes of model errors. Provider error codes from the response body (for example
 * "insufficient_quota", "rate_limit_exceeded", "invalid_api_key") are passed through as they are.
 */
export type ModelErrorCode =
  | "provider_unreachable"
  | "provider_timeout"
  | "provider_bad_response"
  | "provider_http_error"
  | "unknown_model"
  | "missing_api_key"
  | "invalid_tool_definition"
  /** A replay model was asked something its recording does not hold. */
  | "replay_miss"
  /** A replay model's fixture was never read (the config did not go through loadReplayRecordings). */
  | "replay_not_loaded"
  | (string & {});

export interface ModelErrorFields {
  code: ModelErrorCode;
  /** HTTP status of the provider's response, when there was one. */
  status?: number;
  /** Response headers, lower-cased (retry-after, retry-after-ms, x-request-id ...). */
  headers?: Record<string, string>;
  /** The provider's own error message, without our wording around it. */
  providerMessage?: string;
  /** The provider's error type (error.type in the body), when it sent one. */
  providerType?: string;
  /** Milliseconds the provider asked us to wait, from retry-after-ms or retry-after. */
  retryAfterMs?: number;
  cause?: unknown;
}

/**
 * A failed model call. The message is one line that says what happened and what to do next; the
 * fields carry the facts a retry policy needs (status, code, retry-after).
 */
export class ModelError extends DeerflowError {
  override readonly name = "ModelError";
  declare readonly code: ModelErrorCode;
  readonly status?: number;
  readonly headers?: Record<string, string>;
  readonly providerMessage?: string;
  readonly providerType?: string;
  readonly retryAfterMs?: number;

  constructor(message: string, fields: ModelErrorFields) {
    super(fields.code, message, fields.cause === undefined ? undefined : { cause: fields.cause });
    if (fields.status !== undefined) this.status = fields.status;
    if (fields.headers !== undefined) this.headers = fields.headers;
    if (fields.providerMessage !== undefined) this.providerMessage = fields.providerMessage;
    if (fields.providerType !== undefined) this.providerType = fields.providerType;
    if (fields.retryAfterMs !== undefined) this.retryAfterMs = fields.retryAfterMs;
  }
}

export function isModelError(error: unknown): error is ModelError {
  return error instanceof ModelError;
}

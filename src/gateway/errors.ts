import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import * as v from "valibot";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { StateConflictError, StateUpdateError } from "../state/errors.ts";
import { CheckpointerError } from "../runtime/kv-checkpointer.ts";
import { readJsonBody } from "./request-limits.ts";

/*
 * Every gateway error is JSON: `{"detail": "<what is wrong and what to do>"}`, or for auth
 * `{"detail": {"code", "message"}}`, as the upstream gateway and the LangGraph SDK expect. A
 * failure nobody planned for is logged with its stack and answered with a fixed sentence, so no
 * internal detail leaves the process.
 */

export type ErrorDetail = string | { readonly code: string; readonly message: string };

/** An HTTPException whose response is already the JSON body clients get. */
export function httpError(status: ContentfulStatusCode, detail: ErrorDetail, headers?: Record<string, string>): HTTPException {
  const res = Response.json({ detail }, { status, ...(headers ? { headers } : {}) });
  return new HTTPException(status, { res, message: typeof detail === "string" ? detail : detail.message });
}

export function threadNotFound(threadId: string): HTTPException {
  return httpError(404, `Thread ${threadId} not found`);
}

/** Where gateway problems are written; injectable so tests and embedders can capture them. */
export interface GatewayLogger {
  error(message: string, fields?: Readonly<Record<string, unknown>>): void;
  warn(message: string, fields?: Readonly<Record<string, unknown>>): void;
  info(message: string, fields?: Readonly<Record<string, unknown>>): void;
}

export const consoleLogger: GatewayLogger = {
  error: (message, fields) => console.error(`[gateway] ${message}`, ...(fields ? [fields] : [])),
  warn: (message, fields) => console.warn(`[gateway] ${message}`, ...(fields ? [fields] : [])),
  info: (message, fields) => console.info(`[gateway] ${message}`, ...(fields ? [fields] : [])),
};

export const INTERNAL_ERROR_DETAIL = "internal error; see the gateway log";

/** Status of the DeerflowError codes the gateway's own parts raise on purpose. */
const STATUS_BY_CODE: Readonly<Record<string, ContentfulStatusCode>> = {
  invalid_request: 422,
  invalid_thread_id: 422,
  invalid_search_query: 422,
  invalid_thread_update: 422,
  unknown_state_field: 422,
  unknown_node: 422,
  invalid_state_update: 422,
  checkpoint_not_found: 404,
  thread_not_found: 404,
  assistant_not_found: 404,
  thread_busy: 409,
  not_authenticated: 401,
  permission_denied: 403,
};

function isErrorStatus(value: unknown): value is ContentfulStatusCode {
  return typeof value === "number" && Number.isInteger(value) && value >= 400 && value <= 599;
}

/**
 * The HTTP status for an error that reached the gateway: a DeerflowError by its own `status`,
 * its `details.status` or its code; a rejected state update 422 (a sandbox conflict 409);
 * anything else 500.
 */
export function statusOfError(error: unknown): ContentfulStatusCode {
  if (error instanceof StateConflictError) return 409;
  if (error instanceof StateUpdateError) return 422;
  if (error instanceof CheckpointerError) return error.code === "corrupt_record" ? 500 : 422;
  if (error instanceof DeerflowError) {
    // A subclass may carry its status itself (RunOperationError) or in its details.
    const own = (error as { status?: unknown }).status;
    if (isErrorStatus(own)) return own;
    const fromDetails = error.details?.status;
    if (isErrorStatus(fromDetails)) return fromDetails;
    return STATUS_BY_CODE[error.code] ?? 400;
  }
  return 500;
}

export interface ErrorResponseContext {
  readonly logger: GatewayLogger;
  readonly requestId?: string;
  readonly method?: string;
  readonly path?: string;
}

/** The response for any error thrown by a route or middleware. */
export function errorResponse(error: unknown, context: ErrorResponseContext): Response {
  const fields = { request_id: context.requestId, method: context.method, path: context.path };
  if (error instanceof HTTPException) {
    const res = error.getResponse();
    if (res.headers.get("content-type")?.includes("application/json")) return res;
    // Hono's own exceptions (a body too large, a malformed request) carry text; clients get JSON.
    const headers = new Headers(res.headers);
    headers.delete("content-length");
    headers.set("content-type", "application/json");
    return new Response(JSON.stringify({ detail: error.message || res.statusText || "request failed" }), {
      status: error.status,
      headers,
    });
  }
  const status = statusOfError(error);
  if (status >= 500) {
    context.logger.error(`unhandled error: ${errorMessage(error)}`, {
      ...fields,
      ...(error instanceof Error && error.stack ? { stack: error.stack } : {}),
    });
    return Response.json({ detail: INTERNAL_ERROR_DETAIL }, { status });
  }
  const code = (error as { code?: unknown }).code;
  return Response.json({ detail: errorMessage(error), ...(typeof code === "string" ? { code } : {}) }, { status });
}

/** One line per problem: `metadata.x: Invalid type: Expected string but received 1`. */
export function describeIssues(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .slice(0, 10)
    .map((issue) => {
      const path = v.getDotPath(issue);
      if (issue.type === "strict_object" && issue.expected === "never") {
        return `${path ?? "body"}: unknown field; remove it`;
      }
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join("; ");
}

/** Validates a request part; a mismatch is a 422 naming every bad field. */
export function parseRequest<const S extends v.GenericSchema>(schema: S, value: unknown, what = "request body"): v.InferOutput<S> {
  const result = v.safeParse(schema, value);
  if (!result.success) throw httpError(422, `Invalid ${what}: ${describeIssues(result.issues)}`);
  return result.output;
}

/** How a JSON value is named in messages ("an array", "null", "a string"). */
export function jsonKind(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * `schema`, for a JSON object only. valibot's object and record schemas accept arrays (`[]` would
 * pass as an empty object, `metadata: []` become `{}`), so an object is checked for first.
 */
export function jsonObject<const S extends v.GenericSchema>(schema: S) {
  return v.pipe(
    v.custom<v.InferInput<S>>(isJsonObject, (issue) => `expected a JSON object, got ${jsonKind(issue.input)}`),
    schema,
  );
}

/** Any JSON object (not an array, not null). */
export const JsonObjectSchema = jsonObject(v.record(v.string(), v.unknown()));

/**
 * The request body validated against an object schema: empty means `{}`; `null`, an array or a
 * scalar is a 422 like any other mismatch.
 */
export async function parseJsonObjectBody<const S extends v.GenericSchema>(c: Context, schema: S, what = "request body"): Promise<v.InferOutput<S>> {
  const body = await readJsonBody(c);
  return parseRequest(jsonObject(schema), body === undefined ? {} : body, what);
}


import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import * as v from "valibot";
import { ConfigError } from "../config/errors.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { ExtensionApiError } from "../extension-api/errors.ts";
import { ModelError } from "../models/errors.ts";
import { ModuleLoaderError } from "../ports/module-loader.ts";
import { StorageUnavailableError } from "../ports/key-value.ts";
import { SandboxError } from "../ports/sandbox.ts";
import { StateConflictError, StateUpdateError } from "../state/errors.ts";
import { CheckpointerError } from "../runtime/kv-checkpointer.ts";
import type { RunOperationError, RunOperationErrorCode } from "../runtime/runs/types.ts";
import { readJsonBody } from "./request-limits.ts";
import { isRecord } from "../core/guards.ts";

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

/**
 * The one table from the DeerflowError codes the gateway and the runtime below it raise on purpose
 * to the HTTP status they are answered with. A RunOperationError carries a code, never a status:
 * statusOfRunOperation only compiles while every one of its codes has a row here.
 */
const STATUS_BY_CODE = {
  // Run operations (RunOperationError).
  shutting_down: 503,
  thread_busy: 409,
  run_conflict: 409,
  run_not_active: 409,
  run_not_cancellable: 409,
  run_active: 409,
  unknown_model: 400,
  unknown_agent: 400,
  run_not_found: 404,
  assistant_not_found: 404,
  invalid_last_event_id: 400,
  invalid_run_request: 422,
  server_owned_state: 422,
  invalid_input_message: 400,
  invalid_query: 422,
  invalid_run_id: 422,
  // A run of this worker lost its lease; its thread's writes wait for the new owner (RunLeaseLostError).
  run_lease_lost: 503,
  // Threads, their state and checkpoints, and auth.
  invalid_request: 422,
  invalid_thread_id: 422,
  invalid_search_query: 422,
  invalid_thread_update: 422,
  unknown_state_field: 422,
  unknown_node: 422,
  invalid_state_update: 422,
  checkpoint_not_found: 404,
  thread_not_found: 404,
  not_authenticated: 401,
  permission_denied: 403,
  // The store (PostgreSQL) cannot be reached now; the same request may succeed once it is back.
  storage_unavailable: 503,
  // A record that kept changing under a compare-and-set update (several workers writing it).
  storage_write_conflict: 409,
} as const satisfies Readonly<Record<string, ContentfulStatusCode>>;

function statusOfCode(code: string): ContentfulStatusCode | undefined {
  return Object.hasOwn(STATUS_BY_CODE, code) ? STATUS_BY_CODE[code as keyof typeof STATUS_BY_CODE] : undefined;
}

function isErrorStatus(value: unknown): value is ContentfulStatusCode {
  return typeof value === "number" && Number.isInteger(value) && value >= 400 && value <= 599;
}

/** The status a run-operation refusal is answered with. */
export function statusOfRunOperation(error: RunOperationError): ContentfulStatusCode {
  return STATUS_BY_CODE[error.code];
}

/**
 * Errors of the library's lower floors that no route raises as its answer (a config file, a model
 * call, a sandbox path, a module load, the extension contract): one that reaches a response is a
 * failure nobody planned for, answered 500 and logged. Routes that expect one (the files routes
 * and SandboxError) turn it into their own answer first.
 */
function isUnplannedFailure(error: DeerflowError): boolean {
  return (
    error instanceof ConfigError ||
    error instanceof ModelError ||
    error instanceof SandboxError ||
    error instanceof ModuleLoaderError ||
    error instanceof ExtensionApiError
  );
}

/**
 * The HTTP status for an error that reached the gateway: a DeerflowError by its own `status`,
 * its `details.status` or its code (a lower floor's unplanned failure 500); a rejected state
 * update 422 (a sandbox conflict 409); anything else 500.
 */
export function statusOfError(error: unknown): ContentfulStatusCode {
  if (error instanceof StateConflictError) return 409;
  if (error instanceof StateUpdateError) return 422;
  if (error instanceof CheckpointerError) return error.code === "corrupt_record" ? 500 : 422;
  if (error instanceof DeerflowError) {
    if (isUnplannedFailure(error)) return 500;
    // An embedder's route error (or the gateway's own upload refusal) may name its status itself, or in its details.
    const own = (error as { status?: unknown }).status;
    if (isErrorStatus(own)) return own;
    const fromDetails = error.details?.status;
    if (isErrorStatus(fromDetails)) return fromDetails;
    return statusOfCode(error.code) ?? 400;
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
  if (error instanceof StorageUnavailableError) {
    // Its message names the store and never a credential: the client learns to retry, not why it failed inside.
    context.logger.warn(`storage unavailable: ${errorMessage(error)}`, fields);
    return Response.json({ detail: error.message, code: error.code }, { status: 503, headers: { "retry-after": "1" } });
  }
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

/**
 * `schema`, for a JSON object only. valibot's object and record schemas accept arrays (`[]` would
 * pass as an empty object, `metadata: []` become `{}`), so an object is checked for first.
 */
export function jsonObject<const S extends v.GenericSchema>(schema: S) {
  return v.pipe(
    v.custom<v.InferInput<S>>(isRecord, (issue) => `expected a JSON object, got ${jsonKind(issue.input)}`),
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


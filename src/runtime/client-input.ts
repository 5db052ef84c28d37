import { ROUTE_PERMISSIONS } from "../authz/enforcement.ts";
import { coerceMessageLikeToMessage, isBaseMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { normalizeAuthzAttributes, readContextString } from "../authz/principal.ts";
import { formatKeyPath } from "../config/issues.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { deepFrozenCopy } from "../core/freeze.ts";
import { NAMED_ID_MAX, idFormatHint } from "../core/ids.ts";
import { DEFAULT_USER_ID } from "../engine/run-identity.ts";
import { MULTITASK_STRATEGIES, RUN_STATUSES, RUN_STREAM_MODES, type MultitaskStrategy, type RunPrincipal, type RunRequest, type RunStreamMode } from "./runs/types.ts";
import { serializeMessage } from "./serialize.ts";
import { THREAD_ID_PATTERN, THREAD_STATUSES } from "./thread-store.ts";

/*
 * What a library caller hands the embedded client, checked before anything is created. The
 * caller runs in the same process as the agent, so it is trusted: unlike an HTTP body, nothing is
 * stripped, and identity (who the run acts for) is the caller's to say, per client or per call.
 * Identity is copied the moment a call is made, so editing the caller's objects afterwards can
 * never change who a queued or cached run acts for.
 */

export type ClientInputErrorCode = "invalid_client_options" | "invalid_client_input";

export class ClientInputError extends DeerflowError {
  declare readonly code: ClientInputErrorCode;
  constructor(code: ClientInputErrorCode, message: string) {
    super(code, message);
    this.name = "ClientInputError";
  }
}

/**
 * The six route permissions: an in-process caller holds
 * them all, so a gateway's agent factory that reads `permissions` sees a complete user.
 */
export const EMBEDDED_PERMISSIONS: readonly string[] = ROUTE_PERMISSIONS;

/** Who an embedded run acts for; structurally a gateway user with `authSource: "embedded"`. */
export interface EmbeddedPrincipal extends RunPrincipal {
  readonly authSource: "embedded";
  readonly permissions: ReadonlySet<string>;
}

/** An identity as a library caller writes it. */
export interface ClientUser {
  readonly id: string;
  /** Any role name the authorization config knows (`admin`, `user`, or an RBAC role). Default `admin`. */
  readonly role?: string;
  readonly isInternal?: boolean;
  /** Groups, tenant ...: what an AuthorizationProvider decides on. Copied at call time. */
  readonly authzAttributes?: Readonly<Record<string, unknown>>;
  readonly oauthProvider?: string;
  readonly oauthId?: string;
}

/** A per-call identity override: every field optional, laid over the client's user. */
export type ClientUserOverride = Partial<ClientUser>;

/** The same identity as the gateway's auth-disabled caller, so both see the same threads. */
export const DEFAULT_CLIENT_USER: ClientUser = Object.freeze({ id: DEFAULT_USER_ID, role: "admin" });

const JsonObject = v.record(v.string(), v.unknown());
const NonEmpty = v.pipe(v.string(), v.minLength(1, "expected a non-empty string"));
const ThreadId = v.pipe(
  v.string(),
  v.regex(THREAD_ID_PATTERN, `expected ${idFormatHint(NAMED_ID_MAX)} (a UUID works)`),
);
const StreamMode = v.picklist(RUN_STREAM_MODES, `expected one of ${RUN_STREAM_MODES.map((m) => `"${m}"`).join(", ")}`);
const Signal = v.custom<AbortSignal>(
  (value) => typeof value === "object" && value !== null && typeof (value as AbortSignal).aborted === "boolean" && typeof (value as AbortSignal).addEventListener === "function",
  "expected an AbortSignal",
);

const userEntries = {
  id: NonEmpty,
  role: v.optional(NonEmpty),
  isInternal: v.optional(v.boolean()),
  authzAttributes: v.optional(
    v.custom<Readonly<Record<string, unknown>>>(
      (value) => typeof value === "object" && value !== null && !Array.isArray(value),
      'expected an object of attributes such as {groups: ["admins"]}',
    ),
  ),
  oauthProvider: v.optional(v.string()),
  oauthId: v.optional(v.string()),
};
export const ClientUserSchema = v.strictObject(userEntries);
const UserOverrideSchema = v.strictObject({ ...userEntries, id: v.optional(NonEmpty) });

export const RunOptionsSchema = v.strictObject({
  threadId: v.optional(ThreadId),
  streamMode: v.optional(v.union([StreamMode, v.array(StreamMode)])),
  context: v.optional(JsonObject),
  configurable: v.optional(JsonObject),
  metadata: v.optional(JsonObject),
  command: v.optional(v.strictObject({ resume: v.optional(v.unknown()), update: v.optional(v.unknown()) })),
  user: v.optional(UserOverrideSchema),
  signal: v.optional(Signal),
  /** Shorthand for `context.model_name`. */
  model: v.optional(NonEmpty),
  multitaskStrategy: v.optional(v.picklist(MULTITASK_STRATEGIES, `expected one of ${MULTITASK_STRATEGIES.map((s) => `"${s}"`).join(", ")}`)),
  onDisconnect: v.optional(v.picklist(["cancel", "continue"], 'expected "cancel" or "continue"')),
  recursionLimit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1, "expected a positive integer"))),
  assistantId: v.optional(NonEmpty),
});
/** What a library call may add to a run. */
export interface RunOptions {
  threadId?: string;
  streamMode?: RunStreamMode | RunStreamMode[];
  context?: Record<string, unknown>;
  configurable?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  command?: { resume?: unknown; update?: unknown };
  /** Laid over the client's user for this call (see ClientUserOverride). */
  user?: {
    role?: string;
    isInternal?: boolean;
    authzAttributes?: Readonly<Record<string, unknown>>;
    oauthProvider?: string;
    oauthId?: string;
    id?: string;
  };
  signal?: AbortSignal;
  /** Shorthand for `context.model_name`. */
  model?: string;
  multitaskStrategy?: MultitaskStrategy;
  onDisconnect?: "cancel" | "continue";
  recursionLimit?: number;
  assistantId?: string;
}
type _RunOptionsMatches = Assert<SameType<RunOptions, v.InferInput<typeof RunOptionsSchema>>>;

export const UserOnlySchema = v.strictObject({ user: v.optional(UserOverrideSchema) });
export const ThreadCreateSchema = v.strictObject({ threadId: v.optional(ThreadId), metadata: v.optional(JsonObject), user: v.optional(UserOverrideSchema) });
export const ThreadListSchema = v.strictObject({
  limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000))),
  offset: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
  metadata: v.optional(JsonObject),
  status: v.optional(v.picklist(THREAD_STATUSES)),
  user: v.optional(UserOverrideSchema),
});
export const StateReadSchema = v.strictObject({ checkpointId: v.optional(NonEmpty), user: v.optional(UserOverrideSchema) });
export const StateUpdateSchema = v.strictObject({
  values: v.nullable(JsonObject),
  asNode: v.optional(NonEmpty),
  checkpointId: v.optional(NonEmpty),
  user: v.optional(UserOverrideSchema),
});
export const HistorySchema = v.strictObject({
  limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100))),
  before: v.optional(NonEmpty),
  user: v.optional(UserOverrideSchema),
});
export const RunListSchema = v.strictObject({
  limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000))),
  offset: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
  status: v.optional(v.picklist(RUN_STATUSES)),
  user: v.optional(UserOverrideSchema),
});
export const CancelSchema = v.strictObject({
  action: v.optional(v.picklist(["interrupt", "rollback"], 'expected "interrupt" or "rollback"')),
  wait: v.optional(v.boolean()),
  user: v.optional(UserOverrideSchema),
});
export const JoinSchema = v.strictObject({ signal: v.optional(Signal), lastEventId: v.optional(NonEmpty), user: v.optional(UserOverrideSchema) });

/** Validates `value` or throws `invalid_client_options` naming the method, the key path and what was expected. */
export function parseOptions<S extends v.GenericSchema>(schema: S, value: unknown, where: string): v.InferOutput<S> {
  const result = v.safeParse(schema, value ?? {});
  if (result.success) return result.output;
  throw new ClientInputError("invalid_client_options", `${where}: ${describe(result.issues)}`);
}

function describe(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .map((issue) => {
      const path = formatKeyPath(issue.path as { key: unknown }[] | undefined) || "options";
      if ((issue.type === "strict_object" || issue.type === "object") && issue.expected === "never") return `${path}: unknown option; remove it`;
      return `${path}: ${issue.message}`;
    })
    .join("; ");
}

/** The run-context keys an embedded caller may use to say who it is (the worker writes them from the principal). */
const CONTEXT_IDENTITY_KEYS = ["user_id", "user_role", "is_internal", "authz_attributes", "oauth_provider", "oauth_id"] as const;

/**
 * The principal one call acts for: the client's user, then identity keys in the call's context
 * (upstream's keyword overrides), then the call's `user`, later winning. Everything is copied and
 * frozen now; the returned context no longer holds the identity keys (the worker writes them).
 */
export function resolvePrincipal(
  base: ClientUser,
  override: ClientUserOverride | undefined,
  context: Readonly<Record<string, unknown>> = {},
): { principal: EmbeddedPrincipal; context: Record<string, unknown> } {
  const fromContext: { -readonly [K in keyof ClientUser]?: ClientUser[K] } = {};
  try {
    const id = readContextString(context, "user_id");
    const role = readContextString(context, "user_role");
    const oauthProvider = readContextString(context, "oauth_provider");
    const oauthId = readContextString(context, "oauth_id");
    if (id !== null) fromContext.id = id;
    if (role !== null && role !== "") fromContext.role = role;
    if (oauthProvider !== null) fromContext.oauthProvider = oauthProvider;
    if (oauthId !== null) fromContext.oauthId = oauthId;
  } catch (error) {
    throw new ClientInputError("invalid_client_options", `context: ${errorMessage(error)}`);
  }
  if (context.is_internal !== undefined && context.is_internal !== null) {
    if (typeof context.is_internal !== "boolean") {
      throw new ClientInputError("invalid_client_options", `context.is_internal: expected true or false, got ${typeof context.is_internal}`);
    }
    fromContext.isInternal = context.is_internal;
  }
  if (context.authz_attributes !== undefined && context.authz_attributes !== null) {
    fromContext.authzAttributes = context.authz_attributes as Record<string, unknown>;
  }
  const merged = { ...base, ...fromContext, ...definedOnly(override ?? {}) };
  const rest = Object.fromEntries(Object.entries(context).filter(([key]) => !(CONTEXT_IDENTITY_KEYS as readonly string[]).includes(key)));
  return { principal: freezePrincipal(merged), context: privateCopy(rest) };
}

/**
 * A copy the caller can no longer reach: structuredClone where it can (Sets, Maps, Dates survive),
 * else a copy of the plain parts (a value with functions or class instances keeps those shared).
 */
export function privateCopy<T>(value: T): T {
  try {
    return structuredClone(value);
  } catch {
    return deepFrozenCopy(value) as T;
  }
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, item]) => item !== undefined)) as Partial<T>;
}

/** Validates a ClientUser and returns a private frozen copy of it. */
export function copyClientUser(user: unknown, where: string): ClientUser {
  const parsed = parseOptions(ClientUserSchema, user, where);
  const principal = freezePrincipal(parsed, where);
  return Object.freeze({
    id: principal.id,
    role: principal.systemRole,
    isInternal: principal.isInternal,
    ...(principal.authzAttributes ? { authzAttributes: principal.authzAttributes } : {}),
    ...(principal.oauthProvider ? { oauthProvider: principal.oauthProvider } : {}),
    ...(principal.oauthId ? { oauthId: principal.oauthId } : {}),
  });
}

function freezePrincipal(user: ClientUser, where = "user"): EmbeddedPrincipal {
  if (typeof user.id !== "string" || user.id === "") throw new ClientInputError("invalid_client_options", `${where}.id: expected a non-empty string`);
  let authzAttributes: Readonly<Record<string, unknown>> | undefined;
  if (user.authzAttributes !== undefined) {
    try {
      authzAttributes = normalizeAuthzAttributes(privateCopy(user.authzAttributes));
    } catch (error) {
      throw new ClientInputError("invalid_client_options", `${where}.authzAttributes: ${errorMessage(error)}`);
    }
  }
  return Object.freeze({
    id: user.id,
    systemRole: user.role ?? "admin",
    authSource: "embedded" as const,
    isInternal: user.isInternal === true,
    permissions: new Set(EMBEDDED_PERMISSIONS),
    ...(authzAttributes ? { authzAttributes } : {}),
    ...(user.oauthProvider ? { oauthProvider: user.oauthProvider } : {}),
    ...(user.oauthId ? { oauthId: user.oauthId } : {}),
  });
}

/** What a call may send as its turn: text, `{messages}` (dicts or LangChain messages) plus other state keys, or null with a `command`. */
export type ClientInput = string | { readonly messages?: readonly unknown[]; readonly [key: string]: unknown } | null | undefined;

/** The run's input as plain JSON (LangChain messages become the wire dicts), each message checked. */
export function runInput(input: ClientInput): Record<string, unknown> | null {
  if (input === null || input === undefined) return null;
  if (typeof input === "string") return { messages: [{ type: "human", content: input }] };
  if (typeof input !== "object" || Array.isArray(input)) {
    throw new ClientInputError("invalid_client_input", `input: expected text, {messages: [...]} or null, got ${Array.isArray(input) ? "a list" : typeof input}`);
  }
  const out: Record<string, unknown> = { ...input };
  if (input.messages === undefined) return out;
  if (!Array.isArray(input.messages)) {
    throw new ClientInputError("invalid_client_input", 'input.messages: expected a list of messages such as {type: "human", content: "hi"}');
  }
  out.messages = input.messages.map((message, index) => {
    if (isBaseMessage(message)) return serializeMessage(message);
    try {
      coerceMessageLikeToMessage(message as never);
    } catch (error) {
      throw new ClientInputError(
        "invalid_client_input",
        `input.messages[${index}]: not a message (${errorMessage(error).split("\n")[0]}); pass {type: "human", content: "..."}, {role: "user", content: "..."} or a LangChain message`,
      );
    }
    return message;
  });
  return out;
}

/** A validated RunRequest for the manager, from a call's options (already parsed) and input. */
export function buildRunRequest(
  input: ClientInput,
  options: v.InferOutput<typeof RunOptionsSchema>,
  context: Record<string, unknown>,
  defaultModes: readonly RunStreamMode[],
): RunRequest {
  const body = privateCopy(runInput(input));
  if (body === null && !options.command) {
    throw new ClientInputError("invalid_client_input", "input: a run needs a message (text or {messages}) or a command such as {resume: ...}");
  }
  const modes = options.streamMode === undefined ? defaultModes : typeof options.streamMode === "string" ? [options.streamMode] : options.streamMode;
  return {
    assistantId: options.assistantId ?? "lead_agent",
    input: body,
    command: options.command ?? null,
    metadata: { ...(options.metadata ?? {}) },
    configurable: { ...(options.configurable ?? {}) },
    context: { ...context, ...(options.model ? { model_name: options.model } : {}) },
    streamMode: [...new Set(modes)],
    onDisconnect: options.onDisconnect ?? "cancel",
    multitaskStrategy: options.multitaskStrategy ?? "reject",
    ...(options.recursionLimit === undefined ? {} : { recursionLimit: options.recursionLimit }),
  };
}

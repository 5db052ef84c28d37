import { coerceMessageLikeToMessage } from "@langchain/core/messages";
import * as v from "valibot";
import { formatKeyPath } from "../config/issues.ts";
import { errorMessage } from "../core/errors.ts";
import {
  MULTITASK_STRATEGIES,
  RUN_STREAM_MODES,
  RunOperationError,
  type RunRequest,
  type RunStreamMode,
} from "../runtime/runs/types.ts";
import { THREAD_ID_PATTERN } from "../runtime/thread-store.ts";
import { jsonObject, JsonObjectSchema } from "./errors.ts";
import {
  serverOwnedChannelsIn,
  serverOwnedChannelsMessage,
  stripServerOwnedContext,
  stripServerOwnedMessage,
  stripServerOwnedMessages,
  type CallerTrust,
} from "./server-owned.ts";

/*
 * The body a POST to a LangGraph Platform API runs route takes, checked before any run exists: an
 * unknown field, an unsupported option or stream mode is a 422 naming the field. Unlike upstream,
 * `multitask_strategy: "enqueue"` is supported (queued runs start in order).
 */

export { THREAD_ID_PATTERN };
export const DEFAULT_MAX_RECURSION_LIMIT = 1000;

const unsupported = (field: string, what: string) =>
  v.nullish(v.never(`${field} is not supported: ${what}; leave it out or send null`));

const JsonObject = JsonObjectSchema;
const positiveWholeNumber = v.pipe(
  v.number((issue) => `expected a whole number >= 1, got ${issue.received}`),
  v.integer((issue) => `expected a whole number >= 1, got ${issue.received}`),
  v.minValue(1, (issue) => `expected a whole number >= 1, got ${issue.received}`),
);

const StreamModeSchema = v.custom<RunStreamMode | RunStreamMode[]>(
  (value) => {
    const modes = typeof value === "string" ? [value] : value;
    return Array.isArray(modes) && modes.every((mode) => (RUN_STREAM_MODES as readonly unknown[]).includes(mode));
  },
  (issue) => {
    const modes = typeof issue.input === "string" ? [issue.input] : Array.isArray(issue.input) ? issue.input : [issue.input];
    const bad = modes.filter((mode) => !(RUN_STREAM_MODES as readonly unknown[]).includes(mode)).map((mode) => JSON.stringify(mode));
    return `unsupported stream mode ${bad.join(", ")}; use one or more of ${RUN_STREAM_MODES.map((m) => `"${m}"`).join(", ")}`;
  },
);

const RunBodyEntries = v.strictObject({
  assistant_id: v.nullish(v.string()),
  input: v.nullish(JsonObject),
  command: v.nullish(
    jsonObject(
      v.strictObject({
        resume: v.optional(v.unknown()),
        update: v.optional(v.unknown()),
      }),
    ),
  ),
  metadata: v.nullish(JsonObject),
  config: v.nullish(
    jsonObject(
      v.looseObject({
        configurable: v.nullish(JsonObject),
        // A zero, negative or fractional limit is refused, not replaced by a default nobody asked for.
        recursion_limit: v.nullish(positiveWholeNumber),
        tags: v.nullish(v.array(v.string())),
        metadata: v.nullish(JsonObject),
        run_name: v.nullish(v.string()),
      }),
    ),
  ),
  context: v.nullish(JsonObject),
  checkpoint_id: v.nullish(v.string()),
  checkpoint: v.nullish(jsonObject(v.looseObject({ checkpoint_id: v.nullish(v.string()), checkpoint_ns: v.nullish(v.string()) }))),
  interrupt_before: unsupported("interrupt_before", "static breakpoints are not offered; pause from a tool with interrupt()"),
  interrupt_after: unsupported("interrupt_after", "static breakpoints are not offered; pause from a tool with interrupt()"),
  stream_mode: v.nullish(StreamModeSchema),
  stream_subgraphs: v.nullish(v.boolean()),
  stream_resumable: v.nullish(v.literal(false, "stream_resumable=true is not supported: reconnect with Last-Event-ID instead; send false or leave it out")),
  on_disconnect: v.nullish(v.picklist(["cancel", "continue"], 'on_disconnect must be "cancel" or "continue"')),
  multitask_strategy: v.nullish(
    v.picklist(MULTITASK_STRATEGIES, `multitask_strategy must be one of ${MULTITASK_STRATEGIES.map((s) => `"${s}"`).join(", ")}`),
  ),
  webhook: unsupported("webhook", "completion webhooks are not offered"),
  on_completion: unsupported("on_completion", "completion behaviour is not configurable"),
  after_seconds: unsupported("after_seconds", "delayed runs are not offered"),
  feedback_keys: unsupported("feedback_keys", "feedback collection is not offered"),
  if_not_exists: v.nullish(v.literal("create", 'if_not_exists must be "create" (a missing thread is created)')),
});

/** A run body is a JSON object: `[]`, `null` or `"x"` is a 422 before any run exists. */
export const RunBodySchema = jsonObject(RunBodyEntries);

export interface ParsedRunBody {
  readonly request: RunRequest;
  /** `config.configurable.thread_id` as the caller sent it: the stateless runs' thread selector. */
  readonly configurableThreadId: string | undefined;
}

export interface ParseRunBodyOptions {
  readonly maxRecursionLimit?: number;
  /**
   * Who sends the body (callerTrustOf the authenticated user); default "external". An internal
   * caller may carry `channel_user_id` in the top-level `context` and `original_user_content` in its
   * messages' `additional_kwargs`; `config.configurable` supplies neither for anyone.
   */
  readonly caller?: CallerTrust;
}

const SECRET_KEY = /(secret|password|passwd|api[_-]?key|access[_-]?token|auth[_-]?token|private[_-]?key)/i;

/** Validates a run body; throws a RunOperationError (422, or 400 for a malformed input message). */
export function parseRunBody(body: unknown, options: ParseRunBodyOptions = {}): ParsedRunBody {
  const result = v.safeParse(RunBodySchema, body === undefined ? {} : body);
  if (!result.success) throw new RunOperationError("invalid_run_request", describeIssues(result.issues));
  const parsed = result.output;
  const rawConfigurable = parsed.config?.configurable ?? {};
  const threadId = rawConfigurable.thread_id;
  if (threadId !== undefined && threadId !== null && (typeof threadId !== "string" || !THREAD_ID_PATTERN.test(threadId))) {
    throw new RunOperationError("invalid_run_request", `config.configurable.thread_id must match ${THREAD_ID_PATTERN}; got ${JSON.stringify(threadId)}`);
  }
  for (const key of Object.keys(parsed.metadata ?? {})) {
    if (SECRET_KEY.test(key)) {
      throw new RunOperationError("invalid_run_request", `metadata.${key} looks like a secret; run metadata is stored and listed, so keep secrets out of it`);
    }
  }
  const caller = options.caller ?? "external";
  const configurable = stripServerOwnedContext(rawConfigurable);
  const checkpointId = parsed.checkpoint_id ?? parsed.checkpoint?.checkpoint_id;
  if (checkpointId) configurable.checkpoint_id = checkpointId;
  if (parsed.checkpoint?.checkpoint_ns) configurable.checkpoint_ns = parsed.checkpoint.checkpoint_ns;
  const modes = parsed.stream_mode === undefined || parsed.stream_mode === null ? ["values" as const] : typeof parsed.stream_mode === "string" ? [parsed.stream_mode] : parsed.stream_mode;
  const recursionLimit = clampRecursionLimit(parsed.config?.recursion_limit, options.maxRecursionLimit ?? DEFAULT_MAX_RECURSION_LIMIT);
  const request: RunRequest = {
    assistantId: parsed.assistant_id ?? "lead_agent",
    input: parsed.input ? sanitizeInput(parsed.input, caller) : null,
    command: parsed.command ? sanitizeCommand(parsed.command, caller) : null,
    metadata: parsed.metadata ?? {},
    configurable,
    context: stripServerOwnedContext(parsed.context ?? {}, { caller, where: "context" }),
    streamMode: [...new Set(modes)],
    onDisconnect: parsed.on_disconnect ?? "cancel",
    multitaskStrategy: parsed.multitask_strategy ?? "reject",
    ...(recursionLimit === undefined ? {} : { recursionLimit }),
  };
  return { request, configurableThreadId: typeof threadId === "string" ? threadId : undefined };
}

/** A valid client limit (a whole number >= 1, checked by RunBodySchema) is clamped to the server's maximum. */
export function clampRecursionLimit(raw: number | null | undefined, max: number): number | undefined {
  if (raw === undefined || raw === null) return undefined;
  return Math.min(raw, max);
}

function refuseServerOwnedChannels(where: string, write: unknown): void {
  const channels = serverOwnedChannelsIn(write);
  if (channels.length > 0) throw new RunOperationError("server_owned_state", serverOwnedChannelsMessage(where, channels));
}

function sanitizeInput(input: Record<string, unknown>, caller: CallerTrust): Record<string, unknown> {
  refuseServerOwnedChannels("input", input);
  if (input.messages === undefined) return { ...input };
  if (!Array.isArray(input.messages)) {
    throw new RunOperationError("invalid_input_message", "input.messages must be a list of messages such as {\"type\": \"human\", \"content\": \"hi\"}");
  }
  const messages = stripServerOwnedMessages(input.messages, { caller, where: "input.messages" });
  messages.forEach((message, index) => {
    try {
      coerceMessageLikeToMessage(message as never);
    } catch (error) {
      throw new RunOperationError(
        "invalid_input_message",
        `input.messages[${index}] is not a message: ${errorMessage(error).split("\n")[0]}; send {"type": "human", "content": "..."} or {"role": "user", "content": "..."}`,
      );
    }
  });
  return { ...input, messages };
}

/** A command's state update writes messages as surely as `input` does, so it is stripped the same way. */
function sanitizeCommand(command: NonNullable<RunRequest["command"]>, caller: CallerTrust): NonNullable<RunRequest["command"]> {
  const { update } = command;
  refuseServerOwnedChannels("command.update", update);
  if (update === undefined || update === null || typeof update !== "object") return { ...command };
  const options = { caller, where: "command.update.messages" };
  const stripped = (messages: unknown) => (Array.isArray(messages) ? stripServerOwnedMessages(messages, options) : stripServerOwnedMessage(messages, options));
  if (Array.isArray(update)) {
    // LangGraph's tuple form: [["messages", [...]], ["title", "..."]].
    return { ...command, update: update.map((write) => (Array.isArray(write) && write[0] === "messages" ? [write[0], stripped(write[1])] : write)) };
  }
  const record = update as Record<string, unknown>;
  if (!("messages" in record)) return { ...command };
  return { ...command, update: { ...record, messages: stripped(record.messages) } };
}

function describeIssues(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .map((issue) => {
      const path = formatKeyPath(issue.path as { key: unknown }[] | undefined) || "body";
      if (issue.type === "strict_object" && issue.expected === "never") {
        const topLevel = (issue.path?.length ?? 0) === 1;
        return `${path}: unknown field; remove it${topLevel ? ` (the run body accepts ${Object.keys(RunBodyEntries.entries).join(", ")})` : ""}`;
      }
      if (issue.type === "strict_object" || issue.type === "object") return `${path}: ${issue.message}; send a JSON object`;
      return `${path}: ${issue.message}`;
    })
    .join("; ");
}

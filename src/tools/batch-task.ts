import { ToolMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { subagentTaskProperties } from "./task.ts";
import {
  BATCH_RECORD_VERSION,
  BatchStore,
  BatchStoreError,
  addUsage,
  assertBatchId,
  isBatchOpen,
  isItemSettled,
  zeroUsage,
  type BatchItemRecord,
  type BatchLimits,
  type BatchOwner,
  type BatchRecord,
  type BatchSnapshot,
  type BatchTaskSpec,
} from "./batch-store.ts";
import { subagentThreadId, type SubagentRunResult, type SubagentBuilder, type SubagentRunner, type SubagentType, type SubagentUsage } from "./subagent-run.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import type { Agent } from "../engine/agent.ts";
import type { AgentRuntime, AgentTool, ToolContext } from "../engine/types.ts";
import { canonicalHashSync, sha256HexSync } from "../extension-api/sha256-sync.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { emitEvent } from "../engine/events.ts";
import { resolveThreadId, resolveUserId } from "../engine/scope-ids.ts";
import { SUBAGENT_TOKEN_USAGE_KEY, boundSubagentText, formatSubagentResultMessage } from "./subagent-result.ts";
import { isRecord } from "../core/guards.ts";

/*
 * `batch_task`: an explicit, durable fan-out. Where `task` is one delegation whose verdict lives
 * only in the conversation (and the delegation ledger), a batch is a record in KeyValue that
 * outlives the run: every item's verdict is stored the moment it is known, so a run that is
 * aborted or dies mid-batch loses only the items that were running, and calling batch_task again
 * with the batch id runs only what is unfinished and returns the whole batch.
 *
 * Its limits are fixed when the batch is created and stored with it; nothing the model passes
 * later can raise them. It is deliberately not an ordinary delegation: SubagentLimit counts only
 * `task` calls, and the result carries no `subagent_status`, so the delegation ledger, ToolErrorHandling's
 * task path and the citation ledger's "processing a subagent result" test all leave it alone.
 * One cohesive thing: the tool, its config section and its durable batch loop, read top to bottom;
 * the batch record store is batch-store.ts beside it.
 */

export const BATCH_TASK_TOOL_NAME = "batch_task";
export const BATCH_TASK_PROGRESS_EVENT = "batch_task_progress";
/** Structured facts of a batch result on the ToolMessage (status per item, never result text). */
export const BATCH_TASK_RESULT_KEY = "batch_task";
/** The stable code of a refused call, on the error ToolMessage. */
export const BATCH_TASK_ERROR_CODE_KEY = "batch_task_error_code";

export const MIN_BATCH_TOTAL = 1;
export const MAX_BATCH_TOTAL = 64;
export const DEFAULT_BATCH_MAX_TOTAL = 16;
export const MIN_BATCH_LIVE = 1;
export const MAX_BATCH_LIVE = 8;
export const DEFAULT_BATCH_MAX_LIVE = 2;
export const MIN_BATCH_RUNNING = 1;
export const MAX_BATCH_RUNNING = 16;
export const DEFAULT_BATCH_MAX_RUNNING = 4;

function clamped(low: number, high: number, fallback: number) {
  return v.optional(
    v.pipe(
      v.number(),
      v.integer("expected a whole number"),
      v.transform((value: number) => Math.max(low, Math.min(high, value))),
    ),
    fallback,
  );
}

/** The `subagents.batch` section. Limits out of range are clamped, not refused. */
export const BatchTaskConfigSchema = v.strictObject({
  /** Bind the batch_task tool (only where delegation is on). */
  enabled: v.optional(v.boolean(), false),
  /** Items one batch may hold; clamped to 1-64. */
  max_total: clamped(MIN_BATCH_TOTAL, MAX_BATCH_TOTAL, DEFAULT_BATCH_MAX_TOTAL),
  /** Unfinished batches one thread may hold; clamped to 1-8. */
  max_live: clamped(MIN_BATCH_LIVE, MAX_BATCH_LIVE, DEFAULT_BATCH_MAX_LIVE),
  /** Items of one batch running at once; clamped to 1-16. */
  max_running: clamped(MIN_BATCH_RUNNING, MAX_BATCH_RUNNING, DEFAULT_BATCH_MAX_RUNNING),
});
export interface BatchTaskConfig {
  enabled: boolean;
  max_total: number;
  max_live: number;
  max_running: number;
}
type _BatchTaskConfigMatches = Assert<SameType<BatchTaskConfig, v.InferOutput<typeof BatchTaskConfigSchema>>>;
export type BatchTaskConfigInput = Partial<BatchTaskConfig>;
type _BatchTaskConfigInputMatches = Assert<SameType<BatchTaskConfigInput, v.InferInput<typeof BatchTaskConfigSchema>>>;

/** `subagents.batch`, validated and clamped. */
export function parseBatchTaskConfig(config?: BatchTaskConfigInput | null): BatchTaskConfig {
  return parseMiddlewareConfig(
    BatchTaskConfigSchema,
    config,
    "subagents.batch",
    "Fix this key (enabled is true or false; max_total, max_live and max_running are whole numbers).",
  );
}

/** What the assembly descriptor records of the batch mode: every setting that changes behaviour. */
export function batchTaskReleasePolicyParameters(config?: BatchTaskConfigInput | null): Record<string, unknown> {
  const settings = parseBatchTaskConfig(config);
  return { enabled: settings.enabled, max_total: settings.max_total, max_live: settings.max_live, max_running: settings.max_running };
}

export type BatchTaskErrorCode =
  | "batch_invalid_arguments"
  | "batch_unknown_subagent_type"
  | "batch_total_limit"
  | "batch_live_limit"
  | "batch_tasks_mismatch"
  | "batch_busy"
  | "batch_storage_unavailable"
  | "batch_thread_required"
  | "batch_record_malformed";

export interface BatchTaskToolOptions {
  /** The subagent types items may name; a later duplicate name wins. Defaults to the runner's (the built-ins). */
  readonly types?: readonly SubagentType[];
  /** Builds a subagent's own Agent for a type, as for `task`. */
  readonly buildAgent: SubagentBuilder;
  /** The `subagents.batch` section. */
  readonly config?: BatchTaskConfigInput | null;
  /** Where batches live; defaults to the run's `services.storage`. */
  readonly storage?: BatchStore;
}

function text(value: unknown): string {
  return typeof value === "string" ? value.trim() : "";
}

function refusal(code: BatchTaskErrorCode, message: string, toolCallId: string): ToolMessage {
  return new ToolMessage({
    content: `Error: ${message}`,
    tool_call_id: toolCallId,
    name: BATCH_TASK_TOOL_NAME,
    status: "error",
    additional_kwargs: { [BATCH_TASK_ERROR_CODE_KEY]: code },
  });
}

class Refusal extends DeerflowError {
  constructor(code: BatchTaskErrorCode, message: string) {
    super(code, message);
    this.name = "BatchTaskRefusal";
  }
}

function describe(types: ReadonlyMap<string, SubagentType>, limits: BatchTaskConfig): string {
  const lines = [...types.values()].map((type) => `- ${type.name}: ${type.description.split("\n")[0]}`);
  return [
    "Run a durable batch of independent delegated tasks and get back every item's result in one report.",
    "Use it for many similar, independent pieces of work that must not be lost if the run is interrupted; use `task` for ordinary one-off delegation.",
    `A batch holds at most ${limits.max_total} tasks; at most ${limits.max_running} run at once and the rest wait. A thread may have at most ${limits.max_live} unfinished batches.`,
    "Each finished item is saved as soon as it finishes. To resume an interrupted batch or read its results again, call batch_task with its batch_id (tasks may be left out): completed items are reused, only unfinished ones run.",
    "Available subagent types:",
    ...lines,
  ].join("\n");
}

/** The tasks argument as specs, or a refusal naming the first bad item. */
function readTasks(raw: unknown, types: ReadonlyMap<string, SubagentType>): BatchTaskSpec[] {
  if (!Array.isArray(raw)) throw new Refusal("batch_invalid_arguments", "`tasks` must be a list of {description, prompt, subagent_type}. Call batch_task again with one.");
  return raw.map((entry, index) => {
    const where = `tasks[${index}]`;
    if (!isRecord(entry)) throw new Refusal("batch_invalid_arguments", `${where} must be an object with description, prompt and subagent_type. Fix it and call batch_task again.`);
    const prompt = text(entry["prompt"]);
    if (!prompt) throw new Refusal("batch_invalid_arguments", `${where} needs a non-empty \`prompt\` telling the subagent what to do. Fix it and call batch_task again.`);
    const subagentType = text(entry["subagent_type"]);
    if (!types.has(subagentType)) {
      throw new Refusal(
        "batch_unknown_subagent_type",
        `${where} names unknown subagent type '${subagentType}'. Available: ${[...types.keys()].join(", ")}. Fix it and call batch_task again.`,
      );
    }
    return { description: text(entry["description"]) || prompt.slice(0, 60), prompt, subagent_type: subagentType };
  });
}

/**
 * The id of a batch started without one: derived from the thread and the dispatching call, so a
 * replay of the same call resumes the same batch instead of starting a second one.
 */
export function defaultBatchId(threadId: string, toolCallId: string): string {
  if (!toolCallId) return `batch-${newId().replace(/-/g, "").slice(0, 20)}`;
  return `batch-${sha256HexSync(`${threadId}\u0000${toolCallId}`).slice(0, 20)}`;
}

/** The call id an item's subagent runs under: one per attempt, so a re-run starts on a clean thread. */
export function batchItemCallId(batchId: string, index: number, attempt: number): string {
  return `${batchId}-i${index}-a${attempt}`;
}

function counts(items: readonly BatchItemRecord[]): Record<string, number> {
  const tally: Record<string, number> = {};
  for (const item of items) tally[item.status] = (tally[item.status] ?? 0) + 1;
  return tally;
}

function countsText(items: readonly BatchItemRecord[]): string {
  return Object.entries(counts(items))
    .map(([status, n]) => `${n} ${status.replace("_", " ")}`)
    .join(", ");
}

function itemText(item: BatchItemRecord, fullText: string | undefined): string {
  switch (item.status) {
    case "completed": {
      const result = fullText ?? `${item.result_brief ?? ""}\n(Only a bounded brief of this result was stored; the full text is not available.)`;
      return formatSubagentResultMessage("completed", { result, stopReason: item.stop_reason ?? undefined }).content;
    }
    case "failed":
    case "cancelled":
    case "timed_out":
      return formatSubagentResultMessage(item.status, { error: item.error ?? undefined, stopReason: item.stop_reason ?? undefined }).content;
    case "pending":
    case "running":
      return "Not finished yet. Call batch_task with this batch_id to run it.";
  }
}

async function resultMessage(
  store: BatchStore,
  owner: BatchOwner,
  snapshot: BatchSnapshot,
  ranNow: ReadonlySet<number>,
  usage: SubagentUsage,
  toolCallId: string,
): Promise<ToolMessage> {
  const { record, items } = snapshot;
  const reused = items.filter((item) => item.status === "completed" && !ranNow.has(item.index)).length;
  const lines = [
    `Batch ${record.batch_id} "${record.description}": ${items.length} items, ${countsText(items)}. Ran ${ranNow.size} now; reused ${reused} stored results.`,
    `Call batch_task with batch_id "${record.batch_id}" to read these results again; completed items are never run twice.`,
  ];
  for (const item of items) {
    const spec = record.tasks[item.index]!;
    const full = await store.readResult(owner, record.batch_id, item);
    lines.push("", `## Item ${item.index + 1} of ${items.length}: ${spec.description} (${spec.subagent_type}): ${item.status}`, itemText(item, full));
  }
  return new ToolMessage({
    content: lines.join("\n"),
    tool_call_id: toolCallId,
    name: BATCH_TASK_TOOL_NAME,
    additional_kwargs: {
      [BATCH_TASK_RESULT_KEY]: {
        batch_id: record.batch_id,
        open: isBatchOpen(snapshot),
        limits: { ...record.limits },
        counts: counts(items),
        items: items.map((item) => ({
          index: item.index,
          status: item.status,
          stop_reason: item.stop_reason,
          result_sha256: item.result_sha256,
          attempts: item.attempts,
          ran_now: ranNow.has(item.index),
        })),
      },
      // Only what this call spent: earlier calls' items were credited by the message they returned.
      [SUBAGENT_TOKEN_USAGE_KEY]: { ...usage },
    },
  });
}

/** The `batch_task` tool over the given subagent types. */
export function createBatchTaskTool(options: BatchTaskToolOptions, runner: SubagentRunner): AgentTool {
  const settings = parseBatchTaskConfig(options.config);
  const types = new Map((options.types ?? runner.defaultTypes).map((type) => [type.name, type] as const));
  const names = [...types.keys()];
  // One store per storage, so its creation and run guards cover every call of this tool.
  const stores = new WeakMap<object, BatchStore>();
  const storeFor = (runtime: AgentRuntime): BatchStore | undefined => {
    if (options.storage) return options.storage;
    const storage = runtime.services.storage;
    if (!storage) return undefined;
    let store = stores.get(storage);
    if (!store) stores.set(storage, (store = new BatchStore(storage)));
    return store;
  };

  /** The batch to run: the stored one when the id is known, else a new one within the limits. */
  async function openBatch(store: BatchStore, owner: BatchOwner, batchId: string, args: Record<string, unknown>, runtime: AgentRuntime, explicitId: boolean): Promise<BatchSnapshot> {
    const given = args["tasks"] === undefined || (Array.isArray(args["tasks"]) && args["tasks"].length === 0) ? undefined : readTasks(args["tasks"], types);
    const existing = await store.read(owner, batchId);
    if (existing) {
      if (given === undefined || canonicalHashSync(given) === existing.record.tasks_sha256) return existing;
      if (explicitId) {
        throw new Refusal(
          "batch_tasks_mismatch",
          `Batch "${batchId}" already exists with different tasks. Call batch_task with batch_id "${batchId}" and no tasks to resume it, or leave batch_id out to start a new batch.`,
        );
      }
      // A derived id that collides with an unrelated batch (a provider reusing call ids) is not the caller's mistake.
      return openBatch(store, owner, defaultBatchId(owner.threadId, ""), args, runtime, false);
    }
    if (given === undefined) {
      throw new Refusal(
        "batch_invalid_arguments",
        explicitId
          ? `No batch "${batchId}" exists in this thread. To start it, call batch_task again with this batch_id and a non-empty \`tasks\` list.`
          : "A new batch needs a non-empty `tasks` list of {description, prompt, subagent_type}. Call batch_task again with one.",
      );
    }
    if (given.length > settings.max_total) {
      throw new Refusal(
        "batch_total_limit",
        `A batch holds at most ${settings.max_total} tasks (max_total) and this one has ${given.length}. Split the work into batches of at most ${settings.max_total}, finishing one before the next.`,
      );
    }
    const open = await store.openBatches(owner);
    // An open batch created under a stricter live limit keeps it, so the limit never rises behind its back.
    const maxLive = Math.min(settings.max_live, ...open.map((batch) => batch.record.limits.max_live));
    if (open.length >= maxLive) {
      const ids = open.map((batch) => batch.record.batch_id);
      throw new Refusal(
        "batch_live_limit",
        `This thread already has ${open.length} unfinished batch${open.length === 1 ? "" : "es"} (${ids.join(", ")}), the most allowed at once (max_live=${maxLive}). ` +
          `Call batch_task with one of these batch_id values to finish it, then start the new batch.`,
      );
    }
    const limits: BatchLimits = { max_total: settings.max_total, max_live: settings.max_live, max_running: settings.max_running };
    const record: BatchRecord = {
      version: BATCH_RECORD_VERSION,
      batch_id: batchId,
      user_id: owner.userId,
      thread_id: owner.threadId,
      description: text(args["description"]) || given[0]!.description,
      created_at: new Date(runtime.services.clock.now()).toISOString(),
      created_run_id: runtime.runId,
      limits,
      tasks: given,
      tasks_sha256: canonicalHashSync(given),
    };
    return store.create(owner, record);
  }

  async function runBatch(store: BatchStore, owner: BatchOwner, snapshot: BatchSnapshot, context: ToolContext): Promise<{ snapshot: BatchSnapshot; ranNow: Set<number>; usage: SubagentUsage }> {
    const { runtime } = context;
    const toolCallId = context.toolCall.id ?? "";
    const { record } = snapshot;
    const items = [...snapshot.items];
    const ranNow = new Set<number>();
    let usage = zeroUsage();
    const clock = runtime.services.clock;
    const nowIso = (): string => new Date(clock.now()).toISOString();
    const progress = (phase: string, extra: Record<string, unknown> = {}): void =>
      emitEvent(runtime, { type: BATCH_TASK_PROGRESS_EVENT, tool_call_id: toolCallId, batch_id: record.batch_id, phase, ...extra });

    const queue = items.filter((item) => !isItemSettled(item)).map((item) => item.index);
    progress("started", { total: items.length, to_run: queue.length, limits: { ...record.limits } });

    async function runItem(index: number): Promise<void> {
      const spec = record.tasks[index]!;
      const before = items[index]!;
      const attempt = before.attempts + 1;
      const callId = batchItemCallId(record.batch_id, index, attempt);
      const running: BatchItemRecord = {
        ...before,
        status: "running",
        attempts: attempt,
        stop_reason: null,
        result_brief: null,
        result_sha256: null,
        error: null,
        started_at: nowIso(),
        finished_at: null,
        run_id: runtime.runId,
        subagent_thread_id: subagentThreadId(runtime.threadId, callId),
      };
      // Recorded before the run starts: a process that dies now leaves "running", which a resume re-runs.
      await store.writeItem(owner, record.batch_id, running);
      items[index] = running;
      ranNow.add(index);
      progress("item_started", { index, attempt, description: spec.description, subagent_type: spec.subagent_type });

      const type = types.get(spec.subagent_type);
      let outcome: Pick<SubagentRunResult, "status" | "stop_reason" | "result" | "result_brief" | "result_sha256" | "error" | "usage"> ;
      if (!type) {
        outcome = {
          status: "failed",
          stop_reason: null,
          result: undefined,
          result_brief: null,
          result_sha256: null,
          error: `Subagent type '${spec.subagent_type}' is no longer available. Available: ${names.join(", ")}.`,
          usage: zeroUsage(),
        };
      } else {
        outcome = await runner.run({
          type,
          prompt: spec.prompt,
          description: spec.description,
          parent: { runtime, runId: runtime.runId, threadId: runtime.threadId, toolCallId: callId },
          buildAgent: options.buildAgent,
        });
      }
      usage = addUsage(usage, outcome.usage);
      if (outcome.status === "completed" && outcome.result !== undefined && outcome.result_sha256 !== null) {
        // The text first: a record saying "completed" must always have its text behind it.
        await store.writeResult(owner, record.batch_id, index, outcome.result, outcome.result_sha256);
      }
      const finished: BatchItemRecord = {
        ...running,
        status: outcome.status,
        stop_reason: outcome.stop_reason,
        result_brief: outcome.result_brief,
        result_sha256: outcome.result_sha256,
        error: outcome.error !== undefined ? boundSubagentText(outcome.error) : null,
        usage: addUsage(before.usage, outcome.usage),
        finished_at: nowIso(),
      };
      await store.writeItem(owner, record.batch_id, finished);
      items[index] = finished;
      progress("item_finished", { index, attempt, status: finished.status, stop_reason: finished.stop_reason, usage: { ...outcome.usage } });
    }

    let failed = false;
    let failure: unknown;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < queue.length && !failed && !runtime.signal?.aborted) {
        const index = queue[next++]!;
        try {
          await runItem(index);
        } catch (error) {
          // The first failure stops new starts; items already running still finish and are recorded.
          if (!failed) failure = error;
          failed = true;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(record.limits.max_running, queue.length) }, worker));

    const result = { record, items };
    if (failed) {
      if (isGraphBubbleUp(failure) || runtime.signal?.aborted) throw failure;
      throw new DeerflowError(
        "batch_store_write_failed",
        `Batch "${record.batch_id}" could not record an item's progress (${errorMessage(failure)}). ` +
          `Every verdict already recorded is kept; call batch_task with batch_id "${record.batch_id}" again once storage works to run the rest.`,
        { cause: failure },
      );
    }
    progress(runtime.signal?.aborted ? "cancelled" : "finished", { counts: counts(items), usage: { ...usage } });
    return { snapshot: result, ranNow, usage };
  }

  return {
    name: BATCH_TASK_TOOL_NAME,
    description: describe(types, settings),
    schema: {
      type: "object",
      properties: {
        batch_id: {
          type: "string",
          pattern: "^[A-Za-z0-9_-]{1,64}$",
          description: "The batch to resume or read again. Leave it out to start a new batch; the result names the batch's id.",
        },
        description: { type: "string", description: "A short (3-5 word) description of the whole batch for display. Provide it first." },
        tasks: {
          type: "array",
          maxItems: settings.max_total,
          description: "The independent tasks of a new batch. Leave it out when resuming a batch by batch_id.",
          items: {
            type: "object",
            properties: subagentTaskProperties(names, "A short (3-5 word) description of this task."),
            required: ["description", "prompt", "subagent_type"],
            additionalProperties: false,
          },
        },
      },
      required: ["description"],
      additionalProperties: false,
    },
    async invoke(args: Record<string, unknown>, context: ToolContext) {
      const { runtime } = context;
      const toolCallId = context.toolCall.id ?? "";
      const store = storeFor(runtime);
      if (!store) {
        return refusal(
          "batch_storage_unavailable",
          "batch_task needs durable storage and this run has none. Delegate the items one by one with `task` instead.",
          toolCallId,
        );
      }
      let owner: BatchOwner;
      try {
        owner = { userId: resolveUserId(runtime), threadId: resolveThreadId(runtime) };
      } catch (error) {
        if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
        return refusal("batch_thread_required", `batch_task keeps batches per thread and this run has no usable thread (${errorMessage(error)}). Delegate with \`task\` instead.`, toolCallId);
      }

      const explicitId = text(args["batch_id"]);
      let claimed: BatchSnapshot;
      try {
        if (explicitId) assertBatchId(explicitId);
        claimed = await store.withThreadLock(owner, async () => {
          const snapshot = await openBatch(store, owner, explicitId || defaultBatchId(owner.threadId, toolCallId), args, runtime, explicitId !== "");
          if (!store.claim(owner, snapshot.record.batch_id)) {
            throw new Refusal(
              "batch_busy",
              `Batch "${snapshot.record.batch_id}" is already running in another batch_task call. Wait for that call's result instead of starting it twice.`,
            );
          }
          return snapshot;
        });
      } catch (error) {
        if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
        if (error instanceof Refusal) return refusal(error.code as BatchTaskErrorCode, error.message, toolCallId);
        if (error instanceof BatchStoreError) {
          return refusal(error.code === "invalid_batch_id" ? "batch_invalid_arguments" : "batch_record_malformed", error.message, toolCallId);
        }
        throw error;
      }

      try {
        const { snapshot, ranNow, usage } = await runBatch(store, owner, claimed, context);
        // The verdicts are stored; an aborted run only has to stop, not answer.
        if (runtime.signal?.aborted) throw runtime.signal.reason;
        return await resultMessage(store, owner, snapshot, ranNow, usage, toolCallId);
      } finally {
        store.release(owner, claimed.record.batch_id);
      }
    },
  };
}

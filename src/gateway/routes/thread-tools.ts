import type { BaseMessage } from "@langchain/core/messages";
import type { CheckpointTuple } from "@langchain/langgraph-checkpoint";
import type { Hono } from "hono";
import * as v from "valibot";
import { errorMessage } from "../../core/errors.ts";
import { newId } from "../../core/ids.ts";
import { NODE } from "../../engine/agent.ts";
import { stripInjectedUserMessageIdSuffix } from "../../middlewares/dynamic-context.ts";
import { isHiddenFromHistory, isListedInHistory } from "../../middlewares/messages.ts";
import { countTokensApproximately } from "../../middlewares/summarization/context.ts";
import { normalizeTokenUsage, SUBAGENT_TOKEN_USAGE_KEY } from "../../middlewares/token-usage/index.ts";
import { MessageSeqStore } from "../../runtime/message-seqs.ts";
import { RunFeedbackStore, type RunFeedback } from "../../runtime/run-feedback.ts";
import { checkpointMessages, checkpointValues, readHead } from "../../runtime/runs/checkpoints.ts";
import { isThreadVisibleTo } from "../../runtime/thread-store.ts";
import type { RunRecord } from "../../runtime/runs/types.ts";
import { serializeMessage } from "../../runtime/serialize.ts";
import { updateThreadState, writableChannels, type ThreadStateGraph } from "../../runtime/thread-state.ts";
import { CLEAR_GOAL } from "../../state/thread-state.ts";
import { authenticatedUser } from "../auth/context.ts";
import type { GatewayDeps, GatewayRunHooks } from "../deps.ts";
import { httpError, parseJsonObjectBody, parseRequest, threadNotFound } from "../errors.ts";
import { threadOwnerFor } from "../route-guard.ts";
import type { GatewayEnv, GatewayUser } from "../types.ts";

/*
 * The web UI's thread tools beyond the LangGraph API: the history page it opens every thread with
 * (messages/page, thread-global seqs), token usage, branching a thread at a turn, the thread goal,
 * and thumbs feedback on a run. Every route goes through the guard: another user's thread is a 404.
 *
 * History and usage are read from the thread's checkpoints: the head, and for the messages a
 * compaction removed, the head's ancestors. Answers a regenerate replaced are not listed.
 */

export type ThreadToolRouteDeps = Pick<GatewayDeps, "checkpointer" | "guard" | "threads" | "storage" | "versioned" | "agentFactory" | "clock" | "config">;

const PAGE_LIMIT_DEFAULT = 50;
const PAGE_LIMIT_MAX = 200;
const MAX_LINEAGE_DEPTH = 1000;
const GOAL_OBJECTIVE_MAX = 4000;
const GOAL_MAX_CONTINUATIONS = 8;
const GOAL_MAX_NO_PROGRESS = 2;
/** The channels a branch does not inherit: they bind the parent's sandbox and workspace. */
const BRANCH_EXCLUDED_CHANNELS: ReadonlySet<string> = new Set(["sandbox", "thread_data"]);
const BRANCH_METADATA_KEY = "deerflow_branch";

const wholeNumber = v.pipe(v.string(), v.check((text) => /^\d+$/.test(text.trim()), "expected a whole number"), v.transform(Number));

const PageQuerySchema = v.object({
  limit: v.optional(v.pipe(wholeNumber, v.minValue(1), v.maxValue(PAGE_LIMIT_MAX))),
  before_seq: v.optional(v.pipe(wholeNumber, v.minValue(1))),
  after_seq: v.optional(v.never("after_seq is not supported: this page goes backwards only; use before_seq")),
});

const nonBlank = (field: string) =>
  v.pipe(v.string(), v.check((value) => value.trim() !== "", `${field} must not be empty or only spaces`));

const BranchSchema = v.strictObject({
  message_id: nonBlank("message_id"),
  message_ids: v.optional(v.array(nonBlank("message_ids")), []),
  title: v.nullish(v.pipe(v.string(), v.maxLength(256))),
});

const GoalSchema = v.strictObject({
  objective: v.pipe(
    v.string(),
    v.check((value) => value.trim() !== "", "objective must not be empty or only spaces"),
    v.maxLength(GOAL_OBJECTIVE_MAX),
  ),
  max_continuations: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(GOAL_MAX_CONTINUATIONS)), GOAL_MAX_CONTINUATIONS),
});

const FeedbackSchema = v.strictObject({
  rating: v.union([v.literal(1), v.literal(-1)], "rating must be 1 (thumbs up) or -1 (thumbs down)"),
  comment: v.nullish(v.pipe(v.string(), v.maxLength(4000))),
});

type Values = Record<string, unknown>;


function hasSummary(tuple: CheckpointTuple): boolean {
  const summary = checkpointValues(tuple).summary_text;
  return typeof summary === "string" && summary !== "";
}

/** The run a message belongs to: ThreadData stamps the run on the user message that opens each turn. */
function turnRunIds(messages: readonly BaseMessage[]): (string | null)[] {
  let current: string | null = null;
  return messages.map((message) => {
    const stamped = message.additional_kwargs?.run_id;
    if (message.type === "human" && typeof stamped === "string" && stamped !== "") current = stamped;
    return current;
  });
}

function feedbackJson(row: RunFeedback): { feedback_id: string; rating: 1 | -1; comment: string | null } {
  return { feedback_id: row.feedback_id, rating: row.rating, comment: row.comment };
}

interface UsageTotals {
  input: number;
  output: number;
  total: number;
}

/** What the routes keep per thread beyond its checkpoints, for the thread's deletion. */
export interface ThreadToolRoutes {
  /** Removes a deleted thread's message seqs and run feedback. */
  forgetThread(threadId: string): Promise<void>;
}

export function registerThreadToolRoutes(api: Hono<GatewayEnv>, deps: ThreadToolRouteDeps, hooks: GatewayRunHooks | undefined): ThreadToolRoutes {
  const { checkpointer, guard, threads } = deps;
  // The deployment's compare-and-set (one shared across processes when the store has one).
  const seqs = new MessageSeqStore(deps.storage, { versioned: deps.versioned });
  const feedback = new RunFeedbackStore(deps.storage, { versioned: deps.versioned });
  const nowIso = () => new Date(deps.clock.now()).toISOString();
  const hasActiveRun = async (threadId: string) => (await hooks?.hasActiveRun?.(threadId)) ?? false;

  async function graphFor(user: GatewayUser): Promise<ThreadStateGraph> {
    const agent = await deps.agentFactory({ user });
    return agent.graph as unknown as ThreadStateGraph;
  }

  /** Holds the thread for a state write outside a run: 409 while a run holds it. */
  async function holdThread(threadId: string, action: string): Promise<() => unknown> {
    if (await hasActiveRun(threadId)) throw httpError(409, `Thread ${threadId} has a run in flight. ${action} after the run finishes.`);
    try {
      return (await hooks?.reserveThread?.(threadId)) ?? (() => undefined);
    } catch (error) {
      throw httpError(409, errorMessage(error));
    }
  }

  /**
   * The thread's conversation as the user saw it: the head's messages, plus those a compaction
   * took out of the context since (they are in the head's ancestors, before the compaction). An
   * answer a regenerate replaced is in another line of checkpoints, so it stays out. Each message
   * in its newest version, in the order it first appeared.
   */
  async function conversation(threadId: string, head: CheckpointTuple | undefined): Promise<BaseMessage[]> {
    if (!head || !hasSummary(head)) return checkpointMessages(head);
    const lists: BaseMessage[][] = [checkpointMessages(head)];
    let tuple: CheckpointTuple | undefined = head;
    for (let depth = 0; tuple && hasSummary(tuple) && depth < MAX_LINEAGE_DEPTH; depth++) {
      const parentId = tuple.parentConfig?.configurable?.checkpoint_id;
      if (typeof parentId !== "string") break;
      tuple = await checkpointer.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: String(tuple.config.configurable?.checkpoint_ns ?? ""), checkpoint_id: parentId } });
      if (tuple) lists.push(checkpointMessages(tuple));
    }
    const newest = new Map<string, BaseMessage>();
    for (const list of lists) for (const message of list) if (message.id && !newest.has(message.id)) newest.set(message.id, message);
    const seen = new Set<string>();
    const ordered: BaseMessage[] = [];
    for (const list of lists.reverse()) {
      for (const message of list) {
        if (!message.id || seen.has(message.id)) continue;
        seen.add(message.id);
        ordered.push(newest.get(message.id)!);
      }
    }
    return ordered;
  }

  // -- history page ---------------------------------------------------------------------------

  api.get("/threads/:thread_id/messages/page", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:read", threadId, { requireExisting: true });
    const query = parseRequest(PageQuerySchema, { limit: c.req.query("limit"), before_seq: c.req.query("before_seq"), after_seq: c.req.query("after_seq") }, "query");
    const limit = query.limit ?? PAGE_LIMIT_DEFAULT;
    const user = authenticatedUser(c);
    const messages = await conversation(threadId, await readHead(checkpointer, threadId));
    // Every message with an id gets its seq, hidden ones too, so a seq follows conversation order.
    // A seq belongs to a message of a run: a turn a regenerate replays (same ids) is new history.
    // A user message carries when its turn started (ThreadData's stamp); the rest are dated when first listed.
    const now = nowIso();
    const runIds = turnRunIds(messages);
    const keyOf = (message: BaseMessage, index: number) => `${runIds[index] ?? ""}\n${message.id}`;
    const known = await seqs.assign(
      threadId,
      messages.flatMap((message, index) => {
        if (!message.id) return [];
        const stamped = message.type === "human" ? message.additional_kwargs?.timestamp : undefined;
        return [{ key: keyOf(message, index), at: typeof stamped === "string" && stamped <= now ? stamped : now }];
      }),
    );
    const rows = messages.flatMap((message, index) => {
      if (!message.id || !isListedInHistory(message)) return [];
      const { seq, created_at } = known.get(keyOf(message, index))!;
      return [{ run_id: runIds[index] ?? "", seq, content: serializeMessage(message), metadata: { caller: "lead_agent" }, created_at, message }];
    });
    rows.sort((a, b) => a.seq - b.seq);
    const eligible = query.before_seq === undefined ? rows : rows.filter((row) => row.seq < query.before_seq!);
    const page = eligible.slice(Math.max(0, eligible.length - limit));
    const hasMore = eligible.length > page.length;
    // Feedback sits on the last visible AI message of each run, the caller's own only.
    const lastAiSeq = new Map<string, number>();
    for (const row of rows) if (row.message.type === "ai" && row.run_id) lastAiSeq.set(row.run_id, row.seq);
    const data = await Promise.all(
      page.map(async ({ message: _message, ...row }) => {
        const mine = row.run_id && lastAiSeq.get(row.run_id) === row.seq ? await feedback.get(threadId, row.run_id, user.id) : undefined;
        return { ...row, feedback: mine ? feedbackJson(mine) : null };
      }),
    );
    return c.json({ data, has_more: hasMore, next_before_seq: hasMore ? data[0]!.seq : null });
  });

  // -- token usage ----------------------------------------------------------------------------

  api.get("/threads/:thread_id/token-usage", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:read", threadId, { requireExisting: true });
    const head = await readHead(checkpointer, threadId);
    // Usage counts every model call of the conversation, compacted or not; context usage the head only.
    const messages = await conversation(threadId, head);
    const runIds = turnRunIds(messages);
    const records = new Map<string, RunRecord | undefined>();
    for (const runId of new Set(runIds)) if (runId) records.set(runId, await hooks?.runs?.get(threadId, runId));
    const defaultModel = deps.config.models[0]?.name ?? "unknown";
    const modelOfRun = (runId: string | null): string => {
      const named = (runId ? records.get(runId)?.kwargs.context : undefined) as { model_name?: unknown } | undefined;
      return typeof named?.model_name === "string" && named.model_name !== "" ? named.model_name : defaultModel;
    };
    const totals: UsageTotals = { input: 0, output: 0, total: 0 };
    const byModel: Record<string, { tokens: number; runs: number }> = {};
    const runsByModel = new Map<string, Set<string>>();
    const countedRuns = new Set<string>();
    let subagent = 0;
    messages.forEach((message, index) => {
      if (message.type === "tool") {
        // TokenUsage folds a subagent's usage into the AI message that dispatched it: this is that share.
        subagent += normalizeTokenUsage(message.additional_kwargs?.[SUBAGENT_TOKEN_USAGE_KEY])?.total_tokens ?? 0;
        return;
      }
      if (message.type !== "ai") return;
      const usage = normalizeTokenUsage((message as { usage_metadata?: unknown }).usage_metadata);
      if (!usage) return;
      totals.input += usage.input_tokens;
      totals.output += usage.output_tokens;
      totals.total += usage.total_tokens;
      const runId = runIds[index] ?? null;
      const model = modelOfRun(runId);
      const entry = (byModel[model] ??= { tokens: 0, runs: 0 });
      entry.tokens += usage.total_tokens;
      if (runId) {
        countedRuns.add(runId);
        const seen = runsByModel.get(model) ?? new Set<string>();
        seen.add(runId);
        runsByModel.set(model, seen);
        entry.runs = seen.size;
      }
    });
    const latestRun = [...runIds].reverse().find((id) => id !== null) ?? null;
    const contextWindow = deps.config.models.find((model) => model.name === modelOfRun(latestRun))?.context_window ?? null;
    const visible = checkpointMessages(head).filter((message) => message.type !== "remove");
    const tokenCount = visible.length === 0 ? 0 : countTokensApproximately(visible);
    return c.json({
      thread_id: threadId,
      total_tokens: totals.total,
      total_input_tokens: totals.input,
      total_output_tokens: totals.output,
      total_runs: countedRuns.size,
      by_model: byModel,
      // Model calls made by middlewares (title, summary, memory) are not kept with the thread: 0.
      by_caller: { lead_agent: Math.max(0, totals.total - subagent), subagent: Math.min(subagent, totals.total), middleware: 0 },
      context_usage: {
        token_count: tokenCount,
        max_context_tokens: contextWindow,
        percentage: contextWindow ? Math.round((tokenCount / contextWindow) * 1000) / 10 : null,
      },
    });
  });

  // -- branches -------------------------------------------------------------------------------

  /** Walks the head's lineage back; `pick` chooses the checkpoint. */
  async function findInLineage(threadId: string, head: CheckpointTuple, pick: (tuple: CheckpointTuple) => boolean): Promise<CheckpointTuple | undefined> {
    let tuple: CheckpointTuple | undefined = head;
    for (let depth = 0; tuple && depth < MAX_LINEAGE_DEPTH; depth++) {
      if (pick(tuple)) return tuple;
      const parentId = tuple.parentConfig?.configurable?.checkpoint_id;
      if (typeof parentId !== "string") return undefined;
      tuple = await checkpointer.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: String(tuple.config.configurable?.checkpoint_ns ?? ""), checkpoint_id: parentId } });
    }
    return undefined;
  }

  /** The checkpoint at the end of the turn: every target is an AI message in it and no visible message follows. */
  function endsWithTurn(messages: readonly BaseMessage[], targets: ReadonlySet<string>): boolean {
    const indexes = [...targets].map((id) => messages.findIndex((message) => message.id === id));
    if (indexes.some((index) => index < 0 || messages[index]!.type !== "ai")) return false;
    const end = Math.max(...indexes);
    return !messages.slice(end + 1).some((message) => (message.type === "human" || message.type === "ai") && !isHiddenFromHistory(message));
  }

  api.post("/threads/:thread_id/branches", async (c) => {
    const threadId = c.req.param("thread_id");
    const source = (await guard.thread(c, "threads:write", threadId, { requireExisting: true }))!;
    const body = await parseJsonObjectBody(c, BranchSchema);
    const user = authenticatedUser(c);
    const head = await readHead(checkpointer, threadId);
    if (!head) throw httpError(409, `Thread ${threadId} has no checkpoint yet: there is no turn to branch from.`);
    const targets = new Set([body.message_id, ...body.message_ids]);
    const snapshot = await findInLineage(threadId, head, (tuple) => endsWithTurn(checkpointMessages(tuple), targets));
    if (!snapshot) throw httpError(409, "This turn can no longer be branched from: no checkpoint in the thread's history ends with it.");
    const snapshotMessages = checkpointMessages(snapshot);
    const firstTarget = Math.min(...[...targets].map((id) => snapshotMessages.findIndex((message) => message.id === id)));
    const human = snapshotMessages.slice(0, firstTarget).findLast((message) => message.type === "human" && !isHiddenFromHistory(message));
    // The checkpoint before the turn's user message, written first so the inherited answer can be regenerated on the branch.
    // Holds neither the user's message nor what DynamicContext put under the id the client sent, as regenerate/prepare looks for.
    const humanIds = new Set(human?.id ? [human.id, stripInjectedUserMessageIdSuffix(human.id)!] : []);
    const base = human?.id ? await findInLineage(threadId, snapshot, (tuple) => !checkpointMessages(tuple).some((message) => message.id !== undefined && humanIds.has(message.id))) : undefined;

    const graph = await graphFor(user);
    const writable = new Set(writableChannels(graph));
    const branchValues = (tuple: CheckpointTuple): Values =>
      Object.fromEntries(Object.entries(checkpointValues(tuple)).filter(([key]) => writable.has(key) && !BRANCH_EXCLUDED_CHANNELS.has(key)));

    const now = nowIso();
    const metadata = {
      [BRANCH_METADATA_KEY]: true,
      branch_parent_thread_id: threadId,
      branch_parent_checkpoint_id: snapshot.checkpoint.id,
      branch_parent_message_id: body.message_id,
      branch_created_at: now,
      ...(typeof source.metadata.assistant_id === "string" ? { assistant_id: source.metadata.assistant_id } : {}),
    };
    const { thread } = await threads.create({ metadata, ownerId: threadOwnerFor(user) });
    const branchId = thread.thread_id;
    try {
      if (base) await updateThreadState(graph, branchId, { values: branchValues(base), asNode: NODE.afterAgent });
      await updateThreadState(graph, branchId, { values: branchValues(snapshot), asNode: NODE.afterAgent });
    } catch (error) {
      await checkpointer.deleteThread(branchId);
      await threads.delete(branchId);
      throw error;
    }
    const sourceTitle = typeof checkpointValues(head).title === "string" ? (checkpointValues(head).title as string) : source.display_name;
    let title = body.title?.trim() || sourceTitle?.trim() || null;
    if (!body.title && title && source.metadata[BRANCH_METADATA_KEY] === true) title = title.replace(/^(branch:\s*)+/i, "").trim() || null;
    if (title) {
      await updateThreadState(graph, branchId, { values: { title }, asNode: NODE.afterAgent });
      await threads.update(branchId, { display_name: title });
    }
    return c.json({
      thread_id: branchId,
      parent_thread_id: threadId,
      parent_checkpoint_id: snapshot.checkpoint.id,
      branched_from_message_id: body.message_id,
      // Workspace files (uploads, outputs) stay with the parent thread.
      workspace_clone_mode: "skipped_not_supported",
      history_seed_mode: "checkpoint",
    });
  });

  // -- goal -----------------------------------------------------------------------------------

  api.get("/threads/:thread_id/goal", async (c) => {
    const threadId = c.req.param("thread_id");
    const row = await guard.thread(c, "threads:read", threadId);
    if (!row) return c.json({ goal: null });
    const goal = checkpointValues(await readHead(checkpointer, threadId)).goal;
    return c.json({ goal: goal ?? null });
  });

  api.put("/threads/:thread_id/goal", async (c) => {
    const threadId = c.req.param("thread_id");
    const row = await guard.thread(c, "threads:write", threadId);
    const body = await parseJsonObjectBody(c, GoalSchema);
    const user = authenticatedUser(c);
    // The UI's new-chat page holds its thread id before the first run: the goal creates the thread.
    if (!row) {
      const { thread, created } = await threads.create({ threadId, ownerId: threadOwnerFor(user) });
      if (!created && !isThreadVisibleTo(thread, user.id)) throw threadNotFound(threadId);
    }
    const release = await holdThread(threadId, "Set the goal");
    try {
      const now = nowIso();
      const goal = {
        objective: body.objective.trim(),
        status: "active",
        created_at: now,
        updated_at: now,
        continuation_count: 0,
        max_continuations: body.max_continuations,
        no_progress_count: 0,
        max_no_progress_continuations: GOAL_MAX_NO_PROGRESS,
      };
      await updateThreadState(await graphFor(user), threadId, { values: { goal }, asNode: NODE.afterAgent });
      return c.json({ goal });
    } finally {
      await release();
    }
  });

  api.delete("/threads/:thread_id/goal", async (c) => {
    const threadId = c.req.param("thread_id");
    const row = await guard.thread(c, "threads:write", threadId);
    if (!row) return c.json({ goal: null });
    const release = await holdThread(threadId, "Clear the goal");
    try {
      const goal = checkpointValues(await readHead(checkpointer, threadId)).goal;
      if (goal !== null && goal !== undefined) {
        await updateThreadState(await graphFor(authenticatedUser(c)), threadId, { values: { goal: { ...CLEAR_GOAL } }, asNode: NODE.afterAgent });
      }
      return c.json({ goal: null });
    } finally {
      await release();
    }
  });

  // -- run feedback ---------------------------------------------------------------------------

  async function runOf(threadId: string, runId: string): Promise<RunRecord> {
    const run = await hooks?.runs?.get(threadId, runId);
    if (!run) throw httpError(404, `Run ${runId} not found in thread ${threadId}`);
    return run;
  }

  api.put("/threads/:thread_id/runs/:run_id/feedback", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:write", threadId, { requireExisting: true });
    const body = await parseJsonObjectBody(c, FeedbackSchema);
    const run = await runOf(threadId, c.req.param("run_id"));
    const row = await feedback.upsert({
      threadId,
      runId: run.run_id,
      userId: authenticatedUser(c).id,
      rating: body.rating,
      comment: body.comment ?? null,
      now: nowIso(),
      newId: () => newId(),
    });
    return c.json(row);
  });

  api.get("/threads/:thread_id/runs/:run_id/feedback", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:read", threadId, { requireExisting: true });
    const run = await runOf(threadId, c.req.param("run_id"));
    const row = await feedback.get(threadId, run.run_id, authenticatedUser(c).id);
    return c.json(row ? [row] : []);
  });

  api.delete("/threads/:thread_id/runs/:run_id/feedback", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:write", threadId, { requireExisting: true });
    const deleted = await feedback.delete(threadId, c.req.param("run_id"), authenticatedUser(c).id);
    if (!deleted) throw httpError(404, "No feedback found for this run");
    return c.json({ success: true });
  });

  return {
    async forgetThread(threadId: string): Promise<void> {
      await seqs.deleteThread(threadId);
      await feedback.deleteThread(threadId);
    },
  };
}

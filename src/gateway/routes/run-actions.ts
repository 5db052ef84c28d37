import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { RemoveMessage, type BaseMessage } from "@langchain/core/messages";
import { REMOVE_ALL_MESSAGES } from "@langchain/langgraph/web";
import type { Hono } from "hono";
import * as v from "valibot";
import { contentText } from "../../core/content.ts";
import { errorMessage } from "../../core/errors.ts";
import { deepFrozenCopy } from "../../core/freeze.ts";
import { newId } from "../../core/ids.ts";
import { NODE } from "../../engine/agent.ts";
import { RunScope } from "../../engine/run-scope.ts";
import type { AgentRuntime } from "../../engine/types.ts";
import { INJECTED_USER_MESSAGE_ID_SUFFIX } from "../../middlewares/dynamic-context.ts";
import { ORIGINAL_USER_CONTENT_KEY } from "../../middlewares/input-sanitization.ts";
import { HIDE_FROM_UI, isHiddenFromHistory } from "../../middlewares/messages.ts";
import { SUMMARIZATION_NAME, SummarizationError, type SummarizationMiddleware } from "../../middlewares/summarization/index.ts";
import { checkpointMessages, checkpointValues, readHead } from "../../runtime/runs/checkpoints.ts";
import type { RunManager } from "../../runtime/runs/manager.ts";
import type { RunRecord } from "../../runtime/runs/types.ts";
import { type ThreadStateGraph, updateThreadState } from "../../runtime/thread-state.ts";
import { authenticatedUser } from "../auth/context.ts";
import { httpError, parseJsonObjectBody } from "../errors.ts";
import type { AgentFactory, GatewayEnv, GatewayUser, RouteGuard } from "../types.ts";

/*
 * What the web UI's message actions and thread tools ask of a thread beyond the LangGraph API:
 * the checkpoint to branch from for regenerate and edit (the UI then starts an ordinary run from
 * it), compaction on demand through the Summarization middleware's own compact(). Every route goes through the guard (another user's thread is a 404).
 */

export interface RunActionRouteDeps {
  readonly checkpointer: BaseCheckpointSaver;
  readonly guard: RouteGuard;
  readonly agentFactory: AgentFactory;
  /** The runs part's manager, to name the run behind an answer (absent when the runs part was replaced). */
  readonly runs?: RunManager<GatewayUser>;
  readonly hasActiveRun: (threadId: string) => boolean | Promise<boolean>;
  /** Holds the thread while a compaction writes it: no run starts meanwhile. */
  readonly reserveThread: (threadId: string) => Promise<() => unknown>;
}

/** How far back the lineage is walked for the checkpoint before a turn. */
const MAX_LINEAGE_DEPTH = 1000;

const nonBlank = (field: string) =>
  v.pipe(v.string(), v.check((value) => value.trim() !== "", `${field} must not be empty or only spaces`));

const RegenerateSchema = v.strictObject({ message_id: nonBlank("message_id") });
const EditRegenerateSchema = v.strictObject({ human_message_id: nonBlank("human_message_id"), replacement_text: nonBlank("replacement_text") });
const CompactSchema = v.strictObject({
  force: v.optional(v.boolean(), true),
  agent_name: v.nullish(v.string()),
  model_name: v.nullish(v.string()),
});

type Values = Record<string, unknown>;


function kwargsOf(message: BaseMessage): Values {
  return { ...(message.additional_kwargs ?? {}) } as Values;
}

const isVisibleHuman = (message: BaseMessage) => message.type === "human" && !isHiddenFromHistory(message);
const isVisibleAi = (message: BaseMessage) => message.type === "ai" && !isHiddenFromHistory(message);

function toolCallsOf(message: BaseMessage): unknown[] {
  const calls = (message as { tool_calls?: unknown }).tool_calls;
  return Array.isArray(calls) ? calls : [];
}

/** The id the client sent: DynamicContext re-keys the first user message of a thread to `<id>__user`. */
function clientMessageId(id: string): string {
  return id.endsWith(INJECTED_USER_MESSAGE_ID_SUFFIX) ? id.slice(0, -INJECTED_USER_MESSAGE_ID_SUFFIX.length) : id;
}

/** What the user typed (an outer middleware may have framed the content). */
function userText(message: BaseMessage): string {
  const original = kwargsOf(message)[ORIGINAL_USER_CONTENT_KEY];
  return typeof original === "string" ? original : contentText(message.content);
}

/** The turn's user message as the UI's run input carries it, under the id the client first sent. */
function replayedHumanMessage(message: BaseMessage): Values {
  const { [ORIGINAL_USER_CONTENT_KEY]: _original, [HIDE_FROM_UI]: _hidden, run_id: _run, timestamp: _at, ...kwargs } = kwargsOf(message);
  return {
    type: "human",
    content: [{ type: "text", text: userText(message) }],
    additional_kwargs: kwargs,
    ...(message.id ? { id: clientMessageId(message.id) } : {}),
    ...(message.name ? { name: message.name } : {}),
  };
}

function editedHumanMessage(message: BaseMessage, id: string, text: string): Values {
  const source = kwargsOf(message);
  const kwargs: Values = {};
  for (const key of ["files", "referenced_message_contexts"]) if (key in source) kwargs[key] = structuredClone(source[key]);
  return { type: "human", id, content: [{ type: "text", text }], additional_kwargs: kwargs, ...(message.name ? { name: message.name } : {}) };
}

function checkpointResponse(tuple: CheckpointTuple): { checkpoint_ns: string; checkpoint_id: string; checkpoint_map: null } {
  return { checkpoint_ns: String(tuple.config.configurable?.checkpoint_ns ?? ""), checkpoint_id: tuple.checkpoint.id, checkpoint_map: null };
}

export function registerRunActionRoutes(api: Hono<GatewayEnv>, deps: RunActionRouteDeps): void {
  const { checkpointer, guard } = deps;

  async function headOf(threadId: string): Promise<CheckpointTuple> {
    const head = await readHead(checkpointer, threadId);
    if (!head) throw httpError(404, `Thread ${threadId} has no checkpoint yet: run it once before regenerating or editing.`);
    return head;
  }

  /**
   * The newest checkpoint in the head's lineage that does not hold the user message yet: a run
   * from it with that turn's input makes a branch in which the later answer never happened.
   */
  async function checkpointBefore(threadId: string, head: CheckpointTuple, humanId: string): Promise<CheckpointTuple> {
    const ids = new Set([humanId, clientMessageId(humanId)]);
    let tuple: CheckpointTuple | undefined = head;
    for (let depth = 0; tuple && depth < MAX_LINEAGE_DEPTH; depth++) {
      if (!checkpointMessages(tuple).some((message) => message.id !== undefined && ids.has(message.id))) return tuple;
      const parentId = tuple.parentConfig?.configurable?.checkpoint_id;
      if (typeof parentId !== "string") break;
      tuple = await checkpointer.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: String(tuple.config.configurable?.checkpoint_ns ?? ""), checkpoint_id: parentId } });
    }
    throw httpError(409, `No checkpoint before user message ${humanId} was found in the thread's history (searched ${MAX_LINEAGE_DEPTH} back).`);
  }

  /** The run that answered the turn: ThreadData stamps it on the user message; else the newest run. */
  async function runOfTurn(threadId: string, human: BaseMessage): Promise<RunRecord | { run_id: string; status?: undefined }> {
    const stamped = kwargsOf(human).run_id;
    if (typeof stamped === "string" && stamped !== "") {
      return (await deps.runs?.get(threadId, stamped)) ?? { run_id: stamped };
    }
    const [latest] = (await deps.runs?.list(threadId, { limit: 1 })) ?? [];
    if (latest) return latest;
    throw httpError(409, "Could not find the run that answered this message.");
  }

  api.post("/threads/:thread_id/runs/regenerate/prepare", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "runs:create", threadId, { requireExisting: true });
    const body = await parseJsonObjectBody(c, RegenerateSchema);
    const head = await headOf(threadId);
    const messages = checkpointMessages(head);
    const index = messages.findIndex((message) => message.id === body.message_id);
    let human: BaseMessage | undefined;
    if (index < 0) {
      // An answer cut off mid-stream never reached a checkpoint: its interrupted run is the target.
      human = messages.findLast(isVisibleHuman);
      const run = human ? await runOfTurn(threadId, human).catch(() => undefined) : undefined;
      if (!human || !run || (run.status !== "interrupted" && run.status !== "error")) throw httpError(404, `Message ${body.message_id} not found in thread ${threadId}.`);
    } else {
      const target = messages[index]!;
      if (!isVisibleAi(target)) throw httpError(409, "Only visible assistant messages can be regenerated.");
      if (messages.findLast(isVisibleAi)?.id !== body.message_id) throw httpError(409, "Only the latest assistant message can be regenerated.");
      human = messages.slice(0, index).findLast(isVisibleHuman);
    }
    if (!human) throw httpError(409, "Could not find the user message this assistant message answers.");
    if (!human.id) throw httpError(409, "The user message of this turn has no id, so its turn cannot be replayed.");
    const run = await runOfTurn(threadId, human);
    const base = await checkpointBefore(threadId, head, human.id);
    const checkpoint = checkpointResponse(base);
    const input: Values = { messages: [replayedHumanMessage(human)] };
    // The base may predate a rename: the current title is replayed rather than rolled back.
    const title = checkpointValues(head).title;
    if (typeof title === "string" && title !== "") input.title = title;
    return c.json({
      input,
      checkpoint,
      metadata: { regenerate_from_message_id: body.message_id, regenerate_from_run_id: run.run_id, regenerate_checkpoint_id: checkpoint.checkpoint_id },
      target_run_id: run.run_id,
    });
  });

  api.post("/threads/:thread_id/runs/edit-regenerate/prepare", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "runs:create", threadId, { requireExisting: true });
    const body = await parseJsonObjectBody(c, EditRegenerateSchema);
    const text = body.replacement_text.trim();
    const head = await headOf(threadId);
    const goal = checkpointValues(head).goal as { status?: unknown } | null | undefined;
    if (goal && goal.status === "active") throw httpError(409, "Cannot edit while a goal is active: clear or finish the goal first.");
    const messages = checkpointMessages(head);
    const humanIndex = messages.findLastIndex(isVisibleHuman);
    if (humanIndex < 0 || messages[humanIndex]!.id !== body.human_message_id) {
      throw httpError(409, "Only the latest completed user turn can be edited.");
    }
    const human = messages[humanIndex]!;
    const aiIndex = messages.findLastIndex((message, i) => i > humanIndex && isVisibleAi(message));
    const ai = aiIndex < 0 ? undefined : messages[aiIndex]!;
    if (!ai || contentText(ai.content).trim() === "" || toolCallsOf(ai).length > 0) {
      throw httpError(409, "Only a turn the assistant finished with a text answer can be edited.");
    }
    if (text === userText(human).trim()) throw httpError(409, "The edited message is unchanged: change the text, or regenerate instead.");
    if (!ai.id) throw httpError(409, "The assistant message of this turn has no id, so its turn cannot be replayed.");
    const run = await runOfTurn(threadId, human);
    if (run.status !== undefined && run.status !== "success") throw httpError(409, "Only turns whose run succeeded can be edited and rerun.");
    const base = await checkpointBefore(threadId, head, human.id!);
    const checkpoint = checkpointResponse(base);
    const replacementId = newId();
    const sourceMessageIds = messages.slice(humanIndex, aiIndex + 1).flatMap((message) => (message.id ? [message.id] : []));
    const groupId = (run as Partial<RunRecord>).metadata?.edit_version_group_id;
    const input: Values = { messages: [editedHumanMessage(human, replacementId, text)] };
    // An untitled base belongs to a thread not named yet: its title comes from the edited prompt.
    const title = checkpointValues(head).title;
    const baseTitle = checkpointValues(base).title;
    if (typeof baseTitle === "string" && baseTitle !== "" && typeof title === "string" && title !== "") input.title = title;
    return c.json({
      input,
      checkpoint,
      metadata: {
        replay_kind: "edit",
        regenerate_from_message_id: ai.id,
        regenerate_from_run_id: run.run_id,
        regenerate_checkpoint_id: checkpoint.checkpoint_id,
        edit_from_message_id: human.id,
        edit_message_id: replacementId,
        edit_version_group_id: typeof groupId === "string" && groupId !== "" ? groupId : human.id,
      },
      target_run_id: run.run_id,
      replacement_human_message_id: replacementId,
      source_message_ids: sourceMessageIds,
    });
  });

  api.post("/threads/:thread_id/compact", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:write", threadId, { requireExisting: true });
    const body = await parseJsonObjectBody(c, CompactSchema);
    const user = authenticatedUser(c);
    const agent = await deps.agentFactory({ user, ...(body.model_name ? { modelName: body.model_name } : {}) });
    const summarization = agent.middlewares.find((mw) => mw.name === SUMMARIZATION_NAME) as SummarizationMiddleware | undefined;
    // A bare graph (no engine services) has no summarization middleware to compact with either.
    if (!summarization || typeof summarization.compact !== "function" || agent.services === undefined) {
      throw httpError(409, "Context compaction is disabled: set summarization.enabled: true in config.yaml to compact threads.");
    }
    if (await deps.hasActiveRun(threadId)) throw httpError(409, `Thread ${threadId} has a run in flight. Compact after the run finishes.`);
    let release: () => unknown;
    try {
      release = await deps.reserveThread(threadId);
    } catch (error) {
      throw httpError(409, errorMessage(error));
    }
    try {
      const head = await readHead(checkpointer, threadId);
      const values = checkpointValues(head);
      const messages = checkpointMessages(head);
      const notCompacted = (reason: string) =>
        c.json({ thread_id: threadId, compacted: false, reason, removed_message_count: 0, preserved_message_count: messages.length, summary_updated: false, checkpoint_id: head?.checkpoint.id ?? null, total_tokens: 0 });
      if (!head || messages.length === 0) return notCompacted("not_enough_messages");
      const runtime: AgentRuntime = {
        context: deepFrozenCopy({ thread_id: threadId, user_id: user.id, ...(body.agent_name ? { agent_name: body.agent_name } : {}) }),
        scope: new RunScope(newId("compact")),
        threadId,
        runId: newId("compact"),
        signal: c.req.raw.signal,
        writer: () => undefined,
        services: agent.services,
      };
      let result;
      try {
        result = await summarization.compact(
          { ...values, messages, summary_text: typeof values.summary_text === "string" ? values.summary_text : null } as never,
          runtime,
          { force: body.force, raiseOnFailure: true },
        );
      } catch (error) {
        if (error instanceof SummarizationError) throw httpError(500, `Failed to compact thread context: ${error.message}`);
        throw error;
      }
      if (result === null) return notCompacted("not_enough_messages");
      // The same write the middleware's beforeModel makes, as the graph's last node, so the thread
      // has nothing left to run: every channel but these two carries over from the head.
      const { checkpoint } = await updateThreadState(agent.graph as unknown as ThreadStateGraph, threadId, {
        values: { messages: [new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), ...result.preservedMessages], summary_text: result.summaryText },
        asNode: NODE.afterAgent,
      });
      return c.json({
        thread_id: threadId,
        compacted: true,
        reason: null,
        removed_message_count: result.messagesToSummarize.length,
        preserved_message_count: result.preservedMessages.length,
        summary_updated: true,
        checkpoint_id: checkpoint.checkpoint_id,
        total_tokens: result.totalTokens,
      });
    } finally {
      await release();
    }
  });
}

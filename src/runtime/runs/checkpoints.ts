import { coerceMessageLikeToMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import {
  INTERRUPT,
  copyCheckpoint,
  emptyCheckpoint,
  uuid6,
  type BaseCheckpointSaver,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
} from "@langchain/langgraph-checkpoint";
import { localTitleFor } from "../../middlewares/title.ts";
import { serializeValue, serializeValues } from "../serialize.ts";

/*
 * What the run lifecycle writes into a thread's checkpoints besides the agent's own steps: the
 * rollback restore and the fallback title. Both go through BaseCheckpointSaver's public methods
 * only (getTuple, put, putWrites), so they work on any saver. A write is a new checkpoint, never an
 * edit of an old one, which keeps every earlier checkpoint (and so history) intact.
 */

function headConfig(threadId: string) {
  return { configurable: { thread_id: threadId, checkpoint_ns: "" } };
}

export async function readHead(checkpointer: BaseCheckpointSaver, threadId: string): Promise<CheckpointTuple | undefined> {
  return checkpointer.getTuple(headConfig(threadId));
}

/** A checkpoint's raw channel values (none for a missing checkpoint). */
export function checkpointValues(tuple: CheckpointTuple | undefined): Record<string, unknown> {
  return (tuple?.checkpoint.channel_values ?? {}) as Record<string, unknown>;
}

/** The messages channel of a checkpoint, as stored (an empty list when there is none). */
export function checkpointMessages(tuple: CheckpointTuple | undefined): BaseMessage[] {
  const messages = checkpointValues(tuple).messages;
  return Array.isArray(messages) ? (messages as BaseMessage[]) : [];
}

/** A thread's visible values at its head, with pending interrupts as `__interrupt__`. */
export async function readThreadValues(checkpointer: BaseCheckpointSaver, threadId: string): Promise<Record<string, unknown> | undefined> {
  const head = await readHead(checkpointer, threadId);
  if (!head) return undefined;
  const values = serializeValues(stateChannels(head.checkpoint.channel_values));
  const interrupts = (head.pendingWrites ?? []).filter(([, channel]) => channel === INTERRUPT).flatMap(([, , value]) => (Array.isArray(value) ? value : [value]));
  if (interrupts.length > 0) values.__interrupt__ = serializeValue(interrupts);
  return values;
}

/**
 * Writes `checkpoint` as the thread's new head, child of `parentId`, with the source's pending
 * writes carried over so a restored pause keeps its interrupt.
 */
async function writeHead(
  checkpointer: BaseCheckpointSaver,
  threadId: string,
  source: { checkpoint: CheckpointTuple["checkpoint"]; metadata?: CheckpointMetadata; pendingWrites?: CheckpointTuple["pendingWrites"]; ns: string },
  parentId: string | undefined,
  changes: { values?: Record<string, unknown>; writes: Record<string, unknown> },
): Promise<void> {
  const checkpoint = copyCheckpoint(source.checkpoint);
  checkpoint.id = uuid6(-3);
  checkpoint.ts = new Date().toISOString();
  const newVersions: Record<string, string | number> = { ...checkpoint.channel_versions };
  for (const [channel, value] of Object.entries(changes.values ?? {})) {
    checkpoint.channel_values[channel] = value;
    const version = checkpointer.getNextVersion(checkpoint.channel_versions[channel] as number | undefined);
    checkpoint.channel_versions[channel] = version;
    newVersions[channel] = version;
  }
  const step = typeof source.metadata?.step === "number" ? source.metadata.step + 1 : 0;
  const metadata = { source: "update", step, parents: {}, writes: changes.writes } as unknown as CheckpointMetadata;
  const config = { configurable: { thread_id: threadId, checkpoint_ns: source.ns, ...(parentId ? { checkpoint_id: parentId } : {}) } };
  const saved = await checkpointer.put(config, checkpoint, metadata, newVersions);
  const byTask = new Map<string, PendingWrite[]>();
  for (const [taskId, channel, value] of source.pendingWrites ?? []) {
    const list = byTask.get(taskId) ?? [];
    list.push([channel, value]);
    byTask.set(taskId, list);
  }
  for (const [taskId, writes] of byTask) await checkpointer.putWrites(saved, writes, taskId);
}

/**
 * Puts the thread back to `preRun`: a new head with the pre-run checkpoint's values, versions and
 * pending writes, forked from the pre-run checkpoint (the cancelled run's checkpoints stay in
 * history as an abandoned branch). No pre-run checkpoint means the thread had none: delete them.
 */
export async function restorePreRunCheckpoint(checkpointer: BaseCheckpointSaver, threadId: string, preRun: CheckpointTuple | undefined): Promise<void> {
  if (!preRun) {
    await checkpointer.deleteThread(threadId);
    return;
  }
  const ns = String(preRun.config.configurable?.checkpoint_ns ?? "");
  await writeHead(
    checkpointer,
    threadId,
    { checkpoint: preRun.checkpoint, metadata: preRun.metadata, pendingWrites: preRun.pendingWrites, ns },
    preRun.checkpoint.id,
    { writes: { rollback_restore: { restored_checkpoint_id: preRun.checkpoint.id } } },
  );
}

/**
 * The local title of an interrupted first turn, written when the head has none (upstream DeerFlow
 * does the same). The run's input counts as the first message: a run cancelled before its
 * input was checkpointed still names the thread after what the user asked.
 */
export async function writeFallbackTitle(checkpointer: BaseCheckpointSaver, threadId: string, input: unknown): Promise<string | null> {
  const head = await readHead(checkpointer, threadId);
  const values = (head?.checkpoint.channel_values ?? {}) as Record<string, unknown>;
  if (typeof values.title === "string" && values.title !== "") return values.title;
  let messages = Array.isArray(values.messages) ? (values.messages as BaseMessage[]) : [];
  if (!messages.some((m) => HumanMessage.isInstance(m))) messages = [...inputMessages(input), ...messages];
  const title = localTitleFor({ messages, title: null });
  if (!title) return null;
  const source = head
    ? { checkpoint: head.checkpoint, metadata: head.metadata, pendingWrites: head.pendingWrites, ns: String(head.config.configurable?.checkpoint_ns ?? "") }
    : { checkpoint: emptyCheckpoint(), ns: "" };
  await writeHead(checkpointer, threadId, source, head?.checkpoint.id, { values: { title }, writes: { fallback_title: { title } } });
  return title;
}

/** A checkpoint's state channels, without Pregel's own (`__start__`, `branch:to:...`). */
function stateChannels(channelValues: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(channelValues).filter(([name]) => !name.startsWith("__") && !name.includes(":")));
}

/** The title stored at the thread's head, if any. */
export function titleOf(head: CheckpointTuple | undefined): string | null {
  return titleIn(checkpointValues(head));
}

/** The title in a thread's values (a checkpoint's channels, or the state the engine read), if any. */
export function titleIn(values: Readonly<Record<string, unknown>>): string | null {
  const title = values.title;
  return typeof title === "string" && title !== "" ? title : null;
}

function inputMessages(input: unknown): BaseMessage[] {
  const raw = (input as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(raw)) return [];
  const out: BaseMessage[] = [];
  for (const item of raw) {
    try {
      out.push(coerceMessageLikeToMessage(item as never));
    } catch {
      // Validation already refused malformed input messages; nothing to title from here.
    }
  }
  return out;
}

import type { RunnableConfig } from "@langchain/core/runnables";
import type { CheckpointListOptions } from "@langchain/langgraph-checkpoint";
import type { StateSnapshot } from "@langchain/langgraph/web";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { isEngineChannel, serializeValue, serializeValues } from "./serialize.ts";
import { isRecord } from "../core/guards.ts";

/*
 * Thread state as the LangGraph Platform API shows it, read and written through a compiled graph
 * and its checkpointer: the graph knows the channels and reducers, so an update folds exactly as a
 * run's own write would.
 */

/** The LangGraph thread statuses (the same union as the gateway's ThreadStatus). */
export type ThreadStatus = "idle" | "busy" | "interrupted" | "error";

/** What this module needs of a compiled graph (Agent.graph is one). */
export interface ThreadStateGraph {
  getState(config: RunnableConfig, options?: { subgraphs?: boolean }): Promise<StateSnapshot>;
  getStateHistory(config: RunnableConfig, options?: CheckpointListOptions): AsyncIterableIterator<StateSnapshot>;
  updateState(config: RunnableConfig, values: unknown, asNode?: string): Promise<RunnableConfig>;
  readonly nodes: Readonly<Record<string, unknown>>;
  readonly channels: Readonly<Record<string, unknown>>;
}

export interface CheckpointJson {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string | null;
  checkpoint_map: Record<string, unknown> | null;
}

export interface InterruptJson {
  id?: string;
  value?: unknown;
  [key: string]: unknown;
}

export interface ThreadTaskJson {
  id: string;
  name: string;
  path: unknown[] | null;
  error: string | null;
  interrupts: InterruptJson[];
  checkpoint: CheckpointJson | null;
  state: ThreadStateJson | null;
  result?: unknown;
}

/** The SDK's `ThreadState`, plus `interrupts`: every pending interrupt of the checkpoint. */
export interface ThreadStateJson {
  values: Record<string, unknown>;
  next: string[];
  tasks: ThreadTaskJson[];
  checkpoint: CheckpointJson;
  parent_checkpoint: CheckpointJson | null;
  metadata: Record<string, unknown>;
  created_at: string | null;
  interrupts: InterruptJson[];
}

export type ThreadStateErrorCode = "checkpoint_not_found" | "unknown_state_field" | "unknown_node" | "invalid_state_update";

export class ThreadStateError extends DeerflowError {
  declare readonly code: ThreadStateErrorCode;
  constructor(code: ThreadStateErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = "ThreadStateError";
  }
}

function checkpointOf(config: RunnableConfig | undefined, threadId: string): CheckpointJson | null {
  const configurable = config?.configurable;
  if (!isRecord(configurable)) return null;
  const checkpointId = configurable.checkpoint_id;
  const map = configurable.checkpoint_map;
  return {
    thread_id: typeof configurable.thread_id === "string" ? configurable.thread_id : threadId,
    checkpoint_ns: typeof configurable.checkpoint_ns === "string" ? configurable.checkpoint_ns : "",
    checkpoint_id: typeof checkpointId === "string" && checkpointId !== "" ? checkpointId : null,
    checkpoint_map: isRecord(map) ? (serializeValue(map) as Record<string, unknown>) : null,
  };
}

function isSnapshot(value: unknown): value is StateSnapshot {
  return isRecord(value) && "values" in value && "next" in value && "tasks" in value;
}

function interruptsOf(task: StateSnapshot["tasks"][number]): InterruptJson[] {
  return (task.interrupts ?? []).map((item) => {
    const serialized = serializeValue(item);
    return isRecord(serialized) ? serialized : { value: serialized };
  });
}

function taskError(error: unknown): string | null {
  if (error === undefined || error === null) return null;
  return errorMessage(error);
}

/** A LangGraph snapshot as the API's ThreadState; `__interrupt__` lives in tasks, never in values. */
export function snapshotToThreadState(snapshot: StateSnapshot, threadId: string): ThreadStateJson {
  const { __interrupt__: _pending, ...values } = isRecord(snapshot.values) ? snapshot.values : {};
  const tasks: ThreadTaskJson[] = (snapshot.tasks ?? []).map((task) => {
    const nested = task.state;
    return {
      id: task.id,
      name: task.name,
      path: Array.isArray(task.path) ? (serializeValue(task.path) as unknown[]) : null,
      error: taskError(task.error),
      interrupts: interruptsOf(task),
      checkpoint: nested !== undefined && !isSnapshot(nested) ? checkpointOf(nested, threadId) : null,
      state: nested !== undefined && isSnapshot(nested) ? snapshotToThreadState(nested, threadId) : null,
      ...(task.result === undefined ? {} : { result: serializeValue(task.result) }),
    };
  });
  const checkpoint = checkpointOf(snapshot.config, threadId) ?? {
    thread_id: threadId,
    checkpoint_ns: "",
    checkpoint_id: null,
    checkpoint_map: null,
  };
  return {
    values: serializeValues(values),
    next: [...(snapshot.next ?? [])],
    tasks,
    checkpoint,
    parent_checkpoint: checkpointOf(snapshot.parentConfig, threadId),
    metadata: isRecord(snapshot.metadata) ? (serializeValue(snapshot.metadata) as Record<string, unknown>) : {},
    created_at: snapshot.createdAt ?? null,
    interrupts: tasks.flatMap((task) => task.interrupts),
  };
}

/** True when the snapshot was read from a stored checkpoint (a thread that has never run has none). */
export function hasCheckpoint(snapshot: StateSnapshot): boolean {
  const id = snapshot.config?.configurable?.checkpoint_id;
  return typeof id === "string" && id !== "";
}

/** Pending interrupts keyed by task id: the `interrupts` field of the API's Thread. */
export function threadInterrupts(snapshot: StateSnapshot): Record<string, InterruptJson[]> {
  const out: Record<string, InterruptJson[]> = {};
  for (const task of snapshot.tasks ?? []) {
    const interrupts = interruptsOf(task);
    if (interrupts.length > 0) out[task.id] = interrupts;
  }
  return out;
}

/**
 * A thread's status: `busy` while a run holds it (only the run manager knows, so the stored
 * status wins), else `interrupted` when the checkpoint waits on an interrupt, `error` when a
 * task failed or the last run ended in error, `idle` otherwise.
 */
export function deriveThreadStatus(snapshot: StateSnapshot | undefined, stored: ThreadStatus): ThreadStatus {
  if (stored === "busy") return "busy";
  const tasks = snapshot?.tasks ?? [];
  if (tasks.some((task) => (task.interrupts ?? []).length > 0)) return "interrupted";
  if (tasks.some((task) => task.error !== undefined && task.error !== null)) return "error";
  return stored === "error" ? "error" : "idle";
}

function configFor(threadId: string, checkpoint?: { checkpointId?: string; checkpointNs?: string }): RunnableConfig {
  return {
    configurable: {
      thread_id: threadId,
      checkpoint_ns: checkpoint?.checkpointNs ?? "",
      ...(checkpoint?.checkpointId ? { checkpoint_id: checkpoint.checkpointId } : {}),
    },
  };
}

export interface ReadStateOptions {
  readonly checkpointId?: string;
  readonly checkpointNs?: string;
  readonly subgraphs?: boolean;
}

/**
 * The thread's latest state, or the state at one checkpoint. A thread without checkpoints reads
 * as an empty state; a checkpoint id that does not exist is `checkpoint_not_found`.
 */
export async function readThreadState(
  graph: ThreadStateGraph,
  threadId: string,
  options: ReadStateOptions = {},
): Promise<{ state: ThreadStateJson; snapshot: StateSnapshot }> {
  const snapshot = await graph.getState(configFor(threadId, options), { subgraphs: options.subgraphs === true });
  // LangGraph answers an unknown checkpoint id with an empty snapshot that merely echoes the id.
  if (options.checkpointId && snapshot.createdAt === undefined) throw checkpointNotFound(threadId, options.checkpointId);
  return { state: snapshotToThreadState(snapshot, threadId), snapshot };
}

function checkpointNotFound(threadId: string, checkpointId: string): ThreadStateError {
  return new ThreadStateError(
    "checkpoint_not_found",
    `Checkpoint ${checkpointId} not found in thread ${threadId}; list the thread's checkpoints with POST /threads/${threadId}/history.`,
  );
}

export interface HistoryOptions {
  /** 1 to 100; the caller validates. */
  readonly limit: number;
  /** Only checkpoints older than this one. */
  readonly before?: string;
  /** Start listing at this checkpoint (inclusive). */
  readonly checkpointId?: string;
  readonly checkpointNs?: string;
  /** Only checkpoints whose metadata has these exact values. */
  readonly metadata?: Record<string, unknown>;
}

/** Checkpoints newest first, each as a full ThreadState. */
export async function readThreadHistory(graph: ThreadStateGraph, threadId: string, options: HistoryOptions): Promise<ThreadStateJson[]> {
  const listOptions: CheckpointListOptions = {
    limit: options.limit,
    ...(options.before ? { before: { configurable: { checkpoint_id: options.before } } } : {}),
    ...(options.metadata && Object.keys(options.metadata).length > 0 ? { filter: options.metadata } : {}),
  };
  const out: ThreadStateJson[] = [];
  for await (const snapshot of graph.getStateHistory(
    configFor(threadId, { checkpointId: options.checkpointId, checkpointNs: options.checkpointNs }),
    listOptions,
  )) {
    out.push(snapshotToThreadState(snapshot, threadId));
    if (out.length >= options.limit) break;
  }
  return out;
}

/** The channels a caller may write: the graph's own state keys, never LangGraph's or the engine's. */
export function writableChannels(graph: ThreadStateGraph): string[] {
  return Object.keys(graph.channels).filter((name) => !name.startsWith("__") && !name.includes(":") && !isEngineChannel(name));
}

export interface UpdateStateOptions {
  readonly values: Record<string, unknown> | null;
  readonly asNode?: string;
  /** Fork from this checkpoint instead of the latest. */
  readonly checkpointId?: string;
  readonly checkpointNs?: string;
}

/**
 * Writes `values` as if node `asNode` had returned them (each channel's reducer folds them in) and
 * returns the new checkpoint. An unknown field or node is refused before anything is written.
 */
export async function updateThreadState(
  graph: ThreadStateGraph,
  threadId: string,
  options: UpdateStateOptions,
): Promise<{ checkpoint: CheckpointJson }> {
  const values = options.values ?? {};
  const writable = writableChannels(graph);
  const unknown = Object.keys(values).filter((key) => !writable.includes(key));
  if (unknown.length > 0) {
    throw new ThreadStateError(
      "unknown_state_field",
      `Unknown thread-state field(s): ${unknown.join(", ")}. Writable fields: ${writable.join(", ")}.`,
    );
  }
  if (options.asNode !== undefined) {
    const nodes = Object.keys(graph.nodes).filter((name) => !name.startsWith("__"));
    if (!nodes.includes(options.asNode)) {
      throw new ThreadStateError("unknown_node", `as_node ${JSON.stringify(options.asNode)} is not a node of this graph; use one of: ${nodes.join(", ")}.`);
    }
  }
  if (options.checkpointId) {
    // Throws checkpoint_not_found: LangGraph would otherwise fork from an empty state.
    await readThreadState(graph, threadId, { checkpointId: options.checkpointId, checkpointNs: options.checkpointNs });
  }
  let config: RunnableConfig;
  try {
    config = await graph.updateState(
      configFor(threadId, { checkpointId: options.checkpointId, checkpointNs: options.checkpointNs }),
      options.values,
      options.asNode,
    );
  } catch (error) {
    if (error instanceof Error && error.name === "InvalidUpdateError") {
      throw new ThreadStateError("invalid_state_update", `${error.message}. Pass as_node to say which node the update comes from.`, { cause: error });
    }
    throw error;
  }
  const checkpoint = checkpointOf(config, threadId);
  if (!checkpoint?.checkpoint_id) {
    throw new DeerflowError("state_update_failed", `The update to thread ${threadId} returned no checkpoint; see the gateway log.`);
  }
  return { checkpoint };
}

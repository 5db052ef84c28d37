import { authenticatedUser } from "../auth/context.ts";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { StateSnapshot } from "@langchain/langgraph/web";
import type { Context, Hono } from "hono";
import * as v from "valibot";
import { errorMessage } from "../../core/errors.ts";
import { assertThreadId, isThreadVisibleTo, SEARCH_LIMIT_MAX, THREAD_STATUSES } from "../../runtime/thread-store.ts";
import {
  deriveThreadStatus,
  hasCheckpoint,
  readThreadHistory,
  readThreadState,
  threadInterrupts,
  updateThreadState,
  type ThreadStateGraph,
  type ThreadStateJson,
} from "../../runtime/thread-state.ts";
import { httpError, jsonObject, JsonObjectSchema, parseJsonObjectBody, parseRequest, threadNotFound, type GatewayLogger } from "../errors.ts";
import { threadOwnerFilter, threadOwnerFor } from "../route-guard.ts";
import { serverOwnedChannelsIn, serverOwnedChannelsMessage, stripServerOwnedMessage, stripServerOwnedMessages } from "../server-owned.ts";
import type { AgentFactory, GatewayEnv, GatewayUser, RouteGuard, ThreadRecord, ThreadStatus, ThreadStore } from "../types.ts";

export interface ThreadRouteDeps {
  readonly threads: ThreadStore;
  readonly guard: RouteGuard;
  readonly checkpointer: BaseCheckpointSaver;
  readonly agentFactory: AgentFactory;
  /** True while a run holds the thread: deleting it or writing its state then is a 409. */
  readonly hasActiveRun: (threadId: string) => boolean | Promise<boolean>;
  /** Holds the thread while it is deleted (409 while a run holds it); default: the active-run check only. */
  readonly reserveThread?: (threadId: string) => Promise<() => void>;
  /** Best-effort cleanup of what else a thread owns (uploads, outputs, a sandbox) after its delete. */
  readonly onThreadDeleted?: (thread: ThreadRecord) => Promise<void>;
  readonly logger: GatewayLogger;
}

/** The LangGraph Thread JSON. */
export interface ThreadJson {
  thread_id: string;
  created_at: string;
  updated_at: string;
  state_updated_at: string;
  metadata: Record<string, unknown>;
  status: ThreadStatus;
  values: Record<string, unknown>;
  interrupts: Record<string, unknown[]>;
}

/** Metadata keys only the server writes: a thread's owner is the row's, never the caller's say. */
const RESERVED_METADATA_KEYS: ReadonlySet<string> = new Set(["owner_id", "user_id"]);

function callerMetadata(metadata: Record<string, unknown> | null | undefined): Record<string, unknown> {
  return Object.fromEntries(Object.entries(metadata ?? {}).filter(([key]) => !RESERVED_METADATA_KEYS.has(key)));
}

export function threadJson(record: ThreadRecord, extra?: Partial<Pick<ThreadJson, "status" | "values" | "interrupts">>): ThreadJson {
  return {
    thread_id: record.thread_id,
    created_at: record.created_at,
    updated_at: record.updated_at,
    state_updated_at: record.updated_at,
    metadata: { ...record.metadata },
    status: extra?.status ?? record.status,
    values: extra?.values ?? (record.display_name ? { title: record.display_name } : {}),
    interrupts: extra?.interrupts ?? {},
  };
}

// -- request schemas --------------------------------------------------------------------------

const JsonObject = JsonObjectSchema;
const NullishObject = v.nullish(JsonObject);
const Select = v.nullish(v.array(v.string()));
const nonNegativeInteger = v.pipe(v.number(), v.integer(), v.minValue(0));

const ThreadCreateSchema = v.strictObject({
  thread_id: v.nullish(v.string()),
  metadata: NullishObject,
  if_exists: v.nullish(v.picklist(["raise", "do_nothing"])),
  assistant_id: v.nullish(v.string()),
  // The SDK's optional extras: refused when used, so nobody believes they took effect.
  supersteps: v.nullish(v.pipe(v.array(v.unknown()), v.maxLength(0, "supersteps are not supported: create the thread, then POST its /state"))),
  ttl: v.nullish(v.never("thread TTLs are not supported; delete threads with DELETE /threads/{thread_id}")),
});

const ThreadSearchSchema = v.strictObject({
  metadata: NullishObject,
  ids: v.nullish(v.array(v.string())),
  limit: v.nullish(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(SEARCH_LIMIT_MAX))),
  offset: v.nullish(nonNegativeInteger),
  status: v.nullish(v.picklist(THREAD_STATUSES)),
  sort_by: v.nullish(v.picklist(["thread_id", "status", "created_at", "updated_at"])),
  sort_order: v.nullish(v.picklist(["asc", "desc"])),
  select: Select,
  values: v.nullish(v.pipe(JsonObject, v.check((o) => Object.keys(o).length === 0, "filtering by state values is not supported; filter by metadata"))),
  extract: v.nullish(v.pipe(JsonObject, v.check((o) => Object.keys(o).length === 0, "extract is not supported; read the thread's state instead"))),
});

const ThreadPatchSchema = v.strictObject({
  metadata: NullishObject,
  ttl: v.nullish(v.never("thread TTLs are not supported")),
});

const CheckpointRefSchema = jsonObject(v.looseObject({
  thread_id: v.nullish(v.string()),
  checkpoint_id: v.nullish(v.string()),
  checkpoint_ns: v.nullish(v.string()),
  checkpoint_map: v.nullish(JsonObject),
}));

const StateUpdateSchema = v.strictObject({
  values: v.nullish(JsonObject),
  as_node: v.nullish(v.pipe(v.string(), v.minLength(1))),
  checkpoint_id: v.nullish(v.pipe(v.string(), v.minLength(1))),
  checkpoint: v.nullish(CheckpointRefSchema),
});

const StateAtCheckpointSchema = v.strictObject({
  checkpoint: CheckpointRefSchema,
  subgraphs: v.nullish(v.boolean()),
  select: Select,
});

const HistorySchema = v.strictObject({
  limit: v.nullish(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100))),
  // A checkpoint id, the SDK's Config `{configurable: {checkpoint_id}}`, or a Checkpoint.
  before: v.nullish(
    v.union([
      v.string(),
      v.looseObject({ configurable: v.looseObject({ checkpoint_id: v.nullish(v.string()) }) }),
      CheckpointRefSchema,
    ]),
  ),
  metadata: NullishObject,
  checkpoint: v.nullish(CheckpointRefSchema),
  select: Select,
});

const HistoryQuerySchema = v.object({
  limit: v.optional(v.pipe(v.string(), v.toNumber(), v.integer(), v.minValue(1), v.maxValue(100))),
  before: v.optional(v.string()),
});

// -- helpers ----------------------------------------------------------------------------------

/** Keeps only the fields a caller selected (`values.<key>` picks one channel). */
export function project<T extends object>(item: T, select: readonly string[] | null | undefined): Partial<T> | T {
  if (!select || select.length === 0) return item;
  const source = item as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const field of select) {
    if (field.startsWith("values.") && typeof source.values === "object" && source.values !== null) {
      const key = field.slice("values.".length);
      const values = (out.values ??= {}) as Record<string, unknown>;
      if (Object.hasOwn(source.values, key)) values[key] = (source.values as Record<string, unknown>)[key];
    } else if (Object.hasOwn(source, field)) {
      out[field] = source[field];
    }
  }
  return out as Partial<T>;
}

function selectFromQuery(c: Context): string[] | undefined {
  const select = c.req.queries("select");
  return select && select.length > 0 ? select : undefined;
}

function booleanQuery(c: Context, name: string): boolean {
  const value = c.req.query(name);
  return value === "true" || value === "1";
}

export function registerThreadRoutes(api: Hono<GatewayEnv>, deps: ThreadRouteDeps): void {
  const { threads, guard } = deps;

  async function graphFor(user: GatewayUser): Promise<ThreadStateGraph> {
    const agent = await deps.agentFactory({ user });
    return agent.graph as unknown as ThreadStateGraph;
  }

  async function reserveOrConflict(threadId: string): Promise<() => void> {
    try {
      return await deps.reserveThread!(threadId);
    } catch (error) {
      throw httpError(409, errorMessage(error));
    }
  }

  async function refuseWhileRunning(threadId: string, action: string): Promise<void> {
    if (await deps.hasActiveRun(threadId)) {
      throw httpError(409, `Thread ${threadId} has a run in progress; cancel the run or wait for it to finish, then ${action}.`);
    }
  }

  /** The thread's state; a thread with neither a row nor a checkpoint does not exist. */
  async function stateOf(
    c: Context<GatewayEnv>,
    threadId: string,
    row: ThreadRecord | undefined,
    options: { checkpointId?: string; checkpointNs?: string; subgraphs?: boolean },
  ): Promise<{ state: ThreadStateJson; snapshot: StateSnapshot }> {
    const result = await readThreadState(await graphFor(authenticatedUser(c)), threadId, options);
    if (!row && !hasCheckpoint(result.snapshot)) throw threadNotFound(threadId);
    return result;
  }

  api.post("/threads", async (c) => {
    guard.permission(c, "threads:write");
    const user = authenticatedUser(c);
    const body = await parseJsonObjectBody(c, ThreadCreateSchema);
    const threadId = body.thread_id === undefined || body.thread_id === null ? undefined : assertThreadId(body.thread_id);
    // A chosen id that another user's thread holds is answered exactly as every route answers an
    // id the caller may not use: the guard's 404 "Thread <id> not found", the same status, body
    // and headers as GET /threads/<id> of that thread, so a create says no more than a read does.
    // (What no answer can hide while thread ids are one namespace for all users: a fresh id can be
    // created. The ids the gateway picks itself are random UUIDs, so that only concerns ids the
    // prober already holds; per-user id namespaces would remove it.)
    if (threadId !== undefined) await guard.thread(c, "threads:write", threadId);
    const metadata = callerMetadata(body.metadata);
    if (body.assistant_id) metadata.assistant_id ??= body.assistant_id;
    const { thread, created } = await threads.create({ threadId, metadata, ownerId: threadOwnerFor(user) });
    // Another user may have created the same id since the guard looked.
    if (!created && !isThreadVisibleTo(thread, user.id)) throw threadNotFound(thread.thread_id);
    if (!created && body.if_exists === "raise") {
      throw httpError(409, `Thread ${thread.thread_id} already exists; send if_exists "do_nothing" to get it back instead.`);
    }
    return c.json(threadJson(thread));
  });

  api.post("/threads/search", async (c) => {
    guard.permission(c, "threads:read");
    const user = authenticatedUser(c);
    const body = await parseJsonObjectBody(c, ThreadSearchSchema);
    const rows = await threads.search({
      ...(body.metadata ? { metadata: body.metadata } : {}),
      ...(body.status ? { status: body.status } : {}),
      ...(body.ids ? { ids: body.ids } : {}),
      ...(body.sort_by ? { sortBy: body.sort_by, sortOrder: body.sort_order ?? "desc" } : {}),
      limit: body.limit ?? 100,
      offset: body.offset ?? 0,
      ownerId: threadOwnerFilter(user),
    });
    return c.json(rows.map((row) => project(threadJson(row), body.select)));
  });

  api.get("/threads/:thread_id", async (c) => {
    const threadId = c.req.param("thread_id");
    const row = await guard.thread(c, "threads:read", threadId);
    const { state, snapshot } = await stateOf(c, threadId, row, {});
    const base: ThreadRecord = row ?? {
      // Checkpoints without a row: a thread written by the CLI or before the row existed.
      thread_id: threadId,
      created_at: snapshot.createdAt ?? new Date(0).toISOString(),
      updated_at: snapshot.createdAt ?? new Date(0).toISOString(),
      metadata: {},
      status: "idle",
      owner_id: null,
    };
    return c.json(
      threadJson(base, {
        status: deriveThreadStatus(snapshot, base.status),
        values: state.values,
        interrupts: threadInterrupts(snapshot),
      }),
    );
  });

  api.patch("/threads/:thread_id", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:write", threadId, { requireExisting: true });
    const body = await parseJsonObjectBody(c, ThreadPatchSchema);
    const updated = await threads.update(threadId, { metadata: callerMetadata(body.metadata) });
    if (!updated) throw threadNotFound(threadId);
    return c.json(threadJson(updated));
  });

  api.delete("/threads/:thread_id", async (c) => {
    const threadId = c.req.param("thread_id");
    const row = await guard.thread(c, "threads:delete", threadId, { requireExisting: true });
    await refuseWhileRunning(threadId, "delete the thread");
    const release = deps.reserveThread ? await reserveOrConflict(threadId) : () => undefined;
    try {
      // Checkpoints before the row: a delete that stops halfway leaves a row to retry it from.
      await deps.checkpointer.deleteThread(threadId);
      await threads.delete(threadId);
      if (deps.onThreadDeleted && row) {
        try {
          await deps.onThreadDeleted(row);
        } catch (error) {
          deps.logger.warn(`thread ${threadId} was deleted but its files were not: ${errorMessage(error)}`, { thread_id: threadId });
        }
      }
    } finally {
      release();
    }
    return c.json({ success: true, message: `Deleted thread ${threadId}` });
  });

  api.get("/threads/:thread_id/state", async (c) => {
    const threadId = c.req.param("thread_id");
    const row = await guard.thread(c, "threads:read", threadId);
    const { state } = await stateOf(c, threadId, row, { subgraphs: booleanQuery(c, "subgraphs") });
    return c.json(project(state, selectFromQuery(c)));
  });

  api.post("/threads/:thread_id/state/checkpoint", async (c) => {
    const threadId = c.req.param("thread_id");
    const row = await guard.thread(c, "threads:read", threadId);
    const body = await parseJsonObjectBody(c, StateAtCheckpointSchema);
    const { state } = await stateOf(c, threadId, row, {
      ...(body.checkpoint.checkpoint_id ? { checkpointId: body.checkpoint.checkpoint_id } : {}),
      ...(body.checkpoint.checkpoint_ns ? { checkpointNs: body.checkpoint.checkpoint_ns } : {}),
      subgraphs: body.subgraphs === true,
    });
    return c.json(project(state, body.select));
  });

  api.get("/threads/:thread_id/state/:checkpoint_id", async (c) => {
    const threadId = c.req.param("thread_id");
    const row = await guard.thread(c, "threads:read", threadId);
    const { state } = await stateOf(c, threadId, row, {
      checkpointId: c.req.param("checkpoint_id"),
      ...(c.req.query("checkpoint_ns") ? { checkpointNs: c.req.query("checkpoint_ns") } : {}),
      subgraphs: booleanQuery(c, "subgraphs"),
    });
    return c.json(project(state, selectFromQuery(c)));
  });

  api.post("/threads/:thread_id/state", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:write", threadId, { requireExisting: true });
    const body = await parseJsonObjectBody(c, StateUpdateSchema);
    await refuseWhileRunning(threadId, "update its state");
    const values = body.values ? { ...body.values } : null;
    const owned = serverOwnedChannelsIn(values);
    if (owned.length > 0) throw httpError(422, serverOwnedChannelsMessage("values", owned));
    // Provenance and identity on a message are the server's to write, here as in a run's input.
    if (values && values.messages !== undefined) {
      values.messages = Array.isArray(values.messages)
        ? stripServerOwnedMessages(values.messages)
        : stripServerOwnedMessage(values.messages);
    }
    const checkpointId = body.checkpoint_id ?? body.checkpoint?.checkpoint_id ?? undefined;
    const checkpointNs = body.checkpoint?.checkpoint_ns ?? undefined;
    const { checkpoint } = await updateThreadState(await graphFor(authenticatedUser(c)), threadId, {
      values,
      ...(body.as_node ? { asNode: body.as_node } : {}),
      ...(checkpointId ? { checkpointId } : {}),
      ...(checkpointNs ? { checkpointNs } : {}),
    });
    const title = values?.title;
    await threads.update(threadId, typeof title === "string" && title.trim() !== "" ? { display_name: title } : {});
    const configurable = { thread_id: checkpoint.thread_id, checkpoint_ns: checkpoint.checkpoint_ns, checkpoint_id: checkpoint.checkpoint_id };
    // The LangGraph servers answer `{checkpoint}`; the SDK's type reads `configurable`. Both are sent.
    return c.json({ checkpoint, configurable });
  });

  async function history(
    c: Context<GatewayEnv>,
    threadId: string,
    options: { limit: number; before?: string; metadata?: Record<string, unknown>; checkpointId?: string; checkpointNs?: string },
    select?: readonly string[] | null,
  ): Promise<Response> {
    const row = await guard.thread(c, "threads:read", threadId);
    const states = await readThreadHistory(await graphFor(authenticatedUser(c)), threadId, options);
    if (!row && states.length === 0) throw threadNotFound(threadId);
    return c.json(states.map((state) => project(state, select)));
  }

  api.post("/threads/:thread_id/history", async (c) => {
    const threadId = c.req.param("thread_id");
    const body = await parseJsonObjectBody(c, HistorySchema);
    const before =
      typeof body.before === "string"
        ? body.before
        : body.before && "configurable" in body.before
          ? ((body.before.configurable as { checkpoint_id?: string | null }).checkpoint_id ?? undefined)
          : (body.before?.checkpoint_id ?? undefined);
    return history(
      c,
      threadId,
      {
        limit: body.limit ?? 10,
        ...(before ? { before } : {}),
        ...(body.metadata ? { metadata: body.metadata } : {}),
        ...(body.checkpoint?.checkpoint_id ? { checkpointId: body.checkpoint.checkpoint_id } : {}),
        ...(body.checkpoint?.checkpoint_ns ? { checkpointNs: body.checkpoint.checkpoint_ns } : {}),
      },
      body.select,
    );
  });

  api.get("/threads/:thread_id/history", async (c) => {
    const threadId = c.req.param("thread_id");
    const query = parseRequest(HistoryQuerySchema, { limit: c.req.query("limit"), before: c.req.query("before") }, "query");
    return history(c, threadId, { limit: query.limit ?? 10, ...(query.before ? { before: query.before } : {}) }, selectFromQuery(c));
  });
}

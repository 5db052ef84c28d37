import type { Context, Hono } from "hono";
import { availableModelNames } from "../../config/index.ts";
import { parseGatewayConfig } from "../../config/gateway.ts";
import { NAMED_ID_PATTERN, newId } from "../../core/ids.ts";
import { RunManager, coordinationOptions, type RunCoordination } from "../../runtime/runs/manager.ts";
import type { LeaseFence } from "../../runtime/runs/fence.ts";
import { readThreadValues } from "../../runtime/runs/checkpoints.ts";
import type { JournalEntry } from "../../runtime/runs/journal.ts";
import { isRecord } from "../../core/guards.ts";
import { parseLastEventId, type StreamBridge } from "../../runtime/runs/stream-bridge.ts";
import type { ReclaimMemory } from "../../ports/runtime-ports.ts";
import { RUN_STATUSES, RunOperationError, type RunRecord, type RunStatus } from "../../runtime/runs/types.ts";
import { statusOfRunOperation } from "../errors.ts";
import { parseRunBody, THREAD_ID_PATTERN, type ParsedRunBody } from "../run-request.ts";
import { readJsonBody } from "../request-limits.ts";
import { callerTrustOf } from "../server-owned.ts";
import { runLocationHeaders, sseResponse } from "../sse.ts";
import { ASSISTANT_ID_ALIASES, listAssistants, resolveAssistantId } from "./assistants.ts";
import type { GatewayDeps, GatewayRunHooks } from "../deps.ts";
import { EMPTY_WORKSPACE_SUMMARY, WORKSPACE_CHANGES_EVENT_TYPE, WORKSPACE_CHANGES_VERSION, workspaceChangesProbe } from "../../runtime/workspace-changes.ts";
import type { GatewayEnv, GatewayUser, RouteGuard, ThreadStore } from "../types.ts";

/*
 * The runs routes of the LangGraph Platform API (create, stream, join, cancel), mounted under /api.
 * Every route is authorized once through the guard (permission, then thread ownership: another
 * user's thread is a 404), validates before anything is created, and answers failures as JSON
 * `{"detail": "..."}`.
 */

export interface RunRouteDeps {
  readonly runs: RunManager<GatewayUser>;
  readonly threads: ThreadStore;
  readonly guard: RouteGuard;
  /** SSE heartbeat cadence (default 15 s). */
  readonly heartbeatMs?: number;
  readonly maxRecursionLimit?: number;
  /** The assistant an id names (aliases resolved), undefined when there is none; default: any id. */
  readonly resolveAssistant?: (assistantId: string) => string | undefined;
  /** The assistant ids offered, for the error that names them. */
  readonly assistantIds?: () => readonly string[];
}

type C = Context<GatewayEnv>;

const RUN_BODY_EXAMPLE = '{"input": {"messages": [...]}}';

export function registerRunRoutes(app: Hono<GatewayEnv>, deps: RunRouteDeps): void {
  const { runs, guard } = deps;

  const parseBody = async (c: C): Promise<ParsedRunBody> => {
    // An empty body is `{}`; a `null` one is not, and parseRunBody refuses it like any non-object.
    const body = await readJsonBody(c, RUN_BODY_EXAMPLE);
    const parsed = parseRunBody(body === undefined ? {} : body, {
      caller: callerTrustOf(c.get("user")),
      ...(deps.maxRecursionLimit === undefined ? {} : { maxRecursionLimit: deps.maxRecursionLimit }),
    });
    const assistantId = parsed.request.assistantId;
    if (deps.resolveAssistant && deps.resolveAssistant(assistantId) === undefined) {
      // As LangGraph Platform: a run for an assistant that does not exist is a 404, and starts nothing.
      const offered = deps.assistantIds?.() ?? [];
      throw new RunOperationError(
        "assistant_not_found",
        `Assistant ${JSON.stringify(assistantId)} not found${offered.length > 0 ? `; this gateway serves ${offered.map((id) => JSON.stringify(id)).join(", ")}` : ""}.`,
      );
    }
    return parsed;
  };

  const stream = (c: C, row: RunRecord, options: { cancelOnDisconnect: boolean; lastEventId?: string; headers?: Record<string, string> }) => {
    const { thread_id: threadId, run_id: runId } = row;
    return sseResponse(c, (signal) => runs.stream(threadId, runId, { signal, ...(options.lastEventId ? { lastEventId: options.lastEventId } : {}) }), {
      clock: runs.clock,
      ...(deps.heartbeatMs === undefined ? {} : { heartbeatMs: deps.heartbeatMs }),
      ...(options.headers ? { headers: options.headers } : {}),
      ...(options.cancelOnDisconnect ? { onDisconnect: () => void runs.cancel(threadId, runId, { action: "interrupt" }).catch(() => undefined) } : {}),
    });
  };

  /** Waits for the run's end; `/wait` and `/join` answer with the thread's final values. */
  const finalResult = async (c: C, row: RunRecord, cancelOnDisconnect: boolean) => {
    const signal = c.req.raw.signal;
    const final = await runs.join(row.thread_id, row.run_id, signal);
    if (signal.aborted) {
      if (cancelOnDisconnect) await runs.cancel(row.thread_id, row.run_id, { action: "interrupt" }).catch(() => undefined);
      return c.body(null, 204);
    }
    if (final.status === "error" || final.status === "timeout") {
      return c.json({ __error__: { error: final.error?.name ?? "RunError", message: final.error?.message ?? `Run ${final.run_id} ended with status ${final.status}.` } });
    }
    return c.json((await runs.threadValues(row.thread_id)) ?? { status: final.status, error: final.error });
  };

  /** Stateless runs: the thread named in config.configurable.thread_id, or a new one owned by the caller. */
  const statelessThread = async (c: C, parsed: ParsedRunBody): Promise<string> => {
    guard.permission(c, "runs:create");
    const threadId = parsed.configurableThreadId ?? newId();
    const existing = await guard.thread(c, "runs:create", threadId);
    if (!existing) await deps.threads.create({ threadId, ownerId: c.get("user").id });
    return threadId;
  };

  app.post("/threads/:thread_id/runs", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:create", true);
    const row = await runs.create(threadId, (await parseBody(c)).request, c.get("user"));
    for (const [name, value] of Object.entries(runLocationHeaders(threadId, row.run_id))) c.header(name, value);
    return c.json(publicRun(row));
  }));

  app.post("/threads/:thread_id/runs/stream", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:create", true);
    const { request } = await parseBody(c);
    const row = await runs.create(threadId, request, c.get("user"));
    return stream(c, row, { cancelOnDisconnect: request.onDisconnect === "cancel", headers: runLocationHeaders(threadId, row.run_id) });
  }));

  app.post("/threads/:thread_id/runs/wait", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:create", true);
    const { request } = await parseBody(c);
    const row = await runs.create(threadId, request, c.get("user"));
    for (const [name, value] of Object.entries(runLocationHeaders(threadId, row.run_id))) c.header(name, value);
    return finalResult(c, row, request.onDisconnect === "cancel");
  }));

  app.get("/threads/:thread_id/runs", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:read", false);
    const limit = intQuery(c, "limit", 10, 1, 1000);
    const offset = intQuery(c, "offset", 0, 0, Number.MAX_SAFE_INTEGER);
    const status = c.req.query("status");
    if (status !== undefined && !(RUN_STATUSES as readonly string[]).includes(status)) {
      throw new RunOperationError("invalid_query", `status must be one of ${RUN_STATUSES.join(", ")}; got ${JSON.stringify(status)}`);
    }
    const rows = await runs.list(threadId, { limit, offset, ...(status ? { status: status as RunStatus } : {}) });
    return c.json(rows.map(publicRun));
  }));

  app.get("/threads/:thread_id/runs/:run_id", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:read", false);
    return c.json(publicRun(await existingRun(runs, threadId, runIdOf(c))));
  }));

  // The run journal as DeerFlow's UI reads it: a bare array of events in order, `event_types=a,b`
  // and `task_id` filtering before `limit` applies, `after_seq` (the last seq read) for the next page.
  app.get("/threads/:thread_id/runs/:run_id/events", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:read", false);
    const runId = runIdOf(c);
    const afterSeq = integerQuery(c, "after_seq", -1);
    const limit = integerQuery(c, "limit", 100);
    if (afterSeq === undefined || afterSeq < -1) {
      throw new RunOperationError("invalid_query", "after_seq must be a whole number >= -1 (-1: from the first entry); pass the seq of the last event read.");
    }
    if (limit === undefined || limit < 1 || limit > 1000) throw new RunOperationError("invalid_query", "limit must be a whole number from 1 to 1000.");
    const types = (c.req.query("event_types") ?? "").split(",").map((type) => type.trim()).filter(Boolean);
    const taskId = c.req.query("task_id") || undefined;
    const accept = types.length === 0 && taskId === undefined
      ? undefined
      : (entry: JournalEntry) => {
          const event = journalEvent(threadId, runId, entry);
          return (types.length === 0 || types.includes(event.event_type) || types.includes(entry.kind)) && (taskId === undefined || event.metadata.task_id === taskId);
        };
    const page = await runs.events(threadId, runId, { afterSeq, limit, ...(accept ? { accept } : {}) });
    if (!page) throw new RunOperationError("run_not_found", `Run ${runId} not found`);
    return c.json(page.events.map((entry) => journalEvent(threadId, runId, entry)));
  }));

  // What the run changed in the thread's workspace and outputs (the run's last `workspace_changes`
  // journal event, see src/runtime/workspace-changes.ts); `available: false` for a run without one.
  app.get("/threads/:thread_id/runs/:run_id/workspace-changes", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:read", true);
    const runId = runIdOf(c);
    const includeFiles = c.req.query("include_files") === undefined || boolQuery(c, "include_files");
    const includeDiff = c.req.query("include_diff") === undefined || boolQuery(c, "include_diff");
    await existingRun(runs, threadId, runId);
    const page = await runs.events(threadId, runId, {
      limit: 1000,
      accept: (entry) => entry.kind === "custom" && isRecord(entry.data) && entry.data.type === WORKSPACE_CHANGES_EVENT_TYPE,
    });
    const recorded = page?.events.at(-1)?.data as Record<string, unknown> | undefined;
    if (!recorded) {
      return c.json({ available: false, version: WORKSPACE_CHANGES_VERSION, summary: EMPTY_WORKSPACE_SUMMARY, files: [], limits: {} });
    }
    const { type: _type, ...changes } = recorded;
    const files = Array.isArray(changes.files) ? (changes.files as Array<Record<string, unknown>>) : [];
    return c.json({
      ...changes,
      available: true,
      files: includeFiles ? (includeDiff ? files : files.map((file) => ({ ...file, diff: "" }))) : [],
    });
  }));

  app.delete("/threads/:thread_id/runs/:run_id", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:cancel", true);
    await runs.delete(threadId, runIdOf(c));
    return c.body(null, 204);
  }));

  app.post("/threads/:thread_id/runs/:run_id/cancel", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:cancel", true);
    const wait = boolQuery(c, "wait");
    await runs.cancel(threadId, runIdOf(c), { action: cancelAction(c) ?? "interrupt", wait });
    return c.body(null, wait ? 204 : 202);
  }));

  app.get("/threads/:thread_id/runs/:run_id/join", handled(async (c) => {
    const threadId = await threadFor(c, guard, "runs:read", false);
    const row = await existingRun(runs, threadId, runIdOf(c));
    return finalResult(c, row, boolQuery(c, "cancel_on_disconnect"));
  }));

  const joinStream = handled(async (c) => {
    const action = c.req.method === "POST" ? cancelAction(c) : undefined;
    // Checked before anything happens: a malformed cursor is a 400, not a replay from the start.
    const lastEventId = parseLastEventId(c.req.header("Last-Event-ID"));
    const threadId = await threadFor(c, guard, action ? "runs:cancel" : "runs:read", action !== undefined);
    const row = await existingRun(runs, threadId, runIdOf(c));
    if (action) {
      const wait = boolQuery(c, "wait");
      await runs.cancel(threadId, row.run_id, { action, wait });
      if (wait) return c.body(null, 204);
    }
    return stream(c, row, { cancelOnDisconnect: boolQuery(c, "cancel_on_disconnect"), ...(lastEventId ? { lastEventId } : {}) });
  });
  app.get("/threads/:thread_id/runs/:run_id/stream", joinStream);
  app.post("/threads/:thread_id/runs/:run_id/stream", joinStream);

  app.post("/runs/stream", handled(async (c) => {
    const parsed = await parseBody(c);
    const threadId = await statelessThread(c, parsed);
    const row = await runs.create(threadId, parsed.request, c.get("user"));
    return stream(c, row, { cancelOnDisconnect: parsed.request.onDisconnect === "cancel", headers: runLocationHeaders(threadId, row.run_id) });
  }));

  app.post("/runs/wait", handled(async (c) => {
    const parsed = await parseBody(c);
    const threadId = await statelessThread(c, parsed);
    const row = await runs.create(threadId, parsed.request, c.get("user"));
    for (const [name, value] of Object.entries(runLocationHeaders(threadId, row.run_id))) c.header(name, value);
    return finalResult(c, row, parsed.request.onDisconnect === "cancel");
  }));
}

export interface RunsPartOptions {
  readonly bridge?: StreamBridge;
  /** Coordinator, bus and worker id of a gateway that is one of several processes (see GatewayOptions). */
  readonly coordination?: RunCoordination;
  /** The fence of the checkpointer the gateway's agents write through. */
  readonly fence?: LeaseFence;
  readonly heartbeatMs?: number;
  readonly maxRecursionLimit?: number;
  /** The lifecycle hooks' shared budget per pass (default 3 s). */
  readonly notifyBudgetMs?: number;
  /** Asked for once the runs went quiet (the serving runtime's collector; see RunManager). */
  readonly reclaimMemory?: ReclaimMemory;
}

/**
 * The runs part as createGateway's `registerExtraRoutes` wants it: a RunManager over the gateway's
 * storage, checkpointer, thread store and agent factory, runs a crashed process left in flight
 * marked interrupted, the routes registered, and the hooks the gateway calls (active-run checks,
 * the shutdown drain, thread deletion, close).
 */
export async function registerRunsPart(
  api: Hono<GatewayEnv>,
  deps: GatewayDeps,
  options: RunsPartOptions = {},
): Promise<GatewayRunHooks & { readonly runs: RunManager<GatewayUser> }> {
  const runs = new RunManager<GatewayUser>({
    storage: deps.storage,
    checkpointer: deps.checkpointer,
    threads: deps.threads,
    agentFactory: deps.agentFactory,
    extensions: deps.extensions,
    clock: deps.clock,
    ...(options.bridge ? { bridge: options.bridge } : {}),
    ...coordinationOptions(options.coordination),
    ...(options.fence ? { fence: options.fence } : {}),
    ...(options.notifyBudgetMs === undefined ? {} : { notifyBudgetMs: options.notifyBudgetMs }),
    ...(options.reclaimMemory ? { reclaimMemory: options.reclaimMemory } : {}),
    modelNames: () => availableModelNames(deps.config),
    customAgentExists: async (name) => (await deps.customAgents.get(name)) !== undefined,
    onDiagnostic: deps.reportDiagnostic,
    ...(parseGatewayConfig(deps.config.gateway).workspace_changes
      ? {
          probe: (() => {
            const snapshot = workspaceChangesProbe(deps.sandbox, {
              ...(deps.config.tool_output?.storage_subdir ? { toolResultsDirname: deps.config.tool_output.storage_subdir } : {}),
              // The run's final values when it has them (no read of the head); after a cancel, the head.
              presented: async ({ threadId }, values) => presentedArtifacts(values ?? (await readThreadValues(deps.checkpointer, threadId))),
            });
            return ({ threadId, user }: { threadId: string; user: GatewayUser }) => snapshot({ userId: user.id, threadId });
          })(),
        }
      : {}),
  });
  await runs.recover();
  registerRunRoutes(api, {
    runs,
    threads: deps.threads,
    guard: deps.guard,
    ...(options.heartbeatMs === undefined ? {} : { heartbeatMs: options.heartbeatMs }),
    ...(options.maxRecursionLimit === undefined ? {} : { maxRecursionLimit: options.maxRecursionLimit }),
    resolveAssistant: (assistantId) => resolveAssistantId(deps.config, assistantId),
    assistantIds: () => [...listAssistants(deps.config, "").map((a) => a.assistant_id), ...Object.keys(ASSISTANT_ID_ALIASES)],
  });
  return {
    runs,
    hasActiveRun: (threadId) => runs.hasActiveRun(threadId),
    reserveThread: (threadId) => runs.reserveThread(threadId),
    drain: async (timeoutMs) => {
      await runs.shutdown(timeoutMs);
    },
    onThreadDeleted: (thread) => runs.deleteThread(thread.thread_id),
    close: () => runs.bridge.close(),
    memoryReleased: () => runs.memoryReleased(),
  };
}

/** One journal entry as a DeerFlow run event: the entry's own fields plus the envelope the UI reads. */
export interface RunEventJson extends JournalEntry {
  readonly thread_id: string;
  readonly run_id: string;
  /** `run.<status>` for a status change, `run.error`, or a custom event's own `type`. */
  readonly event_type: string;
  readonly category: JournalEntry["kind"];
  readonly content: unknown;
  readonly metadata: { readonly task_id?: string };
  readonly created_at: string;
}

export function journalEvent(threadId: string, runId: string, entry: JournalEntry): RunEventJson {
  const data = isRecord(entry.data) ? entry.data : {};
  const eventType =
    entry.kind === "status"
      ? `run.${typeof data.status === "string" ? data.status : "status"}`
      : entry.kind === "error"
        ? "run.error"
        : typeof data.type === "string" && data.type !== ""
          ? data.type
          : "custom";
  const taskId = typeof data.task_id === "string" ? data.task_id : undefined;
  return {
    ...entry,
    thread_id: threadId,
    run_id: runId,
    event_type: eventType,
    category: entry.kind,
    content: entry.data,
    metadata: taskId === undefined ? {} : { task_id: taskId },
    created_at: entry.at,
  };
}

/** The LangGraph `Run` a client sees: the row without its owner. */
export function publicRun(row: RunRecord): Omit<RunRecord, "owner_id"> {
  const { owner_id: _owner, ...run } = row;
  return run;
}

/** Turns run-operation failures into `{"detail": ...}` with their status; auth failures pass through. */
function handled(fn: (c: C) => Promise<Response>) {
  return async (c: C): Promise<Response> => {
    try {
      return await fn(c);
    } catch (error) {
      if (error instanceof RunOperationError) return c.json({ detail: error.message }, statusOfRunOperation(error));
      throw error;
    }
  };
}

async function threadFor(c: C, guard: RouteGuard, permission: "runs:create" | "runs:read" | "runs:cancel", requireExisting: boolean): Promise<string> {
  const threadId = c.req.param("thread_id") ?? "";
  if (!THREAD_ID_PATTERN.test(threadId)) {
    throw new RunOperationError("invalid_thread_id", `thread_id must match ${THREAD_ID_PATTERN}; got ${JSON.stringify(threadId)}`);
  }
  await guard.thread(c, permission, threadId, { requireExisting });
  return threadId;
}

/** Run ids are the gateway's own (UUIDs); they also name storage keys, so the alphabet is closed. */
const RUN_ID_PATTERN = NAMED_ID_PATTERN;

function runIdOf(c: C): string {
  const runId = c.req.param("run_id") ?? "";
  if (!RUN_ID_PATTERN.test(runId)) {
    const shown = JSON.stringify(runId.length > 80 ? `${runId.slice(0, 80)}…` : runId);
    throw new RunOperationError("invalid_run_id", `run_id ${shown} is not a run id: use the run_id a run was created with (1 to 64 letters, digits, "_" or "-").`);
  }
  return runId;
}

async function existingRun(runs: RunManager<GatewayUser>, threadId: string, runId: string): Promise<RunRecord> {
  const row = await runs.get(threadId, runId);
  if (!row) throw new RunOperationError("run_not_found", `Run ${runId} not found`);
  return row;
}

function cancelAction(c: C): "interrupt" | "rollback" | undefined {
  const action = c.req.query("action");
  if (action === undefined || action === "") return undefined;
  if (action !== "interrupt" && action !== "rollback") {
    throw new RunOperationError("invalid_query", `action must be "interrupt" or "rollback"; got ${JSON.stringify(action)}`);
  }
  return action;
}

function boolQuery(c: C, name: string): boolean {
  const value = c.req.query(name);
  if (value === undefined || value === "" || value === "0" || value === "false") return false;
  if (value === "1" || value === "true") return true;
  throw new RunOperationError("invalid_query", `${name} must be true or false (1 or 0); got ${JSON.stringify(value)}`);
}

function intQuery(c: C, name: string, fallback: number, min: number, max: number): number {
  const raw = c.req.query(name);
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RunOperationError("invalid_query", `${name} must be an integer from ${min} to ${max}; got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** A whole-number query parameter, the fallback when absent, undefined when malformed. */
function integerQuery(c: C, name: string, fallback: number): number | undefined {
  const raw = c.req.query(name);
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  return Number.isInteger(value) ? value : undefined;
}

/** The thread's presented files: the `artifacts` channel's strings. */
function presentedArtifacts(values: Record<string, unknown> | undefined): string[] {
  const artifacts = values?.artifacts;
  return Array.isArray(artifacts) ? artifacts.filter((path): path is string => typeof path === "string") : [];
}

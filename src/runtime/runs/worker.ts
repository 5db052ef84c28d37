import { yieldToEventLoop } from "../../core/yield.ts";
import { groupWrites } from "../../engine/agent.ts";
import type { BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { Command, type StreamMode } from "@langchain/langgraph/web";
import { errorMessage } from "../../core/errors.ts";
import type { RunRecord as EngineRunRecord } from "../../engine/agent.ts";
import type { ServedAgent } from "../served-agent.ts";
import { EXTENSION_TASK_STORE_KEY, ExtensionData, taskInfo, type TaskInfo } from "../../extension-api/index.ts";
import { leadTaskOutcome, notifyTaskStart, notifyTaskStop } from "../../extensions/notify.ts";
import type { LoadedExtensions } from "../../extensions/registry.ts";
import { bindExtensionSnapshot } from "../../extensions/run-context.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import { readHead, restorePreRunCheckpoint, titleIn, titleOf, writeFallbackTitle } from "./checkpoints.ts";
import { checkpointWritesSettled } from "./settle.ts";
import { serializeMessage, serializeValue, serializeValues } from "../serialize.ts";
import type { ClaimResult } from "./coordinator.ts";
import type { RunLeaseLostError } from "./fence.ts";
import type { StreamBus } from "./stream-bus.ts";
import type { RunJournal } from "./journal.ts";
import type {
  CancelAction,
  RunAgentFactory,
  RunDiagnostic,
  RunErrorInfo,
  RunPrincipal,
  RunProbe,
  RunProbeFinish,
  RunRecord,
  RunRequest,
  RunStatus,
  RunThreadStore,
} from "./types.ts";

/*
 * One run, start to end, in the order the extension contract promises to lifecycle hooks: claim
 * the thread once its earlier runs (in any process) finished finalizing, start, on_task_start,
 * `metadata`, the agent's stream, then in `finally` the terminal status, rollback or fallback
 * title, thread status, on_task_stop, and only then `end`, then the thread's release. A run
 * cancelled before it started builds no agent and fires no hooks, and still ends its stream. A run
 * that lost its lease writes nothing more (another worker may own its thread): it ends as `error`.
 */

/** Caller config keys that also reach the run context (upstream's context forwarding). */
const FORWARDED_CONFIGURABLE_KEYS = [
  "model_name",
  "mode",
  "thinking_enabled",
  "reasoning_effort",
  "is_plan_mode",
  "subagent_enabled",
  "max_concurrent_subagents",
  "max_total_subagents",
  "agent_name",
  "is_bootstrap",
] as const;

/** How long a run may hold the event loop before its frames get a turn to leave. */
const YIELD_EVERY_MS = 5;

export const ROLLED_BACK: RunErrorInfo = Object.freeze({ name: "RunRolledBack", message: "Rolled back by user" });

/** A run the manager holds in memory while it is queued, running or finalizing. */
export interface ActiveRun<U extends RunPrincipal = RunPrincipal> {
  row: RunRecord;
  readonly request: RunRequest;
  readonly user: U;
  readonly controller: AbortController;
  /** Set by a cancel (or a later run's multitask strategy) before the abort fires. */
  abortAction: CancelAction | null;
  started: boolean;
  /** The worker decided the terminal status; a cancel can no longer change it. */
  settled: boolean;
  /** Set when the run lost its lease: it stops, and writes nothing more. */
  lost: RunLeaseLostError | null;
}

export interface WorkerDeps<U extends RunPrincipal> {
  readonly bridge: StreamBus;
  /** Where the run's status changes and custom events are kept after its stream is gone. */
  readonly journal?: RunJournal;
  readonly checkpointer: BaseCheckpointSaver;
  readonly threads: RunThreadStore;
  readonly agentFactory: RunAgentFactory<U>;
  readonly extensions: LoadedExtensions;
  readonly clock: Clock;
  readonly notifyBudgetMs?: number;
  readonly report: (diagnostic: RunDiagnostic) => void;
  /** Measures the run (workspace changes); its result is journaled before the run's terminal status. */
  readonly probe?: RunProbe<U>;
  /** Persists a status change of the run's row; false when it could not (the run lost its lease). */
  setStatus(run: ActiveRun<U>, status: RunStatus, error?: RunErrorInfo | null): Promise<boolean>;
  /** Waits for the run's turn on its thread: "claimed" runs it; "cancelled" and "lost" never start it. */
  acquire(run: ActiveRun<U>): Promise<ClaimResult>;
  /** After the run's last write: its thread goes to the next run. */
  release(run: ActiveRun<U>): Promise<void>;
}

export async function runWorker<U extends RunPrincipal>(deps: WorkerDeps<U>, run: ActiveRun<U>): Promise<void> {
  const { bridge, extensions } = deps;
  const threadId = run.row.thread_id;
  const runId = run.row.run_id;
  const signal = run.controller.signal;
  let lifecycle: { info: TaskInfo; taskStore: ExtensionData } | undefined;
  let status: RunStatus = "error";
  let error: RunErrorInfo | null = null;
  let preRun: CheckpointTuple | undefined;
  let probing: Promise<RunProbeFinish | undefined> | undefined;
  // The head's values as the engine read them when the graph finished, for the title.
  let finalValues: Readonly<Record<string, unknown>> | undefined;
  try {
    if ((await deps.acquire(run)) !== "claimed" || signal.aborted) return;
    run.started = true;
    await deps.setStatus(run, "running");
    await safely(deps, "thread status", () => deps.threads.update(threadId, { status: "busy" }));
    preRun = await readHead(deps.checkpointer, threadId);
    // Measured while the agent is built; awaited before the graph can touch anything.
    probing = deps.probe ? probeStep(deps, runId, "start", () => deps.probe!({ threadId, runId, user: run.user })) : undefined;
    const context = runContext(run.request);
    const agentName = requestedAgentName(context);
    const agent = await deps.agentFactory({
      user: run.user,
      ...(typeof context.model_name === "string" ? { modelName: context.model_name } : {}),
      ...(agentName === undefined ? {} : { agentName }),
      ...(isBootstrapRun(context) ? { bootstrap: true } : {}),
      subagentsEnabled: context.subagent_enabled === true,
      planMode: context.is_plan_mode === true,
    });
    if (extensions.needsTaskStore) {
      const info = taskInfo({
        taskId: runId,
        runId,
        threadId,
        kind: "lead",
        agentName: run.row.assistant_id,
        resumed: run.request.command?.resume !== undefined,
      });
      lifecycle = { info, taskStore: new ExtensionData(runId) };
      await notifyTaskStart(extensions.taskLifecycle, extensions.appStore, lifecycle.taskStore, info, notifyOptions(deps));
    }
    await probing;
    await bridge.publish(runId, "metadata", { run_id: runId, thread_id: threadId, attempt: 1 });
    // Let the response that streams this run reach its socket before the graph takes the loop.
    await yieldToEventLoop();
    const engine = await streamAgent(deps, run, agent, {
      ...context,
      ...serverContext(run.user, threadId, runId),
      ...(lifecycle ? { [EXTENSION_TASK_STORE_KEY]: lifecycle.taskStore } : {}),
      ...bindExtensionSnapshot(extensions),
    });
    if (signal.aborted) throw signal.reason;
    finalValues = engine?.finalValues;
    // A middleware decided the run failed although its graph finished (LLMErrorHandling after a
    // provider failure): the engine's record of the run carries it.
    if (engine?.failure) {
      error = { name: engine.failure.name, message: engine.failure.message };
      status = "error";
    } else {
      status = engine?.outcome === "interrupted" ? "interrupted" : "success";
    }
  } catch (caught) {
    if (!signal.aborted && !run.lost) {
      error = { name: caught instanceof Error ? caught.name : "Error", message: errorMessage(caught) };
      status = "error";
      deps.report({ level: "error", source: `run ${runId}`, message: `the run failed: ${error.message}` });
      await deps.journal?.record(threadId, runId, "error", { name: error.name, message: error.message });
      await bridge.publish(runId, "error", { name: error.name, message: error.message });
    }
  } finally {
    // Decided once: an abort that lands during cleanup (shutdown) must not re-label a finished run.
    const cancelled = signal.aborted;
    const lost = run.lost;
    if (lost) {
      status = "error";
      error = { name: lost.name, message: lost.message };
    } else if (cancelled) {
      // The aborted stream ended before the graph finished saving its last steps; ours come after.
      if (run.started) await safely(deps, "waiting for checkpoint saves", () => checkpointWritesSettled(deps.checkpointer, threadId));
      const rollback = run.abortAction === "rollback";
      if (rollback && run.started) {
        await safely(deps, "rollback", () => restorePreRunCheckpoint(deps.checkpointer, threadId, preRun));
      }
      status = rollback ? "error" : "interrupted";
      error = rollback ? ROLLED_BACK : null;
    }
    const probeFinish = await probing;
    if (probeFinish && run.started && !run.lost) {
      const measured = await probeStep(deps, runId, "finish", () => probeFinish(!cancelled && finalValues !== undefined ? { values: finalValues } : {}));
      if (measured) await deps.journal?.record(threadId, runId, "custom", measured);
    }
    run.settled = true;
    await safely(deps, "run status", () => deps.setStatus(run, status, error));
    // Lost (now, or by the status write just refused): another worker may own the thread.
    if (run.started && !run.lost) {
      if (cancelled && run.abortAction !== "rollback") {
        await safely(deps, "fallback title", () => writeFallbackTitle(deps.checkpointer, threadId, run.request.input));
      }
      await safely(deps, "thread status", async () => {
        // After a cancel the head is read: the fallback title may just have been written.
        const title = !cancelled && finalValues !== undefined ? titleIn(finalValues) : titleOf(await readHead(deps.checkpointer, threadId));
        await deps.threads.update(threadId, { status: threadStatusAfter(status), ...(title ? { display_name: title } : {}) });
      });
    }
    if (lifecycle) {
      const outcome = leadTaskOutcome({ aborted: cancelled || status === "interrupted", succeeded: status === "success" });
      await notifyTaskStop(extensions.taskLifecycle, extensions.appStore, lifecycle.taskStore, lifecycle.info, outcome, notifyOptions(deps)).catch(
        (cause: unknown) => deps.report({ level: "error", source: `run ${runId}`, message: `on_task_stop pass failed: ${errorMessage(cause)}` }),
      );
    }
    if (deps.journal) await safely(deps, "run journal", () => deps.journal!.close(threadId, runId));
    await safely(deps, "stream end", () => bridge.end(runId));
    bridge.release(runId);
    await safely(deps, "thread release", () => deps.release(run));
  }
}

/** Streams the agent and publishes each chunk in the requested modes; returns the engine's record of the run. */
async function streamAgent<U extends RunPrincipal>(
  deps: WorkerDeps<U>,
  run: ActiveRun<U>,
  agent: ServedAgent,
  context: Record<string, unknown>,
): Promise<EngineRunRecord | undefined> {
  const { request } = run;
  const runId = run.row.run_id;
  // `custom` is always streamed from the graph: the journal keeps those events whether or not a client asked for them.
  const graphModes = [...new Set([...request.streamMode.map((mode) => (mode === "messages-tuple" ? "messages" : mode)), "custom"])] as StreamMode[];
  const publishCustom = request.streamMode.includes("custom");
  const input = request.command ? new Command({ ...request.command } as ConstructorParameters<typeof Command>[0]) : (request.input ?? null);
  let record: EngineRunRecord | undefined;
  let lastValues: Record<string, unknown> = {};
  const stream = agent.stream(
    input as never,
    {
      threadId: run.row.thread_id,
      runId,
      signal: run.controller.signal,
      context,
      streamMode: graphModes,
      configurable: { ...request.configurable },
      ...(request.recursionLimit === undefined ? {} : { recursionLimit: request.recursionLimit }),
    },
    (r) => (record = r),
  );
  let lastYield = Date.now();
  for await (const item of stream) {
    // A run over memory storage never waits on I/O, so without a macrotask turn now and then its
    // frames would reach the socket only when it ends: a client would see the first token last.
    if (Date.now() - lastYield >= YIELD_EVERY_MS) {
      await yieldToEventLoop();
      lastYield = Date.now();
    }
    const [mode, chunk] = item as [string, unknown];
    if (mode === "values") {
      const values = serializeValues(chunk);
      // LangGraph sends a pause as a values chunk holding only `__interrupt__`; clients expect the state with it.
      const pauseOnly = Object.keys(values).length === 1 && "__interrupt__" in values;
      if (!pauseOnly) lastValues = values;
      await deps.bridge.publish(runId, "values", pauseOnly ? { ...lastValues, ...values } : values);
    } else if (mode === "updates") {
      await deps.bridge.publish(runId, "updates", serializeUpdates(chunk));
    } else if (mode === "messages") {
      const [message, metadata] = chunk as [BaseMessage, Record<string, unknown>];
      await deps.bridge.publish(runId, "messages", [serializeMessage(message), serializeMetadata(metadata)]);
    } else if (mode === "custom") {
      const event = serializeValue(chunk) ?? null;
      deps.journal?.record(run.row.thread_id, runId, "custom", event);
      if (publishCustom) await deps.bridge.publish(runId, "custom", event);
    }
  }
  return record;
}

/**
 * One node's update as a client expects it: a node that wrote ordered channel writes (tuples, or a
 * list of partial updates, as the model node does) is folded to one value per channel.
 */
function foldNodeUpdate(update: unknown): unknown {
  if (!Array.isArray(update)) return update;
  const writes: Array<[string, unknown]> = [];
  for (const item of update) {
    if (Array.isArray(item) && item.length === 2 && typeof item[0] === "string") writes.push([item[0], item[1]]);
    else if (typeof item === "object" && item !== null && !Array.isArray(item)) writes.push(...Object.entries(item));
    else return update;
  }
  const folded = Object.fromEntries(groupWrites(writes));
  // A later write of a message id replaces the earlier one, as the messages reducer does (the
  // streamed chunk, then the finished message a hook rewrote).
  if (Array.isArray(folded.messages)) folded.messages = latestById(folded.messages);
  return folded;
}

function latestById(messages: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  const at = new Map<string, number>();
  for (const message of messages) {
    const id = (message as { id?: unknown } | null)?.id;
    if (typeof id === "string" && at.has(id)) {
      out[at.get(id)!] = message;
      continue;
    }
    if (typeof id === "string") at.set(id, out.length);
    out.push(message);
  }
  return out;
}

function serializeUpdates(chunk: unknown): unknown {
  if (typeof chunk !== "object" || chunk === null) return serializeValue(chunk) ?? null;
  const out: Record<string, unknown> = {};
  for (const [node, update] of Object.entries(chunk as Record<string, unknown>)) {
    out[node] = node === "__interrupt__" ? serializeValue(update) : serializeValues(foldNodeUpdate(update));
  }
  return out;
}

function serializeMetadata(metadata: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (key.startsWith("__deerflow")) continue;
    const safe = serializeValue(value);
    if (safe !== undefined) out[key] = safe;
  }
  return out;
}

/** The caller's context as the run sees it: the forwarded configurable keys, then `context` over them. */
export function runContext(request: RunRequest): Record<string, unknown> {
  return { ...forwardedContext(request), ...request.context };
}

/**
 * The custom agent a run asks for: `agent_name`, unless the run is the UI's bootstrap chat
 * (`is_bootstrap`), which talks about an agent that does not exist yet. A value that is not a
 * string is kept as text, so it is refused like any name that names no agent.
 */
export function requestedAgentName(context: Readonly<Record<string, unknown>>): string | undefined {
  const name = context.agent_name;
  if (name === undefined || name === null || name === "" || context.is_bootstrap === true) return undefined;
  return typeof name === "string" ? name : JSON.stringify(name);
}

/** The UI's agent-creation chat: `is_bootstrap` with the name of the agent it creates (the setup_agent tool's target). */
export function isBootstrapRun(context: Readonly<Record<string, unknown>>): boolean {
  return context.is_bootstrap === true && typeof context.agent_name === "string" && context.agent_name.trim() !== "";
}

function forwardedContext(request: RunRequest): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of FORWARDED_CONFIGURABLE_KEYS) {
    if (request.configurable[key] !== undefined) out[key] = request.configurable[key];
  }
  return out;
}

/** Identity the server writes after the caller's keys: who runs, on which thread, as which run. */
function serverContext(user: RunPrincipal, threadId: string, runId: string): Record<string, unknown> {
  return {
    user_id: user.id,
    // An internal caller acts for its owner user with the default role, never with a role of its own.
    ...(user.systemRole === "internal" ? {} : { user_role: user.systemRole }),
    is_internal: user.isInternal === true,
    ...(user.authzAttributes ? { authz_attributes: user.authzAttributes } : {}),
    ...(user.oauthProvider ? { oauth_provider: user.oauthProvider } : {}),
    ...(user.oauthId ? { oauth_id: user.oauthId } : {}),
    thread_id: threadId,
    run_id: runId,
  };
}

/** A probe step whose failure is reported, never raised: a measurement must not fail the run. */
async function probeStep<U extends RunPrincipal, R>(deps: WorkerDeps<U>, runId: string, step: string, fn: () => Promise<R>): Promise<R | undefined> {
  try {
    return await fn();
  } catch (cause) {
    deps.report({ level: "warning", source: `run ${runId}`, message: `the run probe's ${step} failed: ${errorMessage(cause)}` });
    return undefined;
  }
}

function threadStatusAfter(status: RunStatus): "idle" | "interrupted" | "error" {
  if (status === "success") return "idle";
  return status === "interrupted" ? "interrupted" : "error";
}

function notifyOptions<U extends RunPrincipal>(deps: WorkerDeps<U>) {
  return {
    clock: deps.clock,
    onDiagnostic: deps.report,
    ...(deps.notifyBudgetMs === undefined ? {} : { budgetMs: deps.notifyBudgetMs }),
  };
}

/** Cleanup steps never fail the run or skip the steps after them. */
async function safely<U extends RunPrincipal>(deps: WorkerDeps<U>, what: string, step: () => Promise<unknown>): Promise<void> {
  try {
    await step();
  } catch (cause) {
    deps.report({ level: "warning", source: "runs", message: `${what} failed: ${errorMessage(cause)}` });
  }
}

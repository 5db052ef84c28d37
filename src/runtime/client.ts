import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { MessageContent } from "@langchain/core/messages";
import * as v from "valibot";
import { validateLeadConfig, type LeadConfig } from "../agents/app-config.ts";
import type { AuthorizationProvider } from "../authz/provider.ts";
import { availableModelNames } from "../config/index.ts";
import { systemClock } from "../core/clock.ts";
import { mapEnv } from "../core/env.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { servedAgentFactory, type BareGraph, type ServedAgent } from "./served-agent.ts";
import type { AgentMiddleware, AgentTool } from "../engine/types.ts";
import { EMPTY_EXTENSIONS, type LoadedExtensions } from "../extensions/registry.ts";
import { textOf } from "../models/text.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { Clock, Env } from "../ports/runtime-ports.ts";
import type { SandboxProvider } from "../ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../sandbox/virtual.ts";
import { createMemoryKeyValue } from "../storage/key-value.ts";
import { versionedOver } from "../storage/versioned.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { createLeadAgentFactory, leadAgentExtras, type LeadAgentFactory } from "./agent-factory.ts";
import {
  buildRunRequest,
  CancelSchema,
  copyClientUser,
  DEFAULT_CLIENT_USER,
  HistorySchema,
  JoinSchema,
  parseOptions,
  privateCopy,
  resolvePrincipal,
  RunListSchema,
  RunOptionsSchema,
  StateReadSchema,
  StateUpdateSchema,
  ThreadCreateSchema,
  ThreadListSchema,
  UserOnlySchema,
  type ClientInput,
  type ClientUser,
  type ClientUserOverride,
  type EmbeddedPrincipal,
  type RunOptions,
} from "./client-input.ts";
import { KeyValueCheckpointSaver } from "./kv-checkpointer.ts";
import { LeaseFence, runSaver } from "./runs/fence.ts";
import { RunManager, coordinationOptions, type RunCoordination } from "./runs/manager.ts";
import { parseLastEventId, type StreamBridge, type StreamFrame } from "./runs/stream-bridge.ts";
import { RUN_STREAM_MODES, type CancelAction, type RunAgentFactory, type RunDiagnostic, type RunRecord, type RunRequest, type RunStatus, type RunStreamMode } from "./runs/types.ts";
import { hasCheckpoint, readThreadHistory, readThreadState, updateThreadState, type ThreadStateGraph, type ThreadStateJson } from "./thread-state.ts";
import { isThreadVisibleTo, KeyValueThreadStore } from "./thread-store.ts";
import type { ThreadRecord, ThreadStatus, ThreadStore } from "./thread-types.ts";

/*
 * The embedded client: the gateway's run lifecycle without HTTP. Runs go through the same
 * RunManager (multitask strategies, lifecycle hooks, journal, finalizing barrier), the same thread
 * store, checkpointer and agent cache, and a stream yields exactly the frames the SSE endpoint
 * would send, so code can move between `fetch` and in-process calls without changing how it reads
 * events. The caller is trusted: what it says about identity is taken, never stripped.
 * One cohesive thing: the client and its threads and runs views share one Session, so they stay
 * in one file.
 */

export type { ClientInput, ClientUser, ClientUserOverride, EmbeddedPrincipal, RunOptions } from "./client-input.ts";
export { ClientInputError, DEFAULT_CLIENT_USER, EMBEDDED_PERMISSIONS } from "./client-input.ts";

/** One frame of a run: `metadata`, `values`, `updates`, `messages`, `custom`, `error`, `end` (or a lone `gap`). */
export type ClientFrame = StreamFrame;

export interface DeerFlowClientOptions {
  /** The config.yaml schema as an object (validated here); default: the embedded defaults (demo model). */
  readonly config?: LeadConfig | Readonly<Record<string, unknown>>;
  /** Where threads, checkpoints and runs live. Default: memory (gone at exit). A passed store stays the caller's to close. */
  readonly storage?: KeyValue;
  /**
   * Compare-and-set over `storage`'s keys, shared with other processes over the same store (threads,
   * memory, sandbox snapshots). Default: the in-process one over `storage`.
   */
  readonly versioned?: VersionedKeyValue;
  /** Default: the virtual sandbox over `storage` (closed by close()). */
  readonly sandbox?: SandboxProvider;
  readonly env?: Env;
  readonly clock?: Clock;
  /** Loaded extensions: their lifecycle hooks fire around every run, their middlewares join the chain. */
  readonly extensions?: LoadedExtensions;
  /** Who calls act for unless a call says otherwise. Default `{id: "default", role: "admin"}`, the gateway's auth-off caller. Copied now. */
  readonly user?: ClientUser;
  /** Frames `stream()` asks for when a call names none. Default values, messages-tuple and custom. */
  readonly streamMode?: readonly RunStreamMode[];
  readonly checkpointer?: BaseCheckpointSaver;
  readonly threads?: ThreadStore;
  /**
   * Replaces the lead agent per caller (tests, a custom graph); it receives the run's principal and
   * may return the engine's Agent or a bare compiled LangGraph graph (run on this client's checkpointer).
   */
  readonly agentFactory?: (request: Parameters<RunAgentFactory<EmbeddedPrincipal>>[0]) => Promise<ServedAgent | BareGraph>;
  readonly extraTools?: readonly AgentTool[];
  readonly configuredMiddlewares?: readonly AgentMiddleware[];
  readonly authorizationProvider?: AuthorizationProvider;
  readonly bridge?: StreamBridge;
  /** Coordinator, bus and worker id when this client is one of several processes over one store (as the gateway's option). */
  readonly coordination?: RunCoordination;
  readonly onDiagnostic?: (diagnostic: RunDiagnostic) => void;
  /** Budget for in-flight runs at close(); default 5000 ms. */
  readonly drainTimeoutMs?: number;
}

const fn = v.custom<(...args: never[]) => unknown>((value) => typeof value === "function", "expected a function");
const object = v.custom<object>((value) => typeof value === "object" && value !== null, "expected an object");
const ClientOptionsSchema = v.strictObject({
  config: v.optional(v.record(v.string(), v.unknown())),
  storage: v.optional(object),
  versioned: v.optional(object),
  sandbox: v.optional(object),
  env: v.optional(object),
  clock: v.optional(object),
  extensions: v.optional(object),
  user: v.optional(v.unknown()),
  streamMode: v.optional(v.array(v.picklist(RUN_STREAM_MODES))),
  checkpointer: v.optional(object),
  threads: v.optional(object),
  agentFactory: v.optional(fn),
  extraTools: v.optional(v.array(v.unknown())),
  configuredMiddlewares: v.optional(v.array(v.unknown())),
  authorizationProvider: v.optional(object),
  bridge: v.optional(object),
  coordination: v.optional(
    v.strictObject({
      coordinator: object,
      bus: object,
      workerId: v.pipe(v.string(), v.minLength(1, "expected a non-empty worker id")),
      leaseGraceMs: v.optional(v.pipe(v.number(), v.minValue(0))),
    }),
  ),
  onDiagnostic: v.optional(fn),
  drainTimeoutMs: v.optional(v.pipe(v.number(), v.minValue(0))),
});

/** What `DeerFlowClient.fromGateway` reads of a gateway (described here: runtime/ does not import gateway/). */
export interface ClientGatewayParts {
  readonly deps: {
    readonly config: LeadConfig;
    readonly checkpointer: BaseCheckpointSaver;
    readonly threads: ThreadStore;
    readonly agentFactory: (request: never) => Promise<ServedAgent>;
  };
  readonly runs: unknown;
}

export interface ChatResult {
  readonly threadId: string;
  readonly runId: string;
  /** `interrupted`: the run paused (an `interrupt()`), or another run or a cancel stopped it. */
  readonly status: Extract<RunStatus, "success" | "interrupted">;
  /** The final answer: the text of the last AI message of this turn ("" when it produced none). */
  readonly text: string;
  /** The thread's messages after the run, as wire dicts. */
  readonly messages: readonly Record<string, unknown>[];
  /** The thread's values after the run (title, artifacts, todos ...), without `__interrupt__`. */
  readonly values: Readonly<Record<string, unknown>>;
  /** Pending interrupts (what a `command: {resume}` answers); empty when the run did not pause. */
  readonly interrupts: readonly unknown[];
}

export interface JoinResult {
  readonly run: RunRecord;
  readonly values: Readonly<Record<string, unknown>> | undefined;
}

/** Everything one client (and the views `withUser` makes of it) shares. */
interface ClientCore {
  readonly config: LeadConfig;
  readonly runs: RunManager<EmbeddedPrincipal>;
  readonly threads: ThreadStore;
  readonly checkpointer: BaseCheckpointSaver;
  readonly agentFactory: RunAgentFactory<EmbeddedPrincipal>;
  readonly streamMode: readonly RunStreamMode[];
  /** Undefined: the parts belong to someone else (a gateway), close() only stops this client. */
  readonly release: (() => Promise<void>) | undefined;
  closed: boolean;
  closing?: Promise<void>;
}

const DEFAULT_STREAM_MODES: readonly RunStreamMode[] = Object.freeze(["values", "messages-tuple", "custom"]);

/**
 * Builds a client over its own RunManager. Runs a crashed process left pending or running over
 * this storage are marked interrupted first, as the gateway does at startup, so use ONE
 * RunManager per storage: beside a gateway in the same process, use `DeerFlowClient.fromGateway`.
 */
export async function createDeerFlowClient(options: DeerFlowClientOptions = {}): Promise<DeerFlowClient> {
  parseOptions(ClientOptionsSchema, options, "createDeerFlowClient options");
  let config: LeadConfig;
  try {
    config = validateLeadConfig(options.config ?? {}, "DeerFlowClient config");
  } catch (error) {
    throw new DeerflowError("invalid_client_config", errorMessage(error), { cause: error });
  }
  const user = copyClientUser(options.user ?? DEFAULT_CLIENT_USER, "createDeerFlowClient options.user");
  const clock = options.clock ?? systemClock;
  const env = options.env ?? mapEnv({});
  const ownStorage = options.storage === undefined;
  const storage = options.storage ?? createMemoryKeyValue();
  const versioned = options.versioned ?? versionedOver(storage);
  const ownSandbox = options.sandbox === undefined;
  const sandbox = options.sandbox ?? createVirtualSandboxProvider({ storage, versioned, defaultTimeoutMs: config.sandbox.command_timeout_ms });
  // Fenced: a run of this process that lost its lease writes no checkpoint.
  const fence = new LeaseFence(clock);
  const checkpointer = runSaver(options.checkpointer ?? new KeyValueCheckpointSaver({ storage }), fence);
  const threads = options.threads ?? new KeyValueThreadStore({ storage, clock, versioned });
  const report = (diagnostic: RunDiagnostic) => options.onDiagnostic?.(diagnostic);
  const leadFactory: LeadAgentFactory | undefined = options.agentFactory
    ? undefined
    : createLeadAgentFactory({
        config,
        env,
        checkpointer,
        services: { clock, storage, versioned, sandbox, env, baseDir: config.storage.base },
        onDiagnostic: report,
        ...leadAgentExtras(options),
      });
  const agentFactory: RunAgentFactory<EmbeddedPrincipal> = options.agentFactory ? servedAgentFactory(options.agentFactory, checkpointer) : leadFactory!;
  const runs = new RunManager<EmbeddedPrincipal>({
    storage,
    checkpointer,
    threads,
    agentFactory,
    extensions: options.extensions ?? EMPTY_EXTENSIONS,
    clock,
    ...(options.bridge ? { bridge: options.bridge } : {}),
    ...coordinationOptions(options.coordination),
    fence,
    modelNames: () => availableModelNames(config),
    onDiagnostic: report,
  });
  await runs.recover();
  const drainTimeoutMs = options.drainTimeoutMs ?? 5000;
  const step = async (what: string, work: () => Promise<unknown> | undefined) => {
    try {
      await work();
    } catch (error) {
      report({ level: "error", source: "client", message: `close: ${what} failed: ${errorMessage(error)}` });
    }
  };
  const core: ClientCore = {
    config,
    runs,
    threads,
    checkpointer,
    agentFactory,
    streamMode: options.streamMode ?? DEFAULT_STREAM_MODES,
    closed: false,
    release: async () => {
      await step("draining runs", () => runs.shutdown(drainTimeoutMs));
      await step("closing the stream bridge", () => runs.bridge.close());
      await step("closing agents", () => leadFactory?.close());
      if (ownSandbox) await step("closing the sandbox", () => sandbox.close());
      if (ownStorage) await step("closing storage", () => storage.dispose());
    },
  };
  return new DeerFlowClient(new Session(core, user));
}

/** One client's identity over shared parts: what the client and its helpers call through. */
class Session {
  constructor(
    readonly core: ClientCore,
    readonly user: ClientUser,
  ) {}

  assertOpen(): void {
    if (this.core.closed) throw new DeerflowError("client_closed", "This DeerFlowClient is closed; create a new one to start more runs.");
  }

  principal(override: ClientUserOverride | undefined): EmbeddedPrincipal {
    this.assertOpen();
    return resolvePrincipal(this.user, override).principal;
  }

  /** Validates a run call and copies its identity, synchronously (before the caller can change them). */
  prepare(input: ClientInput, rawOptions: RunOptions, defaultModes: readonly RunStreamMode[]): PreparedRun {
    this.assertOpen();
    const options = parseOptions(RunOptionsSchema, rawOptions, "run options");
    const { principal, context } = resolvePrincipal(this.user, options.user, options.context);
    const request = buildRunRequest(input, options, context, defaultModes);
    return { principal, request, threadId: options.threadId, signal: options.signal };
  }

  /** The thread the run goes on (created for the principal when missing), then the run. */
  async admit(call: PreparedRun): Promise<RunRecord> {
    call.signal?.throwIfAborted();
    const { thread, created } = await this.core.threads.create({
      ...(call.threadId === undefined ? {} : { threadId: call.threadId }),
      ownerId: call.principal.id,
    });
    if (!isThreadVisibleTo(thread, call.principal.id)) throw notVisible(thread.thread_id, call.principal);
    try {
      return await this.core.runs.create(thread.thread_id, call.request, call.principal);
    } catch (error) {
      // A refused run (unknown model, shutting down) leaves no empty thread behind.
      if (created) await this.core.threads.delete(thread.thread_id).catch(() => undefined);
      throw error;
    }
  }

  /** The thread's row when the principal may see it; a thread of another user is `thread_not_found`. */
  async visibleThread(threadId: string, principal: EmbeddedPrincipal): Promise<ThreadRecord | undefined> {
    const row = await this.core.threads.get(threadId);
    if (row && !isThreadVisibleTo(row, principal.id)) throw threadNotFound(threadId);
    return row;
  }
}

export class DeerFlowClient {
  readonly #session: Session;
  /** A view made by withUser: closing it closes nothing. */
  readonly #view: boolean;
  /** Thread helpers, acting for the client's user (or `options.user`). */
  readonly threads: ClientThreads;
  /** Run helpers for background runs: start, get, list, cancel, join, join a stream. */
  readonly runs: ClientRuns;

  /** @internal Use {@link createDeerFlowClient} or {@link DeerFlowClient.fromGateway}. */
  constructor(session: Session, view = false) {
    this.#session = session;
    this.#view = view;
    this.threads = new ClientThreads(session);
    this.runs = new ClientRuns(session);
  }

  /** Builds a client with its own RunManager; see {@link createDeerFlowClient}. */
  static create(options: DeerFlowClientOptions = {}): Promise<DeerFlowClient> {
    return createDeerFlowClient(options);
  }

  /**
   * A client over a running gateway's RunManager, thread store, checkpointer and agent cache:
   * HTTP clients and this one see the same threads and runs, and one multitask strategy covers
   * both. The gateway's `shutdown()` owns those parts; this client's close() only stops it.
   */
  static fromGateway(gateway: ClientGatewayParts, options: { user?: ClientUser; streamMode?: readonly RunStreamMode[] } = {}): DeerFlowClient {
    if (!(gateway.runs instanceof RunManager)) {
      throw new DeerflowError(
        "gateway_runs_unavailable",
        "This gateway exposes no RunManager (its registerExtraRoutes replaced the runs part without returning `runs`); return it from registerExtraRoutes, or use createDeerFlowClient over the same storage in a process without the gateway.",
      );
    }
    const user = copyClientUser(options.user ?? DEFAULT_CLIENT_USER, "fromGateway options.user");
    const { deps } = gateway;
    const core: ClientCore = {
      config: deps.config,
      // The gateway's manager and factory read only the principal fields an EmbeddedPrincipal has
      // (it carries a gateway user's whole shape), so they serve embedded callers as they are.
      runs: gateway.runs as RunManager<EmbeddedPrincipal>,
      agentFactory: deps.agentFactory as unknown as RunAgentFactory<EmbeddedPrincipal>,
      threads: deps.threads,
      checkpointer: deps.checkpointer,
      streamMode: options.streamMode ?? DEFAULT_STREAM_MODES,
      closed: false,
      release: undefined,
    };
    return new DeerFlowClient(new Session(core, user));
  }

  /** Who calls act for by default (a frozen copy). */
  get user(): ClientUser {
    return this.#session.user;
  }

  get config(): LeadConfig {
    return this.#session.core.config;
  }

  /** The RunManager every call goes through (shared with a gateway after fromGateway). */
  get runManager(): RunManager<EmbeddedPrincipal> {
    return this.#session.core.runs;
  }

  /** A view of this client acting for `user`, over the same runs and storage; closing the view closes nothing. */
  withUser(user: ClientUser): DeerFlowClient {
    return new DeerFlowClient(new Session(this.#session.core, copyClientUser(user, "withUser user")), true);
  }

  /**
   * Starts a run and yields its frames as the SSE stream carries them: `metadata` first, the
   * requested modes, `error` when it fails, `end` last. Options are checked and the identity copied
   * now; the run starts at the first iteration. Leaving the loop early (break, a thrown error, the
   * signal) cancels the run unless `onDisconnect: "continue"`. A reader that falls further behind
   * than the bridge retains (256 frames) gets one `gap` frame and the stream ends; the run goes on,
   * and `threads.state()` or `runs.join()` has its outcome.
   */
  stream(input: ClientInput, options: RunOptions = {}): AsyncGenerator<ClientFrame> {
    const session = this.#session;
    const call = session.prepare(input, options, session.core.streamMode);
    return (async function* () {
      const row = await session.admit(call);
      yield* follow(session.core.runs, row, { signal: call.signal, cancelOnExit: call.request.onDisconnect === "cancel" });
    })();
  }

  /**
   * Runs one turn to its end and answers with the final AI text, the thread's messages and values.
   * A paused run (interrupt) resolves with status `interrupted` and its `interrupts`; resume it with
   * `chat(null, {threadId, command: {resume}})`. A failed run rejects with `run_failed` (or
   * `run_rolled_back`); an aborted signal cancels the run and rejects with the signal's reason.
   */
  async chat(input: ClientInput, options: RunOptions = {}): Promise<ChatResult> {
    const session = this.#session;
    const call = session.prepare(input, { ...options, streamMode: options.streamMode ?? ["values"] }, ["values"]);
    const row = await session.admit(call);
    const { runs } = session.core;
    const final = await runs.join(row.thread_id, row.run_id, call.signal);
    if (call.signal?.aborted) {
      await runs.cancel(row.thread_id, row.run_id, { action: "interrupt" }).catch(() => undefined);
      throw call.signal.reason;
    }
    assertSucceeded(final);
    const { __interrupt__: pending, ...values } = (await runs.threadValues(row.thread_id)) ?? {};
    const messages = Array.isArray(values.messages) ? (values.messages as Record<string, unknown>[]) : [];
    return {
      threadId: row.thread_id,
      runId: row.run_id,
      status: final.status === "success" ? "success" : "interrupted",
      text: finalAnswer(messages),
      messages,
      values,
      interrupts: Array.isArray(pending) ? pending : [],
    };
  }

  /**
   * Drains in-flight runs (5 s), then closes what this client created (never a storage or sandbox
   * it was given, never a gateway's parts). Idempotent; later calls fail with `client_closed`.
   */
  close(): Promise<void> {
    if (this.#view) return Promise.resolve();
    const { core } = this.#session;
    core.closed = true;
    core.closing ??= core.release?.() ?? Promise.resolve();
    return core.closing;
  }
}

interface PreparedRun {
  readonly principal: EmbeddedPrincipal;
  readonly request: RunRequest;
  readonly threadId: string | undefined;
  readonly signal: AbortSignal | undefined;
}

export class ClientThreads {
  readonly #session: Session;

  /** @internal */
  constructor(session: Session) {
    this.#session = session;
  }

  /** A new thread owned by the caller, or the caller's existing one with that id. */
  async create(options: { threadId?: string; metadata?: Record<string, unknown>; user?: ClientUserOverride } = {}): Promise<ThreadRecord> {
    const parsed = parseOptions(ThreadCreateSchema, options, "threads.create options");
    const principal = this.#session.principal(parsed.user);
    const { thread } = await this.#session.core.threads.create({
      ...(parsed.threadId === undefined ? {} : { threadId: parsed.threadId }),
      metadata: structuredClone(parsed.metadata ?? {}),
      ownerId: principal.id,
    });
    if (!isThreadVisibleTo(thread, principal.id)) throw notVisible(thread.thread_id, principal);
    return thread;
  }

  /** The thread's row, or undefined when it does not exist or belongs to another user. */
  async get(threadId: string, options: { user?: ClientUserOverride } = {}): Promise<ThreadRecord | undefined> {
    const principal = this.#session.principal(parseOptions(UserOnlySchema, options, "threads.get options").user);
    const row = await this.#session.core.threads.get(threadId);
    return row && isThreadVisibleTo(row, principal.id) ? row : undefined;
  }

  /** The caller's threads (and ownerless ones), pinned first, then most recently updated. */
  async list(
    options: { limit?: number; offset?: number; metadata?: Record<string, unknown>; status?: ThreadStatus; user?: ClientUserOverride } = {},
  ): Promise<ThreadRecord[]> {
    const parsed = parseOptions(ThreadListSchema, options, "threads.list options");
    const principal = this.#session.principal(parsed.user);
    return this.#session.core.threads.search({
      limit: parsed.limit ?? 100,
      offset: parsed.offset ?? 0,
      ownerId: principal.id,
      ...(parsed.metadata ? { metadata: parsed.metadata } : {}),
      ...(parsed.status ? { status: parsed.status } : {}),
    });
  }

  /** The thread's state (latest, or at `checkpointId`) as the API's ThreadState. */
  async state(threadId: string, options: { checkpointId?: string; user?: ClientUserOverride } = {}): Promise<ThreadStateJson> {
    const parsed = parseOptions(StateReadSchema, options, "threads.state options");
    const principal = this.#session.principal(parsed.user);
    const row = await this.#session.visibleThread(threadId, principal);
    const { state, snapshot } = await readThreadState(await this.#graph(principal), threadId, parsed.checkpointId ? { checkpointId: parsed.checkpointId } : {});
    if (!row && !hasCheckpoint(snapshot)) throw threadNotFound(threadId);
    return state;
  }

  /** Checkpoints newest first (default 10, at most 100), each as a ThreadState. */
  async history(threadId: string, options: { limit?: number; before?: string; user?: ClientUserOverride } = {}): Promise<ThreadStateJson[]> {
    const parsed = parseOptions(HistorySchema, options, "threads.history options");
    const principal = this.#session.principal(parsed.user);
    const row = await this.#session.visibleThread(threadId, principal);
    const states = await readThreadHistory(await this.#graph(principal), threadId, { limit: parsed.limit ?? 10, ...(parsed.before ? { before: parsed.before } : {}) });
    if (!row && states.length === 0) throw threadNotFound(threadId);
    return states;
  }

  /** Writes `values` as node `asNode` would (reducers fold them); refused while a run holds the thread. */
  async updateState(
    threadId: string,
    options: { values: Record<string, unknown> | null; asNode?: string; checkpointId?: string; user?: ClientUserOverride },
  ): Promise<{ checkpoint: ThreadStateJson["checkpoint"] }> {
    const parsed = parseOptions(StateUpdateSchema, options, "threads.updateState options");
    const principal = this.#session.principal(parsed.user);
    const row = await this.#session.visibleThread(threadId, principal);
    if (!row) throw threadNotFound(threadId);
    await this.#refuseWhileRunning(threadId, "update its state");
    const result = await updateThreadState(await this.#graph(principal), threadId, {
      values: parsed.values === null ? null : privateCopy(parsed.values),
      ...(parsed.asNode ? { asNode: parsed.asNode } : {}),
      ...(parsed.checkpointId ? { checkpointId: parsed.checkpointId } : {}),
    });
    const title = parsed.values?.title;
    await this.#session.core.threads.update(threadId, typeof title === "string" && title.trim() !== "" ? { display_name: title } : {});
    return result;
  }

  /** Deletes the thread, its checkpoints and its runs; false when there was none to delete. */
  async delete(threadId: string, options: { user?: ClientUserOverride } = {}): Promise<boolean> {
    const principal = this.#session.principal(parseOptions(UserOnlySchema, options, "threads.delete options").user);
    const row = await this.#session.visibleThread(threadId, principal);
    if (!row) return false;
    await this.#refuseWhileRunning(threadId, "delete it");
    const { core } = this.#session;
    // Checkpoints before the row: a delete that stops halfway leaves a row to retry it from.
    await core.checkpointer.deleteThread(threadId);
    const deleted = await core.threads.delete(threadId);
    await core.runs.coordinator.deleteThread(threadId);
    return deleted;
  }

  async #graph(principal: EmbeddedPrincipal): Promise<ThreadStateGraph> {
    const agent = await this.#session.core.agentFactory({ user: principal });
    return agent.graph as unknown as ThreadStateGraph;
  }

  async #refuseWhileRunning(threadId: string, action: string): Promise<void> {
    if (await this.#session.core.runs.hasActiveRun(threadId)) {
      throw new DeerflowError("thread_busy", `Thread ${threadId} has a run in progress; cancel the run or wait for it to finish, then ${action}.`);
    }
  }
}

export class ClientRuns {
  readonly #session: Session;

  /** @internal */
  constructor(session: Session) {
    this.#session = session;
  }

  /** Starts a background run (it continues whoever reads it) and returns its pending row. */
  async start(input: ClientInput, options: Omit<RunOptions, "signal" | "onDisconnect"> = {}): Promise<RunRecord> {
    const session = this.#session;
    return session.admit(session.prepare(input, { ...options, onDisconnect: "continue" }, session.core.streamMode));
  }

  async get(threadId: string, runId: string, options: { user?: ClientUserOverride } = {}): Promise<RunRecord | undefined> {
    await this.#thread(threadId, this.#session.principal(parseOptions(UserOnlySchema, options, "runs.get options").user));
    return this.#session.core.runs.get(threadId, runId);
  }

  /** The thread's runs, newest first. */
  async list(threadId: string, options: { limit?: number; offset?: number; status?: RunStatus; user?: ClientUserOverride } = {}): Promise<RunRecord[]> {
    const parsed = parseOptions(RunListSchema, options, "runs.list options");
    await this.#thread(threadId, this.#session.principal(parsed.user));
    return this.#session.core.runs.list(threadId, { limit: parsed.limit ?? 10, offset: parsed.offset ?? 0, ...(parsed.status ? { status: parsed.status } : {}) });
  }

  /** `interrupt` keeps what the run wrote, `rollback` restores the thread to before it; `wait` resolves after its cleanup. */
  async cancel(threadId: string, runId: string, options: { action?: CancelAction; wait?: boolean; user?: ClientUserOverride } = {}): Promise<RunRecord> {
    const parsed = parseOptions(CancelSchema, options, "runs.cancel options");
    await this.#thread(threadId, this.#session.principal(parsed.user));
    const { runs } = this.#session.core;
    const row = await runs.cancel(threadId, runId, { action: parsed.action ?? "interrupt", wait: parsed.wait === true });
    return (await runs.get(threadId, runId)) ?? row;
  }

  /** Waits for the run's end (or the signal) and answers with its row and the thread's values. */
  async join(threadId: string, runId: string, options: { signal?: AbortSignal; user?: ClientUserOverride } = {}): Promise<JoinResult> {
    const parsed = parseOptions(JoinSchema, options, "runs.join options");
    await this.#thread(threadId, this.#session.principal(parsed.user));
    const { runs } = this.#session.core;
    const run = await runs.join(threadId, runId, parsed.signal);
    return { run, values: await runs.threadValues(threadId) };
  }

  /** Joins a run's stream from the start (or after `lastEventId`); leaving it never cancels the run. */
  stream(threadId: string, runId: string, options: { lastEventId?: string; signal?: AbortSignal; user?: ClientUserOverride } = {}): AsyncGenerator<ClientFrame> {
    const parsed = parseOptions(JoinSchema, options, "runs.stream options");
    const lastEventId = parseLastEventId(parsed.lastEventId);
    const principal = this.#session.principal(parsed.user);
    const { runs } = this.#session.core;
    const thread = (id: string) => this.#thread(id, principal);
    return (async function* () {
      await thread(threadId);
      const row = await runs.get(threadId, runId);
      if (!row) throw new DeerflowError("run_not_found", `Run ${runId} not found on thread ${threadId}.`);
      yield* follow(runs, row, { signal: parsed.signal, lastEventId, cancelOnExit: false });
    })();
  }

  async #thread(threadId: string, principal: EmbeddedPrincipal): Promise<void> {
    const row = await this.#session.visibleThread(threadId, principal);
    if (!row) throw threadNotFound(threadId);
  }
}

/** A run's frames until `end` (or a `gap`); leaving early cancels the run when asked to. */
async function* follow(
  runs: RunManager<EmbeddedPrincipal>,
  row: RunRecord,
  options: { signal: AbortSignal | undefined; lastEventId?: string | undefined; cancelOnExit: boolean },
): AsyncGenerator<ClientFrame> {
  const { signal } = options;
  const reading = new AbortController();
  const onAbort = () => reading.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) onAbort();
  // True once the stream ended by itself: only a reader that left before that cancels the run.
  let finished = false;
  try {
    for await (const frame of runs.stream(row.thread_id, row.run_id, {
      signal: reading.signal,
      ...(options.lastEventId ? { lastEventId: options.lastEventId } : {}),
    })) {
      if (frame.event === "end" || frame.event === "gap") finished = true;
      yield frame;
    }
    if (!finished) signal?.throwIfAborted();
    finished = true;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    reading.abort();
    if (!finished && options.cancelOnExit) await runs.cancel(row.thread_id, row.run_id, { action: "interrupt" }).catch(() => undefined);
  }
}

function threadNotFound(threadId: string): DeerflowError {
  return new DeerflowError("thread_not_found", `Thread ${threadId} not found; start one with stream()/chat() or threads.create().`);
}

function notVisible(threadId: string, principal: EmbeddedPrincipal): DeerflowError {
  return new DeerflowError(
    "thread_not_found",
    `Thread ${threadId} is not visible to user ${principal.id}: it belongs to another user. Act as its owner (options.user) or use another thread id.`,
  );
}

function assertSucceeded(run: RunRecord): void {
  if (run.status === "success" || run.status === "interrupted") return;
  const rolledBack = run.error?.name === "RunRolledBack";
  throw new DeerflowError(
    rolledBack ? "run_rolled_back" : "run_failed",
    rolledBack
      ? `Run ${run.run_id} on thread ${run.thread_id} was rolled back; the thread is as it was before the run.`
      : `Run ${run.run_id} on thread ${run.thread_id} ended with status ${run.status}: ${run.error?.message ?? "no error was recorded"}`,
    { details: { threadId: run.thread_id, runId: run.run_id, status: run.status, error: run.error } },
  );
}

/** The text of the last AI message after the user's last turn (middleware-injected human messages are not turns). */
function finalAnswer(messages: readonly Record<string, unknown>[]): string {
  const turn = messages.findLastIndex((m) => m.type === "human" && (m.additional_kwargs as Record<string, unknown> | undefined)?.hide_from_ui !== true);
  for (let i = messages.length - 1; i > turn; i--) {
    const message = messages[i]!;
    if (message.type !== "ai" && message.type !== "AIMessageChunk") continue;
    const text = textOf(message.content as MessageContent).trim();
    if (text !== "") return text;
  }
  return "";
}

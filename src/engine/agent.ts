// The engine's Agent: the graph it compiles from a middleware stack, its four nodes and a run's
// ticket, one cohesive thing; the innermost model and tool calls sit in model-tool-calls.ts.
import { AIMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  Annotation,
  Command,
  END,
  START,
  Send,
  StateGraph,
  type AnnotationRoot,
  type BaseChannel,
  type LangGraphRunnableConfig,
  type OverwriteValue,
  type StreamMode,
} from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import { deepFrozenCopy } from "../core/freeze.ts";
import { newId } from "../core/ids.ts";
import {
  ThreadStateAnnotation,
  applyStateUpdate,
  emptyThreadState,
  type ThreadState,
  type ThreadStateUpdate,
} from "../state/thread-state.ts";
import { RunScope, type RunFailure } from "./run-scope.ts";
import type { AgentServices } from "./services.ts";
import { withoutAmbientRun } from "./ambient.ts";
import { callModel, runTool, toolResultToUpdate } from "./model-tool-calls.ts";
import type {
  AgentMiddleware,
  AgentRuntime,
  AgentState,
  AgentTool,
  HookSpec,
  JumpTarget,
  ModelHandler,
  ModelRequest,
  NodeHook,
  ToolHandler,
} from "./types.ts";

export const NODE = {
  beforeAgent: "before_agent",
  model: "model",
  tools: "tools",
  afterAgent: "after_agent",
} as const;

const MIDDLEWARE_NAME = /^[A-Za-z0-9_.-]+$/;
/** The configurable key that carries the engine's private run ticket; a caller's value is overwritten. */
const RUN_TICKET_KEY = "__deerflow_run_ticket";
const TOOL_CALL_KEY = "__deerflow_tool_call";

type EngineStateDefinition = (typeof ThreadStateAnnotation)["spec"] & {
  jump_to: BaseChannel<"end" | null, OverwriteValue<"end" | null> | "end" | null>;
};
/** The compiled LangGraph graph an Agent runs: getState, updateState, stream. */
export type AgentGraph = ReturnType<StateGraph<EngineStateDefinition>["compile"]>;

/** Engine-internal channel: a tool's Command that ends the run (tool calls fan out, so they meet here). */
const EngineStateAnnotation: AnnotationRoot<EngineStateDefinition> = Annotation.Root({
  ...ThreadStateAnnotation.spec,
  jump_to: Annotation<"end" | null>({
    reducer: (left: "end" | null, right: "end" | null | undefined) => (right === undefined ? left : right),
    default: () => null,
  }),
});
type EngineState = ThreadState & { jump_to: "end" | null };

type HookName = "beforeAgent" | "beforeModel" | "afterModel" | "afterAgent";

/**
 * afterAgent hooks that ran at the end of a step but must show as their own node: when they threw
 * (or interrupted), the after_agent node rethrows, so the checkpoint (the step's writes kept), the
 * error and a resume are those of a separate node; when they wrote state, the node writes it, so
 * the `updates` stream still shows those writes under after_agent and the step's update holds the
 * step's alone.
 */
type HandOver = { readonly error: unknown } | { readonly writes: Array<[string, unknown]> };
interface BoundHook {
  readonly middleware: string;
  readonly hookName: HookName;
  readonly fn: NodeHook;
  readonly canJumpTo: ReadonlySet<JumpTarget>;
}

export interface CreateAgentOptions {
  readonly model: BaseChatModel;
  readonly tools?: readonly AgentTool[];
  /** Ordered outer to inner. */
  readonly middlewares?: readonly AgentMiddleware[];
  readonly systemPrompt?: string | SystemMessage;
  readonly checkpointer?: BaseCheckpointSaver;
  readonly services: AgentServices;
  readonly name?: string;
  readonly recursionLimit?: number;
}

export interface AgentRunOptions {
  readonly threadId?: string;
  readonly runId?: string;
  /** Caller context: read-only for every middleware. */
  readonly context?: Record<string, unknown>;
  readonly signal?: AbortSignal;
  readonly streamMode?: StreamMode | StreamMode[];
  readonly recursionLimit?: number;
  readonly callbacks?: RunnableConfig["callbacks"];
  /** Extra configurable entries (checkpoint_id for time travel, ...). */
  readonly configurable?: Record<string, unknown>;
}

/** What one run leaves behind besides state: facts the engine or a hook recorded. */
export interface RunRecord {
  readonly runId: string;
  readonly scope: RunScope;
  /** afterAgent hook failures during an error or abort exit; the original error wins. */
  readonly cleanupErrors: unknown[];
  outcome: "running" | "completed" | "interrupted" | "failed" | "aborted";
  /**
   * Set when the graph finished (completed or interrupted) but a middleware marked the run failed
   * through its scope (RunScope.fail): the run is to be reported as an error with this name and message.
   */
  failure: RunFailure | undefined;
  /**
   * The thread's state as the graph left it (read for the outcome, after the stream ended with the
   * graph completed or interrupted); undefined otherwise. A caller that wants the head's values right
   * after the run (the run worker's title) reads them here instead of the checkpointer again.
   */
  finalValues?: Readonly<Record<string, unknown>>;
}

interface RunTicket {
  readonly record: RunRecord;
  readonly runtimeBase: Omit<AgentRuntime, "writer">;
  afterAgentRan: boolean;
  lastState: EngineState | undefined;
  /** What the model step left for the after_agent node to deliver (see HandOver). */
  handedOver: HandOver | undefined;
}

export type AgentInput = ThreadStateUpdate | Command | null;

/**
 * An agent: the middleware stack compiled onto a LangGraph StateGraph. One graph step per model
 * call (all beforeModel hooks, the wrapped model call and all afterModel hooks run in one node and
 * their updates are written as ordered tuples, so every hook still sees its predecessors' writes),
 * and one task per tool call. The afterAgent hooks run at the end of the step that ends the run
 * when they write nothing: a graph step costs a checkpoint and the framework's per-task work. The
 * after_agent node stays in the graph: hooks that wrote state or threw hand over to it (HandOver),
 * so what a client streams and what a checkpoint holds are what they were with a separate node; a
 * checkpoint written before the fold resumes there; and a state update written "as" after_agent
 * still marks a thread finished. (beforeAgent keeps its node: on a conversation's first turn its
 * hooks write, and a fold would show their writes under the model's update.)
 */
export class Agent {
  readonly name: string;
  readonly model: BaseChatModel;
  readonly tools: readonly AgentTool[];
  readonly middlewares: readonly AgentMiddleware[];
  readonly systemMessage: SystemMessage | undefined;
  readonly checkpointer: BaseCheckpointSaver | undefined;
  readonly services: AgentServices;
  readonly graph: AgentGraph;
  readonly #recursionLimit: number;
  readonly #tickets = new Map<string, RunTicket>();
  readonly #toolsByName: ReadonlyMap<string, AgentTool>;
  readonly #hooks: Readonly<Record<HookName, readonly BoundHook[]>>;
  readonly #modelWrappers: readonly AgentMiddleware[];
  readonly #toolWrappers: readonly AgentMiddleware[];

  constructor(options: CreateAgentOptions) {
    this.name = options.name ?? "agent";
    this.model = options.model;
    this.middlewares = Object.freeze([...(options.middlewares ?? [])]);
    this.services = options.services;
    this.checkpointer = options.checkpointer;
    this.#recursionLimit = options.recursionLimit ?? 100;
    this.systemMessage =
      typeof options.systemPrompt === "string"
        ? new SystemMessage({ content: options.systemPrompt, id: "system-prompt" })
        : options.systemPrompt;

    validateMiddlewares(this.middlewares);
    const tools = [...(options.tools ?? [])];
    for (const mw of this.middlewares) tools.push(...(mw.tools ?? []));
    const byName = new Map<string, AgentTool>();
    for (const tool of tools) {
      if (byName.has(tool.name)) {
        throw new DeerflowError("duplicate_tool", `Two tools are named "${tool.name}"; tool names must be unique in an agent.`);
      }
      byName.set(tool.name, tool);
    }
    this.tools = Object.freeze(tools);
    this.#toolsByName = byName;
    this.#hooks = {
      beforeAgent: bindHooks(this.middlewares, "beforeAgent"),
      beforeModel: bindHooks(this.middlewares, "beforeModel"),
      // after* hooks run in reverse stack order.
      afterModel: bindHooks(this.middlewares, "afterModel").reverse(),
      afterAgent: bindHooks(this.middlewares, "afterAgent").reverse(),
    };
    this.#modelWrappers = this.middlewares.filter((m) => typeof m.wrapModelCall === "function");
    this.#toolWrappers = this.middlewares.filter((m) => typeof m.wrapToolCall === "function");
    this.graph = this.#compile();
  }

  #compile(): AgentGraph {
    const hasBeforeAgent = this.#hooks.beforeAgent.length > 0;
    const hasAfterAgent = this.#hooks.afterAgent.length > 0;
    const handOver = hasAfterAgent ? [NODE.afterAgent] : [];
    // The graph's generic types cannot follow nodes that return Commands with Sends; the node
    // functions below are typed against EngineState themselves.
    const builder: any = new StateGraph(EngineStateAnnotation);
    builder.addNode(NODE.model, (state: EngineState, config: LangGraphRunnableConfig) => this.#modelNode(state, config), {
      ends: [NODE.model, NODE.tools, END, ...handOver],
    });
    builder.addNode(NODE.tools, (input: EngineState & { [TOOL_CALL_KEY]: ToolCall }, config: LangGraphRunnableConfig) =>
      this.#toolNode(input, config),
    );
    builder.addEdge(NODE.tools, NODE.model);
    if (hasBeforeAgent) {
      builder.addNode(NODE.beforeAgent, (state: EngineState, config: LangGraphRunnableConfig) => this.#beforeAgentNode(state, config), {
        ends: [NODE.model, NODE.tools, END, ...handOver],
      });
      builder.addEdge(START, NODE.beforeAgent);
    } else {
      builder.addEdge(START, NODE.model);
    }
    if (hasAfterAgent) {
      builder.addNode(NODE.afterAgent, (state: EngineState, config: LangGraphRunnableConfig) => this.#afterAgentNode(state, config));
      builder.addEdge(NODE.afterAgent, END);
    }
    return builder.compile({ checkpointer: this.checkpointer, name: this.name }) as AgentGraph;
  }

  /** Runs to the end and returns the final state. */
  async invoke(input: AgentInput, options: AgentRunOptions = {}): Promise<ThreadState> {
    let last: unknown;
    for await (const chunk of this.stream(input, { ...options, streamMode: "values" })) last = chunk;
    if (last === undefined) throw new DeerflowError("empty_run", "The run produced no state.");
    return stripEngineChannels(last as EngineState);
  }

  /**
   * Streams a run. Chunks are LangGraph's (a `[mode, chunk]` pair when several modes are asked).
   * afterAgent hooks run on every exit: in the graph on a normal end or a jump to end, and here
   * after a thrown error or an abort.
   */
  async *stream(input: AgentInput, options: AgentRunOptions = {}, onRecord?: (record: RunRecord) => void): AsyncGenerator<unknown> {
    const runId = options.runId ?? newId("run");
    const record: RunRecord = { runId, scope: new RunScope(runId), cleanupErrors: [], outcome: "running", failure: undefined };
    onRecord?.(record);
    const ticketId = newId();
    const threadId = options.threadId ?? (options.configurable?.thread_id as string | undefined);
    const ticket: RunTicket = {
      record,
      runtimeBase: {
        context: deepFrozenCopy(options.context ?? {}),
        scope: record.scope,
        threadId,
        runId,
        signal: options.signal,
        services: this.services,
      },
      afterAgentRan: false,
      lastState: undefined,
      handedOver: undefined,
    };
    this.#tickets.set(ticketId, ticket);
    const config: LangGraphRunnableConfig & { streamMode: StreamMode | StreamMode[] } = {
      configurable: {
        ...options.configurable,
        ...(threadId === undefined ? {} : { thread_id: threadId }),
        run_id: runId,
        [RUN_TICKET_KEY]: ticketId,
      },
      recursionLimit: options.recursionLimit ?? this.#recursionLimit,
      streamMode: options.streamMode ?? "values",
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.callbacks ? { callbacks: options.callbacks } : {}),
    };
    let failure: unknown;
    try {
      // A run's config is what its caller gave, never a context left current by another run.
      const stream = await withoutAmbientRun(() => this.graph.stream(input as never, config as never));
      for await (const chunk of stream) yield chunk;
      record.outcome = (await this.#isPaused(config, record)) ? "interrupted" : "completed";
      record.failure = record.scope.failure;
    } catch (error) {
      failure = error;
      record.outcome = options.signal?.aborted ? "aborted" : "failed";
      throw error;
    } finally {
      try {
        if (failure !== undefined && !ticket.afterAgentRan && this.#hooks.afterAgent.length > 0) {
          await this.#afterAgentOnExit(ticket, config);
        }
      } finally {
        this.#tickets.delete(ticketId);
      }
    }
  }

  async #isPaused(config: LangGraphRunnableConfig, record: RunRecord): Promise<boolean> {
    if (!this.checkpointer || config.configurable?.thread_id === undefined) return false;
    const snapshot = await withoutAmbientRun(() => this.graph.getState(headOf(config) as never));
    record.finalValues = snapshot.values as Record<string, unknown>;
    return snapshot.next.length > 0;
  }

  /** afterAgent after an error or abort: hooks run on the last state a node saw; their failures are recorded, never thrown over the original error. */
  async #afterAgentOnExit(ticket: RunTicket, config: LangGraphRunnableConfig): Promise<void> {
    ticket.afterAgentRan = true;
    let state = ticket.lastState;
    if (!state && this.checkpointer && config.configurable?.thread_id !== undefined) {
      try {
        state = (await withoutAmbientRun(() => this.graph.getState(headOf(config) as never))).values as EngineState;
      } catch (error) {
        ticket.record.cleanupErrors.push(error);
      }
    }
    const runtime: AgentRuntime = { ...ticket.runtimeBase, writer: () => {} };
    let working = state ?? emptyEngineState();
    const writes: Array<[string, unknown]> = [];
    for (const hook of this.#hooks.afterAgent) {
      try {
        const result = await hook.fn(working, runtime);
        if (result) {
          const { jumpTo: _ignored, ...update } = result;
          working = applyEngineUpdate(working, update, writes);
        }
      } catch (error) {
        ticket.record.cleanupErrors.push(error);
      }
    }
    if (writes.length > 0 && this.checkpointer && config.configurable?.thread_id !== undefined) {
      try {
        const { [RUN_TICKET_KEY]: _t, ...configurable } = config.configurable ?? {};
        await withoutAmbientRun(() =>
          this.graph.updateState({ configurable } as never, Object.fromEntries(groupWrites(writes)) as never, NODE.afterAgent),
        );
      } catch (error) {
        ticket.record.cleanupErrors.push(error);
      }
    }
  }

  #runtime(config: LangGraphRunnableConfig): { ticket: RunTicket; runtime: AgentRuntime } {
    const ticketId = config.configurable?.[RUN_TICKET_KEY];
    const ticket = typeof ticketId === "string" ? this.#tickets.get(ticketId) : undefined;
    if (!ticket) {
      throw new DeerflowError(
        "run_scope_missing",
        `This graph must be run through Agent.stream() or Agent.invoke() of agent "${this.name}", which own the run scope.`,
      );
    }
    const writer = typeof config.writer === "function" ? config.writer : () => {};
    return { ticket, runtime: { ...ticket.runtimeBase, writer } };
  }

  /**
   * Runs node hooks in order on a working state, recording each update as ordered channel writes
   * so the next hook sees it; stops at the first (declared) jump and returns it.
   */
  async #runHooks(
    hooks: readonly BoundHook[],
    state: EngineState,
    runtime: AgentRuntime,
    ticket: RunTicket,
    writes: Array<[string, unknown]>,
  ): Promise<{ state: EngineState; jump?: JumpTarget }> {
    let working = state;
    for (const hook of hooks) {
      const result = await hook.fn(working, runtime);
      if (!result) continue;
      const { jumpTo, ...update } = result;
      working = applyEngineUpdate(working, update, writes);
      ticket.lastState = working;
      if (jumpTo) return { state: working, jump: checkJump(hook, jumpTo) };
    }
    return { state: working };
  }

  async #beforeAgentNode(state: EngineState, config: LangGraphRunnableConfig) {
    const { ticket, runtime } = this.#runtime(config);
    ticket.lastState = state;
    const writes: Array<[string, unknown]> = [];
    const { state: working, jump } = await this.#runHooks(this.#hooks.beforeAgent, state, runtime, ticket, writes);
    return this.#route(jump ?? "model", working, writes, ticket, runtime);
  }

  async #modelNode(state: EngineState, config: LangGraphRunnableConfig) {
    const { ticket, runtime } = this.#runtime(config);
    ticket.lastState = state;
    const writes: Array<[string, unknown]> = [];
    if (state.jump_to === "end") {
      return this.#finish(applyEngineUpdate(state, { jump_to: null }, writes), writes, ticket, runtime);
    }
    const before = await this.#runHooks(this.#hooks.beforeModel, state, runtime, ticket, writes);
    // "model" from beforeModel goes straight to the call, skipping the remaining beforeModel hooks.
    if (before.jump && before.jump !== "model") return this.#route(before.jump, before.state, writes, ticket, runtime);
    let working = before.state;

    const request: ModelRequest = {
      model: this.model,
      systemMessage: this.systemMessage,
      messages: working.messages,
      tools: this.tools,
      state: working,
      runtime,
    };
    const response = await this.#modelChain(config)(request);
    if (!AIMessage.isInstance(response)) {
      throw new DeerflowError("invalid_model_response", "A wrapModelCall returned something other than an AIMessage.");
    }
    working = applyEngineUpdate(working, { messages: [response] }, writes);
    ticket.lastState = working;

    const after = await this.#runHooks(this.#hooks.afterModel, working, runtime, ticket, writes);
    if (after.jump) return this.#route(after.jump, after.state, writes, ticket, runtime);
    return this.#route(pendingToolCalls(after.state.messages).length > 0 ? "tools" : "end", after.state, writes, ticket, runtime);
  }

  async #route(
    target: JumpTarget,
    working: EngineState,
    writes: Array<[string, unknown]>,
    ticket: RunTicket,
    runtime: AgentRuntime,
  ): Promise<Command> {
    if (target === "model") return new Command({ update: writes, goto: NODE.model });
    if (target === "tools") {
      const calls = pendingToolCalls(working.messages);
      if (calls.length === 0) return this.#finish(working, writes, ticket, runtime);
      const { jump_to: _j, ...base } = working;
      return new Command({ update: writes, goto: calls.map((call) => new Send(NODE.tools, { ...base, [TOOL_CALL_KEY]: call })) });
    }
    return this.#finish(working, writes, ticket, runtime);
  }

  /** The run's end from inside a step: the afterAgent hooks run on the step's state, their writes join the step's. */
  async #finish(working: EngineState, writes: Array<[string, unknown]>, ticket: RunTicket, runtime: AgentRuntime): Promise<Command> {
    if (this.#hooks.afterAgent.length === 0) return new Command({ update: writes, goto: END });
    ticket.afterAgentRan = true;
    const stepWrites = writes.length;
    try {
      await this.#runHooks(this.#hooks.afterAgent, working, runtime, ticket, writes);
    } catch (error) {
      return this.#handOver(ticket, { error }, writes.slice(0, stepWrites));
    }
    if (writes.length > stepWrites) return this.#handOver(ticket, { writes: writes.slice(stepWrites) }, writes.slice(0, stepWrites));
    return new Command({ update: writes, goto: END });
  }

  /** Ends the step (with its own writes) at the after_agent node, which delivers what the hooks left. */
  #handOver(ticket: RunTicket, handOver: HandOver, stepWrites: Array<[string, unknown]>): Command {
    ticket.handedOver = handOver;
    return new Command({ update: stepWrites, goto: NODE.afterAgent });
  }

  #modelChain(config: LangGraphRunnableConfig): ModelHandler {
    const base: ModelHandler = (request) => callModel(request, config);
    return this.#modelWrappers.reduceRight<ModelHandler>(
      (next, mw) => (request) => mw.wrapModelCall!(request, next),
      base,
    );
  }

  async #toolNode(input: EngineState & { [TOOL_CALL_KEY]: ToolCall }, config: LangGraphRunnableConfig) {
    const { runtime } = this.#runtime(config);
    const { [TOOL_CALL_KEY]: toolCall, jump_to: _j, ...state } = input;
    const base: ToolHandler = (request) => runTool(request);
    const chain = this.#toolWrappers.reduceRight<ToolHandler>(
      (next, mw) => (request) => mw.wrapToolCall!(request, next),
      base,
    );
    const result = await chain({ toolCall, tool: this.#toolsByName.get(toolCall.name), state: state as AgentState, runtime });
    return toolResultToUpdate(result, toolCall);
  }

  async #afterAgentNode(state: EngineState, config: LangGraphRunnableConfig) {
    const { ticket, runtime } = this.#runtime(config);
    ticket.afterAgentRan = true;
    const handed = takeHandOver(ticket);
    if (handed) return new Command({ update: handed.writes });
    ticket.lastState = state;
    const writes: Array<[string, unknown]> = [];
    await this.#runHooks(this.#hooks.afterAgent, state, runtime, ticket, writes);
    return new Command({ update: writes });
  }
}

/**
 * The run's config pointed at the thread's newest checkpoint. A run started from an earlier one
 * (`checkpoint_id`: regenerate, edit, time travel) must be judged, and cleaned up, on where it
 * ended, not on the checkpoint it branched from, whose pending `next` would read as a pause.
 */
function headOf(config: LangGraphRunnableConfig): LangGraphRunnableConfig {
  const { checkpoint_id: _from, ...configurable } = config.configurable ?? {};
  return { ...config, configurable };
}

export function createAgent(options: CreateAgentOptions): Agent {
  return new Agent(options);
}

/** What a step left for the after_agent node, once: an error is thrown from there, writes returned. */
function takeHandOver(ticket: RunTicket): { readonly writes: Array<[string, unknown]> } | undefined {
  const handed = ticket.handedOver;
  if (handed === undefined) return undefined;
  ticket.handedOver = undefined;
  if ("error" in handed) throw handed.error;
  return handed;
}

function validateMiddlewares(middlewares: readonly AgentMiddleware[]): void {
  const seen = new Set<string>();
  for (const mw of middlewares) {
    if (typeof mw?.name !== "string" || !MIDDLEWARE_NAME.test(mw.name)) {
      throw new DeerflowError("invalid_middleware_name", `Middleware name ${JSON.stringify(mw?.name)} must match ${MIDDLEWARE_NAME}.`);
    }
    if (seen.has(mw.name)) {
      throw new DeerflowError("duplicate_middleware", `Middleware "${mw.name}" appears twice in the stack; names must be unique.`);
    }
    seen.add(mw.name);
  }
}

function bindHooks(middlewares: readonly AgentMiddleware[], hookName: HookName): BoundHook[] {
  const hooks: BoundHook[] = [];
  for (const mw of middlewares) {
    const raw = mw[hookName] as NodeHook | HookSpec | undefined;
    if (raw === undefined) continue;
    const spec: HookSpec = typeof raw === "function" ? { hook: raw } : raw;
    if (typeof spec.hook !== "function") {
      throw new DeerflowError("invalid_hook", `Middleware "${mw.name}": ${hookName} must be a function or { hook, canJumpTo }.`);
    }
    const allowed: readonly JumpTarget[] = hookName === "afterAgent" ? [] : (spec.canJumpTo ?? []);
    hooks.push({ middleware: mw.name, hookName, fn: spec.hook.bind(mw), canJumpTo: new Set(allowed) });
  }
  return hooks;
}

function checkJump(hook: BoundHook, target: JumpTarget): JumpTarget {
  if (!hook.canJumpTo.has(target)) {
    throw new DeerflowError(
      "undeclared_jump",
      `Middleware "${hook.middleware}" jumped to "${target}" from ${hook.hookName} without declaring it; add it to canJumpTo.`,
    );
  }
  return target;
}

/** Folds an update into the working state and records it as ordered channel writes. */
function applyEngineUpdate(state: EngineState, update: Record<string, unknown>, writes: Array<[string, unknown]>): EngineState {
  const { jump_to: jump, ...threadUpdate } = update as ThreadStateUpdate & { jump_to?: "end" | null };
  let next = state;
  const keys = Object.keys(threadUpdate).filter((k) => (threadUpdate as Record<string, unknown>)[k] !== undefined);
  if (keys.length > 0) {
    const { jump_to: current, ...rest } = state;
    next = { ...applyStateUpdate(rest as ThreadState, threadUpdate), jump_to: current };
    for (const key of keys) writes.push([key, (threadUpdate as Record<string, unknown>)[key]]);
  }
  if (jump !== undefined) {
    next = { ...next, jump_to: jump };
    writes.push(["jump_to", jump]);
  }
  return next;
}

/**
 * Ordered channel writes folded to one value per channel (list-valued `messages` concatenated):
 * what updateState takes, and what a client reading a node's update expects to see.
 */
export function groupWrites(writes: ReadonlyArray<readonly [string, unknown]>): Map<string, unknown> {
  const grouped = new Map<string, unknown>();
  for (const [key, value] of writes) {
    if (key === "messages" && grouped.has(key)) {
      grouped.set(key, [...toArray(grouped.get(key)), ...toArray(value)]);
    } else {
      grouped.set(key, value);
    }
  }
  return grouped;
}

function toArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [value];
}

/** The tool calls of the newest AIMessage that no ToolMessage answers yet. */
export function pendingToolCalls(messages: readonly BaseMessage[]): ToolCall[] {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!;
    if (AIMessage.isInstance(message)) {
      const calls = message.tool_calls ?? [];
      if (calls.length === 0) return [];
      const answered = new Set<string>();
      for (let j = i + 1; j < messages.length; j++) {
        const later = messages[j]!;
        if (ToolMessage.isInstance(later)) answered.add(later.tool_call_id);
      }
      return calls.filter((call) => !call.id || !answered.has(call.id));
    }
  }
  return [];
}

function emptyEngineState(): EngineState {
  return { ...emptyThreadState(), jump_to: null };
}

function stripEngineChannels(state: EngineState): ThreadState {
  const { jump_to: _j, ...rest } = state;
  return rest as ThreadState;
}

import type { SystemMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { LangGraphRunnableConfig, StreamMode } from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import { Agent, type AgentGraph, type AgentInput, type AgentRunOptions, type RunRecord } from "../engine/agent.ts";
import { withoutAmbientRun } from "../engine/ambient.ts";
import { RunScope } from "../engine/run-scope.ts";
import type { AgentServices } from "../engine/services.ts";
import type { AgentMiddleware } from "../engine/types.ts";

/**
 * What the runs worker and the gateway's state routes need of an agent: a graph to read and write
 * thread state through, a stream of a run, and (the engine's Agent only) its middlewares and
 * services. A factory may return the engine's Agent or a bare compiled LangGraph graph; the spec
 * keeps the bare graph supported ("a third-party factory returning a bare graph stays supported").
 */
export interface ServedAgent {
  readonly name: string;
  readonly graph: AgentGraph;
  readonly middlewares: readonly AgentMiddleware[];
  /** Absent for a bare graph, which has no engine services or system prompt of its own. */
  readonly services?: AgentServices;
  readonly systemMessage?: SystemMessage;
  stream(input: AgentInput, options?: AgentRunOptions, onRecord?: (record: RunRecord) => void): AsyncGenerator<unknown>;
}

/** What a compiled LangGraph graph (`new StateGraph(...).compile()`) offers; checked by duck type, a second copy of LangGraph has its own classes. */
export interface BareGraph {
  stream(input: unknown, config?: unknown): Promise<AsyncIterable<unknown>>;
  getState(config: unknown): Promise<{ readonly next: readonly string[] }>;
  updateState(config: unknown, values: unknown, asNode?: string): Promise<unknown>;
  withConfig(config: Record<string, unknown>): BareGraph;
  checkpointer?: unknown;
  readonly name?: string;
}

export class InvalidAgentError extends DeerflowError {
  constructor(message: string) {
    super("invalid_agent", message);
    this.name = "InvalidAgentError";
  }
}

function isBareGraph(value: unknown): value is BareGraph {
  if (typeof value !== "object" || value === null) return false;
  const graph = value as Record<string, unknown>;
  return ["stream", "getState", "updateState", "withConfig"].every((key) => typeof graph[key] === "function");
}

function isServedAgent(value: unknown): value is ServedAgent {
  if (value instanceof Agent) return true;
  if (typeof value !== "object" || value === null) return false;
  const agent = value as Record<string, unknown>;
  return typeof agent.stream === "function" && isBareGraph(agent.graph) && Array.isArray(agent.middlewares);
}

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value !== "object") return `a ${typeof value}`;
  const constructorName = (value as { constructor?: { name?: unknown } }).constructor?.name;
  if (constructorName === "Object" || constructorName === undefined) return "a plain object";
  return typeof constructorName === "string" && constructorName !== "" ? `a ${constructorName} instance` : "an object";
}

/**
 * A bare graph run the way the engine runs its own: the gateway's checkpointer (on a copy, so the
 * caller's graph is untouched: thread state, history, rollback and lease fencing all read the one
 * saver the gateway owns, as LangGraph Platform supplies persistence to the graphs it serves), the
 * run's caller context as LangGraph's runtime `context`, and a RunRecord saying how it ended.
 */
class GraphAgent implements ServedAgent {
  readonly name: string;
  readonly graph: AgentGraph;
  readonly middlewares: readonly AgentMiddleware[] = Object.freeze([]);

  constructor(graph: BareGraph, checkpointer: BaseCheckpointSaver) {
    const bound = graph.withConfig({});
    bound.checkpointer = checkpointer;
    this.graph = bound as unknown as AgentGraph;
    this.name = typeof graph.name === "string" && graph.name !== "" ? graph.name : "graph";
  }

  async *stream(input: AgentInput, options: AgentRunOptions = {}, onRecord?: (record: RunRecord) => void): AsyncGenerator<unknown> {
    const runId = options.runId ?? newId("run");
    const record: RunRecord = { runId, scope: new RunScope(runId), cleanupErrors: [], outcome: "running", failure: undefined };
    onRecord?.(record);
    const threadId = options.threadId ?? (options.configurable?.thread_id as string | undefined);
    const configurable = { ...options.configurable, ...(threadId === undefined ? {} : { thread_id: threadId }), run_id: runId };
    const config: LangGraphRunnableConfig & { streamMode: StreamMode | StreamMode[] } = {
      configurable,
      streamMode: options.streamMode ?? "values",
      ...(options.context ? { context: options.context } : {}),
      ...(options.recursionLimit === undefined ? {} : { recursionLimit: options.recursionLimit }),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.callbacks ? { callbacks: options.callbacks } : {}),
    };
    try {
      const stream = await withoutAmbientRun(() => this.graph.stream(input as never, config as never));
      for await (const chunk of stream) yield chunk;
      record.outcome = threadId !== undefined && (await this.#paused(threadId, record)) ? "interrupted" : "completed";
    } catch (error) {
      record.outcome = options.signal?.aborted ? "aborted" : "failed";
      throw error;
    }
  }

  async #paused(threadId: string, record: RunRecord): Promise<boolean> {
    const snapshot = await withoutAmbientRun(() => this.graph.getState({ configurable: { thread_id: threadId } } as never));
    record.finalValues = snapshot.values as Record<string, unknown>;
    return snapshot.next.length > 0;
  }
}

/**
 * Turns what an agent factory returned into a ServedAgent: the engine's Agent as it is, a bare
 * compiled graph wrapped (once per graph) onto `checkpointer`, anything else refused by name.
 */
export function servedAgentFactory<R>(
  factory: (request: R) => Promise<ServedAgent | BareGraph>,
  checkpointer: BaseCheckpointSaver,
): (request: R) => Promise<ServedAgent> {
  const wrapped = new WeakMap<object, GraphAgent>();
  return async (request: R): Promise<ServedAgent> => {
    const value: unknown = await factory(request);
    if (isServedAgent(value)) return value;
    if (isBareGraph(value)) {
      let agent = wrapped.get(value);
      if (agent === undefined) {
        agent = new GraphAgent(value, checkpointer);
        wrapped.set(value, agent);
      }
      return agent;
    }
    throw new InvalidAgentError(
      `the agent factory returned ${describeValue(value)}; return the engine's Agent (createAgent) or a compiled LangGraph graph (new StateGraph(...).compile())`,
    );
  };
}

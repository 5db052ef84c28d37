/**
 * The lead agent the bench's gateway serves (bench/gateway-app.ts: the embedded defaults, demo
 * model, virtual sandbox), outside the gateway, for bench/gateway.ts's fair comparison:
 * - createLeadAgent(storage): the agent the gateway's factory (src/runtime/agent-factory.ts)
 *   assembles for the auth-disabled caller (assembleLeadAgent, embedded defaults), over `storage`
 *   with the gateway's KeyValueCheckpointSaver; the in-process floor runs it with no HTTP, no run
 *   manager and no SSE.
 * - `graph` (bench/lgapi/serve.ts serves it as `bench/lead-agent.ts:graph`): the same agent over
 *   memory storage, without a checkpointer of its own (langgraph-api checkpoints), as a compiled
 *   LangGraph graph for the official server.
 * The run's context is what the gateway's run worker gives the agent for that caller (user id,
 * role, thread and run ids).
 */
// First, as in the other benches (docs/toolchain.md, AsyncLocalStorage before any import); in
// langgraph-api's process too, where this file is the first to load the project's @langchain copies.
import "../adapters/shared/als.ts";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { END, MessagesAnnotation, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { assembleLeadAgent } from "../src/agents/lead-agent.ts";
import { systemClock } from "../src/core/clock.ts";
import { mapEnv } from "../src/core/env.ts";
import { newId } from "../src/core/ids.ts";
import type { Agent } from "../src/engine/index.ts";
import { DEFAULT_USER_ID } from "../src/engine/run-identity.ts";
import type { KeyValue } from "../src/ports/key-value.ts";
import { KeyValueCheckpointSaver } from "../src/runtime/kv-checkpointer.ts";
import { createVirtualSandboxProvider } from "../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import { benchConfig } from "./gateway-app.ts";

export interface BenchLeadAgent {
  readonly agent: Agent;
  /** The context the gateway's run worker passes for the auth-disabled caller. */
  context(threadId: string, runId: string): Record<string, unknown>;
  /** Flushes and closes the memory store. */
  close(): Promise<void>;
}

/** The auth-disabled caller (src/gateway/auth/layer.ts): the admin "default". */
const USER = { id: DEFAULT_USER_ID, systemRole: "admin", isInternal: false } as const;

/**
 * The lead agent the gateway assembles for the auth-disabled caller, over `storage` (sandbox and
 * memory there too); checkpointed by `checkpointer` (default: the gateway's KeyValueCheckpointSaver
 * over `storage`; null: none).
 */
export async function createLeadAgent(storage: KeyValue, options: { checkpointer?: BaseCheckpointSaver | null } = {}): Promise<BenchLeadAgent> {
  const config = benchConfig();
  const env = mapEnv({});
  const checkpointer = options.checkpointer === undefined ? new KeyValueCheckpointSaver({ storage }) : (options.checkpointer ?? undefined);
  const assembly = await assembleLeadAgent({
    config,
    env,
    ...(checkpointer === undefined ? {} : { checkpointer }),
    services: { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }), env, baseDir: config.storage.base },
    context: { user_id: USER.id, user_role: USER.systemRole, is_internal: USER.isInternal },
  });
  return {
    agent: assembly.agent,
    // As the run worker's serverContext (src/runtime/runs/worker.ts) for this caller.
    context: (threadId, runId) => ({ user_id: USER.id, user_role: USER.systemRole, is_internal: USER.isInternal, thread_id: threadId, run_id: runId }),
    close: async () => {
      await assembly.memoryStore?.close();
    },
  };
}

let served: Promise<BenchLeadAgent> | undefined;

/**
 * One node that runs the lead agent to its end on the thread's messages and returns its final
 * messages. The engine's graph cannot be handed to the server as it is: its nodes find their run
 * through a ticket Agent.stream puts in the config. The server's callbacks go along, so the
 * model's tokens reach its `messages` stream as they would from a graph of its own.
 */
async function leadAgentNode(state: typeof MessagesAnnotation.State, config: LangGraphRunnableConfig): Promise<{ messages: unknown[] }> {
  const { agent, context } = await (served ??= createLeadAgent(createMemoryKeyValue(), { checkpointer: null }));
  const threadId = String(config.configurable?.["thread_id"] ?? newId("thread"));
  const runId = String(config.configurable?.["run_id"] ?? newId("run"));
  let last: { messages?: unknown[] } | undefined;
  for await (const chunk of agent.stream({ messages: state.messages }, {
    threadId,
    runId,
    context: context(threadId, runId),
    streamMode: "values",
    ...(config.callbacks ? { callbacks: config.callbacks as never } : {}),
    ...(config.signal ? { signal: config.signal } : {}),
  })) {
    last = chunk as { messages?: unknown[] };
  }
  return { messages: last?.messages ?? [] };
}

export const graph = new StateGraph(MessagesAnnotation).addNode("lead_agent", leadAgentNode).addEdge(START, "lead_agent").addEdge("lead_agent", END).compile();

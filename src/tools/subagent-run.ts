import type { BaseMessage } from "@langchain/core/messages";
import { SCOPE_ID_MAX, toIdAlphabet } from "../core/ids.ts";
import type { Agent } from "../engine/agent.ts";
import type { AgentRuntime } from "../engine/types.ts";
import type { AgentAssemblyDescriptor } from "../extension-api/index.ts";
import type { LoadedExtensions } from "../extensions/registry.ts";
import { sha256HexSync } from "../extension-api/sha256-sync.ts";
import type { SubagentStatus, SubagentStopReason } from "./subagent-result.ts";

/*
 * What the delegation tools (`task`, `batch_task`) need of a subagent run, declared on the tools'
 * floor: the agents layer (agents/subagent-executor.ts) runs subagents and hands the tools a
 * SubagentRunner when it assembles them (agents/delegation-tools.ts), so no tool imports agents/.
 */

/** One kind of subagent the lead may delegate to. */
export interface SubagentType {
  readonly name: string;
  /** Shown to the lead model in the task tool's description: when to delegate here. */
  readonly description: string;
  readonly systemPrompt: string;
  /** Tool names the subagent may use, or null for all the lead's tools (minus the denylist). */
  readonly tools: readonly string[] | null;
  /** Tool names never given to the subagent, whatever `tools` allows. */
  readonly disallowedTools: readonly string[];
  /** A model name, or undefined to inherit the lead's model. */
  readonly model?: string;
  /** Graph steps (LangGraph recursion limit) before the run is cut off as turn_capped. */
  readonly maxTurns: number;
  readonly timeoutMs: number;
}

export type SubagentTerminalStatus = Exclude<SubagentStatus, "polling_timed_out">;

export interface SubagentUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

export interface SubagentParent {
  /** The runtime of the parent's `task` tool call: its writer, signal, clock and identity context. */
  readonly runtime: AgentRuntime;
  readonly runId: string;
  readonly threadId: string | undefined;
  readonly toolCallId: string;
}

/** What a subagent's builder is told besides its type. */
export interface SubagentBuildContext {
  /**
   * The extension snapshot this delegation runs with (the parent run's, else the assembly's): the
   * one its task store and lifecycle hooks use, so construction composes the same generation.
   */
  readonly extensions: LoadedExtensions | undefined;
}

/** A built subagent with the assembly descriptor its builder published for it. */
export interface SubagentAssembly {
  readonly agent: Agent;
  readonly descriptor: AgentAssemblyDescriptor;
  readonly fingerprint: string;
}

/** Builds the subagent's own Agent (its chain, tools and model); called once per delegation. */
export type SubagentBuilder = (
  type: SubagentType,
  context: SubagentBuildContext,
) => Agent | SubagentAssembly | Promise<Agent | SubagentAssembly>;

export interface RunSubagentOptions {
  readonly type: SubagentType;
  readonly prompt: string;
  readonly description: string;
  readonly parent: SubagentParent;
  readonly buildAgent: SubagentBuilder;
  /**
   * Forward the subagent's LoopDetection transitions to the parent run's journal (through the
   * parent's event writer, nothing else of the subagent's stream). Ordinary `task` delegations do;
   * durable batch items do not persist them.
   */
  readonly recordLoopDetection?: boolean;
}

export interface SubagentRunResult {
  readonly status: SubagentTerminalStatus;
  readonly stop_reason: SubagentStopReason | null;
  /** The final text, bounded for metadata; null when the run produced no result. */
  readonly result_brief: string | null;
  /** sha256 of the full final text; null when there is none. */
  readonly result_sha256: string | null;
  readonly usage: SubagentUsage;
  /** The full final text (completed runs only). */
  readonly result: string | undefined;
  /** What went wrong (every status but completed). */
  readonly error: string | undefined;
  /** The subagent's messages as last seen, for citation checks against its citing turn. */
  readonly messages: readonly BaseMessage[];
  readonly thread_id: string;
  readonly run_id: string;
  /** The delegated agent's assembly descriptor, when its builder published one (the lead's does). */
  readonly assembly_descriptor?: AgentAssemblyDescriptor;
}

/** The subagent's own thread: stable per parent thread and tool call, distinct from the parent's. */
/**
 * The subagent's own thread: derived from the parent thread and the dispatching call, in the id
 * alphabet thread data and sandboxes accept (1-128 of [A-Za-z0-9_-]); a longer one keeps a readable
 * head and a digest of the whole, so two delegations never share a thread.
 */
export function subagentThreadId(parentThreadId: string | undefined, toolCallId: string): string {
  const raw = toIdAlphabet(`${parentThreadId ?? "threadless"}-task-${toolCallId}`, "_");
  if (raw.length <= SCOPE_ID_MAX && raw === `${parentThreadId ?? "threadless"}-task-${toolCallId}`) return raw;
  return `${raw.slice(0, 95)}-${sha256HexSync(`${parentThreadId ?? ""}\u0000${toolCallId}`).slice(0, 32)}`;
}

/** How a delegation tool runs a subagent: given to the tool by whoever assembles it. */
export interface SubagentRunner {
  /** Runs one delegated task to its terminal verdict (agents/subagent-executor.ts runSubagent). */
  run(options: RunSubagentOptions): Promise<SubagentRunResult>;
  /** The subagent types a tool offers when it is given none. */
  readonly defaultTypes: readonly SubagentType[];
  /** The verdict on a completed report's citations, stored in the task result's kwargs; undefined: none. */
  citationVerdict(outcome: Pick<SubagentRunResult, "status" | "result" | "messages">): object | undefined;
}

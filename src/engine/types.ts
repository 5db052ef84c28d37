import type { AIMessage, BaseMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { ToolCall } from "@langchain/core/messages/tool";
import type { Command } from "@langchain/langgraph/web";
import type { ThreadState, ThreadStateUpdate } from "../state/thread-state.ts";
import type { RunScope } from "./run-scope.ts";
import type { AgentServices } from "./services.ts";

/** Where a hook may send the run next. A hook may only use targets it declares. */
export type JumpTarget = "model" | "tools" | "end";

/** The state every hook sees: ThreadState's channels. */
export type AgentState = ThreadState;

/** A partial state update, folded through each channel's reducer. */
export type StateUpdate = ThreadStateUpdate;

export type HookResult = (StateUpdate & { jumpTo?: JumpTarget }) | void | undefined;

/** Everything a hook can see about the run besides state. Caller context is frozen. */
export interface AgentRuntime {
  /** The caller's context, deep-frozen: middlewares read it and never write it. */
  readonly context: Readonly<Record<string, unknown>>;
  /** Per-run mutable facts owned by the engine; a caller cannot reach it. */
  readonly scope: RunScope;
  readonly threadId: string | undefined;
  readonly runId: string;
  readonly signal: AbortSignal | undefined;
  /** Emits a `custom` stream event (no-op when the caller did not ask for custom events). */
  readonly writer: (chunk: unknown) => void;
  /** Ports and shared services given at assembly (sandbox provider, storage, clock, env). */
  readonly services: AgentServices;
}

export type NodeHook = (state: AgentState, runtime: AgentRuntime) => HookResult | Promise<HookResult>;
export interface HookSpec {
  hook: NodeHook;
  canJumpTo?: readonly JumpTarget[];
}

/** A tool as the engine runs it: JSON Schema parameters and an async body. */
export interface AgentTool {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object. */
  readonly schema: Record<string, unknown>;
  /** Free-form facts about the tool's origin (for example `deerflow_mcp`). */
  readonly metadata?: Readonly<Record<string, unknown>>;
  invoke(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput>;
}

export interface ToolContext {
  readonly toolCall: ToolCall;
  readonly state: AgentState;
  readonly runtime: AgentRuntime;
}

/** What a tool body may return: text, a full ToolMessage, or a Command (state update and/or goto end). */
export type ToolOutput = string | ToolMessage | Command | Array<Record<string, unknown>>;

export interface ModelRequest {
  readonly model: BaseChatModel;
  /** The system prompt, kept apart so it can be cached as a static prefix. */
  readonly systemMessage: SystemMessage | undefined;
  readonly messages: readonly BaseMessage[];
  readonly tools: readonly AgentTool[];
  readonly toolChoice?: "auto" | "none" | "required" | string;
  readonly state: AgentState;
  readonly runtime: AgentRuntime;
}
export type ModelHandler = (request: ModelRequest) => Promise<AIMessage>;

export interface ToolCallRequest {
  readonly toolCall: ToolCall;
  /** Undefined when the model called a tool that is not bound. */
  readonly tool: AgentTool | undefined;
  readonly state: AgentState;
  readonly runtime: AgentRuntime;
}
export type ToolResult = ToolMessage | Command;
export type ToolHandler = (request: ToolCallRequest) => Promise<ToolResult>;

/**
 * One middleware. The stack is ordered outer to inner: before* hooks run in stack order, after*
 * hooks in reverse, the first wrapper is the outermost.
 */
export interface AgentMiddleware {
  /** Stable name, `^[A-Za-z0-9_.-]+$`, unique in a stack. */
  readonly name: string;
  /** Tools this middleware contributes to the agent. */
  readonly tools?: readonly AgentTool[];
  readonly beforeAgent?: NodeHook | HookSpec;
  readonly beforeModel?: NodeHook | HookSpec;
  readonly afterModel?: NodeHook | HookSpec;
  readonly afterAgent?: NodeHook | HookSpec;
  wrapModelCall?(request: ModelRequest, handler: ModelHandler): Promise<AIMessage>;
  wrapToolCall?(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult>;
  /** Behaviour-affecting configuration as JSON-safe values (long text hashed). */
  releasePolicyParameters?(): Record<string, unknown>;
}

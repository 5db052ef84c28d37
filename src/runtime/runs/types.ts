import { DeerflowError } from "../../core/errors.ts";
import type { ServedAgent } from "../served-agent.ts";

/*
 * The run lifecycle's own vocabulary. The gateway's seam types (GatewayUser, ThreadStore,
 * AgentFactory) are structurally compatible with the ones here; runtime/ sits below gateway/, so
 * it describes only the parts it reads instead of importing them.
 */

export const RUN_STATUSES = ["pending", "running", "success", "error", "timeout", "interrupted"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set(["success", "error", "timeout", "interrupted"]);

export const MULTITASK_STRATEGIES = ["reject", "interrupt", "rollback", "enqueue"] as const;
export type MultitaskStrategy = (typeof MULTITASK_STRATEGIES)[number];

/** Stream modes a client may ask for; `messages-tuple` runs LangGraph's `messages` mode and is sent as event `messages`. */
export const RUN_STREAM_MODES = ["values", "updates", "messages-tuple", "custom"] as const;
export type RunStreamMode = (typeof RUN_STREAM_MODES)[number];

export type CancelAction = "interrupt" | "rollback";

export interface RunErrorInfo {
  readonly name: string;
  readonly message: string;
}

/** One run's durable row (the LangGraph `Run` shape plus owner and error). */
export interface RunRecord {
  readonly run_id: string;
  readonly thread_id: string;
  readonly assistant_id: string;
  readonly status: RunStatus;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly multitask_strategy: MultitaskStrategy;
  readonly created_at: string;
  readonly updated_at: string;
  readonly owner_id: string | null;
  readonly error: RunErrorInfo | null;
  /** What the run was asked to do (input, command, config, context, stream modes ...). */
  readonly kwargs: Readonly<Record<string, unknown>>;
}

/** A validated, server-owned-keys-stripped run request: what the HTTP body or an embedded caller asks for. */
export interface RunRequest {
  readonly assistantId: string;
  readonly input: Readonly<Record<string, unknown>> | null;
  readonly command: { readonly resume?: unknown; readonly update?: unknown } | null;
  readonly metadata: Readonly<Record<string, unknown>>;
  /** `config.configurable` without server-owned keys (checkpoint_id selects a checkpoint to run from). */
  readonly configurable: Readonly<Record<string, unknown>>;
  /** The caller's context without server-owned keys; the server's identity keys are written after it. */
  readonly context: Readonly<Record<string, unknown>>;
  readonly streamMode: readonly RunStreamMode[];
  readonly onDisconnect: "cancel" | "continue";
  readonly multitaskStrategy: MultitaskStrategy;
  /** Undefined: the agent's configured limit. */
  readonly recursionLimit?: number;
}

/** Who starts a run: the subset of the gateway's user the run lifecycle reads. */
export interface RunPrincipal {
  readonly id: string;
  readonly systemRole: string;
  readonly isInternal: boolean;
  readonly oauthProvider?: string;
  readonly oauthId?: string;
  readonly authzAttributes?: Readonly<Record<string, unknown>>;
}

/**
 * Who may change what belongs to the whole deployment (skills, the MCP config, custom agents): an
 * administrator, never an internal caller acting for one. The gateway's routes and the
 * setup_agent tool both ask this.
 */
export function isDeploymentAdministrator(user: Pick<RunPrincipal, "systemRole" | "isInternal">): boolean {
  return user.systemRole === "admin" && user.isInternal !== true;
}

export type RunThreadStatus = "idle" | "busy" | "interrupted" | "error";

/** The thread-meta operations the run lifecycle needs (a subset of the gateway's ThreadStore). */
export interface RunThreadStore {
  get(threadId: string): Promise<{ readonly thread_id: string } | undefined>;
  update(threadId: string, patch: { status?: RunThreadStatus; display_name?: string | null }): Promise<unknown>;
}

export interface RunAgentRequest<U extends RunPrincipal = RunPrincipal> {
  readonly user: U;
  readonly modelName?: string;
  /** The custom agent the run asked for (`context.agent_name`), if any. */
  readonly agentName?: string;
  /** The UI's agent-creation chat (`context.is_bootstrap` with an agent_name): the agent gets setup_agent. */
  readonly bootstrap?: boolean;
  readonly subagentsEnabled?: boolean;
  readonly planMode?: boolean;
}
export type RunAgentFactory<U extends RunPrincipal = RunPrincipal> = (request: RunAgentRequest<U>) => Promise<ServedAgent>;

/**
 * Something measured across a run (the workspace changes): begun once the run holds its thread,
 * finished after its graph ended; what `finish` returns is journaled as a custom event of the run.
 * A probe that fails costs only its record, never the run.
 */
export type RunProbe<U extends RunPrincipal = RunPrincipal> = (run: {
  readonly threadId: string;
  readonly runId: string;
  readonly user: U;
}) => Promise<RunProbeFinish | undefined>;
/**
 * `ended.values`: the thread's values as the graph left them, when it finished uncancelled (the
 * engine read them for the outcome); absent after a cancel or a failure, when the probe reads the
 * thread itself if it needs them.
 */
export type RunProbeFinish = (ended: { readonly values?: Readonly<Record<string, unknown>> }) => Promise<Record<string, unknown> | undefined>;

export interface RunDiagnostic {
  readonly level: "error" | "warning" | "info";
  readonly source: string;
  readonly message: string;
}

/** Why a run operation was refused; the gateway picks the HTTP status from the code (src/gateway/errors.ts). */
export type RunOperationErrorCode =
  /** The gateway is draining and admits no new run. */
  | "shutting_down"
  /** The thread is being deleted, or has a run in progress and cannot be deleted. */
  | "thread_busy"
  /** The thread has a run in progress and the request's multitask strategy is "reject". */
  | "run_conflict"
  /** The run is not finished but is not running in this gateway either. */
  | "run_not_active"
  /** The run has finished, so there is nothing to cancel. */
  | "run_not_cancellable"
  /** The run is still going, so it cannot be deleted. */
  | "run_active"
  /** context.model_name names no configured model. */
  | "unknown_model"
  /** context.agent_name names no custom agent. */
  | "unknown_agent"
  | "run_not_found"
  | "assistant_not_found"
  /** Last-Event-ID is not a frame id. */
  | "invalid_last_event_id"
  /** The run body does not match the run request schema. */
  | "invalid_run_request"
  /** The run input writes a channel only the server may write. */
  | "server_owned_state"
  /** input.messages holds something that is not a message. */
  | "invalid_input_message"
  /** A query parameter has a value the route does not take. */
  | "invalid_query"
  | "invalid_thread_id"
  | "invalid_run_id";

/** A failure of a run operation. It carries no HTTP status: the gateway maps its code to one. */
export class RunOperationError extends DeerflowError {
  declare readonly code: RunOperationErrorCode;

  constructor(code: RunOperationErrorCode, message: string) {
    super(code, message);
    this.name = "RunOperationError";
  }
}

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_RUN_STATUSES.has(status);
}

/** Default request values, for embedded callers that build a RunRequest by hand. */
export function runRequest(fields: Partial<RunRequest> = {}): RunRequest {
  return {
    assistantId: fields.assistantId ?? "lead_agent",
    input: fields.input ?? null,
    command: fields.command ?? null,
    metadata: fields.metadata ?? {},
    configurable: fields.configurable ?? {},
    context: fields.context ?? {},
    streamMode: fields.streamMode ?? ["values"],
    onDisconnect: fields.onDisconnect ?? "cancel",
    multitaskStrategy: fields.multitaskStrategy ?? "reject",
    ...(fields.recursionLimit === undefined ? {} : { recursionLimit: fields.recursionLimit }),
  };
}

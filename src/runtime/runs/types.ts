import { DeerflowError } from "../../core/errors.ts";
import type { Agent } from "../../engine/agent.ts";

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

export type RunThreadStatus = "idle" | "busy" | "interrupted" | "error";

/** The thread-meta operations the run lifecycle needs (a subset of the gateway's ThreadStore). */
export interface RunThreadStore {
  get(threadId: string): Promise<{ readonly thread_id: string } | undefined>;
  update(threadId: string, patch: { status?: RunThreadStatus; display_name?: string | null }): Promise<unknown>;
}

export interface RunAgentRequest<U extends RunPrincipal = RunPrincipal> {
  readonly user: U;
  readonly modelName?: string;
  readonly subagentsEnabled?: boolean;
  readonly planMode?: boolean;
}
export type RunAgentFactory<U extends RunPrincipal = RunPrincipal> = (request: RunAgentRequest<U>) => Promise<Agent>;

export interface RunDiagnostic {
  readonly level: "error" | "warning" | "info";
  readonly source: string;
  readonly message: string;
}

/** A failure of a run operation, with the HTTP status the gateway answers it with. */
export class RunOperationError extends DeerflowError {
  readonly status: 400 | 404 | 409 | 422 | 503;

  constructor(status: 400 | 404 | 409 | 422 | 503, code: string, message: string) {
    super(code, message);
    this.name = "RunOperationError";
    this.status = status;
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

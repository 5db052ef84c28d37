/** The sandbox a thread is bound to; set lazily by the first sandbox tool that runs. */
export interface SandboxState {
  sandbox_id: string;
}

/** A thread's user-data folders as the sandbox shows them: `/mnt/user-data/{workspace,uploads,outputs}`, never a host path. */
export interface ThreadDataState {
  workspace_path: string;
  uploads_path: string;
  outputs_path: string;
}

/** One file the user uploaded to the thread; gateways add their own keys, so the record stays open. */
export interface UploadedFile {
  filename: string;
  size: number;
  path: string;
  [key: string]: unknown;
}

export type TodoStatus = "pending" | "in_progress" | "completed";

export interface Todo {
  content: string;
  status: TodoStatus;
}

/** Metadata of an image the agent looked at; the bytes stay on disk and never enter a checkpoint. */
export interface ViewedImage {
  mime_type: string;
  size: number;
  actual_path: string;
}

/** Deferred tools exposed by tool_search, valid only for the tool catalog whose hash they carry. */
export interface Promoted {
  catalog_hash: string;
  names: string[];
}

export type DelegationStatus =
  | "in_progress"
  | "completed"
  | "failed"
  | "cancelled"
  | "timed_out"
  | "polling_timed_out";

/** Why a guardrail ended a subagent early; the status itself stays completed or failed. */
export type DelegationStopReason = "token_capped" | "turn_capped" | "loop_capped";

interface DelegationFields {
  description: string;
  subagent_type: string;
  status: DelegationStatus;
  stop_reason?: DelegationStopReason | null;
  result_brief?: string;
  result_sha256?: string;
  result_ref?: string;
  error?: string;
  run_id?: string;
  created_at?: string;
  updated_at?: string;
}

/** One `task` delegation in the thread's ledger. Producers may attach further keys. */
export interface Delegation extends DelegationFields {
  id: string;
  [key: string]: unknown;
}

/**
 * What a writer sends for one delegation: the id plus any fields to merge over the stored entry.
 * A first-seen id needs at least a `status`.
 */
export type DelegationUpdate = { id: string; [key: string]: unknown } & Partial<DelegationFields>;

/** A skill file the agent read: a reference for later turns, never the skill's body. */
export interface SkillContextEntry {
  name: string;
  path: string;
  description: string;
  loaded_at: number;
}

/**
 * What a writer may send for a skill read. Older checkpoints carried the body under `body` or
 * `content`; those keys (and any other extra key) are accepted and dropped.
 */
export interface SkillContextInput {
  path: string;
  name?: string;
  description?: string;
  loaded_at?: number;
  [legacy: string]: unknown;
}

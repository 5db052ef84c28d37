import type { ExtensionData } from "./task-store.ts";

/** How a task ended: `aborted` covers an interrupt or a cancellation, `failed` an error. */
export type TaskOutcome = "completed" | "aborted" | "failed";

export const TASK_OUTCOMES: readonly TaskOutcome[] = Object.freeze(["completed", "aborted", "failed"]);

/** One lead run or one delegated subagent execution. */
export interface TaskInfo {
  /** The run id for a lead task, the execution id for a subagent. */
  readonly taskId: string;
  readonly runId: string;
  readonly threadId: string;
  readonly kind: "lead" | "subagent";
  /** The parent run's id, set for subagents only. */
  readonly parentTaskId?: string;
  readonly agentName?: string;
  /** True when the task continues an interrupted one rather than starting fresh. */
  readonly resumed: boolean;
}

/** A frozen TaskInfo; `resumed` defaults to false. */
export function taskInfo(fields: Omit<TaskInfo, "resumed"> & { readonly resumed?: boolean }): TaskInfo {
  return Object.freeze({ ...fields, resumed: fields.resumed === true });
}

/**
 * Told when a task starts and stops. Both methods are optional, so a contributor implements only
 * what it needs. The host awaits them within a shared time budget; a hook that throws or overruns is
 * reported and skipped, never fails the task.
 */
export interface TaskLifecycleContributor {
  onTaskStart?(appStore: ExtensionData, taskStore: ExtensionData, info: TaskInfo): void | Promise<void>;
  onTaskStop?(appStore: ExtensionData, taskStore: ExtensionData, info: TaskInfo, outcome: TaskOutcome): void | Promise<void>;
}

import type { AgentRuntime } from "../engine/types.ts";

/** Why a run stopped early; the run worker persists it with the run. */
export type StopReason = "loop_capped" | "token_capped" | "safety_capped" | "subagent_limit_capped" | "model_length_capped";

export const STOP_REASON_KEY = "stop_reason";

/** Records why the run stopped, unless an earlier guard already did: the first stop wins. */
export function recordStopReason(runtime: AgentRuntime, reason: StopReason): boolean {
  if (runtime.scope.has(STOP_REASON_KEY)) return false;
  runtime.scope.set(STOP_REASON_KEY, reason);
  return true;
}

export function readStopReason(runtime: AgentRuntime): StopReason | undefined {
  return runtime.scope.get<StopReason>(STOP_REASON_KEY);
}

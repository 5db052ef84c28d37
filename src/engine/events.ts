import { isGraphBubbleUp } from "@langchain/langgraph/web";
import type { AgentRuntime } from "./types.ts";

/**
 * Writes a custom event to the run's stream for live clients and the audit trail. Best effort: a
 * consumer that fails must not change what the agent does; only control flow (a graph interrupt,
 * an abort) escapes.
 */
export function emitEvent(runtime: AgentRuntime, event: unknown): void {
  try {
    runtime.writer(event);
  } catch (error) {
    if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
  }
}

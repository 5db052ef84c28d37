import { ManualClock } from "../../src/core/clock.ts";
import type { AgentRuntime } from "../../src/engine/types.ts";
import type { AgentServices } from "../../src/engine/services.ts";
import { RunScope } from "../../src/engine/run-scope.ts";

/** A hand-built runtime, the way the engine hands one to hooks and tools. */
export function makeRuntime(options: {
  context?: Record<string, unknown>;
  threadId?: string;
  runId?: string;
  signal?: AbortSignal;
  services?: Partial<AgentServices>;
} = {}): AgentRuntime {
  const runId = options.runId ?? "run-1";
  return {
    context: Object.freeze({ ...options.context }),
    scope: new RunScope(runId),
    threadId: options.threadId,
    runId,
    signal: options.signal,
    writer: () => {},
    services: { clock: new ManualClock(Date.UTC(2026, 4, 8, 12, 0, 0)), ...options.services },
  };
}

import type { AgentRuntime } from "../engine/types.ts";

/*
 * The seam through which the host's own model calls — the ones no middleware model-call wrapper
 * sees: titles, summaries, memory extraction, goal evaluation, the gateway's follow-up suggestions
 * and draft polishing — can be observed. Middlewares take
 * a hook of this type in their deps and route each such call through it; the extension layer
 * supplies one that reports to system-model-call observers. Keeping only this type here leaves the
 * middlewares independent of the extension machinery: without a hook, a call is just the call.
 */

/** Which host-owned call this is; the same names the extension API's SystemOperationKind uses. */
export type SystemModelCallKind = "title" | "summarization" | "memory" | "goal" | "suggestions" | "input_polish";

/** What the call sends: a message list, or the one prompt string (never split). */
export interface SystemModelCallRequest {
  readonly messages: unknown;
  readonly modelName?: string;
}

/**
 * Runs `invoke` and resolves or rejects exactly as it does: a hook may observe the call, never
 * change its outcome. `runtime` is the run the call belongs to, when it belongs to one (memory
 * extraction runs detached, after the run).
 */
export type SystemModelCallHook = <R>(
  kind: SystemModelCallKind,
  request: SystemModelCallRequest,
  invoke: () => Promise<R>,
  runtime?: AgentRuntime,
) => Promise<R>;

/** The default hook: the model call and nothing else. */
export const runSystemModelCall: SystemModelCallHook = (_kind, _request, invoke) => invoke();

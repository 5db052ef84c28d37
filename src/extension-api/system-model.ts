import type { ExtensionData } from "./task-store.ts";

/** The host's own model calls, made outside the agent loop. */
export type SystemOperationKind = "goal" | "memory" | "title" | "summarization" | "suggestions" | "input_polish";

export const SYSTEM_OPERATION_KINDS: readonly SystemOperationKind[] = Object.freeze(["goal", "memory", "title", "summarization", "suggestions", "input_polish"]);

/** What the host sent. `messages` is always a frozen array, whatever the call site passed. */
export interface SystemModelRequest {
  readonly messages: readonly unknown[];
  readonly modelName?: string;
  readonly invokeConfig?: Readonly<Record<string, unknown>>;
}

/**
 * A frozen request. An array of messages is copied (so the call site mutating its list later does
 * not rewrite what observers saw); anything else — a prompt string, one message object — becomes a
 * one-element array holding it whole, never split into characters; no messages gives an empty array.
 */
export function systemModelRequest(fields: {
  readonly messages?: unknown;
  readonly modelName?: string;
  readonly invokeConfig?: Readonly<Record<string, unknown>>;
} = {}): SystemModelRequest {
  const { messages } = fields;
  const normalised = Array.isArray(messages) ? [...(messages as unknown[])] : messages === undefined ? [] : [messages];
  const request: { -readonly [K in keyof SystemModelRequest]: SystemModelRequest[K] } = { messages: Object.freeze(normalised) };
  if (fields.modelName !== undefined) request.modelName = fields.modelName;
  if (fields.invokeConfig !== undefined) request.invokeConfig = fields.invokeConfig;
  return Object.freeze(request);
}

/** What came back: `response` on success, `error` on failure; `durationMs` either way. */
export interface SystemModelResult {
  readonly response?: unknown;
  readonly error?: unknown;
  readonly durationMs: number;
}

/** Observes every system model call. Observation only: its return value and its failures never reach the caller. */
export interface SystemModelCallObserver {
  onSystemModelCall(
    appStore: ExtensionData,
    taskStore: ExtensionData,
    kind: SystemOperationKind,
    request: SystemModelRequest,
    result: SystemModelResult,
  ): void | Promise<void>;
}

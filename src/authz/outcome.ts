import type { RunScope } from "../engine/run-scope.ts";

/*
 * The neutral record of an authorization or guardrail decision about one tool call, published in
 * the engine-owned run scope (never caller context), keyed by tool_call_id. The publisher and its
 * consumers share only this module. Gates run outer to inner and each one publishes, so the value
 * left for a call is the decision that settled it: the outer gate's deny, or the innermost allow.
 */

/** Run-scope key. `__`-prefixed like every reserved key; the scope is unreachable for callers anyway. */
export const AUTHORIZATION_OUTCOME_KEY = "__authorization_outcome";

export interface AuthorizationOutcome {
  readonly toolCallId: string;
  readonly toolName: string;
  /** The middleware that decided (`Authorization`, `Guardrail`). */
  readonly gate: string;
  /** The provider's name (`authorization`, `allowlist`, ...). */
  readonly provider: string;
  readonly allowed: boolean;
  /** The reason code, e.g. `oap.tool_not_allowed`, `authz.denied`, `oap.evaluator_error`. */
  readonly rule: string;
  readonly reason: string | null;
  readonly policyId: string | null;
  /** The provider failed and fail_closed decided. */
  readonly providerError: boolean;
  readonly failClosed: boolean;
  /** ISO-8601 time of the decision. */
  readonly decidedAt: string;
}

type OutcomeTable = Record<string, AuthorizationOutcome>;

// A null-prototype record rather than a Map: the scope's diagnostic snapshot stays JSON-safe, and a
// tool_call_id such as "__proto__" is just another key.
function outcomes(scope: RunScope, create: boolean): OutcomeTable | undefined {
  const existing = scope.get<unknown>(AUTHORIZATION_OUTCOME_KEY);
  if (typeof existing === "object" && existing !== null && Object.getPrototypeOf(existing) === null) return existing as OutcomeTable;
  if (!create) return undefined;
  const fresh = Object.create(null) as OutcomeTable;
  scope.set(AUTHORIZATION_OUTCOME_KEY, fresh);
  return fresh;
}

export function publishAuthorizationOutcome(scope: RunScope, outcome: AuthorizationOutcome): void {
  outcomes(scope, true)![outcome.toolCallId] = Object.freeze({ ...outcome });
}

/** Reads and removes the outcome of one call: each decision is consumed once. */
export function takeAuthorizationOutcome(scope: RunScope, toolCallId: string): AuthorizationOutcome | undefined {
  const table = outcomes(scope, false);
  if (table === undefined || !Object.hasOwn(table, toolCallId)) return undefined;
  const outcome = table[toolCallId];
  delete table[toolCallId];
  return outcome;
}

export function peekAuthorizationOutcome(scope: RunScope, toolCallId: string): AuthorizationOutcome | undefined {
  const table = outcomes(scope, false);
  return table !== undefined && Object.hasOwn(table, toolCallId) ? table[toolCallId] : undefined;
}

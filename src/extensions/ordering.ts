/**
 * The host's ordering invariants as data: which middleware must wrap which. Names only (the
 * extension layer sits below the middlewares and never imports them). The stack composer checks
 * the final composed stack against these; a violation names the members involved.
 */
export interface OrderingConstraint {
  /** Must come earlier in the stack (wrap outside). */
  readonly outer: string;
  /** Must come later (wrap inside), when present. */
  readonly inner: string;
  readonly reason: string;
}

const RECEIPT_REASON =
  "ToolReceipt is the outermost gate-facing tool wrapper: an inner receipt layer would gap the ledger on results the gates answer themselves";

export const HOST_ORDERING_CONSTRAINTS: readonly OrderingConstraint[] = Object.freeze([
  ...["Authorization", "Guardrail", "SandboxAudit", "ReadBeforeWrite", "ToolProgress", "ToolErrorHandling"].map(
    (inner): OrderingConstraint => ({ outer: "ToolReceipt", inner, reason: RECEIPT_REASON }),
  ),
  { outer: "ToolOutputBudget", inner: "ToolResultSanitization", reason: "sanitize the raw output first, then the budget truncates it" },
  { outer: "Authorization", inner: "Guardrail", reason: "an authorization deny never costs an external guardrail call" },
  { outer: "ReadBeforeWrite", inner: "ToolProgress", reason: "a blocked write returns before it can consume a progress slot" },
  { outer: "ReadBeforeWrite", inner: "ToolErrorHandling", reason: "a blocked write returns before the error handler runs" },
  { outer: "ToolProgress", inner: "ToolErrorHandling", reason: "ToolProgress reads the deerflow_tool_meta ToolErrorHandling stamps" },
  { outer: "Sandbox", inner: "ReadBeforeWrite", reason: "a sandbox acquired by the write gate's inspection is bound to state by Sandbox" },
  { outer: "InputSanitization", inner: "LLMErrorHandling", reason: "retries resend the sanitized request" },
  { outer: "DanglingToolCall", inner: "LLMErrorHandling", reason: "retries resend the repaired request" },
  { outer: "SkillActivation", inner: "SkillToolPolicy", reason: "the policy reads the slash source activation publishes in the same call" },
  { outer: "SkillToolPolicy", inner: "DurableContext", reason: "the policy sits between activation and durable context" },
  { outer: "DurableContext", inner: "Summarization", reason: "delegations and skill reads are captured before history is compacted" },
  { outer: "DurableContext", inner: "SystemMessageCoalescing", reason: "the authority SystemMessage is merged into the leading system block" },
  { outer: "DynamicContext", inner: "SystemMessageCoalescing", reason: "only the newest date reminder survives coalescing" },
  { outer: "McpRouting", inner: "DeferredToolFilter", reason: "routing promotes before the filter hides unpromoted schemas" },
  { outer: "LoopDetection", inner: "TerminalResponse", reason: "extension middlewares and guards sit before the terminal tail" },
  { outer: "TerminalResponse", inner: "SafetyFinishReason", reason: "reverse afterModel order runs Safety before the loop guard counts calls" },
  { outer: "LoopDetection", inner: "SafetyFinishReason", reason: "Safety strips tool calls before LoopDetection counts them" },
]);

/** Members that must be last in the lead stack. */
export const HOST_LAST_MEMBERS: readonly string[] = Object.freeze(["Clarification"]);

export interface OrderingViolation {
  readonly constraint: OrderingConstraint | { outer: string; inner: "(end of stack)"; reason: string };
  readonly outerIndex: number;
  readonly innerIndex: number;
}

/** Every invariant the stack breaks (both members present, inner before outer; a last member not last). */
export function orderingViolations(
  names: readonly string[],
  constraints: readonly OrderingConstraint[] = HOST_ORDERING_CONSTRAINTS,
  last: readonly string[] = HOST_LAST_MEMBERS,
): OrderingViolation[] {
  const index = new Map<string, number>();
  names.forEach((name, i) => {
    if (!index.has(name)) index.set(name, i);
  });
  const violations: OrderingViolation[] = [];
  for (const constraint of constraints) {
    const outerIndex = index.get(constraint.outer);
    const innerIndex = index.get(constraint.inner);
    if (outerIndex !== undefined && innerIndex !== undefined && outerIndex > innerIndex) {
      violations.push({ constraint, outerIndex, innerIndex });
    }
  }
  for (const name of last) {
    const at = index.get(name);
    if (at !== undefined && at !== names.length - 1) {
      violations.push({ constraint: { outer: name, inner: "(end of stack)", reason: `${name} must be the innermost member` }, outerIndex: at, innerIndex: names.length - 1 });
    }
  }
  return violations;
}

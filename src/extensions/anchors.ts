import { Placement } from "../extension-api/index.ts";
import { HOST_LAST_MEMBERS } from "./ordering.ts";

/**
 * Anchors turn a semantic placement into a stack index. They are data over middleware NAMES:
 * this layer sits below the middlewares and must not import them, and a table is what changes
 * when the host stack is restructured (extensions, which only say what they must observe, don't).
 * Index 0 is the outermost member; inserting at index i puts the new member just outside the one
 * currently at i.
 */
export type AnchorRule =
  /** Just outside (`outer`) or just inside (`inner`) the first member with one of `names`. */
  | { readonly kind: "outer" | "inner"; readonly names: readonly string[] }
  /** Just outside / inside the last member with one of `names`. */
  | { readonly kind: "outer_last" | "inner_last"; readonly names: readonly string[] }
  /** Just inside the last member with one of `names` that comes after the last of `after`. */
  | { readonly kind: "inner_last_after"; readonly names: readonly string[]; readonly after: readonly string[] }
  | { readonly kind: "start" }
  | { readonly kind: "end" };

/** Rules tried in order; the first is the primary, the rest are fallbacks. */
export type AnchorChain = readonly AnchorRule[];

export type BuildScope = "lead" | "subagent";

export const outerOf = (...names: string[]): AnchorRule => ({ kind: "outer", names });
export const innerOf = (...names: string[]): AnchorRule => ({ kind: "inner", names });
export const outerOfLast = (...names: string[]): AnchorRule => ({ kind: "outer_last", names });
export const innerOfLast = (...names: string[]): AnchorRule => ({ kind: "inner_last", names });
export const innerOfLastAfter = (names: readonly string[], after: readonly string[]): AnchorRule => ({ kind: "inner_last_after", names, after });
export const START: AnchorRule = Object.freeze({ kind: "start" });
export const END: AnchorRule = Object.freeze({ kind: "end" });

/** The index a rule yields on a stack of names, or undefined when its anchor member is absent. */
export function resolveRule(rule: AnchorRule, names: readonly string[]): number | undefined {
  switch (rule.kind) {
    case "start":
      return 0;
    case "end":
      return names.length;
    case "outer":
    case "inner": {
      const at = names.findIndex((name) => rule.names.includes(name));
      if (at < 0) return undefined;
      return rule.kind === "outer" ? at : at + 1;
    }
    case "outer_last":
    case "inner_last": {
      const at = lastIndexOf(names, rule.names, -1);
      if (at < 0) return undefined;
      return rule.kind === "outer_last" ? at : at + 1;
    }
    case "inner_last_after": {
      const boundary = lastIndexOf(names, rule.after, -1);
      if (boundary < 0) return undefined;
      const at = lastIndexOf(names, rule.names, boundary);
      return at < 0 ? undefined : at + 1;
    }
  }
}

export interface ResolvedAnchor {
  readonly index: number;
  /** False when a fallback rule decided the index: the placement may not see what it documents. */
  readonly primary: boolean;
  readonly rule: AnchorRule;
}

/**
 * Resolves a chain against a stack of (unwrapped) member names. A chain that misses entirely ends
 * at the end of the stack, as a fallback. Whatever the rule, a member that must be innermost
 * (Clarification short-circuits the tool loop) stays innermost: an "end" index becomes just outside it.
 */
export function resolveAnchor(chain: AnchorChain, names: readonly string[], pinnedLast: readonly string[] = HOST_LAST_MEMBERS): ResolvedAnchor {
  let resolved: ResolvedAnchor | undefined;
  for (const [position, rule] of chain.entries()) {
    const index = resolveRule(rule, names);
    if (index !== undefined) {
      resolved = { index, primary: position === 0, rule };
      break;
    }
  }
  resolved ??= { index: names.length, primary: false, rule: END };
  const lastName = names[names.length - 1];
  if (resolved.index === names.length && lastName !== undefined && pinnedLast.includes(lastName)) {
    return { ...resolved, index: names.length - 1 };
  }
  return resolved;
}

const LLM_ERROR_HANDLING = "LLMErrorHandling";
const SAFETY_FINISH_REASON = "SafetyFinishReason";
const TERMINAL_RESPONSE = "TerminalResponse";
const CLARIFICATION = "Clarification";
const SYSTEM_MESSAGE_COALESCING = "SystemMessageCoalescing";

/** MODEL_PHYSICAL: inner of every request transform, but never past Clarification. */
const LEAD_MODEL_PHYSICAL: AnchorChain = Object.freeze([
  innerOfLastAfter([SAFETY_FINISH_REASON], [TERMINAL_RESPONSE]),
  innerOfLast(TERMINAL_RESPONSE),
  outerOfLast(CLARIFICATION),
  END,
]);

export const LEAD_ANCHORS: Readonly<Record<Placement, AnchorChain>> = Object.freeze({
  // Outside the retry loop, so one logical model decision stays one observation across retries.
  [Placement.MODEL_LOGICAL]: Object.freeze([outerOf(LLM_ERROR_HANDLING)]),
  [Placement.MODEL_PHYSICAL]: LEAD_MODEL_PHYSICAL,
  // Outermost: sees tool calls and results exactly as the model and the user see them.
  [Placement.TOOL_VISIBLE]: Object.freeze([START]),
  // As close to the tool body as the chain allows; Clarification only intercepts ask_clarification.
  [Placement.TOOL_RAW]: Object.freeze([outerOfLast(CLARIFICATION), END]),
  [Placement.STANDARD]: Object.freeze([outerOf(LLM_ERROR_HANDLING), END]),
});

export const SUBAGENT_ANCHORS: Readonly<Record<Placement, AnchorChain>> = Object.freeze({
  ...LEAD_ANCHORS,
  // Subagents have no terminal tail; the coalesced system block is the last request transform.
  [Placement.MODEL_PHYSICAL]: Object.freeze([innerOfLast(SYSTEM_MESSAGE_COALESCING), ...LEAD_MODEL_PHYSICAL]),
});

export function anchorsForScope(scope: BuildScope): Readonly<Record<Placement, AnchorChain>> {
  return scope === "subagent" ? SUBAGENT_ANCHORS : LEAD_ANCHORS;
}

export function describeRule(rule: AnchorRule): string {
  switch (rule.kind) {
    case "start":
      return "start of stack";
    case "end":
      return "end of stack";
    case "inner_last_after":
      return `inner of the last ${rule.names.join("|")} after the last ${rule.after.join("|")}`;
    case "outer":
    case "inner":
      return `${rule.kind} of the first ${rule.names.join("|")}`;
    case "outer_last":
    case "inner_last":
      return `${rule.kind === "outer_last" ? "outer" : "inner"} of the last ${rule.names.join("|")}`;
  }
}

function lastIndexOf(names: readonly string[], wanted: readonly string[], after: number): number {
  for (let index = names.length - 1; index > after; index -= 1) {
    if (wanted.includes(names[index]!)) return index;
  }
  return -1;
}

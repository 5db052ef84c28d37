import { DeerflowError, errorMessage } from "../core/errors.ts";
import { isAgentScope, isPlacement, middlewareName, unwrapMiddleware, type Placement } from "../extension-api/index.ts";
import type { AgentMiddleware } from "../engine/types.ts";
import { anchorsForScope, describeRule, resolveAnchor, type BuildScope } from "./anchors.ts";
import { isolateMiddleware, middlewareProblem, type DiagnosticSink, type ExtensionDiagnostic } from "./isolation.ts";
import { HOST_ORDERING_CONSTRAINTS, orderingViolations, type OrderingViolation } from "./ordering.ts";

/** One middleware an extension asks to have placed. Unknown-typed: it comes from third-party code. */
export interface ExtensionMiddlewareContribution {
  readonly source: string;
  readonly middleware: unknown;
  readonly placement: unknown;
  /** "lead" | "subagent" | "both"; defaults to "both". */
  readonly scope?: unknown;
  /** An integer; lower sorts first (outer at a shared anchor). Defaults to 0. */
  readonly order?: unknown;
}

export interface ComposeOptions {
  readonly scope: BuildScope;
  /**
   * Receives the failures the isolation wrappers report while runs execute. Build-time problems
   * are returned in `diagnostics` instead, so a caller records each exactly once.
   */
  readonly onDiagnostic: DiagnosticSink;
}

export interface ComposedStack {
  readonly stack: AgentMiddleware[];
  /** Final index -> extension source, for contributed members only. */
  readonly provenance: Map<number, string>;
  /** Build-time diagnostics: invalid contributions (error), fallback anchors (warning). */
  readonly diagnostics: ExtensionDiagnostic[];
}

export const CORE_ORDER_BLAME = "core middleware order";

export class ExtensionOrderingError extends DeerflowError {
  /** The extensions blamed, or [CORE_ORDER_BLAME] when only host members are involved. */
  readonly blame: readonly string[];
  readonly violations: readonly OrderingViolation[];

  constructor(message: string, blame: readonly string[], violations: readonly OrderingViolation[]) {
    super("extension_ordering_violation", message, { details: { blame: [...blame] } });
    this.name = "ExtensionOrderingError";
    this.blame = Object.freeze([...blame]);
    this.violations = Object.freeze([...violations]);
  }
}

const UNSAFE_GRAPH_CHARS = /[^A-Za-z0-9_.-]+/g;

/** A graph-safe middleware name: every run of characters outside `[A-Za-z0-9_.-]` becomes `_`. */
export function graphSafeName(value: string): string {
  return value.replace(UNSAFE_GRAPH_CHARS, "_");
}

interface Accepted {
  readonly source: string;
  readonly middleware: AgentMiddleware;
  readonly placement: Placement;
  readonly order: number;
  readonly registration: number;
}

/**
 * The single point where contributed middlewares join a fully assembled stack (lead or subagent).
 * Called once at the end of a builder, never inside a shared base builder, because anchors such as
 * MODEL_PHYSICAL refer to members appended last. Always validates host ordering, with or without
 * contributions; a violation is the one hard failure and names who caused it.
 */
export function composeWithExtensions(
  stack: readonly AgentMiddleware[],
  contributions: readonly ExtensionMiddlewareContribution[],
  options: ComposeOptions,
): ComposedStack {
  if (options?.scope !== "lead" && options?.scope !== "subagent") {
    throw new DeerflowError("invalid_agent_scope", `composeWithExtensions needs scope "lead" or "subagent", got ${JSON.stringify(options?.scope)}.`);
  }
  const diagnostics: ExtensionDiagnostic[] = [];
  const accepted = acceptContributions(contributions ?? [], options.scope, diagnostics);
  accepted.sort((a, b) => a.order - b.order || a.registration - b.registration);

  // Anchors resolve against the host stack as given, so one contribution never moves another's anchor.
  const hostNames = stack.map(memberName);
  const anchors = anchorsForScope(options.scope);
  const usedNames = new Set(stack.map((member) => member.name));
  const planned: Array<{ index: number; priority: number; source: string; wrapped: AgentMiddleware }> = [];
  for (const [priority, item] of accepted.entries()) {
    const chain = anchors[item.placement];
    const resolved = resolveAnchor(chain, hostNames);
    if (!resolved.primary) {
      diagnostics.push({
        level: "warning",
        source: item.source,
        message:
          `placement ${item.placement} of ${item.middleware.name} fell back to ${describeRule(resolved.rule)} because its primary anchor ` +
          `(${describeRule(chain[0]!)}) is absent from this ${options.scope} stack; it may not observe what the placement documents.`,
      });
    }
    const base = graphSafeName(`extension:${item.source}:${item.middleware.name}:${item.order}`);
    let name = base;
    for (let suffix = 2; usedNames.has(name); suffix += 1) name = `${base}_${suffix}`;
    try {
      const wrapped = isolateMiddleware(item.middleware, { source: item.source, name, onDiagnostic: options.onDiagnostic });
      usedNames.add(name);
      planned.push({ index: resolved.index, priority, source: item.source, wrapped });
    } catch (error) {
      diagnostics.push({ level: "error", source: item.source, message: `middleware ${item.middleware.name} could not be wrapped and was skipped: ${errorMessage(error)}` });
    }
  }

  // Back to front so earlier indices stay valid; at one index the earlier-sorted item goes in last,
  // which pushes the others inward and leaves it outermost.
  const result = [...stack];
  planned.sort((a, b) => b.index - a.index || b.priority - a.priority);
  const sources = new Map<AgentMiddleware, string>();
  for (const entry of planned) {
    result.splice(entry.index, 0, entry.wrapped);
    sources.set(entry.wrapped, entry.source);
  }
  const provenance = new Map<number, string>();
  result.forEach((member, index) => {
    const source = sources.get(member);
    if (source !== undefined) provenance.set(index, source);
  });

  assertOrdering(result, provenance);
  return { stack: result, provenance, diagnostics };
}

/**
 * Throws {@link ExtensionOrderingError} when the stack breaks a host ordering invariant. Isolation
 * wrappers are unwrapped, so a contributed member named like a host one counts as that member, and
 * every occurrence of a name is checked, not only the first.
 */
export function assertOrdering(stack: readonly AgentMiddleware[], provenance: ReadonlyMap<number, string> = new Map()): void {
  const names = stack.map(memberName);
  const violations = [...orderingViolations(names), ...laterOccurrenceViolations(names)];
  if (violations.length === 0) return;

  const blamed = new Set<string>();
  const lines = violations.map((violation) => {
    const indices = violatingIndices(names, violation);
    const culprits = [...new Set(indices.map((i) => provenance.get(i)).filter((s): s is string => s !== undefined))].sort();
    for (const culprit of culprits) blamed.add(culprit);
    const { outer, inner, reason } = violation.constraint;
    const where = inner === "(end of stack)" ? `${outer} must be the innermost member but sits at ${violation.outerIndex} of ${names.length}` : `${outer} must wrap ${inner}, but ${outer} is at ${violation.outerIndex} and ${inner} at ${violation.innerIndex}`;
    return `${where} (${reason}); contributed by: ${culprits.length > 0 ? culprits.join(", ") : CORE_ORDER_BLAME}`;
  });
  const blame = blamed.size > 0 ? [...blamed].sort() : [CORE_ORDER_BLAME];
  throw new ExtensionOrderingError(
    `Middleware ordering constraint violated: ${lines.join("; ")}. ` +
      (blamed.size > 0
        ? `Change the placement of the blamed extension's middleware or disable that extension (${blame.join(", ")}).`
        : "The host stack itself is misordered: fix the builder's middleware order."),
    blame,
    violations,
  );
}

function acceptContributions(contributions: readonly ExtensionMiddlewareContribution[], scope: BuildScope, diagnostics: ExtensionDiagnostic[]): Accepted[] {
  const accepted: Accepted[] = [];
  for (const [registration, contribution] of contributions.entries()) {
    const source =
      typeof contribution === "object" && contribution !== null && typeof contribution.source === "string" && contribution.source !== ""
        ? contribution.source
        : "(unknown extension)";
    const reject = (why: string) => diagnostics.push({ level: "error", source, message: `contribution ${registration} was skipped: ${why}` });
    if (typeof contribution !== "object" || contribution === null) {
      reject(`expected { source, middleware, placement, scope?, order? }, got ${contribution === null ? "null" : typeof contribution}`);
      continue;
    }
    if (source === "(unknown extension)") {
      reject("it has no `source` naming the extension");
      continue;
    }
    const itemScope = contribution.scope ?? "both";
    if (!isAgentScope(itemScope)) {
      reject(`invalid scope ${safeJson(itemScope)}; expected "lead", "subagent" or "both"`);
      continue;
    }
    if (!isPlacement(contribution.placement)) {
      reject(`invalid placement ${safeJson(contribution.placement)}; expected model_logical, model_physical, tool_visible, tool_raw or standard`);
      continue;
    }
    const order = contribution.order ?? 0;
    if (typeof order !== "number" || !Number.isSafeInteger(order)) {
      reject(`invalid order ${safeJson(order)}; expected an integer`);
      continue;
    }
    const problem = middlewareProblem(contribution.middleware);
    if (problem !== null) {
      reject(`not a middleware: ${problem}`);
      continue;
    }
    if (itemScope !== "both" && itemScope !== scope) continue;
    accepted.push({ source, middleware: contribution.middleware as AgentMiddleware, placement: contribution.placement, order, registration });
  }
  return accepted;
}

/** Pairs the first-occurrence check cannot see: a second copy of an outer member placed inside its inner. */
function laterOccurrenceViolations(names: readonly string[]): OrderingViolation[] {
  const found: OrderingViolation[] = [];
  for (const constraint of HOST_ORDERING_CONSTRAINTS) {
    const outer = indicesOf(names, constraint.outer);
    const inner = indicesOf(names, constraint.inner);
    if (outer.length === 0 || inner.length === 0) continue;
    const firstsViolate = outer[0]! > inner[0]!;
    const maxOuter = outer[outer.length - 1]!;
    const minInner = inner[0]!;
    if (!firstsViolate && maxOuter > minInner) found.push({ constraint, outerIndex: maxOuter, innerIndex: minInner });
  }
  return found;
}

function violatingIndices(names: readonly string[], violation: OrderingViolation): number[] {
  const { outer, inner } = violation.constraint;
  const outerIdx = indicesOf(names, outer);
  if (inner === "(end of stack)") {
    // Whatever sits inside a member that must be last is what displaced it.
    const last = outerIdx[outerIdx.length - 1] ?? violation.outerIndex;
    return [...outerIdx, ...names.map((_, i) => i).filter((i) => i > last)];
  }
  const innerIdx = indicesOf(names, inner);
  const minInner = Math.min(...innerIdx);
  const maxOuter = Math.max(...outerIdx);
  return [...outerIdx.filter((i) => i >= minInner), ...innerIdx.filter((i) => i <= maxOuter)];
}

function indicesOf(names: readonly string[], wanted: string): number[] {
  const found: number[] = [];
  names.forEach((name, index) => {
    if (name === wanted) found.push(index);
  });
  return found;
}

function memberName(member: AgentMiddleware): string {
  return middlewareName(unwrapMiddleware(member));
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

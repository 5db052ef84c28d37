import { CanonicalJsonError, canonicalJson, isPlainObject, sha256Hex } from "./canonical.ts";
import { ExtensionApiError } from "./errors.ts";
import { sha256HexSync } from "./sha256-sync.ts";

/**
 * A middleware (or any stack member) that declares the parameters which change its behaviour, so
 * an assembly fingerprint moves exactly when a policy does. The declaration must be synchronous
 * and canonical-JSON-safe; long texts (prompts, messages) go in through {@link hashLongText}.
 */
export interface ReleasePolicyProvider {
  releasePolicyParameters(): Record<string, unknown>;
}

export function isReleasePolicyProvider(value: unknown): value is ReleasePolicyProvider {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { releasePolicyParameters?: unknown }).releasePolicyParameters === "function"
  );
}

/** A long text as it appears in a declaration: its digest and size, never its content. */
export interface LongTextDigest {
  /** SHA-256 of the text's UTF-8 bytes, 64 lowercase hex digits (`printf %s "$text" | sha256sum`). */
  readonly sha256: string;
  /** Length in Unicode code points, which is what Python's `len` reports for the same text. */
  readonly length: number;
}

export const DEFAULT_LONG_TEXT_THRESHOLD = 256;

/**
 * A text up to `threshold` code points is returned unchanged; a longer one becomes a
 * {@link LongTextDigest}. Declarations are written into descriptors that leave the process, and
 * a prompt may carry operator secrets or customer text, so long texts are identified, not copied.
 */
export async function hashLongText(
  text: string,
  threshold: number = DEFAULT_LONG_TEXT_THRESHOLD,
): Promise<string | LongTextDigest> {
  const length = longTextLength(text, threshold);
  if (length <= threshold) return text;
  return { sha256: await sha256Hex(text), length };
}

/** {@link hashLongText} computed synchronously, for declarations and probes built in synchronous code. */
export function hashLongTextSync(text: string, threshold: number = DEFAULT_LONG_TEXT_THRESHOLD): string | LongTextDigest {
  const length = longTextLength(text, threshold);
  if (length <= threshold) return text;
  return { sha256: sha256HexSync(text), length };
}

/** The text's length in code points, after checking both arguments. */
function longTextLength(text: string, threshold: number): number {
  if (typeof text !== "string") {
    throw new ExtensionApiError("invalid_text", `hashLongText needs a string, got ${typeof text}`);
  }
  if (!Number.isInteger(threshold) || threshold < 0) {
    throw new ExtensionApiError(
      "invalid_threshold",
      `hashLongText threshold must be a non-negative integer (code points), got ${String(threshold)}`,
    );
  }
  return countCodePoints(text);
}

/** What {@link collectReleasePolicies} records for a provider whose declaration is unusable. */
export interface ReleasePolicyFailure {
  readonly error: string;
}

export type ReleasePolicyRecord = Record<string, unknown> | ReleasePolicyFailure;

/**
 * Each provider's declaration, keyed by middleware name in stack order (`Name`, `Name#2`, ...).
 * Isolation wrappers are unwrapped through `.inner`: they carry the wrapper's identity and
 * forward no declaration, so describing the wrapper would hide the extension's policy.
 * A broken declaration is recorded as `{ error }` rather than thrown, so one faulty extension
 * cannot stop the host from describing everything else. Declarations are copied, so a middleware
 * mutating its own state later does not rewrite what was recorded.
 */
export function collectReleasePolicies(stack: readonly unknown[]): Record<string, ReleasePolicyRecord> {
  const policies = new Map<string, ReleasePolicyRecord>();
  for (const member of stack) {
    const middleware = unwrapMiddleware(member);
    if (!isReleasePolicyProvider(middleware)) continue;
    policies.set(uniqueKey(policies, middlewareName(middleware)), readDeclaration(middleware));
  }
  return Object.fromEntries(policies);
}

/** Follows `.inner` until it reaches a member that wraps nothing. */
export function unwrapMiddleware(member: unknown): unknown {
  const seen = new Set<unknown>();
  let current = member;
  while (!seen.has(current)) {
    seen.add(current);
    const inner = typeof current === "object" && current !== null ? (current as { inner?: unknown }).inner : undefined;
    if (typeof inner !== "object" || inner === null) break;
    current = inner;
  }
  return current;
}

/** A middleware's `name` when it has one, otherwise its class name. */
export function middlewareName(middleware: unknown): string {
  if (typeof middleware !== "object" && typeof middleware !== "function") return "AnonymousMiddleware";
  if (middleware === null) return "AnonymousMiddleware";
  const name: unknown = (middleware as { name?: unknown }).name;
  if (typeof name === "string" && name !== "") return name;
  const constructorName: unknown = (middleware as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof constructorName === "string" && constructorName !== "") return constructorName;
  return "AnonymousMiddleware";
}

function readDeclaration(provider: ReleasePolicyProvider): ReleasePolicyRecord {
  let declaration: unknown;
  try {
    declaration = provider.releasePolicyParameters();
  } catch (error) {
    return { error: errorTypeName(error) };
  }
  if (!isPlainObject(declaration)) return { error: "NonMappingDeclaration" };
  try {
    return JSON.parse(canonicalJson(declaration)) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof CanonicalJsonError) return { error: "NonJsonDeclaration" };
    // A getter inside the declaration threw: that is the provider's failure, not a JSON one.
    return { error: errorTypeName(error) };
  }
}

function uniqueKey(taken: ReadonlyMap<string, unknown>, name: string): string {
  if (!taken.has(name)) return name;
  let ordinal = 2;
  while (taken.has(`${name}#${ordinal}`)) ordinal += 1;
  return `${name}#${ordinal}`;
}

function errorTypeName(error: unknown): string {
  if (typeof error !== "object" || error === null) return "Error";
  // A plain `new Error()` with a meaningful `name` (AbortError, TimeoutError) says more than its class.
  const name: unknown = (error as { name?: unknown }).name;
  if (typeof name === "string" && name !== "" && name !== "Error") return name;
  const constructorName: unknown = (error as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof constructorName === "string" && constructorName !== "" && constructorName !== "Object") {
    return constructorName;
  }
  return "Error";
}

function countCodePoints(text: string): number {
  let count = 0;
  for (let index = 0; index < text.length; index += 1) {
    const unit = text.charCodeAt(index);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) index += 1;
    }
    count += 1;
  }
  return count;
}

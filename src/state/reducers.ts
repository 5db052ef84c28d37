import type { BaseMessage } from "@langchain/core/messages";
import { messagesStateReducer, type Messages } from "@langchain/langgraph/web";
import { StateConflictError, StateUpdateError } from "./errors.ts";
import { isOneOf } from "../extension-api/one-of.ts";
import type {
  Delegation,
  DelegationStatus,
  DelegationUpdate,
  Promoted,
  SandboxState,
  SkillContextEntry,
  SkillContextInput,
  Todo,
  ViewedImage,
} from "./types.ts";
import { isRecord } from "../core/guards.ts";

// Every reducer treats `undefined` as "not touched": LangGraph hands a reducer the raw value of
// every key a node returns, so `{ title: undefined }` must behave like a missing key in the graph
// and in applyStateUpdate alike. Reducers return `left` itself whenever nothing changes, and never
// write into `left` or `right`.

export const DELEGATION_STATUSES: readonly DelegationStatus[] = Object.freeze([
  "in_progress",
  "completed",
  "failed",
  "cancelled",
  "timed_out",
  "polling_timed_out",
]);
export const MAX_DELEGATIONS = 50;
export const MAX_SKILL_CONTEXT_ENTRIES = 8;
export const MAX_SKILL_DESCRIPTION_CHARS = 500;

function invalid(channel: string, message: string): StateUpdateError {
  return new StateUpdateError("invalid_update", `Invalid '${channel}' update: ${message}`, { channel });
}

function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `${typeof value} ${JSON.stringify(value)}`;
}

function orderedUnion(left: readonly string[], right: readonly string[]): string[] | undefined {
  const seen = new Set(left);
  const added: string[] = [];
  for (const item of right) {
    if (seen.has(item)) continue;
    seen.add(item);
    added.push(item);
  }
  return added.length === 0 ? undefined : [...left, ...added];
}

function requireStringArray(channel: string, field: string, value: unknown): readonly string[] {
  if (!Array.isArray(value) || value.some((item) => typeof item !== "string")) {
    throw invalid(channel, `${field} must be an array of strings, got ${describeValue(value)}.`);
  }
  return value as readonly string[];
}

/** Last write wins; only `undefined` (an untouched key) keeps the stored value, `null` clears it. */
export function lastValue<T>(left: T, right: T | undefined): T {
  return right === undefined ? left : right;
}

/**
 * LangGraph's messagesStateReducer, with LangGraph's own errors re-raised as StateUpdateError so
 * callers get a stable code. Like LangGraph, it assigns an id in place to a message that has none.
 */
export function reduceMessages(left: BaseMessage[], right: Messages | undefined): BaseMessage[] {
  if (right === undefined) return left;
  if (right === null) {
    throw new StateUpdateError(
      "invalid_messages_update",
      "Invalid 'messages' update: null. Send [] to add nothing, or RemoveMessage({ id: REMOVE_ALL_MESSAGES }) to clear the history.",
      { channel: "messages" },
    );
  }
  try {
    return messagesStateReducer(left ?? [], right);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const unknownId = /doesn't exist/.test(reason);
    throw new StateUpdateError(
      unknownId ? "unknown_message_id" : "invalid_messages_update",
      unknownId
        ? `Cannot apply 'messages' update: ${reason}. Remove only messages that are in the thread's history.`
        : `Cannot apply 'messages' update: ${reason}`,
      { channel: "messages", cause: error },
    );
  }
}

/** One sandbox per thread: a repeat of the same id is a no-op, a different id is a conflict. */
export function reduceSandbox(left: SandboxState | null, right: SandboxState | null | undefined): SandboxState | null {
  if (right === undefined || right === null) return left;
  if (!isRecord(right) || typeof right.sandbox_id !== "string" || right.sandbox_id === "") {
    throw invalid("sandbox", `expected { sandbox_id: non-empty string }, got ${describeValue(right)}.`);
  }
  if (left === null || left === undefined || typeof left.sandbox_id !== "string") return right;
  if (left.sandbox_id === right.sandbox_id) return left;
  throw new StateConflictError(left.sandbox_id, right.sandbox_id);
}

/** Ordered union: stored order kept, each new path appended once. */
export function reduceArtifacts(left: string[], right: readonly string[] | null | undefined): string[] {
  if (right === undefined || right === null) return left;
  const incoming = requireStringArray("artifacts", "artifacts", right);
  return orderedUnion(left ?? [], incoming) ?? left ?? [];
}

/** `null` means "not touched" here because an empty todo list is written as `[]`. */
export function reduceTodos(left: Todo[] | null, right: readonly Todo[] | null | undefined): Todo[] | null {
  if (right === undefined || right === null) return left;
  if (!Array.isArray(right)) throw invalid("todos", `expected an array of todos, got ${describeValue(right)}.`);
  return [...right];
}

/**
 * The update that clears a thread's goal: null means "not touched" (every node returning the
 * channel's default must not wipe the goal), so clearing needs a value of its own. Plain JSON, so
 * it survives a checkpoint's pending writes.
 */
export const CLEAR_GOAL: Readonly<Record<string, unknown>> = Object.freeze({ __clear_goal__: true });

export function isClearGoal(value: unknown): boolean {
  return isRecord(value) && value.__clear_goal__ === true && Object.keys(value).length === 1;
}

export function reduceGoal(
  left: Record<string, unknown> | null,
  right: Record<string, unknown> | null | undefined,
): Record<string, unknown> | null {
  if (right === undefined || right === null) return left;
  if (isClearGoal(right)) return null;
  if (!isRecord(right)) throw invalid("goal", `expected an object, got ${describeValue(right)}.`);
  return right;
}

/** Merge by image path, the update winning per path; an empty object clears every entry. */
export function reduceViewedImages(
  left: Record<string, ViewedImage>,
  right: Readonly<Record<string, ViewedImage>> | null | undefined,
): Record<string, ViewedImage> {
  if (right === undefined || right === null) return left;
  if (!isRecord(right)) throw invalid("viewed_images", `expected an object keyed by image path, got ${describeValue(right)}.`);
  if (Object.keys(right).length === 0) return {};
  return { ...left, ...right };
}

/**
 * Promotions are scoped to a catalog hash: names promoted under another catalog could point at a
 * different tool now, so a new hash drops them all instead of merging.
 */
export function reducePromoted(left: Promoted | null, right: Readonly<Promoted> | null | undefined): Promoted | null {
  if (right === undefined || right === null) return left;
  if (!isRecord(right)) throw invalid("promoted", `expected { catalog_hash, names }, got ${describeValue(right)}.`);
  if (Object.keys(right).length === 0) return left;
  if (typeof right.catalog_hash !== "string" || right.catalog_hash === "") {
    throw invalid("promoted", "catalog_hash must be a non-empty string.");
  }
  const names = requireStringArray("promoted", "names", right.names);
  if (left === null || left === undefined || left.catalog_hash !== right.catalog_hash) {
    return { catalog_hash: right.catalog_hash, names: orderedUnion([], names) ?? [] };
  }
  const union = orderedUnion(left.names, names);
  return union === undefined ? left : { catalog_hash: left.catalog_hash, names: union };
}

function isDelegationStatus(value: unknown): value is DelegationStatus {
  return isOneOf(DELEGATION_STATUSES, value);
}

function mergeDelegation(previous: Delegation, patch: DelegationUpdate): Delegation {
  const merged: Delegation = { ...previous };
  for (const [key, value] of Object.entries(patch)) {
    // A key sent as undefined would vanish in the checkpoint anyway; skipping it keeps the stored field.
    if (value !== undefined) merged[key] = value;
  }
  // A late in_progress echo (a retried dispatch, a slow poll) must not reopen finished work.
  if (previous.status !== "in_progress" && merged.status === "in_progress") merged.status = previous.status;
  // The first dispatch owns the birth facts: per-run limits count delegations by run_id.
  if (previous.created_at != null) merged.created_at = previous.created_at;
  if (previous.run_id != null) merged.run_id = previous.run_id;
  return merged;
}

function firstDelegation(patch: DelegationUpdate): Delegation {
  const entry: Delegation = { id: patch.id, description: "", subagent_type: "", status: "in_progress" };
  for (const [key, value] of Object.entries(patch)) {
    if (value !== undefined) entry[key] = value;
  }
  return entry;
}

/**
 * Upsert by id in first-seen order; a terminal status never goes back to in_progress; the stored
 * created_at and run_id survive; only the newest MAX_DELEGATIONS entries are kept.
 */
export function reduceDelegations(
  left: Delegation[],
  right: readonly DelegationUpdate[] | null | undefined,
): Delegation[] {
  if (right === undefined || right === null) return left;
  if (!Array.isArray(right)) throw invalid("delegations", `expected an array of entries, got ${describeValue(right)}.`);
  if (right.length === 0) return left;
  const byId = new Map<string, Delegation>();
  for (const entry of left ?? []) byId.set(entry.id, entry);
  for (const patch of right as readonly unknown[]) {
    if (!isRecord(patch) || typeof patch.id !== "string" || patch.id === "") {
      throw invalid("delegations", `every entry needs a non-empty string id, got ${describeValue(patch)}.`);
    }
    const update = patch as DelegationUpdate;
    if (update.status !== undefined && !isDelegationStatus(update.status)) {
      throw invalid(
        "delegations",
        `entry '${update.id}' has status ${JSON.stringify(update.status)}; expected one of ${DELEGATION_STATUSES.join(", ")}.`,
      );
    }
    const previous = byId.get(update.id);
    if (previous === undefined && update.status === undefined) {
      throw invalid("delegations", `entry '${update.id}' is new to the ledger and needs a status.`);
    }
    byId.set(update.id, previous === undefined ? firstDelegation(update) : mergeDelegation(previous, update));
  }
  const merged = [...byId.values()];
  return merged.length > MAX_DELEGATIONS ? merged.slice(-MAX_DELEGATIONS) : merged;
}

/**
 * Whitespace is collapsed because the description is rendered on one line of the durable-context
 * block; the cap counts code points so a cut never splits a surrogate pair.
 */
function boundDescription(raw: unknown): string {
  if (typeof raw !== "string") return "";
  const flat = raw.replace(/\s+/g, " ").trim();
  if (flat.length <= MAX_SKILL_DESCRIPTION_CHARS) return flat;
  const codePoints = Array.from(flat);
  return codePoints.length <= MAX_SKILL_DESCRIPTION_CHARS
    ? flat
    : codePoints.slice(0, MAX_SKILL_DESCRIPTION_CHARS).join("");
}

function toSkillEntry(raw: Record<string, unknown> & { path: string }): SkillContextEntry {
  return {
    name: typeof raw.name === "string" ? raw.name : "",
    path: raw.path,
    description: boundDescription(raw.description),
    loaded_at: typeof raw.loaded_at === "number" && Number.isFinite(raw.loaded_at) ? raw.loaded_at : 0,
  };
}

function hasPath(value: unknown): value is Record<string, unknown> & { path: string } {
  return isRecord(value) && typeof value.path === "string" && value.path !== "";
}

/**
 * Dedupe by path, a re-read moving the entry to the newest position with its new values; keep the
 * newest MAX_SKILL_CONTEXT_ENTRIES. Stored entries are normalised too, because checkpoints written
 * before the body was dropped still carry it.
 */
export function reduceSkillContext(
  left: SkillContextEntry[],
  right: readonly SkillContextInput[] | null | undefined,
): SkillContextEntry[] {
  if (right === undefined || right === null) return left;
  if (!Array.isArray(right)) throw invalid("skill_context", `expected an array of entries, got ${describeValue(right)}.`);
  if (right.length === 0) return left;
  const incoming = (right as readonly unknown[]).map((raw) => {
    if (!hasPath(raw)) throw invalid("skill_context", `every entry needs a non-empty string path, got ${describeValue(raw)}.`);
    return toSkillEntry(raw);
  });
  const byPath = new Map<string, SkillContextEntry>();
  // A malformed stored entry cannot be repaired by the writer of this update, so it is dropped rather than failing the run.
  for (const stored of left ?? []) if (hasPath(stored)) byPath.set(stored.path, toSkillEntry(stored));
  for (const entry of incoming) {
    byPath.delete(entry.path);
    byPath.set(entry.path, entry);
  }
  const merged = [...byPath.values()];
  return merged.length > MAX_SKILL_CONTEXT_ENTRIES ? merged.slice(-MAX_SKILL_CONTEXT_ENTRIES) : merged;
}

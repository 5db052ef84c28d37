import type { AIMessage, BaseMessage, ToolMessage } from "@langchain/core/messages";
import { sha256Hex } from "../../extension-api/canonical.ts";
import { isOneOf } from "../../extension-api/one-of.ts";
import { DELEGATION_STATUSES, MAX_DELEGATIONS } from "../../state/reducers.ts";
import type { Delegation, DelegationStatus, DelegationStopReason, DelegationUpdate } from "../../state/types.ts";
// The keys of the task tool's structured result metadata (ToolMessage.additional_kwargs), as the
// tool-error-handling family writes them. Its subagent.ts, not its index: the family's middleware
// imports this folder, and the index would close a cycle.
import {
  SUBAGENT_ERROR_KEY,
  SUBAGENT_METADATA_TEXT_MAX_CHARS,
  SUBAGENT_RESULT_BRIEF_KEY,
  SUBAGENT_RESULT_SHA256_KEY,
  SUBAGENT_STATUS_KEY,
  SUBAGENT_STOP_REASON_KEY,
  SUBAGENT_STOP_REASONS,
} from "../../tools/subagent-result.ts";
import { isRecord } from "../../core/guards.ts";

/*
 * The delegation ledger: `task` calls and their results, kept in ThreadState.delegations so that
 * summarisation cannot make the lead forget (and redo) work it already delegated. Capture reads
 * only the structured subagent metadata on the task's ToolMessage, never its display text.
 * Rendering treats every stored field as untrusted: values are re-validated, whitespace-flattened
 * and escaped, and an entry without a valid verdict is not shown at all.
 */

export const DELEGATION_DESCRIPTION_CAP = 200;
export const DELEGATION_RESULT_BRIEF_CAP = 2000;
export const LEDGER_RENDER_CHAR_BUDGET = 6000;
export const LEDGER_ENTRY_RESULT_RENDER_CAP = 120;

export const TASK_TOOL_NAME = "task";
export const TERMINAL_DELEGATION_STATUSES: ReadonlySet<DelegationStatus> = new Set(
  DELEGATION_STATUSES.filter((status) => status !== "in_progress"),
);
export const DELEGATION_STOP_REASONS: ReadonlySet<DelegationStopReason> = new Set(SUBAGENT_STOP_REASONS);

const SHA256_HEX = /^[0-9a-f]{64}$/;
// Checkpoints from before capped runs kept their status carry this retired value.
const LEGACY_STATUS_STOP_REASONS: Readonly<Record<string, DelegationStopReason>> = { max_turns_reached: "turn_capped" };

const STATUS_ONLY_RESULT_BRIEFS: Readonly<Partial<Record<DelegationStatus, string>>> = {
  failed: "Task failed.",
  cancelled: "Task cancelled by user.",
  timed_out: "Task timed out.",
  polling_timed_out: "Task polling timed out.",
};

// Fields whose change makes a captured entry worth writing again.
const STABLE_FIELDS = ["description", "subagent_type", "status", "run_id", "result_brief", "result_sha256", "result_ref"] as const;

const OMITTED_MARKER = "\n...\n";

/** Length in code points, which is what the caps count (and what DeerFlow's `len` counts). */
export function codePointLength(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

function codePointSlice(text: string, start: number, end?: number): string {
  return Array.from(text).slice(start, end).join("");
}

/** Deterministic head/tail cut (two thirds head), never a summary; a cut never splits a surrogate pair. */
export function boundText(text: string, cap: number): string {
  if (text.length <= cap || codePointLength(text) <= cap) return text;
  if (cap <= 0) return "";
  if (cap <= OMITTED_MARKER.length) return codePointSlice(text, 0, cap);
  const head = Math.floor((cap * 2) / 3);
  const tail = cap - head - OMITTED_MARKER.length;
  if (tail <= 0) return codePointSlice(text, 0, cap);
  const points = Array.from(text);
  return `${points.slice(0, head).join("")}${OMITTED_MARKER}${points.slice(-tail).join("")}`;
}

/** `&`, `<`, `>` escaped, so a stored value cannot open or close a tag of the data block. */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** One line of escaped text: a stored value cannot start a heading or a fake ledger line. */
export function escapeContextText(value: string): string {
  return escapeHtml(value.split(/\s+/).filter(Boolean).join(" "));
}

export interface SubagentResultMetadata {
  status: Exclude<DelegationStatus, "in_progress">;
  stop_reason?: DelegationStopReason;
  result_brief?: string;
  result_sha256?: string;
  error?: string;
}

function boundMetadataText(text: string): string {
  return boundText(text.trim(), SUBAGENT_METADATA_TEXT_MAX_CHARS);
}

/** The task tool's structured verdict on a ToolMessage, or undefined when it carries none. */
export function readSubagentResultMetadata(kwargs: Readonly<Record<string, unknown>> | undefined): SubagentResultMetadata | undefined {
  if (!kwargs) return undefined;
  const rawStatus = kwargs[SUBAGENT_STATUS_KEY];
  const legacyStopReason = typeof rawStatus === "string" ? LEGACY_STATUS_STOP_REASONS[rawStatus] : undefined;
  const rawBrief = kwargs[SUBAGENT_RESULT_BRIEF_KEY];
  const hasBrief = typeof rawBrief === "string" && rawBrief.trim() !== "";
  let status: SubagentResultMetadata["status"];
  if (legacyStopReason !== undefined) status = hasBrief ? "completed" : "failed";
  else if (typeof rawStatus === "string" && TERMINAL_DELEGATION_STATUSES.has(rawStatus as DelegationStatus)) {
    status = rawStatus as SubagentResultMetadata["status"];
  } else return undefined;

  const metadata: SubagentResultMetadata = { status };
  if (status === "completed" && hasBrief) {
    metadata.result_brief = boundMetadataText(rawBrief as string);
    const rawHash = kwargs[SUBAGENT_RESULT_SHA256_KEY];
    if (typeof rawHash === "string" && SHA256_HEX.test(rawHash)) metadata.result_sha256 = rawHash;
  }
  const rawError = kwargs[SUBAGENT_ERROR_KEY];
  if (status !== "completed" && typeof rawError === "string" && rawError.trim() !== "") metadata.error = boundMetadataText(rawError);
  const rawStopReason = kwargs[SUBAGENT_STOP_REASON_KEY];
  if (typeof rawStopReason === "string" && DELEGATION_STOP_REASONS.has(rawStopReason as DelegationStopReason)) {
    metadata.stop_reason = rawStopReason as DelegationStopReason;
  } else if (legacyStopReason !== undefined) metadata.stop_reason = legacyStopReason;
  return metadata;
}

function isAi(message: BaseMessage): message is AIMessage {
  return message.type === "ai";
}

function isTool(message: BaseMessage): message is ToolMessage {
  return message.type === "tool";
}

/** Every `task` delegation in `messages`, in dispatch order: in_progress, or the verdict its result carries. */
export async function extractDelegations(messages: readonly BaseMessage[], nowIso: string): Promise<DelegationUpdate[]> {
  const entries = new Map<string, DelegationUpdate>();
  for (const message of messages) {
    if (!isAi(message)) continue;
    for (const call of message.tool_calls ?? []) {
      if (call.name !== TASK_TOOL_NAME || !call.id) continue;
      const args: Record<string, unknown> = isRecord(call.args) ? call.args : {};
      const description = String(args["description"] || args["prompt"] || "");
      // A repeated call id restarts its entry in place: Map.set keeps the first dispatch's position.
      entries.set(call.id, {
        id: call.id,
        description: codePointSlice(description, 0, DELEGATION_DESCRIPTION_CAP),
        subagent_type: String(args["subagent_type"] || ""),
        status: "in_progress",
        created_at: nowIso,
      });
    }
  }
  for (const message of messages) {
    if (!isTool(message) || !message.tool_call_id) continue;
    const entry = entries.get(message.tool_call_id);
    if (entry === undefined) continue;
    const verdict = readSubagentResultMetadata(message.additional_kwargs);
    if (verdict === undefined) continue;
    entry.status = verdict.status;
    if (verdict.stop_reason) entry.stop_reason = verdict.stop_reason;
    const resultText = verdict.result_brief || verdict.error || STATUS_ONLY_RESULT_BRIEFS[verdict.status];
    if (resultText) {
      entry.result_brief = boundText(resultText, DELEGATION_RESULT_BRIEF_CAP);
      entry.result_sha256 = verdict.result_sha256 ?? (await sha256Hex(resultText));
      entry.result_ref = String(message.id || message.tool_call_id);
    }
  }
  return [...entries.values()];
}

/** Tags ids new to the ledger with this run; a known id keeps the run that first dispatched it. */
export function withRunId(delegations: readonly DelegationUpdate[], runId: string | undefined, existing: readonly Delegation[]): DelegationUpdate[] {
  if (runId === undefined) return [...delegations];
  const byId = new Map(existing.filter(isRecord).map((entry) => [entry.id, entry]));
  return delegations.map((entry) => {
    const previous = byId.get(entry.id);
    if (previous === undefined) return { ...entry, run_id: runId };
    if (previous.run_id) return { ...entry, run_id: previous.run_id };
    const { run_id: _dropped, ...rest } = entry;
    return rest as DelegationUpdate;
  });
}

/**
 * Once the ledger is full, entries older than its oldest retained one were evicted on purpose;
 * writing them again would push out newer work.
 */
function retainedWindow(delegations: readonly DelegationUpdate[], existing: readonly Delegation[]): readonly DelegationUpdate[] {
  if (existing.length < MAX_DELEGATIONS || existing.length === 0) return delegations;
  const earliest = isRecord(existing[0]) ? existing[0].id : undefined;
  if (earliest !== undefined) {
    const index = delegations.findIndex((entry) => entry.id === earliest);
    if (index !== -1) return delegations.slice(index);
  }
  return delegations.slice(-MAX_DELEGATIONS);
}

/** Only entries that are new or whose stable fields changed; a stored verdict is never reopened. */
export function changedDelegations(delegations: readonly DelegationUpdate[], existing: readonly Delegation[]): DelegationUpdate[] {
  const byId = new Map(existing.filter(isRecord).map((entry) => [entry.id, entry]));
  const changed: DelegationUpdate[] = [];
  for (const entry of retainedWindow(delegations, existing)) {
    const previous = byId.get(entry.id);
    if (previous === undefined) {
      changed.push(entry);
      continue;
    }
    if (TERMINAL_DELEGATION_STATUSES.has(previous.status) && !TERMINAL_DELEGATION_STATUSES.has(entry.status as DelegationStatus)) continue;
    if (STABLE_FIELDS.some((field) => previous[field] !== entry[field])) changed.push(entry);
  }
  return changed;
}

function statusGuidance(status: DelegationStatus, stopReason: DelegationStopReason | undefined): string {
  if (stopReason) {
    if (status === "completed") {
      return "hit a guardrail cap with a partial result; reuse the partial result, retry with a tighter scope, or raise the per-agent budget (max_turns / token_budget)";
    }
    return "hit a guardrail cap with no usable result; retry with a tighter scope or raise the per-agent budget (max_turns / token_budget)";
  }
  switch (status) {
    case "in_progress":
      return "already delegated; do NOT delegate again; wait for or build on the result";
    case "completed":
      return "completed result; do NOT delegate again; reuse this result";
    case "failed":
      return "failed attempt; may retry with a changed plan";
    case "cancelled":
      return "cancelled attempt; may retry with a changed plan";
    case "timed_out":
      return "timed-out attempt; may retry with a changed plan";
    case "polling_timed_out":
      return "polling timed-out attempt; may retry with a changed plan";
  }
}

interface RenderableDelegation {
  status: DelegationStatus;
  description: string;
  subagentType: string;
  stopReason: DelegationStopReason | undefined;
  resultBrief: string | undefined;
}

/** A stored entry re-validated for rendering, or undefined when it has no trustworthy verdict. */
function revalidate(raw: unknown): RenderableDelegation | undefined {
  if (!isRecord(raw) || typeof raw["id"] !== "string" || raw["id"] === "") return undefined;
  const status = raw["status"];
  if (!isOneOf(DELEGATION_STATUSES, status)) return undefined;
  const stopReason = raw["stop_reason"];
  const brief = raw["result_brief"];
  return {
    status: status as DelegationStatus,
    description: typeof raw["description"] === "string" ? raw["description"] : "",
    subagentType: typeof raw["subagent_type"] === "string" ? raw["subagent_type"] : "",
    stopReason: typeof stopReason === "string" && DELEGATION_STOP_REASONS.has(stopReason as DelegationStopReason) ? (stopReason as DelegationStopReason) : undefined,
    resultBrief: typeof brief === "string" && brief !== "" ? brief : undefined,
  };
}

function renderEntryLine(entry: RenderableDelegation): string {
  const guidance = statusGuidance(entry.status, entry.stopReason);
  let line = `- [${escapeContextText(entry.status)}] ${escapeContextText(entry.description)} (via ${escapeContextText(entry.subagentType)}; ${guidance})`;
  if (entry.resultBrief) line += ` -> ${escapeContextText(boundText(entry.resultBrief, LEDGER_ENTRY_RESULT_RENDER_CAP))}`;
  return line;
}

function fitsBudget(lines: readonly string[], candidate: string, maxChars: number): boolean {
  return codePointLength([...lines, candidate].join("\n")) <= maxChars;
}

function omittedLine(count: number): string {
  return `- ... ${count} older delegation entries omitted from this model view because of context budget`;
}

/** The `## Work already delegated` section, newest first within the budget, or "" when nothing renders. */
export function renderDelegationLedger(stored: readonly unknown[], maxChars: number = LEDGER_RENDER_CHAR_BUDGET): string {
  const entries = stored.map(revalidate).filter((entry): entry is RenderableDelegation => entry !== undefined);
  if (entries.length === 0) return "";
  const lines = [
    "## Work already delegated",
    "Newest entries are shown first. In-progress entries are already delegated. Completed entries are reusable results. Failed, cancelled, or timed-out entries are prior attempts.",
  ];
  let omitted = 0;
  const newestFirst = [...entries].reverse();
  for (let index = 0; index < newestFirst.length; index++) {
    const line = renderEntryLine(newestFirst[index]!);
    if (fitsBudget(lines, line, maxChars)) {
      lines.push(line);
      continue;
    }
    omitted = newestFirst.length - index;
    break;
  }
  if (omitted > 0) {
    while (lines.length > 1 && !fitsBudget(lines, omittedLine(omitted), maxChars)) {
      lines.pop();
      omitted++;
    }
    if (fitsBudget(lines, omittedLine(omitted), maxChars)) lines.push(omittedLine(omitted));
  }
  const rendered = lines.join("\n");
  if (codePointLength(rendered) <= maxChars) return rendered;
  return `${codePointSlice(rendered, 0, Math.max(0, maxChars - 4))}\n...`;
}

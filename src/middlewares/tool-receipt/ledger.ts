import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { isRecord } from "../../core/guards.ts";

/*
 * Tool receipts as data: their shape, the ledger the model sees, the snapshot a response keeps of
 * it, and the citation wire format. Pure functions only, shared by ToolReceipt and the subagent
 * executor that later checks a report's citations against the execution record.
 *
 * Display ids (r1..rN) are positions in the message list, so they only stay stable while history
 * is append-only. Summarization drops old ToolMessages and the survivors renumber; that is why
 * every response that saw a ledger keeps the exact receipts it was shown, and citations are
 * resolved against that snapshot rather than against the ledger as it reads later.
 */

/** additional_kwargs key of a ToolMessage's receipt. Server-owned: the Gateway strips it from clients. */
export const TOOL_RECEIPT_KEY = "deerflow_tool_receipt";
/** additional_kwargs key of the receipts a response was shown. Server-owned, like the receipt. */
export const TOOL_RECEIPT_LEDGER_KEY = "deerflow_tool_receipt_ledger";
/** Marks the hidden ledger message of a request. */
export const TOOL_RECEIPT_CONTEXT_KEY = "deerflow_tool_receipt_context";

export const RECEIPT_ID_PREFIX = "r";
/** Ledger size in characters (code points, as the Python host counts). */
export const RECEIPT_LEDGER_CHAR_BUDGET = 2000;
/** Longer ids are malformed model output: ten digits already exceed any real ledger. */
export const MAX_RECEIPT_ID_DIGITS = 10;
/** A persisted receipt field longer than this is not one the runtime wrote. */
export const MAX_RECEIPT_FIELD_CHARS = 256;

/** A receipt as stamped on a ToolMessage: facts about one call, no display id yet. */
export interface ToolReceiptStamp {
  readonly tool_call_id: string;
  readonly tool_name: string;
  /** success | error | partial_success, from deerflow_tool_meta, else the message's status. */
  readonly status: string;
  /** First 16 hex digits of the SHA-256 of the arguments as sorted-key JSON. */
  readonly args_sha256: string;
  /** First 16 hex digits of the SHA-256 of the output text. */
  readonly output_sha256: string;
  /** UTF-8 byte length of the output text. */
  readonly output_bytes: number;
  /** ISO 8601 time of stamping. */
  readonly created_at: string;
}

/** A receipt with the display id it has in one ledger. */
export interface ToolReceipt extends ToolReceiptStamp {
  readonly id: string;
}

/** What a rendered ledger consists of: the text and the receipts visible in it, with their original ids. */
export interface RenderedReceiptLedger {
  readonly text: string;
  readonly receipts: readonly ToolReceipt[];
}

export const LEDGER_HEADING = "## Tool receipts (execution record)";
export const OLDER_RECEIPTS_OMITTED = "- ... older receipts omitted (context budget)";
// The model must never read provenance as endorsement, so the ledger always states its limits.
export const LEDGER_EVIDENCE_BOUNDARY =
  "Execution evidence only — receipts record that a call happened and its status; they do not validate claim correctness or task acceptance.";

export function receiptId(position: number): string {
  return `${RECEIPT_ID_PREFIX}${position}`;
}

/** The citation the model is asked to write: `[r2]`, or `[r2 write_file]` when anchored to a tool. */
export function formatCitation(id: string, toolName?: string): string {
  return toolName ? `[${id} ${toolName}]` : `[${id}]`;
}

// The instruction's example is built from formatCitation, so it can never drift from the parser.
export function ledgerInstruction(): string {
  return `Cite receipt ids (e.g. ${formatCitation(receiptId(1), "write_file")}) in your final report for every claim about an action you took.`;
}

function ledgerHeader(): string[] {
  return [LEDGER_HEADING, ledgerInstruction(), LEDGER_EVIDENCE_BOUNDARY];
}

const STRING_FIELDS = ["tool_call_id", "tool_name", "status", "args_sha256", "output_sha256", "created_at"] as const;

/**
 * Structural check of a persisted receipt: types and sizes only, not provenance. Receipts come back
 * out of checkpoints, so a malformed one must be skipped rather than rendered as evidence.
 */
export function isValidReceipt(value: unknown): value is ToolReceiptStamp {
  if (!isRecord(value)) return false;
  for (const field of STRING_FIELDS) {
    const text = value[field];
    if (typeof text !== "string" || codePointLength(text) > MAX_RECEIPT_FIELD_CHARS) return false;
  }
  const bytes = value["output_bytes"];
  return typeof bytes === "number" && Number.isSafeInteger(bytes) && bytes >= 0;
}

// Only the known fields travel on: a newer writer's extra keys must not leak into a ledger.
function pick(stamp: ToolReceiptStamp, id: string): ToolReceipt {
  return {
    id,
    tool_call_id: stamp.tool_call_id,
    tool_name: stamp.tool_name,
    status: stamp.status,
    args_sha256: stamp.args_sha256,
    output_sha256: stamp.output_sha256,
    output_bytes: stamp.output_bytes,
    created_at: stamp.created_at,
  };
}

/** The valid receipts stamped on the ToolMessages of `messages`, in order, with ids r1..rN. */
export function extractToolReceipts(messages: readonly BaseMessage[]): ToolReceipt[] {
  const receipts: ToolReceipt[] = [];
  for (const message of messages) {
    if (!ToolMessage.isInstance(message)) continue;
    const stamp: unknown = message.additional_kwargs?.[TOOL_RECEIPT_KEY];
    if (isValidReceipt(stamp)) receipts.push(pick(stamp, receiptId(receipts.length + 1)));
  }
  return receipts;
}

function receiptLine(receipt: ToolReceipt): string {
  return `- [${receipt.id}] ${receipt.tool_name} status=${receipt.status} args_sha256=${receipt.args_sha256} output_sha256=${receipt.output_sha256} bytes=${receipt.output_bytes}`;
}

function codePointLength(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

function joinedLength(lines: readonly string[]): number {
  let total = Math.max(0, lines.length - 1);
  for (const line of lines) total += codePointLength(line);
  return total;
}

function boundText(text: string, maxChars: number): string {
  if (maxChars <= 0) return "";
  const chars = Array.from(text);
  if (chars.length <= maxChars) return text;
  if (maxChars <= 4) return chars.slice(0, maxChars).join("");
  return `${chars.slice(0, maxChars - 4).join("")}\n...`;
}

/**
 * Renders the ledger the model sees, and returns with it the exact receipts visible in that text.
 * Over budget, the newest receipts are kept in chronological order with their original ids, after
 * an omission marker; a caller that persists what a response was shown must keep `receipts`, never
 * the full input, or a citation could resolve against an entry the model never saw.
 */
export function renderReceiptLedger(
  receipts: readonly ToolReceipt[],
  options: { readonly maxChars?: number } = {},
): RenderedReceiptLedger {
  const maxChars = options.maxChars ?? RECEIPT_LEDGER_CHAR_BUDGET;
  if (receipts.length === 0 || maxChars <= 0) return { text: "", receipts: [] };
  const header = ledgerHeader();
  const lines = receipts.map(receiptLine);
  let text: string;
  let visible: readonly ToolReceipt[];
  if (joinedLength([...header, ...lines]) <= maxChars) {
    text = [...header, ...lines].join("\n");
    visible = receipts;
  } else {
    let kept = 0;
    let keptLength = joinedLength([...header, OLDER_RECEIPTS_OMITTED]);
    for (let index = lines.length - 1; index >= 0; index -= 1) {
      const next = keptLength + 1 + codePointLength(lines[index]!);
      if (next > maxChars) break;
      keptLength = next;
      kept += 1;
    }
    text = [...header, OLDER_RECEIPTS_OMITTED, ...lines.slice(lines.length - kept)].join("\n");
    visible = kept > 0 ? receipts.slice(receipts.length - kept) : [];
  }
  if (codePointLength(text) > maxChars) {
    // Even the header overran the budget: whatever lines survive the cut are not whole receipts.
    return { text: boundText(text, maxChars), receipts: [] };
  }
  return { text, receipts: visible };
}

const SNAPSHOT_ID = new RegExp(`^${RECEIPT_ID_PREFIX}([1-9][0-9]{0,${MAX_RECEIPT_ID_DIGITS - 1}})$`);

/**
 * The receipts of a persisted snapshot, or null when it is malformed. Ids must form a strictly
 * consecutive run of positive original ids (r24..r30 is valid: the budget kept only the newest),
 * so a forged or corrupted snapshot cannot make a citation resolve.
 */
export function validateReceiptSnapshot(value: unknown): ToolReceipt[] | null {
  if (!Array.isArray(value)) return null;
  const receipts: ToolReceipt[] = [];
  let first: number | undefined;
  for (const [index, entry] of value.entries()) {
    if (!isValidReceipt(entry)) return null;
    const id: unknown = (entry as unknown as Record<string, unknown>)["id"];
    const match = typeof id === "string" ? SNAPSHOT_ID.exec(id) : null;
    if (!match) return null;
    first ??= Number(match[1]);
    if (id !== receiptId(first + index)) return null;
    receipts.push(pick(entry, id));
  }
  return receipts;
}

/**
 * The receipts the newest response that received a ledger was shown, or null when no response
 * carries a snapshot or the newest one is malformed (never an older one: that would verify the
 * report against a ledger it was not written from).
 */
export function citingTurnReceipts(messages: readonly BaseMessage[]): ToolReceipt[] | null {
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    const message = messages[index]!;
    if (!AIMessage.isInstance(message)) continue;
    const snapshot: unknown = message.additional_kwargs?.[TOOL_RECEIPT_LEDGER_KEY];
    if (snapshot === undefined || snapshot === null) continue;
    return validateReceiptSnapshot(snapshot);
  }
  return null;
}

export interface ReceiptCitation {
  readonly id: string;
  /** The tool name the citation claims, when anchored (`[r2 write_file]`). */
  readonly anchor: string | null;
}

// An anchor starts like an identifier; later characters follow Python's `\w` (any script) plus "." and "-".
const CITATION = new RegExp(`\\[${RECEIPT_ID_PREFIX}([0-9]+)(?:\\s+([A-Za-z_][\\p{L}\\p{N}_.-]*))?\\]`, "gu");

/**
 * The (id, anchor) pairs a report cites, first-seen order. An exact repeat is kept once; the same
 * id with a different anchor is a different claim and is kept. Ids longer than ten digits are
 * malformed model output and skipped, before any conversion could misread them.
 */
export function parseCitations(text: string): ReceiptCitation[] {
  const seen = new Set<string>();
  const citations: ReceiptCitation[] = [];
  for (const match of text.matchAll(CITATION)) {
    const digits = match[1]!;
    if (digits.length > MAX_RECEIPT_ID_DIGITS) continue;
    const citation: ReceiptCitation = { id: receiptId(Number.parseInt(digits, 10)), anchor: match[2] ?? null };
    const key = JSON.stringify([citation.id, citation.anchor]);
    if (seen.has(key)) continue;
    seen.add(key);
    citations.push(citation);
  }
  return citations;
}

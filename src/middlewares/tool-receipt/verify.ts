import { parseCitations, type ToolReceipt } from "./ledger.ts";

/*
 * Parent-side check of a subagent report's citations against the receipts that report was written
 * from. Pure: no I/O, no model call. The verdict is advisory evidence, never acceptance, so its
 * summary flag is `citation_resolved`; words like "verified" or "satisfied" belong to the hard
 * gates of the runtime.
 */

export const CITATION_VERDICT_SOURCE = "receipt_citations";
export const CITATION_VERDICT_REQUIREMENT = "cited_ids_in_execution_record";
const VERDICT_LIMITATION = "execution evidence only, does not validate claim correctness";

export interface CitationFailure {
  readonly id: string;
  readonly reason: string;
}

export interface CitationVerdict {
  readonly source: string;
  readonly requirement: string;
  readonly citation_resolved: boolean;
  readonly cited: readonly string[];
  readonly resolved: readonly string[];
  readonly failed: readonly CitationFailure[];
  readonly unknown: readonly string[];
  /** The report claims actions (verbs, file paths) yet cites nothing: a weak negative signal. */
  readonly no_citation_claims: boolean;
}

// Biased toward flagging: a false positive costs one UNVERIFIED line, a false negative lets a
// fabricated success through. Word edges follow Python's Unicode `\b`, not ASCII's.
const ACTION_VERB =
  /(?<![\p{L}\p{N}_])(?:wrote|written|created|saved|generated|ran|executed|uploaded|downloaded|deleted|modified|updated|installed|deployed|fetched|built|compiled|produced|exported)(?![\p{L}\p{N}_])/iu;
const FILE_PATH =
  /(?:\/[\p{L}\p{N}_.-]+){2,}|(?<![\p{L}\p{N}_])[\p{L}\p{N}_.-]+\.(?:py|md|txt|json|ya?ml|csv|html|js|ts|sh|log|pdf|png|jpe?g)(?![\p{L}\p{N}_])/u;

function claimsActions(text: string): boolean {
  return ACTION_VERB.test(text) || FILE_PATH.test(text);
}

/**
 * Cross-checks every citation in a report against the receipts it could cite: an unknown id, a
 * receipt that did not succeed, or an anchor naming another tool fails the citation.
 */
export function verifyCitations(reportText: string, receipts: readonly ToolReceipt[]): CitationVerdict {
  const byId = new Map(receipts.map((receipt) => [receipt.id, receipt] as const));
  const cited: string[] = [];
  const resolved: string[] = [];
  const failed: CitationFailure[] = [];
  const unknown: string[] = [];
  for (const { id, anchor } of parseCitations(reportText)) {
    cited.push(id);
    const receipt = byId.get(id);
    if (!receipt) {
      unknown.push(id);
    } else if (receipt.status !== "success") {
      failed.push({ id, reason: `receipt status=${receipt.status}` });
    } else if (anchor !== null && anchor !== receipt.tool_name) {
      failed.push({ id, reason: `anchor mismatch: cited as ${anchor}, receipt ${id} is ${receipt.tool_name}` });
    } else {
      resolved.push(id);
    }
  }
  const noCitationClaims = cited.length === 0 && claimsActions(reportText);
  return {
    source: CITATION_VERDICT_SOURCE,
    requirement: CITATION_VERDICT_REQUIREMENT,
    // A report that claims nothing and cites nothing has nothing to resolve.
    citation_resolved: cited.length > 0 ? failed.length === 0 && unknown.length === 0 : !noCitationClaims,
    cited,
    resolved,
    failed,
    unknown,
    no_citation_claims: noCitationClaims,
  };
}

function stringList(value: unknown): string[] | null {
  return Array.isArray(value) && value.every((item) => typeof item === "string") ? [...(value as string[])] : null;
}

/** A persisted verdict re-read from durable context, or null when malformed: the read side trusts nothing. */
export function validateCitationVerdict(value: unknown): CitationVerdict | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const raw = value as Record<string, unknown>;
  const { source, requirement, citation_resolved: citationResolved, no_citation_claims: noCitationClaims } = raw;
  if (typeof source !== "string" || typeof requirement !== "string") return null;
  if (typeof citationResolved !== "boolean" || typeof noCitationClaims !== "boolean") return null;
  const cited = stringList(raw["cited"]);
  const resolved = stringList(raw["resolved"]);
  const unknown = stringList(raw["unknown"]);
  if (!cited || !resolved || !unknown || !Array.isArray(raw["failed"])) return null;
  const failed: CitationFailure[] = [];
  for (const entry of raw["failed"] as unknown[]) {
    if (typeof entry !== "object" || entry === null) return null;
    const { id, reason } = entry as Record<string, unknown>;
    if (typeof id !== "string" || typeof reason !== "string") return null;
    failed.push({ id, reason });
  }
  return {
    source,
    requirement,
    citation_resolved: citationResolved,
    cited,
    resolved,
    failed,
    unknown,
    no_citation_claims: noCitationClaims,
  };
}

/** The verdict as one line of the delegation ledger; "" when there is nothing to say. */
export function renderCitationVerdict(verdict: CitationVerdict): string {
  if (verdict.no_citation_claims) return "citations: UNVERIFIED — action claims without receipt citations";
  if (verdict.cited.length === 0) return "";
  const parts = [`${verdict.resolved.length} resolved`];
  if (verdict.failed.length > 0) parts.push(`${verdict.failed.length} failed`);
  if (verdict.unknown.length > 0) parts.push(`${verdict.unknown.length} unknown`);
  return `citations: ${parts.join(", ")} — ${VERDICT_LIMITATION}`;
}

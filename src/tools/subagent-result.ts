import { sha256HexSync } from "../extension-api/sha256-sync.ts";

/*
 * The structured result contract of the `task` tool: model-visible text and the
 * `additional_kwargs` facts consumers read (the delegation ledger, the UI) are built from the same
 * status/result/error inputs, so no caller hand-writes a second protocol string.
 */

/** The subagent's token usage on the task result (TokenUsage counts it toward the run). */
export const SUBAGENT_TOKEN_USAGE_KEY = "subagent_token_usage";
export const SUBAGENT_STATUS_KEY = "subagent_status";
export const SUBAGENT_STOP_REASON_KEY = "subagent_stop_reason";
export const SUBAGENT_ERROR_KEY = "subagent_error";
export const SUBAGENT_RESULT_BRIEF_KEY = "subagent_result_brief";
export const SUBAGENT_RESULT_SHA256_KEY = "subagent_result_sha256";
export const SUBAGENT_METADATA_TEXT_MAX_CHARS = 2000;

export const SUBAGENT_STATUSES = ["completed", "failed", "cancelled", "timed_out", "polling_timed_out"] as const;
export type SubagentStatus = (typeof SUBAGENT_STATUSES)[number];
export const SUBAGENT_STOP_REASONS = ["token_capped", "turn_capped", "loop_capped"] as const;
export type SubagentStopReason = (typeof SUBAGENT_STOP_REASONS)[number];

const STOP_REASON_LABELS: Readonly<Record<SubagentStopReason, string>> = {
  token_capped: "token budget",
  turn_capped: "turn budget",
  loop_capped: "repeated tool-call loop",
};

export interface SubagentResultInput {
  readonly result?: string | undefined;
  readonly error?: string | undefined;
  readonly stopReason?: SubagentStopReason | undefined;
}

/** Trimmed text capped in code points, keeping head and tail around a marker when cut. */
export function boundSubagentText(text: string, cap = SUBAGENT_METADATA_TEXT_MAX_CHARS): string {
  const chars = Array.from(text.trim());
  if (chars.length <= cap) return chars.join("");
  const marker = "\n...\n";
  const head = Math.floor((cap * 2) / 3);
  const tail = cap - head - marker.length;
  if (cap <= marker.length || tail <= 0) return chars.slice(0, cap).join("");
  return `${chars.slice(0, head).join("")}${marker}${chars.slice(chars.length - tail).join("")}`;
}

/** The model-visible text of a task result, and the error detail the metadata records (if any). */
export function formatSubagentResultMessage(status: SubagentStatus, input: SubagentResultInput = {}): { content: string; error: string | undefined } {
  const result = input.result ?? "";
  const error = (input.error ?? "").trim();
  const capped = input.stopReason ? STOP_REASON_LABELS[input.stopReason] : undefined;
  switch (status) {
    case "completed":
      return { content: capped ? `Task Succeeded (capped: ${capped}). Result: ${result}` : `Task Succeeded. Result: ${result}`, error: undefined };
    case "cancelled": {
      const detail = error || "Task cancelled by user.";
      return { content: detail === "Task cancelled by user." ? detail : `Task cancelled by user. Error: ${detail}`, error: detail };
    }
    case "timed_out": {
      const detail = error || "Task timed out.";
      return { content: detail === "Task timed out." ? detail : `Task timed out. Error: ${detail}`, error: detail };
    }
    case "polling_timed_out": {
      const detail = error || "Task polling timed out.";
      return { content: detail, error: detail };
    }
    case "failed": {
      const detail = error || "Task failed.";
      if (capped) {
        return { content: detail === "Task failed." ? `Task failed (capped: ${capped}).` : `Task failed (capped: ${capped}). Error: ${detail}`, error: detail };
      }
      return { content: detail === "Task failed." ? detail : `Task failed. Error: ${detail}`, error: detail };
    }
  }
}

/** The `additional_kwargs` facts of a task result; a blank error is left out rather than sent empty. */
export function makeSubagentAdditionalKwargs(status: SubagentStatus, input: SubagentResultInput = {}): Record<string, unknown> {
  const payload: Record<string, unknown> = { [SUBAGENT_STATUS_KEY]: status };
  if (status === "completed" && typeof input.result === "string" && input.result.trim()) {
    payload[SUBAGENT_RESULT_BRIEF_KEY] = boundSubagentText(input.result);
    payload[SUBAGENT_RESULT_SHA256_KEY] = sha256HexSync(input.result);
  }
  if (status !== "completed" && typeof input.error === "string" && input.error.trim()) {
    payload[SUBAGENT_ERROR_KEY] = boundSubagentText(input.error);
  }
  if (input.stopReason) payload[SUBAGENT_STOP_REASON_KEY] = input.stopReason;
  return payload;
}

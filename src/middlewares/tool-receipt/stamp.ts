import { bytesToHex, sha256Bytes, sha256HexSync } from "../../core/hex.ts";
import type { ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { compareCodePoints, isPlainObject } from "../../extension-api/canonical.ts";
import type { ToolReceiptStamp } from "./ledger.ts";
import { TOOL_META_KEY } from "../tool-result-meta.ts";

/*
 * How a receipt's hashes are computed. They follow the Python host byte for byte, so the same call
 * gets the same receipt whichever runtime stamped it: arguments (and non-string content) as
 * `json.dumps(value, sort_keys=True, default=str)`, which means ", " and ": " separators, keys in
 * code-point order and every non-ASCII character escaped.
 *
 * Parity limits, by construction of JS numbers: a float that happens to be whole is written `1`
 * (Python: `1.0`), and exponent forms differ (`1e-7` vs `1e-07`). Tool arguments arrive as parsed
 * JSON, where both are rare.
 */

/** Hex digits kept of each SHA-256: enough to tell calls apart, short enough for a ledger line. */
export const RECEIPT_HASH_HEX_CHARS = 16;

const SHORT_ESCAPES: Readonly<Record<string, string>> = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" };

function pythonString(text: string): string {
  let out = '"';
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index]!;
    const code = text.charCodeAt(index);
    const short = SHORT_ESCAPES[char];
    if (short !== undefined) out += short;
    // Printable ASCII is written raw; everything else, DEL included, as \uXXXX per UTF-16 unit.
    else if (code >= 0x20 && code <= 0x7e) out += char;
    else out += `\\u${code.toString(16).padStart(4, "0")}`;
  }
  return `${out}"`;
}

function pythonNumber(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "Infinity";
  if (value === -Infinity) return "-Infinity";
  return JSON.stringify(value);
}

/** Python's `json.dumps(value, sort_keys=True, default=str)` for JSON-shaped values. */
export function pythonJsonDumps(value: unknown, ancestors: Set<object> = new Set()): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "string":
      return pythonString(value);
    case "number":
      return pythonNumber(value);
    case "boolean":
      return value ? "true" : "false";
    case "bigint":
      return value.toString();
    case "object":
      break;
    default:
      // default=str: what cannot be JSON is written as its string form.
      return pythonString(String(value));
  }
  const container = value as object;
  if (ancestors.has(container)) throw new TypeError("Circular reference detected");
  ancestors.add(container);
  try {
    if (Array.isArray(container)) return `[${container.map((item) => pythonJsonDumps(item, ancestors)).join(", ")}]`;
    if (isPlainObject(container)) {
      const entries = Object.entries(container).filter(([, item]) => item !== undefined);
      entries.sort(([a], [b]) => compareCodePoints(a, b));
      return `{${entries.map(([key, item]) => `${pythonString(key)}: ${pythonJsonDumps(item, ancestors)}`).join(", ")}}`;
    }
    return pythonString(container instanceof Date ? container.toISOString() : String(container));
  } finally {
    ancestors.delete(container);
  }
}

/**
 * Below this many UTF-16 units the synchronous digest is cheaper: crypto.subtle's round trip
 * (a worker thread on Node and, for larger inputs, on Bun) costs 20-30 µs per call, which made the
 * receipt most of the tool-side chain's cost (bench/tool-side).
 */
const SYNC_DIGEST_MAX_CHARS = 8192;

async function shortSha256(text: string, bytes: Uint8Array): Promise<string> {
  if (text.length <= SYNC_DIGEST_MAX_CHARS) return sha256HexSync(text).slice(0, RECEIPT_HASH_HEX_CHARS);
  return bytesToHex((await sha256Bytes(bytes)).subarray(0, RECEIPT_HASH_HEX_CHARS / 2));
}

function receiptStatus(message: ToolMessage): string {
  const meta: unknown = message.additional_kwargs?.[TOOL_META_KEY];
  const metaStatus = isPlainObject(meta) ? meta["status"] : undefined;
  // A short-circuit answer from an inner gate may carry no meta; its own status is the next best fact.
  if (typeof metaStatus === "string" && metaStatus !== "") return metaStatus;
  return message.status || "success";
}

/** The receipt of one call and its result, stamped at `nowMs`. */
export async function makeToolReceipt(toolCall: Pick<ToolCall, "id" | "name" | "args">, message: ToolMessage, nowMs: number): Promise<ToolReceiptStamp> {
  const args: unknown = toolCall.args;
  const argsJson = pythonJsonDumps(isPlainObject(args) ? args : {});
  const content = typeof message.content === "string" ? message.content : pythonJsonDumps(message.content);
  const encoder = new TextEncoder();
  const output = encoder.encode(content);
  const [argsSha256, outputSha256] = await Promise.all([shortSha256(argsJson, encoder.encode(argsJson)), shortSha256(content, output)]);
  return {
    tool_call_id: toolCall.id ? String(toolCall.id) : "",
    tool_name: toolCall.name ? String(toolCall.name) : "",
    status: receiptStatus(message),
    args_sha256: argsSha256,
    output_sha256: outputSha256,
    output_bytes: output.length,
    created_at: new Date(nowMs).toISOString(),
  };
}

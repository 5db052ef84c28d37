import { isRecord } from "../../core/guards.ts";
/*
 * The identity of one AI message's tool-call set, as LoopDetection compares them. Two sets are the
 * same when they call the same tools on the same salient arguments, whatever their order and
 * whatever incidental arguments (a description, a timeout) differ. The hash never leaves the
 * middleware, so any stable function will do; a sync one keeps afterModel free of awaits.
 */

type Dict = Record<string, unknown>;

/** A tool call as providers hand it over: args may be an object, a JSON string, or junk. */
export interface ToolCallLike {
  readonly name?: unknown;
  readonly args?: unknown;
}

// read_file pages through a file in ranges; calls on neighbouring ranges count as one place.
const READ_FILE_BUCKET_LINES = 200;
const CONTENT_SENSITIVE_TOOLS: ReadonlySet<string> = new Set(["write_file", "str_replace"]);
const SALIENT_FIELDS = ["path", "url", "query", "command", "pattern", "glob", "cmd"] as const;

/** JSON with object keys sorted at every depth; values JSON cannot hold are written as their string form. */
export function stableJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") return Number.isFinite(value) ? JSON.stringify(value) : JSON.stringify(String(value));
  if (Array.isArray(value)) return `[${value.map((item) => stableJson(item)).join(",")}]`;
  if (isRecord(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${stableJson(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(String(value));
}

/**
 * Args as an object plus, when they were not one, a stable key for them. Some providers send args
 * as a JSON string; parsing it keeps `{"path": "a"}` and `'{"path":"a"}'` the same call.
 */
function normalizeArgs(raw: unknown): { args: Dict; fallbackKey: string | null } {
  if (isRecord(raw)) return { args: raw, fallbackKey: null };
  if (raw === null || raw === undefined) return { args: {}, fallbackKey: null };
  if (typeof raw === "string") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return { args: {}, fallbackKey: raw };
    }
    return isRecord(parsed) ? { args: parsed, fallbackKey: null } : { args: {}, fallbackKey: stableJson(parsed) };
  }
  return { args: {}, fallbackKey: stableJson(raw) };
}

/** A line number the way Python's int() reads one, or undefined when it cannot. */
function lineNumber(value: unknown): number | undefined {
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "number") return Number.isFinite(value) ? Math.trunc(value) : undefined;
  if (typeof value === "string" && /^\s*[+-]?\d+\s*$/.test(value)) return Number.parseInt(value, 10);
  return undefined;
}

function readFileKey(args: Dict): string {
  const rawPath = args["path"];
  const path = rawPath ? (typeof rawPath === "string" ? rawPath : stableJson(rawPath)) : "";
  const start = args["start_line"] === undefined || args["start_line"] === null ? 1 : (lineNumber(args["start_line"]) ?? 1);
  const end = args["end_line"] === undefined || args["end_line"] === null ? start : (lineNumber(args["end_line"]) ?? start);
  const [low, high] = start <= end ? [start, end] : [end, start];
  const bucket = (line: number) => Math.floor((Math.max(line, 1) - 1) / READ_FILE_BUCKET_LINES);
  return `${path}:${bucket(low)}-${bucket(high)}`;
}

/** The part of one call's arguments that says where it acts. */
export function stableToolKey(name: string, rawArgs: unknown): string {
  const { args, fallbackKey } = normalizeArgs(rawArgs);
  if (name === "read_file" && fallbackKey === null) return readFileKey(args);
  // The same path rewritten with new content is progress, not a loop.
  if (CONTENT_SENSITIVE_TOOLS.has(name)) return fallbackKey ?? stableJson(args);
  const salient: Dict = {};
  for (const field of SALIENT_FIELDS) {
    const value = args[field];
    if (value !== undefined && value !== null) salient[field] = value;
  }
  if (Object.keys(salient).length > 0) return stableJson(salient);
  return fallbackKey ?? stableJson(args);
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK_64 = 0xffffffffffffffffn;

function fnv1a64(text: string): string {
  let hash = FNV_OFFSET;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= BigInt(byte);
    hash = (hash * FNV_PRIME) & MASK_64;
  }
  return hash.toString(16).padStart(16, "0");
}

/** Order-independent hash of a tool-call set: the same multiset of calls always hashes the same. */
export function hashToolCalls(calls: readonly ToolCallLike[]): string {
  const normalized = calls.map((call) => {
    const name = typeof call.name === "string" ? call.name : "";
    return `${name}:${stableToolKey(name, call.args ?? {})}`;
  });
  normalized.sort();
  return fnv1a64(JSON.stringify(normalized));
}

import { parse as parseYaml } from "yaml";
import { estimateTokens } from "../../core/tokens.ts";
import { JsonNumber, rawDecodeJson, type JsonNode } from "./json.ts";
import {
  PY_NOT_S,
  PY_S,
  PY_W,
  PyText,
  codePointLength,
  collapseWhitespace,
  pyFloatRepr,
  pyLstrip,
  pySplitWhitespace,
  pySplitlines,
  pyStrip,
  utf8Length,
} from "./text.ts";
import { parseXmlOutline } from "./xml.ts";
import { CsvError, readCsv } from "./csv.ts";

/*
 * Deterministic, model-free summaries of an oversized tool output, so what stays in context after
 * the full text moved to a file says what the file holds (a JSON object's keys, a table's columns,
 * a program's symbols) rather than only its first and last bytes. A port of upstream's
 * tool_output_synopsis.py: the detectors run in the same order with the same thresholds, and the
 * rendered lines read the same, because models and operators compare them across both stacks.
 * One cohesive thing, the detectors in that order, kept in one file so it reads against upstream's;
 * the readers they use (json.ts, xml.ts, csv.ts, text.ts) sit beside it.
 */

export type ToolOutputKind = "json" | "csv" | "tsv" | "yaml" | "xml" | "code" | "text" | "unknown";

export interface ToolOutputSynopsis {
  readonly kind: ToolOutputKind;
  readonly title: string;
  readonly summary: readonly string[];
  readonly structure: readonly string[];
  readonly notableItems: readonly string[];
  /** A raw sample the synopsis already chose (binary-like and oversized output). */
  readonly sample: string;
}

const KEY_LIMIT = 12;
const SCALAR_LIMIT = 6;
const TABLE_SAMPLE_ROWS = 50;
const TABLE_COLUMN_LIMIT = 18;
const TABLE_MIN_DATA_ROWS = 5;
const TEXT_HEADER_LIMIT = 16;
const TEXT_EXCERPT_CHARS = 420;
const CODE_IMPORT_LIMIT = 12;
const CODE_SYMBOL_LIMIT = 24;
const JSON_SHAPE_MAX_DEPTH = 2;
const JSON_STRUCTURE_LIMIT = 24;
const JSON_STRUCTURE_DEPTH = 4;
// Above this the output is not parsed at all: bounds memory and CPU on pathological dumps and
// takes XML/YAML expansion attacks off the table.
const MAX_SYNOPSIS_INPUT_BYTES = 5_000_000;
// YAML aliases can expand exponentially; the detector lets a crafted bomb through, the size cap does not.
const MAX_YAML_CHARS = 500_000;

const CODE_HINTS: readonly RegExp[] = [
  new RegExp(`^${PY_S}*(?:from${PY_S}+${PY_NOT_S}+${PY_S}+import|import${PY_S}+${PY_NOT_S}+)`, "mu"),
  new RegExp(`^${PY_S}*(?:class|def|async${PY_S}+def|function|export${PY_S}+function)${PY_S}+[A-Za-z_]${PY_W}*`, "mu"),
  // Rust and Java need stronger signals (`use x;`, `fn x(`): a bare "use the following" is prose.
  new RegExp(
    `^${PY_S}*(?:package${PY_S}+[A-Za-z_][\\p{L}\\p{N}_.]*|use${PY_S}+[A-Za-z_][\\p{L}\\p{N}_:]*${PY_S}*;|` +
      `pub${PY_S}+fn${PY_S}+[A-Za-z_]${PY_W}*${PY_S}*\\(|fn${PY_S}+[A-Za-z_]${PY_W}*${PY_S}*\\(|public${PY_S}+class${PY_S}+[A-Za-z_]${PY_W}*)`,
    "mu",
  ),
];
const IMPORT_LINE = new RegExp(`^(?:from${PY_S}+(${PY_NOT_S}+)${PY_S}+import|import${PY_S}+(${PY_NOT_S}+))`, "u");
const SYMBOL_LINE = new RegExp(
  `^(class|def|async${PY_S}+def|function|export${PY_S}+function|pub${PY_S}+fn|fn)${PY_S}+([A-Za-z_]${PY_W}*)`,
  "u",
);
const MARKDOWN_HEADER = new RegExp(`^#{1,6}${PY_S}+`, "u");
const CAPS_HEADER = new RegExp(`^[A-Z0-9][A-Z0-9${PY_S.slice(1, -1)}:_-]{6,}$`, "u");
const YAML_KEY_LINE = new RegExp(`^${PY_S}*[A-Za-z_][A-Za-z0-9_.\\-]*:${PY_S}*${PY_NOT_S}.*$`, "u");
const TABLE_HEADER_IDENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
// re.match's `$` also matches before a final newline, so a key ending in "\n" still reads as an identifier.
const JSON_IDENT_KEY = /^[A-Za-z_][A-Za-z0-9_]*\n?$/;

function synopsis(
  kind: ToolOutputKind,
  title: string,
  summary: string[],
  structure: string[] = [],
  notableItems: string[] = [],
  sample = "",
): ToolOutputSynopsis {
  return { kind, title, summary, structure, notableItems, sample };
}

function clip(value: string, limit: number): string {
  if (limit <= 0) return "";
  const text = PyText.of(value);
  if (text.length <= limit) return value;
  return `${text.head(Math.max(0, limit - 3))}...`;
}

function oneLine(value: string, limit: number): string {
  return clip(pyStrip(collapseWhitespace(value)), limit);
}

function headTailSample(content: string, limit: number): string {
  if (limit <= 0) return "";
  const text = PyText.of(content);
  if (text.length <= limit) return content;
  const half = Math.max(1, Math.floor(limit / 2));
  return `${text.head(half)}\n...\n${text.tail(half)}`;
}

function looksBinary(content: string): boolean {
  if (content.includes("\x00")) return true;
  const sample = PyText.of(content).codePointsOfHead(1000);
  const controls = sample.filter((code) => code < 32 && code !== 0x0a && code !== 0x0d && code !== 0x09).length;
  return controls / Math.max(1, sample.length) > 0.05;
}

/** Python's str() of a YAML key (JSON keys are always strings). */
function pyStr(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : pyFloatRepr(value);
  return String(value);
}

function typeName(value: unknown): string {
  if (value instanceof Map) return "object";
  if (Array.isArray(value)) return "array";
  if (typeof value === "boolean") return "boolean";
  if (value === null || value === undefined) return "null";
  if (typeof value === "number" || typeof value === "bigint" || value instanceof JsonNumber) return "number";
  return "string";
}

function shortValue(value: JsonNode): string {
  if (typeof value === "string") return JSON.stringify(clip(value, 80));
  if (value === null) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (value instanceof JsonNumber) return clip(value.repr, 80);
  return clip(String(value), 80);
}

function firstKeys(map: ReadonlyMap<unknown, unknown>): string[] {
  const keys: string[] = [];
  for (const key of map.keys()) {
    if (keys.length >= KEY_LIMIT) break;
    keys.push(pyStr(key));
  }
  return keys;
}

function firstEntries<K, V>(map: ReadonlyMap<K, V>): Array<[K, V]> {
  const entries: Array<[K, V]> = [];
  for (const entry of map) {
    if (entries.length >= KEY_LIMIT) break;
    entries.push(entry);
  }
  return entries;
}

function jsonShape(value: JsonNode, depth = 0): string {
  if (depth >= JSON_SHAPE_MAX_DEPTH) return "...";
  if (value instanceof Map) {
    const keys = firstKeys(value);
    return `object(keys=${value.size}${keys.length > 0 ? `: ${keys.join(", ")}` : ""})`;
  }
  if (Array.isArray(value)) {
    const samples = value
      .slice(0, 3)
      .map((item) => jsonShape(item, depth + 1))
      .join(", ");
    return `array(len=${value.length}${samples ? `, first=[${samples}]` : ""})`;
  }
  return typeName(value);
}

function jsonPath(parent: string, key: string): string {
  return JSON_IDENT_KEY.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}

function jsonContainerDescription(value: JsonNode): string {
  if (value instanceof Map) {
    const keys = firstKeys(value);
    return `object keys ${value.size}${keys.length > 0 ? `; keys ${keys.join(", ")}` : ""}`;
  }
  if (Array.isArray(value)) {
    return `array length ${value.length}${value.length > 0 ? `; first item ${typeName(value[0])}` : ""}`;
  }
  return typeName(value);
}

function isContainer(value: JsonNode): value is Map<string, JsonNode> | JsonNode[] {
  return value instanceof Map || Array.isArray(value);
}

/**
 * Nested container paths. No line or byte anchors: one found by searching for the key text is
 * wrong whenever the same text appears earlier as a value, and the path alone already navigates.
 */
function jsonContainerPaths(root: JsonNode): string[] {
  const paths: string[] = [];
  const walk = (node: JsonNode, current: string, depth: number): void => {
    if (paths.length >= JSON_STRUCTURE_LIMIT || depth >= JSON_STRUCTURE_DEPTH) return;
    if (node instanceof Map) {
      for (const [key, child] of firstEntries(node)) {
        if (paths.length >= JSON_STRUCTURE_LIMIT) break;
        const next = jsonPath(current, key);
        if (isContainer(child)) {
          paths.push(`${next}: ${jsonContainerDescription(child)}`);
          walk(child, next, depth + 1);
        }
      }
      return;
    }
    if (Array.isArray(node) && node.length > 0 && isContainer(node[0]!)) walk(node[0]!, `${current}[]`, depth + 1);
  };
  walk(root, "$", 0);
  return paths;
}

/** Scalars from anywhere in the document: a structural summary, not a confidentiality filter. */
function scalarExamples(root: JsonNode): string[] {
  const examples: string[] = [];
  const walk = (node: JsonNode, current: string, depth: number): void => {
    if (examples.length >= SCALAR_LIMIT || depth >= JSON_STRUCTURE_DEPTH) return;
    if (node instanceof Map) {
      for (const [key, child] of firstEntries(node)) {
        walk(child, `${current}.${key}`, depth + 1);
        if (examples.length >= SCALAR_LIMIT) break;
      }
      return;
    }
    if (Array.isArray(node)) {
      for (const [index, child] of node.slice(0, 2).entries()) {
        walk(child, `${current}[${index}]`, depth + 1);
        if (examples.length >= SCALAR_LIMIT) break;
      }
      return;
    }
    examples.push(`${current}: ${shortValue(node)}`);
  };
  walk(root, "$", 0);
  return examples;
}

function tryJson(content: string): ToolOutputSynopsis | null {
  const stripped = pyStrip(content);
  if (!stripped.startsWith("{") && !stripped.startsWith("[")) return null;
  const decoded = rawDecodeJson(stripped);
  if (!decoded) return null;
  const { value } = decoded;
  const trailing = codePointLength(pyStrip(stripped.slice(decoded.end)));
  const summary: string[] = [];
  const structure = [`shape: ${jsonShape(value)}`, ...jsonContainerPaths(value)];
  const notable = scalarExamples(value);
  if (value instanceof Map) {
    const keys = [...value.keys()];
    summary.push(`JSON object with ${keys.length} top-level keys.`);
    summary.push(`Top-level keys: ${keys.slice(0, KEY_LIMIT).join(", ") || "(none)"}`);
  } else if (Array.isArray(value)) {
    summary.push(`JSON array with ${value.length} items.`);
    if (value.length > 0) structure.push(`first item type: ${typeName(value[0])}`);
  } else {
    summary.push(`JSON ${typeName(value)}.`);
  }
  if (trailing > 0) notable.push(`Trailing non-JSON characters after first value: ${trailing}`);
  return synopsis("json", "JSON output", summary, structure, notable);
}

function tryXml(stripped: string): ToolOutputSynopsis | null {
  if (!stripped.startsWith("<")) return null;
  const outline = parseXmlOutline(stripped);
  if (!outline) return null;
  const counts = new Map<string, number>();
  for (const tag of outline.childTags) counts.set(tag, (counts.get(tag) ?? 0) + 1);
  // Counter.most_common: highest count first, ties in first-seen order (Array.sort is stable).
  const common = [...counts].sort((a, b) => b[1] - a[1]).slice(0, KEY_LIMIT);
  return synopsis(
    "xml",
    "XML output",
    [`XML document with root tag ${outline.rootTag}.`],
    [`root tag: ${outline.rootTag}`, `root attributes: ${outline.rootAttributeCount}`, ...common.map(([tag, n]) => `${tag}: ${n}`)],
  );
}

function tryTable(content: string, delimiter: string, kind: "csv" | "tsv"): ToolOutputSynopsis | null {
  const lines = pySplitlines(content);
  let rows: string[][];
  try {
    rows = readCsv(lines.slice(0, TABLE_SAMPLE_ROWS).join("\n"), delimiter);
  } catch (error) {
    if (error instanceof CsvError) return null;
    throw error;
  }
  rows = rows.filter((row) => row.some((cell) => pyStrip(cell) !== ""));
  if (rows.length < 2 || rows[0]!.length < 2) return null;
  const width = rows[0]!.length;
  const consistent = rows.slice(1, 11).filter((row) => row.length === width);
  // Indented bash output, `ls -l` listings and prose with a comma otherwise pass as tables.
  if (consistent.length < TABLE_MIN_DATA_ROWS) return null;
  const rawHeader = rows[0]!;
  if (rawHeader.some((cell) => !TABLE_HEADER_IDENT.test(pyStrip(cell)))) return null;
  if (rawHeader.some((cell) => cell.startsWith(" ") || cell.startsWith("\t"))) return null;

  const columns = rawHeader.map((cell, index) => pyStrip(cell) || `column_${index + 1}`);
  const dataRows = Math.max(0, lines.filter((line) => pyStrip(line) !== "").length - 1);
  // key=value pairs, so a quoted cell holding the delimiter cannot look like an extra column.
  const firstRow = rows[1]!;
  const pairs = columns
    .slice(0, Math.min(columns.length, firstRow.length))
    .slice(0, TABLE_COLUMN_LIMIT)
    .map((column, index) => `${column}=${clip(firstRow[index]!, 80)}`);
  const label = kind.toUpperCase();
  return synopsis(
    kind,
    kind === "csv" ? "CSV table output" : "TSV table output",
    [`${label} table with ${dataRows} data rows and ${width} columns.`],
    [`columns: ${columns.slice(0, TABLE_COLUMN_LIMIT).join(", ")}`, `first data row: ${pairs.join(" | ") || "(none)"}`],
  );
}

/**
 * YAML-shaped means a document marker or three `key: value` lines whose keys are not bare
 * upper-case log levels ("INFO: starting" is a log line, not a mapping).
 */
function looksYaml(content: string): boolean {
  if (pyLstrip(content).startsWith("---")) return true;
  if (looksCode(content)) return false;
  let keyLike = 0;
  for (const line of pySplitlines(content).slice(0, 80)) {
    if (!YAML_KEY_LINE.test(line)) continue;
    const key = pyStrip(line.split(":", 1)[0]!);
    if (/[A-Z]/.test(key) && !/[a-z]/.test(key) && !key.includes("_")) continue;
    keyLike += 1;
    if (keyLike >= 3) return true;
  }
  return false;
}

function tryYaml(content: string): ToolOutputSynopsis | null {
  if (!looksYaml(content)) return null;
  if (content.length > MAX_YAML_CHARS) return null;
  let value: unknown;
  try {
    // YAML 1.1 and repeated keys allowed, as PyYAML's safe_load reads them.
    value = parseYaml(content, { version: "1.1", mapAsMap: true, uniqueKeys: false, logLevel: "error" });
  } catch {
    return null;
  }
  if (value instanceof Map) {
    // A mapping of nothing but strings is what logs and tracebacks collapse into; calling that
    // "YAML with N keys" would hide the text.
    const nonString = [...value.values()].filter((child) => typeof child !== "string").length;
    if (nonString === 0 && value.size > 0) return null;
    const keys = [...value.keys()].map(pyStr);
    return synopsis(
      "yaml",
      "YAML output",
      [`YAML object with ${keys.length} top-level keys.`, `Top-level keys: ${keys.slice(0, KEY_LIMIT).join(", ")}`],
      firstEntries(value).map(([key, child]) => `${pyStr(key)}: ${typeName(child)}`),
    );
  }
  if (Array.isArray(value)) {
    return synopsis(
      "yaml",
      "YAML output",
      [`YAML array with ${value.length} items.`],
      value.length > 0 ? [`first item type: ${typeName(value[0])}`] : [],
    );
  }
  return null;
}

function looksCode(content: string): boolean {
  return CODE_HINTS.some((pattern) => pattern.test(content));
}

function summarizeCode(content: string): ToolOutputSynopsis {
  const imports: string[] = [];
  const symbols: string[] = [];
  const lines = pySplitlines(content);
  for (const line of lines) {
    const stripped = pyStrip(line);
    const importMatch = IMPORT_LINE.exec(stripped);
    if (importMatch) {
      imports.push(oneLine(importMatch[1] ?? importMatch[2] ?? "", 160));
      continue;
    }
    const symbolMatch = SYMBOL_LINE.exec(stripped);
    if (symbolMatch) symbols.push(oneLine(`${symbolMatch[1]} ${symbolMatch[2]}`, 180));
  }
  const structure = [`line count: ${lines.length}`];
  if (imports.length > 0) structure.push(`imports: ${imports.slice(0, CODE_IMPORT_LIMIT).join(", ")}`);
  return synopsis("code", "Code-like output", [`Code-like text with ${lines.length} lines.`], structure, symbols.slice(0, CODE_SYMBOL_LIMIT));
}

function summarizeText(content: string, toolName: string, includeExcerpts = true): ToolOutputSynopsis {
  const lines = pySplitlines(content);
  const normalized = pyStrip(collapseWhitespace(content));
  const headers: string[] = [];
  const seen = new Set<string>();
  for (const line of lines) {
    const stripped = pyStrip(line);
    if (!stripped) continue;
    if (!MARKDOWN_HEADER.test(stripped) && !CAPS_HEADER.test(stripped)) continue;
    const header = oneLine(stripped, 160);
    if (seen.has(header)) continue;
    seen.add(header);
    headers.push(header);
    if (headers.length >= TEXT_HEADER_LIMIT) break;
  }
  const text = PyText.of(content);
  const words = normalized ? pySplitWhitespace(normalized).length : 0;
  const summary = [
    `Text output${toolName ? ` from ${toolName}` : ""} with ${text.length} characters, ${words} words, and ${lines.length} lines.`,
    `Detected section headers: ${headers.length > 0 ? headers.join(" | ") : "none detected"}.`,
  ];
  // Left out when a raw head/tail sample follows, which would repeat the same bytes.
  if (includeExcerpts) {
    const opener = oneLine(text.head(TEXT_EXCERPT_CHARS), TEXT_EXCERPT_CHARS);
    let closer = "";
    if (text.length > TEXT_EXCERPT_CHARS) {
      const closeStart = Math.max(TEXT_EXCERPT_CHARS, text.length - TEXT_EXCERPT_CHARS);
      closer = closeStart < text.length ? oneLine(text.slice(closeStart), TEXT_EXCERPT_CHARS) : "";
    }
    summary.push(`Opening excerpt: ${opener || "(empty)"}`);
    if (closer) summary.push(`Closing excerpt: ${closer}`);
  }
  return synopsis("text", "Text output", summary);
}

/** A typed synopsis of `content`, without a model. */
export function buildToolOutputSynopsis(content: string, toolName = ""): ToolOutputSynopsis {
  if (content === "") return synopsis("unknown", "Empty output", ["The tool returned an empty string."]);
  const length = codePointLength(content);
  const bytes = utf8Length(content);
  if (bytes > MAX_SYNOPSIS_INPUT_BYTES) {
    return synopsis(
      "unknown",
      "Oversized output",
      [`The output has ${length} characters (${(bytes / 1024 / 1024).toFixed(1)} MB). Parsing skipped due to size limit.`],
      [],
      [],
      headTailSample(content, TEXT_EXCERPT_CHARS * 2),
    );
  }
  if (looksBinary(content)) {
    return synopsis(
      "unknown",
      "Binary-like output",
      [`The output has ${length} characters and includes non-text control bytes.`],
      [],
      [],
      headTailSample(content, TEXT_EXCERPT_CHARS * 2),
    );
  }
  return (
    tryJson(content) ??
    tryXml(pyStrip(content)) ??
    (content.includes("\t") ? tryTable(content, "\t", "tsv") : null) ??
    (content.includes(",") ? tryTable(content, ",", "csv") : null) ??
    tryYaml(content) ??
    (looksCode(content) ? summarizeCode(content) : summarizeText(content, toolName))
  );
}

/**
 * The inline raw sample: `head` code points from the start and `tail` from the end, each snapped
 * to a line break, never repeating bytes when the two would overlap.
 */
function buildRawSample(content: string, head: number, tail: number, existing: string): string {
  if (existing) return existing;
  if (head <= 0 && tail <= 0) return "";
  const text = PyText.of(content);
  if (text.length <= head + tail) return content;
  const parts: string[] = [];
  if (head > 0) {
    let headText = text.head(head);
    const snap = headText.lastIndexOf("\n");
    if (snap > 0) headText = headText.slice(0, snap);
    parts.push(headText);
  }
  if (tail > 0 && head + tail < text.length) {
    let tailText = text.tail(tail);
    const snap = tailText.indexOf("\n");
    if (snap >= 0 && snap < tailText.length - 1) tailText = tailText.slice(snap + 1);
    parts.push(tailText);
  }
  return parts.length === 2 ? `${parts[0]}\n...\n${parts[1]}` : (parts[0] ?? "");
}

export interface ToolOutputPreviewOptions {
  readonly toolName: string;
  readonly virtualPath: string;
  readonly headChars: number;
  readonly tailChars: number;
}

/** What replaces an externalised output in context: file reference, typed synopsis, raw sample, read hint. */
export function renderToolOutputPreview(content: string, options: ToolOutputPreviewOptions): string {
  const { toolName, virtualPath } = options;
  const total = codePointLength(content);
  const head = Math.max(0, options.headChars);
  const tail = Math.max(0, options.tailChars);
  let result = buildToolOutputSynopsis(content, toolName);
  if (result.kind === "text" && head + tail > 0 && total > head + tail) result = summarizeText(content, toolName, false);
  const lines = [
    `[Full ${toolName} output saved to ${virtualPath} (${total} chars, ~${Math.floor(estimateTokens(content))} tokens).]`,
    `[Preview kind: ${result.kind}. This is a structured synopsis, not a raw head/tail truncation.]`,
    "",
    `${result.title}:`,
    ...result.summary.map((item) => `- ${item}`),
  ];
  if (result.structure.length > 0) lines.push("", "Structure:", ...result.structure.map((item) => `- ${item}`));
  if (result.notableItems.length > 0) lines.push("", "Notable items:", ...result.notableItems.map((item) => `- ${item}`));
  const rawSample = buildRawSample(content, head, tail, result.sample);
  if (rawSample) lines.push("", "Raw sample (head + tail, clipped to head_chars / tail_chars):", rawSample);
  lines.push("", "Access:", `- Use read_file on ${virtualPath} with start_line and end_line to inspect the raw output.`);
  return lines.join("\n");
}

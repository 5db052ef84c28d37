import { FORM_FIELD_TYPE_VALUES, type FormFieldType } from "../../tools/ask-clarification.ts";
import { sha256HexSync } from "../../extension-api/sha256-sync.ts";
import { isRecord } from "../../core/guards.ts";

/*
 * Turns ask_clarification arguments into the card the UI renders (artifact.human_input) and the
 * plain text every other surface shows (ToolMessage.content, IM channels). The middleware answers
 * the call before any tool runs, so nothing validated these arguments: everything a model can
 * send — strings for arrays, XML-ish dicts for options, unhashable types — must normalise here,
 * deterministically, without throwing. Python semantics (str(), truthiness, strip(), len() in code
 * points, json.dumps spacing) are kept where they decide what a card shows, so one model output
 * yields the same card here as upstream.
 */

export const MAX_FORM_FIELDS = 16;
export const MAX_FIELD_OPTIONS = 24;
export const MAX_FIELD_TEXT_CHARS = 200;
/**
 * Budget over the serialised fields. The per-item caps alone admit forms whose text fallback
 * overruns IM channel limits (Slack ~40k chars, Feishu ~30 KB per card), which would silently cut
 * trailing fields — what atomic validation exists to prevent.
 */
export const MAX_FORM_SERIALIZED_BYTES = 16_384;

export const FORM_FIELD_TYPES: ReadonlySet<string> = new Set(FORM_FIELD_TYPE_VALUES);
const OPTION_FIELD_TYPES: ReadonlySet<string> = new Set(["select", "multi_select"]);

/**
 * The frontend keeps form values in a plain object keyed by field name; these names would read an
 * inherited Object.prototype member instead of the user's input. A fixed list, not the running
 * engine's Object.prototype, so every runtime degrades the same forms.
 */
export const RESERVED_FIELD_NAMES: ReadonlySet<string> = new Set([
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "toLocaleString",
  "valueOf",
  "hasOwnProperty",
  "isPrototypeOf",
  "propertyIsEnumerable",
  "__defineGetter__",
  "__defineSetter__",
  "__lookupGetter__",
  "__lookupSetter__",
]);

// A Map, not an object literal: `clarification_type: "constructor"` must not find a prototype member.
const TYPE_ICONS: ReadonlyMap<string, string> = new Map([
  ["missing_info", "❓"],
  ["ambiguous_requirement", "🤔"],
  ["approach_choice", "🔀"],
  ["risk_confirmation", "⚠️"],
  ["suggestion", "💡"],
]);
const DEFAULT_ICON = "❓";
const DEFAULT_CLARIFICATION_TYPE = "missing_info";
export const FORM_REPLY_HINT = "Please reply with a value for each field.";

// Python's \w is Unicode-aware; JS's is ASCII unless spelled out.
const XML_TAG = /<\/?[A-Za-z_][\p{L}\p{N}_:.-]*(?:\s[^<>]*?)?\s*\/?>/gu;
// Python's str.strip() whitespace (str.isspace), which differs from String.prototype.trim at
// U+001C..U+001F, U+0085 (stripped) and U+FEFF (kept).
const PY_WS = "[\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const PY_STRIP = new RegExp(`^${PY_WS}+|${PY_WS}+$`, "gu");

export type HumanInputMode = "free_text" | "choice_with_other" | "form";

export interface HumanInputOption {
  id: string;
  label: string;
  value: string;
}

export interface HumanInputField {
  name: string;
  label: string;
  type: FormFieldType;
  required: boolean;
  options?: HumanInputOption[];
  placeholder?: string;
}

/**
 * The structured card. Legacy modes stay `version: 1` so their wire format never changes; the form
 * mode is `version: 2` so an older frontend rejects it and falls back to the text content.
 */
export interface HumanInputRequest {
  version: 1 | 2;
  kind: "human_input_request";
  source: "ask_clarification";
  request_id: string;
  clarification_type: string;
  question: string;
  input_mode: HumanInputMode;
  tool_call_id?: string;
  context?: string | null;
  options?: HumanInputOption[];
  fields?: HumanInputField[];
}

export interface NormalizedClarification {
  /** The `artifact.human_input` payload. */
  payload: HumanInputRequest;
  /** The readable fallback, used as ToolMessage content. */
  text: string;
}

type Dict = Record<string, unknown>;

function own(record: Dict, key: string): unknown {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** JSON.parse that reports failure instead of throwing; only a SyntaxError means "not JSON". */
export function parseJsonValue(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    if (error instanceof SyntaxError) return { ok: false };
    throw error;
  }
}

function pyStrip(text: string): string {
  return text.replace(PY_STRIP, "");
}

function codePoints(text: string): number {
  return Array.from(text).length;
}

/**
 * Python's str() for JSON values. Containers are written as JSON: a Python repr would mean nothing
 * to the clients that read these strings.
 */
function pyStr(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch (error) {
    // A cyclic value cannot come from a model; a programmatic caller still gets a string.
    if (error instanceof TypeError) return String(value);
    throw error;
  }
}

/** Python truthiness: "", 0, false, None, [] and {} are all "not given". */
function pyTruthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === 0 || value === "") return false;
  if (Array.isArray(value)) return value.length > 0;
  if (isRecord(value)) return Object.keys(value).length > 0;
  return true;
}

/** Scalar leaves of an XML-to-dict payload in source order; nulls carry no label and are dropped. */
function flattenLeaves(value: unknown, into: unknown[]): unknown[] {
  if (Array.isArray(value)) {
    for (const item of value) flattenLeaves(item, into);
  } else if (isRecord(value)) {
    for (const item of Object.values(value)) flattenLeaves(item, into);
  } else if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
    into.push(value);
  }
  return into;
}

/**
 * Option labels as the UI may show them: a JSON-string array decoded, XML-to-dict payloads
 * flattened, residual tags stripped, then trimmed, blanks dropped (the frontend rejects a whole
 * payload over one blank label) and duplicates removed in first-seen order.
 */
export function normalizeClarificationOptions(raw: unknown): string[] {
  let options = raw;
  // Some models send arrays as JSON strings; a string that is not JSON is one option.
  if (typeof options === "string") {
    const parsed = parseJsonValue(options);
    options = parsed.ok ? parsed.value : [options];
  }
  if (options === null || options === undefined) return [];
  let items: unknown[];
  if (isRecord(options)) items = flattenLeaves(options, []);
  else if (Array.isArray(options)) {
    // Top-level scalars keep Python's str() (None -> "None"); nested containers are flattened
    // like a dict payload instead of being rendered as one unreadable label.
    items = options.flatMap((item) => (isRecord(item) || Array.isArray(item) ? flattenLeaves(item, []) : [item]));
  } else items = [options];

  const normalized: string[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    const text = pyStrip(pyStr(item).replace(XML_TAG, ""));
    if (!text || seen.has(text)) continue;
    seen.add(text);
    normalized.push(text);
  }
  return normalized;
}

/** Providers serialise booleans as strings or 1/0; anything else unreadable means false. */
function normalizeBool(raw: unknown): boolean {
  if (typeof raw === "boolean") return raw;
  if (typeof raw === "number") return raw !== 0;
  if (typeof raw === "string") return pyStrip(raw).toLowerCase() === "true";
  return false;
}

/** Byte length of Python's `json.dumps(value, ensure_ascii=False)` (", " and ": " separators). */
function pythonJsonBytes(value: unknown): number {
  const dumps = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(dumps).join(", ")}]`;
    if (isRecord(v)) return `{${Object.entries(v).map(([k, item]) => `${JSON.stringify(k)}: ${dumps(item)}`).join(", ")}}`;
    return JSON.stringify(v);
  };
  return new TextEncoder().encode(dumps(value)).length;
}

/**
 * The v2 form fields, or `[]` when the form must degrade. Atomic: one structurally broken entry
 * (not an object, a missing, blank, reserved or duplicate name, any cap exceeded) drops the whole
 * form, so a card never renders "complete" while missing a business field. Benign problems degrade
 * locally: an unknown type (including non-strings such as `[]`) and an option-less select become text.
 */
export function normalizeClarificationFields(raw: unknown): HumanInputField[] {
  let fields = raw;
  if (typeof fields === "string") {
    const parsed = parseJsonValue(fields);
    if (!parsed.ok) return [];
    fields = parsed.value;
  }
  if (!Array.isArray(fields) || fields.length > MAX_FORM_FIELDS) return [];

  const normalized: HumanInputField[] = [];
  const seenNames = new Set<string>();
  for (const entry of fields) {
    if (!isRecord(entry)) return [];
    const rawName = own(entry, "name");
    if (typeof rawName !== "string") return [];
    const name = pyStrip(rawName);
    if (!name || RESERVED_FIELD_NAMES.has(name) || seenNames.has(name) || codePoints(name) > MAX_FIELD_TEXT_CHARS) return [];
    seenNames.add(name);

    const rawLabel = own(entry, "label");
    const strippedLabel = typeof rawLabel === "string" ? pyStrip(rawLabel) : "";
    const label = strippedLabel || name;
    if (codePoints(label) > MAX_FIELD_TEXT_CHARS) return [];

    const rawType = own(entry, "type");
    let type = (typeof rawType === "string" && FORM_FIELD_TYPES.has(rawType) ? rawType : "text") as FormFieldType;
    const options = OPTION_FIELD_TYPES.has(type) ? normalizeClarificationOptions(own(entry, "options")) : [];
    if (options.length > MAX_FIELD_OPTIONS || options.some((option) => codePoints(option) > MAX_FIELD_TEXT_CHARS)) return [];
    if (OPTION_FIELD_TYPES.has(type) && options.length === 0) type = "text";

    const field: HumanInputField = { name, label, type, required: normalizeBool(own(entry, "required")) };
    if (OPTION_FIELD_TYPES.has(type)) {
      field.options = options.map((option, index) => ({ id: `${name}-option-${index + 1}`, label: option, value: option }));
    }
    const rawPlaceholder = own(entry, "placeholder");
    const placeholder = typeof rawPlaceholder === "string" ? pyStrip(rawPlaceholder) : "";
    if (placeholder) {
      if (codePoints(placeholder) > MAX_FIELD_TEXT_CHARS) return [];
      field.placeholder = placeholder;
    }
    normalized.push(field);
  }

  if (pythonJsonBytes(normalized) > MAX_FORM_SERIALIZED_BYTES) return [];
  return normalized;
}

function argsRecord(args: unknown): Dict {
  if (isRecord(args)) return args;
  if (typeof args === "string") {
    const parsed = parseJsonValue(args);
    if (parsed.ok && isRecord(parsed.value)) return parsed.value;
  }
  return {};
}

function fieldLine(field: HumanInputField, index: number): string {
  let line = `  ${index}. ${field.label}`;
  if (field.type === "checkbox") {
    // A ticked box is a yes; an IM user replying in text needs to know an unticked one means no
    // and that a required one is consent, not "must answer".
    line += field.required ? " (required: reply yes to agree)" : " (yes/no, default no)";
  } else if (field.required) {
    line += " (required)";
  }
  if (field.options && field.options.length > 0) {
    line += ` — options: ${field.options.map((option) => option.label).join(" / ")}`;
    if (field.type === "multi_select") line += " (multiple allowed)";
  }
  return line;
}

function formatText(icon: string, question: string, context: unknown, fields: HumanInputField[], options: string[]): string {
  const parts: string[] = [];
  if (pyTruthy(context)) {
    parts.push(`${icon} ${pyStr(context)}`, `\n${question}`);
  } else {
    parts.push(`${icon} ${question}`);
  }
  if (fields.length > 0) {
    parts.push("", ...fields.map((field, i) => fieldLine(field, i + 1)), "", FORM_REPLY_HINT);
  } else if (options.length > 0) {
    parts.push("", ...options.map((option, i) => `  ${i + 1}. ${option}`));
  }
  return parts.join("\n");
}

/** The id of a clarification ToolMessage: stable, so a retried call replaces its card instead of adding one. */
export function clarificationMessageId(toolCallId: string | undefined, text: string): string {
  return toolCallId ? `clarification:${toolCallId}` : `clarification:${sha256HexSync(text).slice(0, 16)}`;
}

/**
 * ask_clarification arguments (an object, or a JSON string of one) as the `human_input` card and
 * its readable text. Forms win over options, options over free text; the `fields` are normalised
 * once and used for both, so the card and the text always list the same things.
 */
export function normalizeClarification(args: unknown, ids: { toolCallId?: string } = {}): NormalizedClarification {
  const record = argsRecord(args);
  const fields = normalizeClarificationFields(own(record, "fields"));
  const options = normalizeClarificationOptions(Object.hasOwn(record, "options") ? record["options"] : []);
  const rawType = own(record, "clarification_type");
  const clarificationType = Object.hasOwn(record, "clarification_type") ? pyStr(rawType) : DEFAULT_CLARIFICATION_TYPE;
  const rawQuestion = own(record, "question");
  const question = pyTruthy(rawQuestion) ? pyStr(rawQuestion) : "";
  const context = own(record, "context");

  const text = formatText(TYPE_ICONS.get(clarificationType) ?? DEFAULT_ICON, question, context, fields, options);
  const toolCallId = ids.toolCallId || undefined;

  const inputMode: HumanInputMode = fields.length > 0 ? "form" : options.length > 0 ? "choice_with_other" : "free_text";
  const payload: HumanInputRequest = {
    version: inputMode === "form" ? 2 : 1,
    kind: "human_input_request",
    source: "ask_clarification",
    request_id: clarificationMessageId(toolCallId, text),
    clarification_type: clarificationType,
    question,
    input_mode: inputMode,
  };
  if (toolCallId) payload.tool_call_id = toolCallId;
  if (Object.hasOwn(record, "context")) payload.context = context === null || context === undefined ? null : pyStr(context);
  if (inputMode === "form") payload.fields = fields;
  else if (inputMode === "choice_with_other") {
    payload.options = options.map((option, index) => ({ id: `option-${index + 1}`, label: option, value: option }));
  }
  return { payload, text };
}

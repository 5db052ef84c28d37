import { ExtensionApiError } from "./errors.ts";
import { bytesToHex } from "./hex.ts";

export type CanonicalJsonErrorCode =
  | "unsupported_type"
  | "non_plain_object"
  | "non_finite_number"
  | "lone_surrogate"
  | "cycle";

/** A value that canonical JSON cannot represent; `path` points at it, e.g. `$.a[2].b`. */
export class CanonicalJsonError extends ExtensionApiError {
  declare readonly code: CanonicalJsonErrorCode;
  readonly path: string;

  constructor(code: CanonicalJsonErrorCode, path: string, message: string) {
    super(code, message);
    this.path = path;
  }
}

/**
 * Orders strings by Unicode code point, as Python's `sorted` does. `Array.prototype.sort`
 * compares UTF-16 code units, which puts astral characters (surrogate pairs, 0xD800-0xDFFF)
 * before BMP characters in 0xE000-0xFFFF and would break parity with the Python host's hashes.
 */
export function compareCodePoints(a: string, b: string): number {
  let index = 0;
  while (index < a.length && index < b.length) {
    const pointA = a.codePointAt(index) as number;
    const pointB = b.codePointAt(index) as number;
    if (pointA !== pointB) return pointA - pointB;
    index += pointA > 0xffff ? 2 : 1;
  }
  return a.length - b.length;
}

/**
 * Serialises plain data to the canonical JSON form shared with the Python host: object keys
 * sorted by code point, `,` and `:` without spaces, non-ASCII written raw, strings escaped as
 * JSON.stringify escapes them. Anything that would make two different values collide, or one
 * value serialise two ways, is rejected with a {@link CanonicalJsonError} naming its path.
 *
 * Parity limits, by construction of JS numbers: `1.0` is written `1`, integers beyond 2^53 have
 * already lost precision before they reach this function, and floats whose shortest form uses an
 * exponent (`1e-7`) are written JS-style, where Python writes `1e-07`.
 */
export function canonicalJson(value: unknown): string {
  return encode(value, "$", new Map());
}

/** SHA-256 of {@link canonicalJson}'s UTF-8 bytes, as 64 lowercase hex digits. */
export async function canonicalHash(value: unknown): Promise<string> {
  return sha256Hex(canonicalJson(value));
}

/** SHA-256 of a string's UTF-8 bytes, as 64 lowercase hex digits (what `sha256sum` prints). */
export async function sha256Hex(text: string): Promise<string> {
  const loneSurrogateIndex = findLoneSurrogate(text);
  if (loneSurrogateIndex !== -1) {
    // TextEncoder would silently turn the surrogate into U+FFFD, so two different texts would share a hash.
    throw loneSurrogateError("$", text, loneSurrogateIndex, "text");
  }
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return bytesToHex(new Uint8Array(digest));
}

/** True for objects whose prototype is Object.prototype or null: what JSON.parse produces. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function encode(value: unknown, path: string, ancestors: Map<object, string>): string {
  switch (typeof value) {
    case "string":
      return encodeString(value, path, "string");
    case "number":
      if (!Number.isFinite(value)) {
        throw new CanonicalJsonError(
          "non_finite_number",
          path,
          `canonical JSON cannot encode ${String(value)} at ${path}: JSON has no NaN or Infinity; ` +
            "store null or a string instead",
        );
      }
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "undefined":
      throw new CanonicalJsonError(
        "unsupported_type",
        path,
        `canonical JSON cannot encode undefined at ${path}: remove the entry or use null`,
      );
    case "bigint":
      throw new CanonicalJsonError(
        "unsupported_type",
        path,
        `canonical JSON cannot encode a bigint at ${path}: convert it to a string ` +
          "(or to a number if it lies within ±2^53)",
      );
    case "symbol":
      throw new CanonicalJsonError(
        "unsupported_type",
        path,
        `canonical JSON cannot encode a symbol at ${path}: use a string instead`,
      );
    case "function":
      throw new CanonicalJsonError(
        "unsupported_type",
        path,
        `canonical JSON cannot encode a function at ${path}: pass plain data, not behaviour`,
      );
  }
  if (value === null) return "null";
  const container = value as object;

  const ancestorPath = ancestors.get(container);
  if (ancestorPath !== undefined) {
    throw new CanonicalJsonError(
      "cycle",
      path,
      `canonical JSON cannot encode a cycle: the value at ${path} is its own ancestor ${ancestorPath}; ` +
        "pass a tree (repeating a value is fine, containing itself is not)",
    );
  }

  ancestors.set(container, path);
  try {
    if (Array.isArray(container)) return encodeArray(container, path, ancestors);
    if (isPlainObject(container)) return encodeObject(container, path, ancestors);
  } finally {
    ancestors.delete(container);
  }
  throw new CanonicalJsonError(
    "non_plain_object",
    path,
    `canonical JSON cannot encode ${describeNonPlain(container)} at ${path}: convert it first to ` +
      "plain objects, arrays, strings, finite numbers, booleans or null (e.g. a Date to its ISO string)",
  );
}

function encodeArray(items: readonly unknown[], path: string, ancestors: Map<object, string>): string {
  if (Object.getPrototypeOf(items) !== Array.prototype) {
    throw new CanonicalJsonError(
      "non_plain_object",
      path,
      `canonical JSON cannot encode an array subclass at ${path}: convert it first with Array.from()`,
    );
  }
  const parts: string[] = [];
  for (let index = 0; index < items.length; index += 1) {
    const itemPath = `${path}[${index}]`;
    if (!(index in items)) {
      throw new CanonicalJsonError(
        "unsupported_type",
        itemPath,
        `canonical JSON cannot encode the hole in a sparse array at ${itemPath}: fill it, e.g. with null`,
      );
    }
    parts.push(encode(items[index], itemPath, ancestors));
  }
  return `[${parts.join(",")}]`;
}

function encodeObject(
  record: Record<string, unknown>,
  path: string,
  ancestors: Map<object, string>,
): string {
  const symbolKey = Object.getOwnPropertySymbols(record).find((key) =>
    Object.prototype.propertyIsEnumerable.call(record, key),
  );
  if (symbolKey !== undefined) {
    throw new CanonicalJsonError(
      "unsupported_type",
      path,
      `canonical JSON cannot encode the symbol key ${String(symbolKey)} of the object at ${path}: ` +
        "use string keys only",
    );
  }
  const keys = Object.keys(record);
  const encodedKeys = new Map<string, string>();
  for (const key of keys) encodedKeys.set(key, encodeString(key, childPath(path, key), "key"));
  keys.sort(compareCodePoints);
  const parts: string[] = [];
  for (const key of keys) {
    parts.push(`${encodedKeys.get(key)}:${encode(record[key], childPath(path, key), ancestors)}`);
  }
  return `{${parts.join(",")}}`;
}

function encodeString(text: string, path: string, role: "string" | "key"): string {
  const loneSurrogateIndex = findLoneSurrogate(text);
  if (loneSurrogateIndex !== -1) throw loneSurrogateError(path, text, loneSurrogateIndex, role);
  return JSON.stringify(text);
}

function findLoneSurrogate(text: string): number {
  for (let index = 0; index < text.length; index += 1) {
    const unit = text.charCodeAt(index);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    if (unit <= 0xdbff) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        index += 1;
        continue;
      }
    }
    return index;
  }
  return -1;
}

function loneSurrogateError(
  path: string,
  text: string,
  index: number,
  role: "string" | "key" | "text",
): CanonicalJsonError {
  const unit = text.charCodeAt(index).toString(16).toUpperCase();
  const subject =
    role === "key"
      ? `canonical JSON cannot encode the key ${JSON.stringify(text)} at ${path}`
      : role === "string"
        ? `canonical JSON cannot encode the string at ${path}`
        : "cannot hash the text";
  return new CanonicalJsonError(
    "lone_surrogate",
    path,
    `${subject}: it holds a lone surrogate U+${unit} at index ${index}, which is not ` +
      "valid Unicode; repair the text (it was probably cut in the middle of a character)",
  );
}

const IDENTIFIER_KEY = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function childPath(path: string, key: string): string {
  return IDENTIFIER_KEY.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function describeNonPlain(value: object): string {
  const constructorName: unknown = (value as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof constructorName !== "string" || constructorName === "") {
    return "an object with a custom prototype";
  }
  return `${/^[AEIOU]/i.test(constructorName) ? "an" : "a"} ${constructorName}`;
}

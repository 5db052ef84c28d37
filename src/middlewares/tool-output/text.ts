/*
 * Text primitives with the semantics the tool-output budget was defined in upstream (Python):
 * lengths and offsets count code points, whitespace is str.isspace(), lines split as
 * str.splitlines(). A budget of "12,000 chars" and a preview that says "(n chars)" must agree
 * with what the same output measures upstream, emoji included.
 */

/** The characters str.isspace() accepts, as a regex character-class body. */
export const PY_WHITESPACE_CLASS = String.raw`\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000`;
/** Python's `\s` for str patterns. */
export const PY_S = `[${PY_WHITESPACE_CLASS}]`;
/** Python's `\S` for str patterns. */
export const PY_NOT_S = `[^${PY_WHITESPACE_CLASS}]`;
/** Python's `\w` for str patterns (letters, numbers, underscore); needs the `u` flag. */
export const PY_W = String.raw`[\p{L}\p{N}_]`;
/** Python's `\d` for str patterns (decimal digits of any script); needs the `u` flag. */
export const PY_D = String.raw`\p{Nd}`;

const LEADING_WS = new RegExp(`^${PY_S}+`);
const TRAILING_WS = new RegExp(`${PY_S}+$`);
const WS_RUN = new RegExp(`${PY_S}+`, "g");
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;
const SURROGATE = /[\uD800-\uDFFF]/;

export function pyStrip(text: string): string {
  return text.replace(LEADING_WS, "").replace(TRAILING_WS, "");
}

export function pyLstrip(text: string): string {
  return text.replace(LEADING_WS, "");
}

/** str.split() with no separator: runs of whitespace split, empty ends dropped. */
export function pySplitWhitespace(text: string): string[] {
  return text.split(WS_RUN).filter((part) => part !== "");
}

/** re.sub(r"\s+", " ", text) */
export function collapseWhitespace(text: string): string {
  return text.replace(WS_RUN, " ");
}

/** str.splitlines(): every Unicode line boundary, no trailing empty line. */
export function pySplitlines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split(LINE_BREAK);
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

/** Length in code points, what Python's len() reports. */
export function codePointLength(text: string): number {
  return PyText.of(text).length;
}

/** UTF-8 byte length without allocating the encoded bytes. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i += 1;
      } else {
        bytes += 3;
      }
    } else {
      bytes += 3;
    }
  }
  return bytes;
}

/**
 * A string indexed by code point. Text without surrogates (nearly all tool output) is indexed
 * directly; only text with astral characters pays for a code-point array.
 */
export class PyText {
  readonly text: string;
  readonly length: number;
  readonly #points: readonly string[] | undefined;

  private constructor(text: string) {
    this.text = text;
    this.#points = SURROGATE.test(text) ? Array.from(text) : undefined;
    this.length = this.#points ? this.#points.length : text.length;
  }

  static of(text: string): PyText {
    return new PyText(text);
  }

  /** text[start:end] for non-negative indices, clamped like Python. */
  slice(start: number, end: number = this.length): string {
    const from = Math.max(0, Math.min(start, this.length));
    const to = Math.max(from, Math.min(end, this.length));
    if (!this.#points) return this.text.slice(from, to);
    return this.#points.slice(from, to).join("");
  }

  /** text[:n] */
  head(n: number): string {
    return this.slice(0, Math.max(0, n));
  }

  /** text[-n:] for n > 0 (Python's text[-0:] is the whole text, which callers never want). */
  tail(n: number): string {
    return n <= 0 ? "" : this.slice(Math.max(0, this.length - n));
  }

  /** str.rfind(needle, start, end) for a one-code-point needle. */
  rfind(needle: string, start: number, end: number): number {
    const from = Math.max(0, start);
    const to = Math.min(end, this.length);
    if (!this.#points) {
      if (to <= from) return -1;
      const index = this.text.lastIndexOf(needle, to - 1);
      return index >= from ? index : -1;
    }
    for (let i = to - 1; i >= from; i--) if (this.#points[i] === needle) return i;
    return -1;
  }

  /** str.find(needle, start, end) for a one-code-point needle. */
  find(needle: string, start: number, end: number): number {
    const from = Math.max(0, start);
    const to = Math.min(end, this.length);
    if (!this.#points) {
      const index = this.text.indexOf(needle, from);
      return index >= 0 && index < to ? index : -1;
    }
    for (let i = from; i < to; i++) if (this.#points[i] === needle) return i;
    return -1;
  }

  /** Code points of text[:n] as numbers (for control-character scans). */
  codePointsOfHead(n: number): number[] {
    const head = this.head(n);
    const out: number[] = [];
    for (const char of head) out.push(char.codePointAt(0)!);
    return out;
  }
}

/** Python's str(float) / repr(float): shortest round-trip digits, exponent below 1e-4 and from 1e16. */
export function pyFloatRepr(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (value === Infinity) return "inf";
  if (value === -Infinity) return "-inf";
  if (value === 0) return Object.is(value, -0) ? "-0.0" : "0.0";
  const sign = value < 0 ? "-" : "";
  const [mantissa, exponentText] = Math.abs(value).toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  const exponent = Number(exponentText);
  if (exponent < -4 || exponent >= 16) {
    const rest = digits.length > 1 ? `.${digits.slice(1)}` : "";
    const expSign = exponent < 0 ? "-" : "+";
    return `${sign}${digits[0]}${rest}e${expSign}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  const integer = digits.length > exponent + 1 ? digits.slice(0, exponent + 1) : digits.padEnd(exponent + 1, "0");
  const fraction = digits.length > exponent + 1 ? digits.slice(exponent + 1) : "0";
  return `${sign}${integer}.${fraction}`;
}

import { DeerflowError } from "../../core/errors.ts";
import { pyFloatRepr } from "./text.ts";

/*
 * A JSON reader for the tool-output synopsis, shaped like Python's json.JSONDecoder.raw_decode:
 * it reads the first value of a text and reports where it ended (trailing characters are counted,
 * not rejected), keeps object keys in document order (JSON.parse reorders integer-like keys), and
 * keeps the int/float distinction a synopsis prints (`1.0` stays `1.0`). NaN and Infinity are
 * accepted as Python accepts them.
 */

/** A JSON number with the text Python's repr() gives it. */
export class JsonNumber {
  constructor(readonly repr: string) {}
}

export type JsonNode = null | boolean | string | JsonNumber | JsonNode[] | Map<string, JsonNode>;

// Python's C scanner gives up past its recursion limit (RecursionError, so "not JSON"); a
// bound here keeps a hostile document from exhausting the JS stack instead.
const MAX_DEPTH = 1000;

class JsonSyntaxError extends DeerflowError {
  constructor(message: string) {
    super("json_syntax_error", message);
    this.name = "JsonSyntaxError";
  }
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
const ESCAPES: Readonly<Record<string, string>> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

class Reader {
  pos = 0;
  constructor(readonly text: string) {}

  skipWhitespace(): void {
    while (this.pos < this.text.length) {
      const c = this.text[this.pos];
      if (c !== " " && c !== "\t" && c !== "\n" && c !== "\r") break;
      this.pos += 1;
    }
  }

  value(depth: number): JsonNode {
    if (depth > MAX_DEPTH) throw new JsonSyntaxError("too deep");
    const c = this.text[this.pos];
    if (c === "{") return this.object(depth);
    if (c === "[") return this.array(depth);
    if (c === '"') return this.string();
    if (this.text.startsWith("null", this.pos)) return this.literal(4, null);
    if (this.text.startsWith("true", this.pos)) return this.literal(4, true);
    if (this.text.startsWith("false", this.pos)) return this.literal(5, false);
    if (this.text.startsWith("NaN", this.pos)) return this.literal(3, new JsonNumber("nan"));
    if (this.text.startsWith("Infinity", this.pos)) return this.literal(8, new JsonNumber("inf"));
    if (this.text.startsWith("-Infinity", this.pos)) return this.literal(9, new JsonNumber("-inf"));
    return this.number();
  }

  literal<T extends JsonNode>(length: number, value: T): T {
    this.pos += length;
    return value;
  }

  number(): JsonNumber {
    NUMBER.lastIndex = this.pos;
    const match = NUMBER.exec(this.text);
    if (!match) throw new JsonSyntaxError("expected a value");
    this.pos += match[0].length;
    if (match[1] === undefined && match[2] === undefined) {
      // JSON forbids leading zeros, so the literal is already Python's int repr, except "-0".
      return new JsonNumber(match[0] === "-0" ? "0" : match[0]);
    }
    return new JsonNumber(pyFloatRepr(Number(match[0])));
  }

  string(): string {
    this.pos += 1;
    let out = "";
    let chunkStart = this.pos;
    while (true) {
      if (this.pos >= this.text.length) throw new JsonSyntaxError("unterminated string");
      const code = this.text.charCodeAt(this.pos);
      if (code === 0x22) {
        out += this.text.slice(chunkStart, this.pos);
        this.pos += 1;
        return out;
      }
      // strict=True: raw control characters are not allowed inside strings.
      if (code < 0x20) throw new JsonSyntaxError("control character in string");
      if (code === 0x5c) {
        out += this.text.slice(chunkStart, this.pos);
        const escape = this.text[this.pos + 1];
        if (escape === "u") {
          const hex = this.text.slice(this.pos + 2, this.pos + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new JsonSyntaxError("invalid \\u escape");
          out += String.fromCharCode(parseInt(hex, 16));
          this.pos += 6;
        } else if (escape !== undefined && escape in ESCAPES) {
          out += ESCAPES[escape];
          this.pos += 2;
        } else {
          throw new JsonSyntaxError("invalid escape");
        }
        chunkStart = this.pos;
        continue;
      }
      this.pos += 1;
    }
  }

  array(depth: number): JsonNode[] {
    this.pos += 1;
    const items: JsonNode[] = [];
    this.skipWhitespace();
    if (this.text[this.pos] === "]") {
      this.pos += 1;
      return items;
    }
    while (true) {
      this.skipWhitespace();
      items.push(this.value(depth + 1));
      this.skipWhitespace();
      const c = this.text[this.pos];
      this.pos += 1;
      if (c === "]") return items;
      if (c !== ",") throw new JsonSyntaxError("expected , or ]");
    }
  }

  object(depth: number): Map<string, JsonNode> {
    this.pos += 1;
    const entries = new Map<string, JsonNode>();
    this.skipWhitespace();
    if (this.text[this.pos] === "}") {
      this.pos += 1;
      return entries;
    }
    while (true) {
      this.skipWhitespace();
      if (this.text[this.pos] !== '"') throw new JsonSyntaxError("expected a key");
      const key = this.string();
      this.skipWhitespace();
      if (this.text[this.pos] !== ":") throw new JsonSyntaxError("expected :");
      this.pos += 1;
      this.skipWhitespace();
      // A repeated key keeps its first position and takes the last value, as a Python dict does.
      entries.set(key, this.value(depth + 1));
      this.skipWhitespace();
      const c = this.text[this.pos];
      this.pos += 1;
      if (c === "}") return entries;
      if (c !== ",") throw new JsonSyntaxError("expected , or }");
    }
  }
}

/**
 * The first JSON value of `text` (which must start with it) and the UTF-16 offset where it ends,
 * or null when no value parses there.
 */
export function rawDecodeJson(text: string): { value: JsonNode; end: number } | null {
  const reader = new Reader(text);
  try {
    const value = reader.value(0);
    return { value, end: reader.pos };
  } catch (error) {
    if (error instanceof JsonSyntaxError || error instanceof RangeError) return null;
    throw error;
  }
}

/*
 * Just enough of a non-validating, namespace-aware XML parser to say what a tool's XML output is:
 * the root tag, its attribute count and its children's tags, named as ElementTree names them
 * (`{uri}local` for a namespaced tag, xmlns declarations not counted as attributes). Anything
 * that is not well-formed is "not XML". Entity declarations are refused outright, as defusedxml
 * refuses them upstream, so a billion-laughs document costs nothing to reject.
 */

import { DeerflowError } from "../../core/errors.ts";

export interface XmlOutline {
  readonly rootTag: string;
  readonly rootAttributeCount: number;
  /** Tags of the root's child elements, in document order. */
  readonly childTags: readonly string[];
}

class XmlSyntaxError extends DeerflowError {
  constructor(message: string) {
    super("xml_syntax_error", message);
    this.name = "XmlSyntaxError";
  }
}

const NAME_START = String.raw`:A-Z_a-z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C\u200D\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD\u{10000}-\u{EFFFF}`;
const NAME_CHAR = String.raw`${NAME_START}\-.0-9\u00B7\u0300-\u036F\u203F\u2040`;
const NAME = new RegExp(`[${NAME_START}][${NAME_CHAR}]*`, "uy");
const SPACE = /[ \t\r\n]*/y;
const REFERENCE = /&(?:(amp|lt|gt|quot|apos)|#([0-9]+)|#x([0-9a-fA-F]+));/y;
// Characters XML 1.0 forbids anywhere in a document (controls, lone surrogates, U+FFFE/U+FFFF).
const INVALID_CHAR = /[\x00-\x08\x0B\x0C\x0E-\x1F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const XML_NAMESPACE = "http://www.w3.org/XML/1998/namespace";

function isXmlChar(code: number): boolean {
  return (
    code === 0x9 ||
    code === 0xa ||
    code === 0xd ||
    (code >= 0x20 && code <= 0xd7ff) ||
    (code >= 0xe000 && code <= 0xfffd) ||
    (code >= 0x10000 && code <= 0x10ffff)
  );
}

interface OpenElement {
  readonly rawName: string;
  readonly namespaces: ReadonlyMap<string, string>;
}

class Parser {
  pos = 0;
  readonly stack: OpenElement[] = [];
  outline: { rootTag: string; rootAttributeCount: number; childTags: string[] } | undefined;

  constructor(readonly text: string) {}

  fail(reason: string): never {
    throw new XmlSyntaxError(reason);
  }

  startsWith(token: string): boolean {
    return this.text.startsWith(token, this.pos);
  }

  skipSpace(): boolean {
    SPACE.lastIndex = this.pos;
    SPACE.exec(this.text);
    const moved = SPACE.lastIndex > this.pos;
    this.pos = SPACE.lastIndex;
    return moved;
  }

  name(): string {
    NAME.lastIndex = this.pos;
    const match = NAME.exec(this.text);
    if (!match) this.fail("expected a name");
    this.pos += match[0].length;
    return match[0];
  }

  until(token: string): string {
    const end = this.text.indexOf(token, this.pos);
    if (end < 0) this.fail(`unterminated, expected ${token}`);
    const body = this.text.slice(this.pos, end);
    this.pos = end + token.length;
    return body;
  }

  /** Character data or an attribute value: references must resolve to the five predefined entities or legal characters. */
  checkReferences(text: string): void {
    let at = text.indexOf("&");
    while (at >= 0) {
      REFERENCE.lastIndex = at;
      const match = REFERENCE.exec(text);
      if (!match) this.fail("undefined entity or bare &");
      if (match[1] === undefined) {
        const code = match[2] !== undefined ? parseInt(match[2], 10) : parseInt(match[3]!, 16);
        if (!isXmlChar(code)) this.fail("reference to an illegal character");
      }
      at = text.indexOf("&", at + match[0].length);
    }
  }

  comment(): void {
    this.pos += 4;
    const body = this.until("-->");
    if (body.includes("--") || body.endsWith("-")) this.fail("-- inside a comment");
  }

  processingInstruction(): void {
    this.pos += 2;
    const target = this.name();
    if (target.toLowerCase() === "xml" && (target !== "xml" || this.pos !== 5)) this.fail("XML declaration not at start");
    this.until("?>");
  }

  doctype(): void {
    this.pos += "<!DOCTYPE".length;
    const start = this.pos;
    let quote: string | undefined;
    let bracketDepth = 0;
    for (; this.pos < this.text.length; this.pos++) {
      const c = this.text[this.pos]!;
      if (quote) {
        if (c === quote) quote = undefined;
      } else if (c === '"' || c === "'") {
        quote = c;
      } else if (c === "[") {
        bracketDepth += 1;
      } else if (c === "]") {
        bracketDepth -= 1;
      } else if (c === ">" && bracketDepth <= 0) {
        const body = this.text.slice(start, this.pos);
        this.pos += 1;
        if (/<!ENTITY/.test(body)) this.fail("entity declarations are forbidden");
        return;
      }
    }
    this.fail("unterminated DOCTYPE");
  }

  /** Misc items allowed before and after the root: whitespace, comments, processing instructions. */
  misc(): void {
    while (true) {
      this.skipSpace();
      if (this.startsWith("<!--")) this.comment();
      else if (this.startsWith("<?")) this.processingInstruction();
      else return;
    }
  }

  resolve(rawName: string, namespaces: ReadonlyMap<string, string>, isElement: boolean): string {
    const colon = rawName.indexOf(":");
    if (colon < 0) {
      const defaultNs = isElement ? namespaces.get("") : undefined;
      return defaultNs ? `{${defaultNs}}${rawName}` : rawName;
    }
    const prefix = rawName.slice(0, colon);
    const local = rawName.slice(colon + 1);
    if (prefix === "" || local === "" || local.includes(":")) this.fail("malformed qualified name");
    const uri = namespaces.get(prefix);
    if (uri === undefined) this.fail(`unbound prefix ${prefix}`);
    return `{${uri}}${local}`;
  }

  startTag(): void {
    this.pos += 1;
    const rawName = this.name();
    const attributes: Array<[string, string]> = [];
    const seen = new Set<string>();
    let selfClosing = false;
    while (true) {
      const hadSpace = this.skipSpace();
      if (this.startsWith("/>")) {
        this.pos += 2;
        selfClosing = true;
        break;
      }
      if (this.startsWith(">")) {
        this.pos += 1;
        break;
      }
      if (!hadSpace) this.fail("attributes must be separated by whitespace");
      const attrName = this.name();
      this.skipSpace();
      if (!this.startsWith("=")) this.fail("expected =");
      this.pos += 1;
      this.skipSpace();
      const quote = this.text[this.pos];
      if (quote !== '"' && quote !== "'") this.fail("attribute value must be quoted");
      this.pos += 1;
      const value = this.until(quote);
      if (value.includes("<")) this.fail("< in attribute value");
      this.checkReferences(value);
      if (seen.has(attrName)) this.fail("duplicate attribute");
      seen.add(attrName);
      attributes.push([attrName, value]);
    }

    const parent = this.stack.at(-1)?.namespaces ?? new Map([["xml", XML_NAMESPACE]]);
    let namespaces: Map<string, string> | undefined;
    const ordinary: string[] = [];
    for (const [attrName, value] of attributes) {
      if (attrName === "xmlns" || attrName.startsWith("xmlns:")) {
        namespaces ??= new Map(parent);
        namespaces.set(attrName === "xmlns" ? "" : attrName.slice(6), value);
      } else {
        ordinary.push(attrName);
      }
    }
    const scope = namespaces ?? parent;
    const tag = this.resolve(rawName, scope, true);
    const resolvedAttributes = new Set(ordinary.map((attrName) => this.resolve(attrName, scope, false)));
    if (resolvedAttributes.size !== ordinary.length) this.fail("duplicate attribute");

    if (this.stack.length === 0) {
      this.outline = { rootTag: tag, rootAttributeCount: ordinary.length, childTags: [] };
    } else if (this.stack.length === 1) {
      this.outline!.childTags.push(tag);
    }
    if (!selfClosing) this.stack.push({ rawName, namespaces: scope });
  }

  endTag(): void {
    this.pos += 2;
    const rawName = this.name();
    this.skipSpace();
    if (!this.startsWith(">")) this.fail("expected >");
    this.pos += 1;
    const open = this.stack.pop();
    if (!open || open.rawName !== rawName) this.fail("mismatched end tag");
  }

  content(): void {
    while (this.stack.length > 0) {
      const next = this.text.indexOf("<", this.pos);
      if (next < 0) this.fail("unclosed element");
      const chars = this.text.slice(this.pos, next);
      if (chars.includes("]]>")) this.fail("]]> in character data");
      this.checkReferences(chars);
      this.pos = next;
      if (this.startsWith("</")) this.endTag();
      else if (this.startsWith("<!--")) this.comment();
      else if (this.startsWith("<![CDATA[")) {
        this.pos += 9;
        this.until("]]>");
      } else if (this.startsWith("<?")) this.processingInstruction();
      else if (this.startsWith("<!")) this.fail("markup declaration inside an element");
      else this.startTag();
    }
  }

  document(): XmlOutline {
    if (INVALID_CHAR.test(this.text)) this.fail("illegal character");
    this.misc();
    if (this.startsWith("<!DOCTYPE")) {
      this.doctype();
      this.misc();
    }
    if (!this.startsWith("<") || this.startsWith("</") || this.startsWith("<!")) this.fail("no root element");
    this.startTag();
    this.content();
    this.misc();
    if (this.pos < this.text.length) this.fail("junk after document element");
    return this.outline!;
  }
}

/** The outline of a well-formed XML document, or null when `text` is not one. */
export function parseXmlOutline(text: string): XmlOutline | null {
  try {
    return new Parser(text).document();
  } catch (error) {
    if (error instanceof XmlSyntaxError) return null;
    throw error;
  }
}

import { Document, isAlias, isMap, isScalar, isSeq, Pair, parseDocument, Scalar, visit, YAMLMap, YAMLSeq, type Node } from "yaml";
import { errorMessage } from "../../core/errors.ts";
import { parsePlugins } from "../config.ts";
import { ExtensionManagerError } from "./errors.ts";

/*
 * The managed `plugins:` block of config.yaml, rewritten in place. Both ends of the block come from
 * the YAML parser's own node ranges, never from a key-shaped pattern: the app config accepts any
 * extra top-level key (`my.key`, `2fa`, `$schema`, a non-ASCII word), and a pattern that fails to
 * recognise the next key does not fail loudly, it swallows that section. Everything outside the
 * block stays byte for byte: comments, neighbouring sections, trailing comments, CRLF line ends.
 * Inside the block, the edit goes through the parsed nodes, so a hand-written record keeps its own
 * comments and layout when the manager only flips its `enabled`.
 *
 * Every rewrite is checked by parsing the result again: the plugins list must be exactly the
 * intended one and every other top-level section must be unchanged. A rewrite that cannot be proven
 * safe is refused rather than written.
 */

export type PluginRecord = Record<string, unknown>;

function invalid(fileName: string, message: string, cause?: unknown): ExtensionManagerError {
  return new ExtensionManagerError("extension_config_invalid", `${fileName}: ${message}`, cause === undefined ? undefined : { cause });
}

function firstLine(text: string): string {
  return (text.split("\n")[0] ?? text).trim();
}

interface Parsed {
  readonly doc: Document.Parsed;
  readonly root: YAMLMap | undefined;
  readonly pair: Pair<Scalar, Node | null> | undefined;
}

function isPluginsKey(pair: Pair): boolean {
  return isScalar(pair.key) && pair.key.value === "plugins";
}

function parse(text: string, fileName: string): Parsed {
  // uniqueKeys off first, so two `plugins:` keys get their own message instead of a generic one.
  const loose = parseDocument(text, { uniqueKeys: false, prettyErrors: true });
  if (loose.errors.length > 0) throw invalid(fileName, `not valid YAML: ${firstLine(loose.errors[0]!.message)}`, loose.errors[0]);
  const contents = loose.contents;
  if (contents === null || (isScalar(contents) && contents.value === null)) return { doc: loose, root: undefined, pair: undefined };
  if (!isMap(contents)) throw invalid(fileName, "the top level must be a mapping of sections (models:, plugins:, ...)");
  const pluginPairs = contents.items.filter(isPluginsKey);
  if (pluginPairs.length > 1) {
    throw invalid(fileName, "has more than one top-level plugins: key; the gateway would read only one of them, so merge them into one list and run the command again");
  }
  const strict = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (strict.errors.length > 0) throw invalid(fileName, `not valid YAML: ${firstLine(strict.errors[0]!.message)}`, strict.errors[0]);
  if (contents.flow) {
    throw invalid(fileName, "the top level is written in flow style ({ ... }); write it as a block mapping (one section per line) so plugins: can be edited in place");
  }
  return { doc: loose, root: contents, pair: pluginPairs[0] as Pair<Scalar, Node | null> | undefined };
}

function recordsOf(parsed: Parsed, fileName: string): PluginRecord[] {
  const value = parsed.pair?.value;
  if (value === undefined || value === null || (isScalar(value) && value.value === null)) return [];
  if (!isSeq(value)) throw invalid(fileName, "plugins must be a list of records (- use: ...)");
  const plain = value.toJS(parsed.doc) as unknown[];
  try {
    parsePlugins(plain, fileName);
  } catch (error) {
    throw invalid(fileName, `the plugins list is not valid: ${errorMessage(error)}`, error);
  }
  return plain as PluginRecord[];
}

function detectNewline(text: string): "\n" | "\r\n" {
  return text.includes("\r\n") ? "\r\n" : "\n";
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return Number.isNaN(a) && Number.isNaN(b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((item, index) => deepEqual(item, other[index]));
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((key) => Object.hasOwn(right, key) && deepEqual(left[key], right[key]));
}

/** The one-line start of `index`: where the line holding it begins. */
function lineStart(text: string, index: number): number {
  return text.lastIndexOf("\n", index - 1) + 1;
}

/** Just past the end of the line holding `index - 1` (its newline included). */
function lineEndAfter(text: string, index: number): number {
  if (index > 0 && text[index - 1] === "\n") return index;
  const newline = text.indexOf("\n", index);
  return newline === -1 ? text.length : newline + 1;
}

function hasAliasesOrAnchors(node: Node): boolean {
  let found = false;
  visit(node, {
    Node(_key, child) {
      if (isAlias(child) || (child as { anchor?: string }).anchor) {
        found = true;
        return visit.BREAK;
      }
      return undefined;
    },
  });
  return found;
}

/** An edit of the plugins list, applied both to the YAML nodes and to the plain records. */
export interface PluginsEdit {
  nodes(seq: YAMLSeq, doc: Document): void;
  records(records: PluginRecord[]): PluginRecord[];
}

/** A read of config.yaml's plugins block. */
export class PluginsConfig {
  readonly records: readonly PluginRecord[];

  private constructor(
    readonly text: string,
    readonly fileName: string,
    private readonly parsed: Parsed,
  ) {
    this.records = recordsOf(parsed, fileName);
  }

  /**
   * Validates what the manager needs before it changes anything: YAML, a block mapping at the top,
   * at most one plugins key, and a plugins list the loader accepts.
   */
  static parse(text: string, fileName: string): PluginsConfig {
    return new PluginsConfig(text, fileName, parse(text, fileName));
  }

  /** The file's text with the edit applied to its plugins block, everything else unchanged. */
  rewrite(edit: PluginsEdit): string {
    const { text, fileName } = this;
    const newline = detectNewline(text);
    const parsed = parse(text, fileName);
    const expected = edit.records(structuredClone([...this.records]));
    const pair = parsed.pair;
    let seq: YAMLSeq;
    const current = pair?.value;
    if (current !== undefined && current !== null && isSeq(current) && !hasAliasesOrAnchors(current)) {
      seq = current;
      seq.flow = false;
      edit.nodes(seq, parsed.doc);
    } else {
      // An absent, empty, aliased or anchored list is rendered from plain values: re-rendering an
      // alias apart from its anchor would produce a dangling reference.
      seq = parsed.doc.createNode(expected) as YAMLSeq;
    }
    // An empty block sequence would render as "plugins:\n  []"; one line reads as what it is.
    if (seq.items.length === 0) seq.flow = true;
    const key = new Scalar("plugins");
    if (pair && isScalar(pair.key)) key.type = pair.key.type;
    const out = new Document();
    out.contents = new YAMLMap();
    (out.contents as YAMLMap).items.push(new Pair(key, seq));
    let column = 0;
    let indentSeq = true;
    if (pair && isScalar(pair.key) && pair.key.range) {
      const keyStart = pair.key.range[0];
      column = keyStart - lineStart(text, keyStart);
      const first = seq.items[0] as Node | undefined;
      const firstStart = first?.range?.[0];
      // "- " at the key's own column (an unindented sequence) stays that way.
      if (firstStart !== undefined && text[firstStart - 2] === "-" && firstStart - 2 - lineStart(text, firstStart - 2) === column) indentSeq = false;
    }
    let rendered = out.toString({ lineWidth: 0, indentSeq });
    if (column > 0) {
      const pad = " ".repeat(column);
      rendered = rendered
        .split("\n")
        .map((line, index) => (index === 0 || line === "" ? line : pad + line))
        .join("\n");
    }
    rendered = rendered.replace(/\n/g, newline);
    if (!rendered.endsWith(newline)) rendered += newline;

    let updated: string;
    if (pair && pair.key.range) {
      const start = pair.key.range[0];
      const valueRange = pair.value?.range;
      const end = lineEndAfter(text, valueRange ? Math.max(valueRange[2], pair.key.range[2]) : pair.key.range[2]);
      updated = text.slice(0, start) + rendered + text.slice(end);
    } else if (text === "" || /^\s*$/.test(text)) {
      updated = rendered;
    } else {
      const separated = text.endsWith(newline + newline) ? text : text.endsWith(newline) ? text + newline : text + newline + newline;
      updated = separated + rendered;
    }
    this.verify(updated, expected);
    return updated;
  }

  private verify(updated: string, expected: PluginRecord[]): void {
    const fail = (why: string) =>
      invalid(this.fileName, `the plugins block could not be rewritten safely (${why}); edit it by hand and run the command again`);
    let after: PluginsConfig;
    try {
      after = PluginsConfig.parse(updated, this.fileName);
    } catch (error) {
      throw fail(errorMessage(error));
    }
    if (!deepEqual(after.records, expected)) throw fail("the rewritten list differs from the intended one");
    const others = (config: PluginsConfig) => {
      const value = config.parsed.root?.toJS(config.parsed.doc) as Record<string, unknown> | undefined;
      const rest = { ...(value ?? {}) };
      delete rest["plugins"];
      return rest;
    };
    let same: boolean;
    try {
      same = deepEqual(others(after), others(this));
    } catch (error) {
      // An alias elsewhere whose anchor lived in the rewritten block no longer resolves.
      throw fail(errorMessage(error));
    }
    if (!same) throw fail("another section would have changed");
  }
}

/** Sets one record's `enabled`, touching nothing else in it. */
export function setEnabledEdit(index: number, enabled: boolean): PluginsEdit {
  return {
    nodes(seq) {
      const item = seq.items[index];
      if (!isMap(item)) throw new Error("plugin record is not a mapping");
      item.set("enabled", enabled);
    },
    records(records) {
      records[index] = { ...records[index], enabled };
      return records;
    },
  };
}

/** Appends a new record at the end of the list (the last plugin to load). */
export function appendEdit(record: PluginRecord): PluginsEdit {
  return {
    nodes(seq, doc) {
      seq.items.push(doc.createNode(record));
    },
    records(records) {
      return [...records, structuredClone(record)];
    },
  };
}

/** Sets the given keys on one record, adding the missing ones at its end; other keys keep their place and value. */
export function updateEdit(index: number, fields: PluginRecord): PluginsEdit {
  return {
    nodes(seq, doc) {
      const item = seq.items[index];
      if (!isMap(item)) throw new Error("plugin record is not a mapping");
      for (const [key, value] of Object.entries(fields)) item.set(key, doc.createNode(value));
    },
    records(records) {
      records[index] = { ...records[index], ...structuredClone(fields) };
      return records;
    },
  };
}

/** Removes one record. */
export function removeEdit(index: number): PluginsEdit {
  return {
    nodes(seq) {
      seq.items.splice(index, 1);
    },
    records(records) {
      records.splice(index, 1);
      return records;
    },
  };
}

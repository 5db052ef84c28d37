import type * as v from "valibot";
import type { ConfigIssue } from "./errors.ts";

/** The structural fields of a valibot schema object that the walker below reads. */
interface SchemaNode {
  readonly kind: string;
  readonly type: string;
  readonly expects: string;
  readonly wrapped?: SchemaNode;
  readonly entries?: Record<string, SchemaNode>;
  readonly item?: SchemaNode;
  readonly value?: SchemaNode;
  readonly pipe?: readonly SchemaNode[];
}

const WRAPPER_TYPES = new Set(["optional", "nullish", "nullable", "exact_optional", "undefinedable"]);
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** `models[0].extra_headers.X-Title`; keys that are not plain words are quoted: `a["b c"]`. */
export function formatKeyPath(path: readonly { key: unknown }[] | undefined): string {
  let out = "";
  for (const item of path ?? []) {
    const key = item.key;
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "string" && IDENTIFIER.test(key)) out += out === "" ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

/** The schema that decides the shape of a value: wrappers and pipes peeled off. */
function structural(schema: SchemaNode | undefined): SchemaNode | undefined {
  let node = schema;
  for (let guard = 0; node !== undefined && guard < 32; guard++) {
    if (WRAPPER_TYPES.has(node.type) && node.wrapped !== undefined) {
      node = node.wrapped;
      continue;
    }
    // The last schema of a pipe decides the shape; a pipe that only adds checks to one has it first.
    const inner = node.pipe?.findLast((item) => item.kind === "schema");
    if (inner !== undefined && inner !== node) {
      node = inner;
      continue;
    }
    return node;
  }
  return node;
}

function childSchema(schema: SchemaNode | undefined, key: unknown): SchemaNode | undefined {
  const node = structural(schema);
  if (node === undefined) return undefined;
  if (node.entries !== undefined) return typeof key === "string" ? node.entries[key] : undefined;
  if (node.item !== undefined) return node.item;
  if (node.value !== undefined) return node.value;
  return undefined;
}

function schemaAt(root: SchemaNode, keys: readonly unknown[]): SchemaNode | undefined {
  let node: SchemaNode | undefined = root;
  for (const key of keys) node = childSchema(node, key);
  return node;
}

/** valibot writes unions as `("a" | "b")`; a message reads better without the outer parentheses. */
function plainExpectation(expects: string): string {
  if (expects === "Object") return "a mapping";
  if (expects === "Array") return "a list";
  if (expects.startsWith("(") && expects.endsWith(")")) {
    const inner = expects.slice(1, -1);
    let depth = 0;
    for (const ch of inner) {
      if (ch === "(") depth++;
      else if (ch === ")" && --depth < 0) return expects;
    }
    if (depth === 0) return inner;
  }
  return expects;
}

function plainReceived(received: string): string {
  if (received === "Object") return "a mapping";
  if (received === "Array") return "a list";
  return received;
}

function expectationOf(schema: SchemaNode | undefined): string {
  const node = structural(schema);
  if (node === undefined) return "a value";
  if (node.entries !== undefined) return "a mapping";
  if (node.type === "array") return "a list";
  return plainExpectation(node.expects);
}

/**
 * One valibot issue as `{path, message}`. Type errors read `expected X, got Y`; validation messages
 * are written next to each rule in the schema; unknown and missing keys are named with the keys
 * that are allowed or expected there.
 */
export function describeIssue(
  issue: v.BaseIssue<unknown>,
  rootSchema: v.GenericSchema,
  fileName: string,
): ConfigIssue {
  const root = rootSchema as unknown as SchemaNode;
  const items = issue.path ?? [];
  const path = formatKeyPath(items);
  const keys = items.map((item) => item.key);
  if (issue.kind !== "schema" || issue.type === "custom") return { path, message: issue.message };

  const isObjectKeyIssue = issue.type === "strict_object" || issue.type === "object";
  if (isObjectKeyIssue && issue.expected === "never") {
    const key = keys.at(-1);
    if (key === "api_key" || key === "apiKey") {
      return {
        path,
        message: `API keys must not be written in ${fileName}; put the key in an environment variable and set api_key_env to its name (e.g. api_key_env: OPENAI_API_KEY)`,
      };
    }
    const parent = structural(schemaAt(root, keys.slice(0, -1)));
    const allowed = parent?.entries === undefined ? [] : Object.keys(parent.entries);
    return {
      path,
      message: allowed.length > 0 ? `unknown key; expected one of: ${allowed.join(", ")}` : "unknown key",
    };
  }
  if (isObjectKeyIssue && issue.received === "undefined" && items.length > 0) {
    return { path, message: `required key is missing; expected ${expectationOf(schemaAt(root, keys))}` };
  }
  return { path, message: `expected ${plainExpectation(issue.expected ?? "a value")}, got ${plainReceived(issue.received)}` };
}

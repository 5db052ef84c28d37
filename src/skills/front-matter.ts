import { YAMLParseError, parse as parseYaml } from "yaml";

/*
 * SKILL.md is Markdown opened by a YAML front-matter block. Only the fields the harness acts on are
 * read here; everything else in the block (metadata, version, author ...) is the author's business.
 */

// The closing fence must start a line; `\s*` after it mirrors DeerFlow's parser, so the same file
// splits at the same place on both hosts.
const FRONT_MATTER = /^---\s*\n([\s\S]*?)\n---\s*\n?/;

export interface SkillFrontMatter {
  readonly name: string;
  readonly description: string;
  readonly license: string | null;
  /** null when the field is absent (no restriction); an empty list restricts to framework tools. */
  readonly allowedTools: readonly string[] | null;
}

export type FrontMatterProblemCode = "missing_front_matter" | "invalid_yaml" | "invalid_field";

export interface FrontMatterProblem {
  readonly code: FrontMatterProblemCode;
  readonly message: string;
  /** The `name` field when it could be read, so a broken skill can still be named in diagnostics. */
  readonly name?: string;
}

export type FrontMatterResult =
  | { readonly ok: true; readonly frontMatter: SkillFrontMatter; readonly body: string }
  | { readonly ok: false; readonly problem: FrontMatterProblem };

/** The front-matter text and the Markdown after it, or undefined when the file has no front matter. */
export function splitSkillMarkdown(content: string): { frontMatterText: string; body: string } | undefined {
  // Windows line endings would otherwise leave a `\r` on every key and value.
  const text = stripBom(content).replace(/\r\n?/g, "\n");
  const match = FRONT_MATTER.exec(text);
  if (!match) return undefined;
  return { frontMatterText: match[1] ?? "", body: text.slice(match[0].length) };
}

/**
 * The front-matter mapping of already-read SKILL.md text, or undefined when there is none or it is
 * not a YAML mapping. Lenient on purpose: callers that only want one field must not depend on the
 * whole file validating.
 */
export function readFrontMatterMapping(content: string): Record<string, unknown> | undefined {
  const parts = splitSkillMarkdown(content);
  if (!parts) return undefined;
  let metadata: unknown;
  try {
    metadata = parseYaml(parts.frontMatterText, { uniqueKeys: false });
  } catch {
    // Untrusted text (a tool result): bad YAML, an unresolved alias or an alias bomb all mean
    // "no usable front matter", and a pure parse cannot raise anything that must propagate.
    return undefined;
  }
  return typeof metadata === "object" && metadata !== null && !Array.isArray(metadata) ? (metadata as Record<string, unknown>) : undefined;
}

/** Parses and validates SKILL.md; a problem is reported, never thrown. */
export function parseSkillMarkdown(content: string): FrontMatterResult {
  const parts = splitSkillMarkdown(content);
  if (!parts) {
    return fail("missing_front_matter", "SKILL.md must start with a YAML front-matter block between two `---` lines.");
  }
  let metadata: unknown;
  try {
    // PyYAML keeps the last of two equal keys; refusing them here would reject skills DeerFlow loads.
    metadata = parseYaml(parts.frontMatterText, { uniqueKeys: false, prettyErrors: true });
  } catch (error) {
    return fail("invalid_yaml", describeYamlError(error, parts.frontMatterText));
  }
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    return fail("invalid_yaml", "The front matter must be a YAML mapping (`name: ...`, `description: ...`).");
  }
  const record = metadata as Record<string, unknown>;
  const rawName = record["name"];
  const name = typeof rawName === "string" ? rawName.trim() : "";
  const known = name ? { name } : {};
  if (!name) return fail("invalid_field", "The front matter needs a non-empty string `name`.");
  const rawDescription = record["description"];
  const description = typeof rawDescription === "string" ? rawDescription.trim() : "";
  if (!description) return fail("invalid_field", "The front matter needs a non-empty string `description`.", known);

  const rawLicense = record["license"];
  const license = rawLicense === undefined || rawLicense === null ? null : String(rawLicense).trim() || null;

  const allowed = parseAllowedTools(record["allowed-tools"]);
  if (typeof allowed === "string") return fail("invalid_field", allowed, known);

  return { ok: true, frontMatter: { name, description, license, allowedTools: allowed }, body: parts.body };
}

/** Returns the list, null when absent, or a message saying what is wrong. */
function parseAllowedTools(raw: unknown): readonly string[] | null | string {
  if (raw === undefined || raw === null) return null;
  if (!Array.isArray(raw)) return "`allowed-tools` must be a YAML list of tool names, e.g. `allowed-tools: [bash, read_file]`.";
  const names: string[] = [];
  for (const item of raw) {
    if (typeof item !== "string") return "`allowed-tools` may only contain tool names (strings).";
    const trimmed = item.trim();
    if (!trimmed) return "`allowed-tools` cannot contain an empty tool name.";
    names.push(trimmed);
  }
  return Object.freeze(names);
}

function describeYamlError(error: unknown, source: string): string {
  if (!(error instanceof YAMLParseError)) return `The front matter is not valid YAML: ${String(error)}`;
  const lines = [`The front matter is not valid YAML: ${error.message.split("\n")[0]}`];
  const line = error.linePos?.[0]?.line;
  const offending = line === undefined ? undefined : source.split("\n")[line - 1];
  if (line !== undefined && offending !== undefined) {
    // +1 for the opening `---` fence, so the number matches what an editor shows for SKILL.md.
    lines.push(`line ${line + 1}: ${offending}`);
    const colon = offending.indexOf(":");
    const value = colon === -1 ? "" : offending.slice(colon + 1).trim();
    if (value.includes(": ") && !/^["'|>[{]/.test(value)) {
      const key = offending.slice(0, colon);
      lines.push(`hint: values containing ":" must be quoted, e.g. ${key}: "${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`);
    }
  }
  return lines.join("\n");
}

function fail(code: FrontMatterProblemCode, message: string, known: { name?: string } = {}): FrontMatterResult {
  return { ok: false, problem: { code, message, ...known } };
}

function stripBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

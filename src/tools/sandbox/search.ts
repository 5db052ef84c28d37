import type { AgentTool } from "../../engine/types.ts";
import { SandboxError, VIRTUAL_DIRS, type DirEntry, type Sandbox } from "../../ports/sandbox.ts";
import type { SandboxAuthorizer } from "../../sandbox/acquire.ts";
import { resolveVirtualPath } from "../../sandbox/virtual-path.ts";
import {
  ArgumentError,
  messageOf,
  optionalBoolean,
  optionalInteger,
  optionalString,
  requireString,
  rethrowControlFlow,
  runSandboxTool,
  splitLines,
} from "./run.ts";
import { DeerflowError } from "../../core/errors.ts";

// The listing and search tools: `ls`, `glob` and `grep`, with their fnmatch patterns and the
// bounded directory walk they share.

const DEFAULT_LS_DEPTH = 2;
const MAX_LS_DEPTH = 5;

export const DEFAULT_GLOB_MAX_RESULTS = 200;
export const MAX_GLOB_MAX_RESULTS = 1000;
export const DEFAULT_GREP_MAX_RESULTS = 100;
export const MAX_GREP_MAX_RESULTS = 500;
/** Files above this size are not searched by grep (DeerFlow's limit). */
export const GREP_MAX_FILE_BYTES = 1_000_000;
/** A grep match line is shown up to this many code points. */
export const GREP_LINE_SUMMARY_CHARS = 200;
// Lines this long are skipped rather than matched: minified files would make a regex crawl (ReDoS).
const GREP_MAX_LINE_CHARS = GREP_LINE_SUMMARY_CHARS * 10;
const BINARY_SNIFF_CHARS = 8192;
// Deep enough for any real project tree, and a bound on what one search can make the sandbox list.
const SEARCH_MAX_DEPTH = 64;

export function lsTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
  return {
    name: "ls",
    description:
      "List the contents of a directory in the sandbox, one absolute path per line, directories ending in '/'. " +
      `Lists ${DEFAULT_LS_DEPTH} levels deep by default. Start from ${VIRTUAL_DIRS.workspace}, ${VIRTUAL_DIRS.uploads} ` +
      `(the user's uploaded files) or ${VIRTUAL_DIRS.outputs}.`,
    schema: {
      type: "object",
      properties: {
        path: { type: "string", description: "The absolute path of the directory to list." },
        depth: {
          type: "integer",
          minimum: 1,
          maximum: MAX_LS_DEPTH,
          description: `How many levels to descend: 1 lists only direct children. Default ${DEFAULT_LS_DEPTH}.`,
        },
      },
      required: ["path"],
      additionalProperties: false,
    },
    async invoke(args, context) {
      return runSandboxTool(context, "ls", "listing directory", async (sandbox) => {
        const path = requireString(args, "path", "ls");
        const depth = optionalInteger(args, "depth", "ls") ?? DEFAULT_LS_DEPTH;
        if (depth < 1 || depth > MAX_LS_DEPTH) throw new ArgumentError(`ls takes \`depth\` from 1 to ${MAX_LS_DEPTH}.`);
        const entries = await sandbox.list(path, { depth });
        if (entries.length === 0) return "(empty)";
        return entries.map((entry) => (entry.type === "directory" ? `${entry.path}/` : entry.path)).join("\n");
      }, authorizer);
    },
  };
}

// Directories and files a search never reports: VCS data, dependency trees, build output, caches,
// editor and OS droppings (DeerFlow's list, so both hosts find the same files).
const SEARCH_IGNORE_PATTERNS: readonly string[] = [
  ".git", ".svn", ".hg", ".bzr", "node_modules", "__pycache__", ".venv", "venv", ".env", "env", ".tox", ".nox",
  ".eggs", "*.egg-info", "site-packages", "dist", "build", ".next", ".nuxt", ".output", ".turbo", "target", "out",
  ".idea", ".vscode", "*.swp", "*.swo", "*~", ".project", ".classpath", ".settings", ".DS_Store", "Thumbs.db",
  "desktop.ini", "*.lnk", "*.log", "*.tmp", "*.temp", ".upload-*.part", "*.bak", "*.cache", ".cache", "logs",
  ".coverage", "coverage", ".nyc_output", "htmlcov", ".pytest_cache", ".mypy_cache", ".ruff_cache",
];

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/** Python's fnmatch.translate for one path segment: `*`, `?`, `[seq]` and `[!seq]`, case-sensitive. */
function fnmatchSource(pattern: string): string {
  let out = "";
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i++]!;
    if (c === "*") {
      while (pattern[i] === "*") i++;
      out += "[\\s\\S]*";
    } else if (c === "?") {
      out += "[\\s\\S]";
    } else if (c === "[") {
      let j = i;
      if (pattern[j] === "!") j++;
      if (pattern[j] === "]") j++;
      while (j < pattern.length && pattern[j] !== "]") j++;
      if (j >= pattern.length) {
        out += "\\[";
      } else {
        let set = pattern.slice(i, j).replace(/\\/g, "\\\\");
        i = j + 1;
        if (set.startsWith("!")) set = `^${set.slice(1)}`;
        else if (set.startsWith("^")) set = `\\${set}`;
        out += `[${set}]`;
      }
    } else {
      out += escapeRegExp(c);
    }
  }
  return out;
}

const IGNORE_REGEXES: readonly RegExp[] = SEARCH_IGNORE_PATTERNS.map((p) => new RegExp(`^(?:${fnmatchSource(p)})$`));

export function isIgnoredSearchName(name: string): boolean {
  return IGNORE_REGEXES.some((regex) => regex.test(name));
}

function pathSegments(path: string): string[] {
  return path.split("/").filter((segment) => segment !== "" && segment !== ".");
}

/**
 * DeerFlow's glob semantics (Python's PurePosixPath.match), compiled once per search: a relative
 * pattern matches the tail of the path segment by segment, so `*.py` finds Python files at any
 * depth; `**` is a one-segment wildcard, and a leading `**\/` may also match nothing. An absolute
 * pattern must match the whole path.
 */
export function globMatcher(pattern: string): (relPath: string) => boolean {
  const full = fromRightMatcher(pattern);
  const rest = pattern.startsWith("**/") ? fromRightMatcher(pattern.slice(3)) : undefined;
  return (relPath) => full(relPath) || (rest !== undefined && rest(relPath));
}

export function globPathMatches(pattern: string, relPath: string): boolean {
  return globMatcher(pattern)(relPath);
}

function fromRightMatcher(pattern: string): (relPath: string) => boolean {
  const absolute = pattern.startsWith("/");
  const segments = pathSegments(pattern).map((segment) => new RegExp(`^(?:${fnmatchSource(segment === "**" ? "*" : segment)})$`));
  if (segments.length === 0) return () => false;
  return (relPath) => {
    const parts = pathSegments(relPath);
    if (absolute ? segments.length !== parts.length : segments.length > parts.length) return false;
    for (let k = 1; k <= segments.length; k++) {
      if (!segments[segments.length - k]!.test(parts[parts.length - k]!)) return false;
    }
    return true;
  };
}

/** The requested maximum, clamped as DeerFlow does: 0 or less means the default. */
function clampMaxResults(requested: number | undefined, fallback: number, upperBound: number): number {
  if (requested === undefined || requested <= 0) return fallback;
  return Math.min(requested, upperBound);
}

async function pathKind(sandbox: Sandbox, path: string): Promise<"file" | "directory" | "missing"> {
  if (!(await sandbox.exists(path))) return "missing";
  try {
    await sandbox.list(path, { depth: 1 });
    return "directory";
  } catch (error) {
    // Listing an existing file is the port's "not a directory" answer.
    if (error instanceof SandboxError && error.code === "not_found") return "file";
    throw error;
  }
}

interface WalkedEntry {
  readonly entry: DirEntry;
  /** Path below the search root, `/`-separated. */
  readonly rel: string;
}

/**
 * Everything below `root` in the order a top-down directory walk visits it: a directory's
 * subdirectories, then its files, then the contents of each subdirectory in turn. Ignored names
 * are pruned with everything below them. One listing call: the port never follows a symbolic link
 * into a deeper level, so the walk cannot loop.
 */
async function walkSearchRoot(sandbox: Sandbox, root: string): Promise<WalkedEntry[]> {
  const entries = await sandbox.list(root, { depth: SEARCH_MAX_DEPTH });
  const children = new Map<string, DirEntry[]>();
  for (const entry of entries) {
    const parent = entry.path.slice(0, entry.path.lastIndexOf("/"));
    let list = children.get(parent);
    if (!list) children.set(parent, (list = []));
    list.push(entry);
  }
  const out: WalkedEntry[] = [];
  const visit = (dir: string, relDir: string): void => {
    const kids = (children.get(dir) ?? []).filter((entry) => !isIgnoredSearchName(entry.name));
    const dirs = kids.filter((entry) => entry.type === "directory");
    const rel = (entry: DirEntry) => (relDir ? `${relDir}/${entry.name}` : entry.name);
    for (const entry of dirs) out.push({ entry, rel: rel(entry) });
    for (const entry of kids) if (entry.type === "file") out.push({ entry, rel: rel(entry) });
    for (const entry of dirs) visit(entry.path, rel(entry));
  };
  visit(root, "");
  return out;
}

function formatGlobResults(rootPath: string, matches: readonly string[], truncated: boolean): string {
  if (matches.length === 0) return `No files matched under ${rootPath}`;
  const lines = [`Found ${matches.length} paths under ${rootPath}${truncated ? ` (showing first ${matches.length})` : ""}`];
  matches.forEach((path, index) => lines.push(`${index + 1}. ${path}`));
  if (truncated) lines.push("Results truncated. Narrow the path or pattern to see fewer matches.");
  return lines.join("\n");
}

interface GrepMatch {
  readonly path: string;
  readonly lineNumber: number;
  readonly line: string;
}

function formatGrepResults(rootPath: string, matches: readonly GrepMatch[], truncated: boolean): string {
  if (matches.length === 0) return `No matches found under ${rootPath}`;
  const lines = [`Found ${matches.length} matches under ${rootPath}${truncated ? ` (showing first ${matches.length})` : ""}`];
  for (const match of matches) lines.push(`${match.path}:${match.lineNumber}: ${match.line}`);
  if (truncated) lines.push("Results truncated. Narrow the path or add a glob filter.");
  return lines.join("\n");
}

function truncateLine(line: string, maxChars = GREP_LINE_SUMMARY_CHARS): string {
  const chars = Array.from(line.replace(/[\r\n]+$/, ""));
  return chars.length <= maxChars ? chars.join("") : `${chars.slice(0, maxChars - 3).join("")}...`;
}

class InvalidPatternError extends DeerflowError {
  constructor(message: string) {
    super("invalid_pattern", message);
    this.name = "InvalidPatternError";
  }
}

/**
 * A model-written pattern in Python's `re` dialect as a JavaScript RegExp: named groups and
 * back-references are respelled, and leading inline flags (`(?i)`, `(?s)`, `(?m)`) become flags.
 */
export function compileGrepPattern(pattern: string, options: { literal: boolean; caseSensitive: boolean }): RegExp {
  let source = options.literal ? escapeRegExp(pattern) : pattern;
  const flags = new Set<string>();
  if (!options.caseSensitive) flags.add("i");
  if (!options.literal) {
    const inline = /^\(\?([imsx]+)\)/.exec(source);
    if (inline) {
      if (inline[1]!.includes("x")) throw new InvalidPatternError("verbose mode (?x) is not supported; remove it and the pattern's layout whitespace");
      for (const flag of inline[1]!) flags.add(flag);
      source = source.slice(inline[0].length);
    }
    source = source.replace(/\(\?P<([A-Za-z_][A-Za-z0-9_]*)>/g, "(?<$1>").replace(/\(\?P=([A-Za-z_][A-Za-z0-9_]*)\)/g, "\\k<$1>");
  }
  try {
    return new RegExp(source, [...flags].join(""));
  } catch (error) {
    throw new InvalidPatternError(messageOf(error));
  }
}

export function globTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
  return {
    name: "glob",
    description:
      "Find files or directories that match a glob pattern under a root directory of the sandbox, for example " +
      "`**/*.py`. Returns a numbered list of absolute paths (at most max_results). Common dependency, build and " +
      "cache folders (node_modules, .git, dist, ...) are skipped.",
    schema: {
      type: "object",
      properties: {
        description: {
          type: "string",
          description: "Why you are searching for these paths, in a few words. Provide this first.",
        },
        pattern: { type: "string", description: "The glob pattern to match relative to the root path, for example `**/*.py`." },
        path: { type: "string", description: "The absolute root directory to search under." },
        include_dirs: { type: "boolean", description: "Also return matching directories. Default false." },
        max_results: {
          type: "integer",
          minimum: 1,
          maximum: MAX_GLOB_MAX_RESULTS,
          description: `Maximum number of paths to return. Default ${DEFAULT_GLOB_MAX_RESULTS}.`,
        },
      },
      required: ["pattern", "path"],
      additionalProperties: false,
    },
    async invoke(args, context) {
      return runSandboxTool(context, "glob", "searching paths", async (sandbox) => {
        const pattern = requireString(args, "pattern", "glob");
        const requested = requireString(args, "path", "glob");
        const includeDirs = optionalBoolean(args, "include_dirs", "glob");
        const maxResults = clampMaxResults(optionalInteger(args, "max_results", "glob"), DEFAULT_GLOB_MAX_RESULTS, MAX_GLOB_MAX_RESULTS);
        const root = resolveVirtualPath(requested);
        const kind = await pathKind(sandbox, root);
        if (kind === "missing") return `Error: Directory not found: ${requested}`;
        if (kind === "file") return `Error: Path is not a directory: ${requested}`;
        const matchesPattern = globMatcher(pattern);
        const matches: string[] = [];
        let truncated = false;
        for (const { entry, rel } of await walkSearchRoot(sandbox, root)) {
          if (entry.type === "directory" && !includeDirs) continue;
          if (!matchesPattern(rel)) continue;
          if (matches.length === maxResults) {
            truncated = true;
            break;
          }
          matches.push(entry.path);
        }
        return formatGlobResults(requested, matches, truncated);
      }, authorizer);
    },
  };
}

export function grepTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
  return {
    name: "grep",
    description:
      "Search for lines matching a pattern inside one text file, or recursively in the text files under a " +
      "directory of the sandbox. The pattern is a regular expression unless literal is true; matching ignores " +
      "case unless case_sensitive is true. Returns `path:line: text` lines (at most max_results). Binary files, " +
      `files over ${GREP_MAX_FILE_BYTES} bytes and common dependency, build and cache folders are skipped.`,
    schema: {
      type: "object",
      properties: {
        description: {
          type: "string",
          description: "Why you are searching file contents, in a few words. Provide this first.",
        },
        pattern: { type: "string", description: "The string or regular expression to search for." },
        path: { type: "string", description: "The absolute file or root directory to search." },
        glob: { type: "string", description: "Optional glob filter for candidate files, for example `**/*.py`." },
        literal: { type: "boolean", description: "Treat pattern as plain text instead of a regular expression. Default false." },
        case_sensitive: { type: "boolean", description: "Match case exactly. Default false." },
        max_results: {
          type: "integer",
          minimum: 1,
          maximum: MAX_GREP_MAX_RESULTS,
          description: `Maximum number of matching lines to return. Default ${DEFAULT_GREP_MAX_RESULTS}.`,
        },
      },
      required: ["pattern", "path"],
      additionalProperties: false,
    },
    async invoke(args, context) {
      return runSandboxTool(context, "grep", "searching file contents", async (sandbox) => {
        const pattern = requireString(args, "pattern", "grep");
        const requested = requireString(args, "path", "grep");
        const globFilter = optionalString(args, "glob", "grep");
        const literal = optionalBoolean(args, "literal", "grep");
        const caseSensitive = optionalBoolean(args, "case_sensitive", "grep");
        const maxResults = clampMaxResults(optionalInteger(args, "max_results", "grep"), DEFAULT_GREP_MAX_RESULTS, MAX_GREP_MAX_RESULTS);
        const root = resolveVirtualPath(requested);
        const kind = await pathKind(sandbox, root);
        if (kind === "missing") return `Error: Directory not found: ${requested}`;
        let regex: RegExp;
        try {
          regex = compileGrepPattern(pattern, { literal, caseSensitive });
        } catch (error) {
          if (error instanceof InvalidPatternError) return `Error: Invalid regex pattern: ${error.message}`;
          throw error;
        }

        const candidates: Array<{ path: string; rel: string; size: number | undefined }> =
          kind === "file"
            ? [{ path: root, rel: root.slice(root.lastIndexOf("/") + 1), size: undefined }]
            : (await walkSearchRoot(sandbox, root))
                .filter(({ entry }) => entry.type === "file")
                .map(({ entry, rel }) => ({ path: entry.path, rel, size: entry.size }));

        const inFilter = globFilter === undefined ? () => true : globMatcher(globFilter);
        const matches: GrepMatch[] = [];
        let truncated = false;
        search: for (const candidate of candidates) {
          if (!inFilter(candidate.rel)) continue;
          if (candidate.size !== undefined && candidate.size > GREP_MAX_FILE_BYTES) continue;
          let content: string;
          try {
            content = await sandbox.readFile(candidate.path);
          } catch (error) {
            rethrowControlFlow(error, context.runtime);
            // One unreadable file must not end the search of the others.
            continue;
          }
          if (candidate.size === undefined && new TextEncoder().encode(content).length > GREP_MAX_FILE_BYTES) continue;
          if (content.slice(0, BINARY_SNIFF_CHARS).includes("\u0000")) continue;
          const lines = splitLines(content);
          for (let index = 0; index < lines.length; index++) {
            const line = lines[index]!;
            if (line.length > GREP_MAX_LINE_CHARS) continue;
            regex.lastIndex = 0;
            if (!regex.test(line)) continue;
            if (matches.length === maxResults) {
              truncated = true;
              break search;
            }
            matches.push({ path: candidate.path, lineNumber: index + 1, line: truncateLine(line) });
          }
        }
        return formatGrepResults(requested, matches, truncated);
      }, authorizer);
    },
  };
}

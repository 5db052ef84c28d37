import { ToolMessage } from "@langchain/core/messages";
import { Command, isGraphBubbleUp } from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import { resolveVirtualPath } from "../core/path.ts";
import type { AgentRuntime, AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";
import { SandboxError, VIRTUAL_DIRS } from "../ports/sandbox.ts";
import type { DirEntry, Sandbox, SandboxScope } from "../ports/sandbox.ts";
import type { ThreadStateUpdate } from "../state/thread-state.ts";

/*
 * The file and shell tools of a thread's sandbox. Expected failures (a path outside the sandbox, a
 * missing file, an ambiguous edit) come back as `Error: ...` text the model can act on, never as a
 * thrown exception; ToolErrorHandling then classifies that text into deerflow_tool_meta.
 */

export const DEFAULT_USER_ID = "default";
/** DeerFlow's single-call cap for non-append writes: larger tool-call payloads tend to stall streaming. */
export const DEFAULT_WRITE_FILE_MAX_BYTES = 80 * 1024;
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

/**
 * Decides whether this run may use a sandbox at all (`sandbox:execute`). Receives the run's
 * read-only caller context (from which a principal is built) and the user and thread whose sandbox
 * would be acquired. Resolving false (or throwing) means no sandbox for this call.
 */
export type SandboxAuthorizer = (context: Readonly<Record<string, unknown>>, scope: SandboxScope) => Promise<boolean>;

export interface SandboxToolsOptions {
  /** Byte cap of one non-append write_file call; 0 disables it. Default 80 KiB. */
  writeFileMaxBytes?: number;
  /** Gates every sandbox acquisition of these tools; without one, acquisition is always allowed. */
  authorizer?: SandboxAuthorizer;
}

/** The run may not use a sandbox: an authorization decision, not a sandbox failure. */
export class SandboxAuthorizationError extends DeerflowError {
  declare readonly code: "sandbox_not_authorized";

  constructor(scope: SandboxScope) {
    super(
      "sandbox_not_authorized",
      `Permission denied: user "${scope.userId}" may not use the sandbox of thread "${scope.threadId}" (sandbox:execute was denied). ` +
        "Answer without files and commands, or ask an administrator to grant sandbox access.",
    );
    this.name = "SandboxAuthorizationError";
  }
}

/**
 * Run-scope key of the sandbox this run acquired. Whoever acquires through {@link acquireRunSandbox}
 * records it, so the Sandbox middleware can bind the thread to it and release it even when the
 * acquiring call never reported the id itself.
 */
export const SANDBOX_ACQUIRED_SCOPE_KEY = "sandbox:acquired_id";
const AUTHORIZATION_SCOPE_PREFIX = "sandbox:authorization:";

/** The user and thread whose sandbox this run uses; undefined when the run has no thread. */
export function sandboxScopeOf(runtime: AgentRuntime): SandboxScope | undefined {
  const fromContext = runtime.context["thread_id"];
  const threadId = runtime.threadId || (typeof fromContext === "string" && fromContext.length > 0 ? fromContext : undefined);
  if (!threadId) return undefined;
  const userId = runtime.context["user_id"];
  return { userId: typeof userId === "string" && userId.length > 0 ? userId : DEFAULT_USER_ID, threadId };
}

/** The id of the sandbox this run acquired through {@link acquireRunSandbox}, if any. */
export function acquiredSandboxId(runtime: AgentRuntime): string | undefined {
  const id = runtime.scope.get<unknown>(SANDBOX_ACQUIRED_SCOPE_KEY);
  return typeof id === "string" && id.length > 0 ? id : undefined;
}

/**
 * Asks the authorizer once. With a `decisionKey` (a tool call id) the decision is shared by every
 * acquisition under that key in this run, so a gate's inspection, the tool body and a post-read
 * hash of one call can never see different answers. An authorizer that throws denies.
 */
export function authorizeSandbox(
  runtime: AgentRuntime,
  scope: SandboxScope,
  authorizer: SandboxAuthorizer | undefined,
  decisionKey?: string,
): Promise<boolean> {
  if (!authorizer) return Promise.resolve(true);
  const key = decisionKey ? `${AUTHORIZATION_SCOPE_PREFIX}${decisionKey}` : undefined;
  const shared = key === undefined ? undefined : runtime.scope.get<Promise<boolean>>(key);
  if (shared) return shared;
  const decision = (async () => {
    try {
      return (await authorizer(runtime.context, scope)) === true;
    } catch (error) {
      if (isGraphBubbleUp(error)) throw error;
      if (runtime.signal?.aborted) throw error;
      return false;
    }
  })();
  if (key !== undefined) runtime.scope.set(key, decision);
  return decision;
}

/**
 * The run's sandbox, acquired through the one path every sandbox user shares: authorization first,
 * then the provider, then a record of the id in the run scope. Throws SandboxError when there is no
 * provider or thread, and SandboxAuthorizationError on a denial.
 */
export async function acquireRunSandbox(
  runtime: AgentRuntime,
  options: { authorizer?: SandboxAuthorizer | undefined; decisionKey?: string | undefined } = {},
): Promise<Sandbox> {
  const provider = runtime.services.sandbox;
  if (!provider) {
    throw new SandboxError("sandbox_unavailable", "Sandbox is not configured for this agent, so no files or commands are available.");
  }
  const scope = sandboxScopeOf(runtime);
  if (!scope) throw new SandboxError("sandbox_unavailable", "missing required thread id; run the agent on a thread.");
  if (!(await authorizeSandbox(runtime, scope, options.authorizer, options.decisionKey))) {
    throw new SandboxAuthorizationError(scope);
  }
  const sandbox = await provider.acquire(scope);
  if (!runtime.scope.has(SANDBOX_ACQUIRED_SCOPE_KEY)) runtime.scope.set(SANDBOX_ACQUIRED_SCOPE_KEY, sandbox.id);
  return sandbox;
}

type Args = Record<string, unknown>;

const ROOTS_TEXT = `${VIRTUAL_DIRS.workspace}, ${VIRTUAL_DIRS.uploads} and ${VIRTUAL_DIRS.outputs}`;

/** A tool argument the model got wrong; its message is shown to the model after `Error: `. */
export class ArgumentError extends DeerflowError {
  constructor(message: string) {
    super("invalid_tool_argument", message);
    this.name = "ArgumentError";
  }
}

export function requireString(args: Args, key: string, tool: string, options: { allowEmpty?: boolean } = {}): string {
  const value = args[key];
  if (typeof value !== "string" || (!options.allowEmpty && value.length === 0)) {
    throw new ArgumentError(`${tool} needs \`${key}\` as a ${options.allowEmpty ? "" : "non-empty "}string.`);
  }
  return value;
}

function optionalBoolean(args: Args, key: string, tool: string): boolean {
  const value = args[key];
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") throw new ArgumentError(`${tool} takes \`${key}\` as true or false.`);
  return value;
}

function optionalInteger(args: Args, key: string, tool: string): number | undefined {
  const value = args[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value)) throw new ArgumentError(`${tool} takes \`${key}\` as a whole number.`);
  return value;
}

function optionalString(args: Args, key: string, tool: string): string | undefined {
  const value = args[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new ArgumentError(`${tool} takes \`${key}\` as a string.`);
  return value;
}

export function sandboxErrorText(error: SandboxError): string {
  switch (error.code) {
    // Worded so the meta classifier files them as permission / not_found, which steer the model.
    case "path_outside_sandbox":
      return `Error: Permission denied: ${error.message}`;
    case "not_found":
      return `Error: Not found: ${error.message}`;
    case "is_directory":
      return `Error: ${error.message}`;
    case "sandbox_unavailable":
      return `Error: Sandbox unavailable: ${error.message}`;
  }
}

// Parallel tool calls of one turn run concurrently; a read-modify-write (str_replace, append) on
// the same file must not interleave with another one. Keyed by sandbox and path, the resource every
// agent of this process shares, and emptied as soon as no call waits, so no run leaves state here.
const fileLocks = new Map<string, Promise<void>>();

async function withFileLock<T>(sandbox: Sandbox, path: string, body: () => Promise<T>): Promise<T> {
  let resolved: string;
  try {
    resolved = resolveVirtualPath(path);
  } catch {
    return body();
  }
  const key = `${sandbox.id}\u0000${resolved}`;
  const previous = fileLocks.get(key) ?? Promise.resolve();
  let release!: () => void;
  const current = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => current);
  fileLocks.set(key, tail);
  await previous;
  try {
    return await body();
  } finally {
    release();
    if (fileLocks.get(key) === tail) fileLocks.delete(key);
  }
}

/** What a tool body answers: its text, plus state to write alongside the message when it has some. */
export type SandboxToolReply = string | { readonly text: string; readonly update?: Omit<ThreadStateUpdate, "messages" | "sandbox"> };

/**
 * Runs a tool body against the thread's sandbox, acquired on first use. When this call is the one
 * that acquired it (no sandbox in state yet), the result carries the sandbox id into state so the
 * thread stays bound to it and the run can release it.
 */
export async function runSandboxTool(
  context: ToolContext,
  toolName: string,
  unexpectedWhat: string,
  body: (sandbox: Sandbox) => Promise<SandboxToolReply>,
  authorizer?: SandboxAuthorizer,
): Promise<ToolOutput> {
  let sandbox: Sandbox;
  try {
    sandbox = await acquireRunSandbox(context.runtime, { authorizer, decisionKey: context.toolCall.id });
  } catch (error) {
    rethrowControlFlow(error, context.runtime);
    if (error instanceof SandboxAuthorizationError) return toolMessage(context, toolName, `Error: ${error.message}`);
    if (error instanceof SandboxError) {
      // Missing configuration is the operator's to fix, and worded so it classifies as config.
      if (!context.runtime.services.sandbox) return toolMessage(context, toolName, `Error: ${error.message}`);
      return toolMessage(context, toolName, sandboxErrorText(error));
    }
    return toolMessage(context, toolName, `Error: Sandbox unavailable: ${messageOf(error)}`);
  }

  let reply: SandboxToolReply;
  try {
    reply = await body(sandbox);
  } catch (error) {
    rethrowControlFlow(error, context.runtime);
    if (error instanceof ArgumentError) reply = `Error: ${error.message}`;
    else if (error instanceof SandboxError) reply = sandboxErrorText(error);
    else reply = `Error: Unexpected error ${unexpectedWhat}: ${messageOf(error)}`;
  }

  const text = typeof reply === "string" ? reply : reply.text;
  const extra = typeof reply === "string" ? undefined : reply.update;
  const message = toolMessage(context, toolName, text);
  const binding = context.state.sandbox ? undefined : { sandbox: { sandbox_id: sandbox.id } };
  if (!binding && !extra) return message;
  return new Command({ update: { ...extra, ...binding, messages: [message] } });
}

/** Rethrows what must pass every catch untouched: graph interrupts and the run's own abort. */
function rethrowControlFlow(error: unknown, runtime: AgentRuntime): void {
  if (isGraphBubbleUp(error)) throw error;
  if (runtime.signal?.aborted) throw error;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A tool's answer as a ToolMessage; `Error:` text is an error result. */
export function toolMessage(context: ToolContext, toolName: string, text: string): ToolMessage {
  return new ToolMessage({
    content: text,
    tool_call_id: context.toolCall.id ?? "",
    name: toolName,
    status: text.startsWith("Error:") ? "error" : "success",
  });
}

function formatExec(stdout: string, stderr: string, exitCode: number): string {
  let output = stdout;
  if (stderr) output += output ? `\nStd Error:\n${stderr}` : stderr;
  if (exitCode !== 0) output += `\nExit Code: ${exitCode}`;
  return output || "(no output)";
}

// Python's universal-newline reading, so line numbers match what upstream's read_file reports.
function splitLines(content: string): string[] {
  const lines = content.split(/\r\n|\r|\n/);
  if (lines.length > 0 && lines.at(-1) === "") lines.pop();
  return lines;
}

function countOccurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let index = haystack.indexOf(needle); index !== -1; index = haystack.indexOf(needle, index + needle.length)) count += 1;
  return count;
}

function bashTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
  return {
    name: "bash",
    description:
      "Execute a bash command in the thread's sandbox. Commands start in /mnt/user-data/workspace; the user's " +
      `files live under ${ROOTS_TEXT}. Always use absolute paths. ` +
      "Save anything the user should receive under /mnt/user-data/outputs. " +
      "Which programs exist depends on the sandbox: the default virtual sandbox offers the common Unix tools " +
      "(ls, cat, grep, sed, awk, find, sort, head, tail, wc, ...) without network access. " +
      "Output is stdout, then stderr after 'Std Error:', then 'Exit Code: N' when the command failed. " +
      "Run long-lived processes in the background with output redirected to a log file.",
    schema: {
      type: "object",
      properties: {
        description: {
          type: "string",
          description: "Why you are running this command, in a few words. Provide this first.",
        },
        command: {
          type: "string",
          description: "The bash command to execute. Use absolute paths for files and directories.",
        },
      },
      required: ["command"],
      additionalProperties: false,
    },
    async invoke(args, context) {
      return runSandboxTool(context, "bash", "executing command", async (sandbox) => {
        const command = requireString(args, "command", "bash");
        const result = await sandbox.exec(command, {
          cwd: VIRTUAL_DIRS.workspace,
          ...(context.runtime.signal ? { signal: context.runtime.signal } : {}),
        });
        return formatExec(result.stdout, result.stderr, result.exitCode);
      }, authorizer);
    },
  };
}

function lsTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
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

function readFileTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
  return {
    name: "read_file",
    description:
      "Read a text file from the sandbox: source code, configuration, logs, uploaded documents converted to text. " +
      "Give start_line and/or end_line (1-indexed, inclusive) to read only part of a long file.",
    schema: {
      type: "object",
      properties: {
        path: { type: "string", description: "The absolute path of the file to read." },
        start_line: {
          type: "integer",
          minimum: 1,
          description: "First line to read (1-indexed, inclusive). Omit to start at the first line.",
        },
        end_line: {
          type: "integer",
          minimum: 1,
          description: "Last line to read (1-indexed, inclusive). Omit to read through the last line.",
        },
      },
      required: ["path"],
      additionalProperties: false,
    },
    async invoke(args, context) {
      // Range mistakes are answered before touching the sandbox, in DeerFlow's wording.
      let startLine: number | undefined;
      let endLine: number | undefined;
      try {
        startLine = optionalInteger(args, "start_line", "read_file");
        endLine = optionalInteger(args, "end_line", "read_file");
      } catch (error) {
        return toolMessage(context, "read_file", `Error: ${messageOf(error)}`);
      }
      if (startLine !== undefined && startLine < 1) return toolMessage(context, "read_file", "(start_line must be >= 1)");
      if (endLine !== undefined && endLine < 1) return toolMessage(context, "read_file", "(end_line must be >= 1)");
      if (endLine !== undefined && (startLine ?? 1) > endLine) {
        return toolMessage(context, "read_file", "(start_line > end_line — no lines in range)");
      }
      return runSandboxTool(context, "read_file", "reading file", async (sandbox) => {
        const path = requireString(args, "path", "read_file");
        let content = await sandbox.readFile(path);
        if (startLine !== undefined || endLine !== undefined) {
          const lines = splitLines(content);
          content = lines.slice((startLine ?? 1) - 1, endLine ?? lines.length).join("\n");
        }
        if (!content) return startLine !== undefined && startLine > 1 ? "(start_line exceeds file length)" : "(empty)";
        return content;
      }, authorizer);
    },
  };
}

function writeFileTool(maxBytes: number, authorizer: SandboxAuthorizer | undefined): AgentTool {
  return {
    name: "write_file",
    description:
      "Write text to a file in the sandbox, creating parent directories as needed. By default the file is " +
      "overwritten; set append to true to add to its end instead. " +
      (maxBytes > 0
        ? `One non-append call may carry at most ${maxBytes} bytes of UTF-8: for a longer document write the first ` +
          "section, then either edit with str_replace or add further sections with append=true. "
        : "") +
      `Deliverables for the user belong under ${VIRTUAL_DIRS.outputs}.`,
    schema: {
      type: "object",
      properties: {
        path: { type: "string", description: "The absolute path of the file to write. Provide this first." },
        content: { type: "string", description: "The text to write. Provide this second." },
        append: {
          type: "boolean",
          description: "Append to the end of the file instead of overwriting it. Default false.",
        },
      },
      required: ["path", "content"],
      additionalProperties: false,
    },
    async invoke(args, context) {
      return runSandboxTool(context, "write_file", "writing file", async (sandbox) => {
        const path = requireString(args, "path", "write_file");
        const content = requireString(args, "content", "write_file", { allowEmpty: true });
        const append = optionalBoolean(args, "append", "write_file");
        if (!append && maxBytes > 0) {
          const bytes = new TextEncoder().encode(content).length;
          if (bytes > maxBytes) {
            return (
              `Error: write_file content (${bytes} bytes) exceeds the ${maxBytes}-byte single-call limit. ` +
              "Split the content into smaller pieces: either (a) write the first section now, then use `str_replace` " +
              "for further edits, or (b) call write_file again with append=true carrying the next section."
            );
          }
        }
        await withFileLock(sandbox, path, () => sandbox.writeFile(path, content, { append }));
        return "OK";
      }, authorizer);
    },
  };
}

function strReplaceTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
  return {
    name: "str_replace",
    description:
      "Replace text in a file in the sandbox. By default old_str must appear exactly once in the file, so include " +
      "enough surrounding lines to make it unique; set replace_all to true to replace every occurrence. " +
      "Read the file first so old_str matches its current content exactly, including whitespace.",
    schema: {
      type: "object",
      properties: {
        path: { type: "string", description: "The absolute path of the file to edit. Provide this first." },
        old_str: { type: "string", description: "The exact text to replace. Provide this second." },
        new_str: { type: "string", description: "The replacement text. Provide this third." },
        replace_all: {
          type: "boolean",
          description: "Replace every occurrence instead of requiring exactly one. Default false.",
        },
      },
      required: ["path", "old_str", "new_str"],
      additionalProperties: false,
    },
    async invoke(args, context) {
      return runSandboxTool(context, "str_replace", "replacing string", async (sandbox) => {
        const path = requireString(args, "path", "str_replace");
        const oldStr = requireString(args, "old_str", "str_replace", { allowEmpty: true });
        const newStr = requireString(args, "new_str", "str_replace", { allowEmpty: true });
        const replaceAll = optionalBoolean(args, "replace_all", "str_replace");
        return withFileLock(sandbox, path, async () => {
          const content = await sandbox.readFile(path);
          // An empty old_str would match between every character; treat it as the no-op it asks for.
          if (!oldStr) return "OK";
          const occurrences = countOccurrences(content, oldStr);
          if (occurrences === 0) return `Error: String to replace not found in file: ${path}`;
          if (occurrences > 1 && !replaceAll) {
            return (
              `Error: String to replace appears ${occurrences} times in file: ${path}. ` +
              "Include more surrounding lines in old_str so it matches exactly once, or set replace_all to true."
            );
          }
          const index = content.indexOf(oldStr);
          const updated = replaceAll
            ? content.split(oldStr).join(newStr)
            : content.slice(0, index) + newStr + content.slice(index + oldStr.length);
          await sandbox.writeFile(path, updated);
          return "OK";
        });
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

function globTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
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

function grepTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
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

/** bash, ls, glob, grep, read_file, write_file and str_replace over the thread's sandbox. */
export function createSandboxTools(options: SandboxToolsOptions = {}): AgentTool[] {
  const maxBytes = options.writeFileMaxBytes ?? DEFAULT_WRITE_FILE_MAX_BYTES;
  const authorizer = options.authorizer;
  return [
    bashTool(authorizer),
    lsTool(authorizer),
    globTool(authorizer),
    grepTool(authorizer),
    readFileTool(authorizer),
    writeFileTool(maxBytes, authorizer),
    strReplaceTool(authorizer),
  ];
}

import { ToolMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph/web";
import { resolveVirtualPath } from "../core/path.ts";
import type { AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";
import { SandboxError, VIRTUAL_DIRS } from "../ports/sandbox.ts";
import type { Sandbox } from "../ports/sandbox.ts";

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

export interface SandboxToolsOptions {
  /** Byte cap of one non-append write_file call; 0 disables it. Default 80 KiB. */
  writeFileMaxBytes?: number;
}

type Args = Record<string, unknown>;

const ROOTS_TEXT = `${VIRTUAL_DIRS.workspace}, ${VIRTUAL_DIRS.uploads} and ${VIRTUAL_DIRS.outputs}`;

class ArgumentError extends Error {}

function requireString(args: Args, key: string, tool: string, options: { allowEmpty?: boolean } = {}): string {
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

function userIdOf(context: ToolContext): string {
  const userId = context.runtime.context["user_id"];
  return typeof userId === "string" && userId.length > 0 ? userId : DEFAULT_USER_ID;
}

function threadIdOf(context: ToolContext): string | undefined {
  if (context.runtime.threadId) return context.runtime.threadId;
  const threadId = context.runtime.context["thread_id"];
  return typeof threadId === "string" && threadId.length > 0 ? threadId : undefined;
}

function sandboxErrorText(error: SandboxError): string {
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
// the same file must not interleave with another one.
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

/**
 * Runs a tool body against the thread's sandbox, acquired on first use. When this call is the one
 * that acquired it (no sandbox in state yet), the result carries the sandbox id into state so the
 * thread stays bound to it and the run can release it.
 */
async function runInSandbox(
  context: ToolContext,
  toolName: string,
  unexpectedWhat: string,
  body: (sandbox: Sandbox) => Promise<string>,
): Promise<ToolOutput> {
  const provider = context.runtime.services.sandbox;
  if (!provider) {
    return toolMessage(context, toolName, "Error: Sandbox is not configured for this agent, so no files or commands are available.");
  }
  const threadId = threadIdOf(context);
  if (!threadId) {
    return toolMessage(context, toolName, "Error: Sandbox unavailable: missing required thread id; run the agent on a thread.");
  }

  let sandbox: Sandbox;
  try {
    sandbox = await provider.acquire({ userId: userIdOf(context), threadId });
  } catch (error) {
    if (context.runtime.signal?.aborted) throw error;
    if (error instanceof SandboxError) return toolMessage(context, toolName, sandboxErrorText(error));
    return toolMessage(context, toolName, `Error: Sandbox unavailable: ${messageOf(error)}`);
  }

  let text: string;
  try {
    text = await body(sandbox);
  } catch (error) {
    if (context.runtime.signal?.aborted) throw error;
    if (error instanceof ArgumentError) text = `Error: ${error.message}`;
    else if (error instanceof SandboxError) text = sandboxErrorText(error);
    else text = `Error: Unexpected error ${unexpectedWhat}: ${messageOf(error)}`;
  }

  const message = toolMessage(context, toolName, text);
  if (context.state.sandbox) return message;
  return new Command({ update: { sandbox: { sandbox_id: sandbox.id }, messages: [message] } });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function toolMessage(context: ToolContext, toolName: string, text: string): ToolMessage {
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

function bashTool(): AgentTool {
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
      return runInSandbox(context, "bash", "executing command", async (sandbox) => {
        const command = requireString(args, "command", "bash");
        const result = await sandbox.exec(command, {
          cwd: VIRTUAL_DIRS.workspace,
          ...(context.runtime.signal ? { signal: context.runtime.signal } : {}),
        });
        return formatExec(result.stdout, result.stderr, result.exitCode);
      });
    },
  };
}

function lsTool(): AgentTool {
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
      return runInSandbox(context, "ls", "listing directory", async (sandbox) => {
        const path = requireString(args, "path", "ls");
        const depth = optionalInteger(args, "depth", "ls") ?? DEFAULT_LS_DEPTH;
        if (depth < 1 || depth > MAX_LS_DEPTH) throw new ArgumentError(`ls takes \`depth\` from 1 to ${MAX_LS_DEPTH}.`);
        const entries = await sandbox.list(path, { depth });
        if (entries.length === 0) return "(empty)";
        return entries.map((entry) => (entry.type === "directory" ? `${entry.path}/` : entry.path)).join("\n");
      });
    },
  };
}

function readFileTool(): AgentTool {
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
      return runInSandbox(context, "read_file", "reading file", async (sandbox) => {
        const path = requireString(args, "path", "read_file");
        let content = await sandbox.readFile(path);
        if (startLine !== undefined || endLine !== undefined) {
          const lines = splitLines(content);
          content = lines.slice((startLine ?? 1) - 1, endLine ?? lines.length).join("\n");
        }
        if (!content) return startLine !== undefined && startLine > 1 ? "(start_line exceeds file length)" : "(empty)";
        return content;
      });
    },
  };
}

function writeFileTool(maxBytes: number): AgentTool {
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
      return runInSandbox(context, "write_file", "writing file", async (sandbox) => {
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
      });
    },
  };
}

function strReplaceTool(): AgentTool {
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
      return runInSandbox(context, "str_replace", "replacing string", async (sandbox) => {
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
      });
    },
  };
}

/** bash, ls, read_file, write_file and str_replace over the thread's sandbox. */
export function createSandboxTools(options: SandboxToolsOptions = {}): AgentTool[] {
  const maxBytes = options.writeFileMaxBytes ?? DEFAULT_WRITE_FILE_MAX_BYTES;
  return [bashTool(), lsTool(), readFileTool(), writeFileTool(maxBytes), strReplaceTool()];
}

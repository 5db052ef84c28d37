import type { AgentTool } from "../../engine/types.ts";
import type { SandboxAuthorizer } from "../../sandbox/acquire.ts";
import { VIRTUAL_DIRS } from "../../ports/sandbox.ts";
import {
  messageOf,
  optionalBoolean,
  optionalInteger,
  requireString,
  runSandboxTool,
  splitLines,
  toolMessage,
  withFileLock,
} from "./run.ts";

// The file tools: `read_file`, `write_file` and `str_replace`.

/** DeerFlow's single-call cap for non-append writes: larger tool-call payloads tend to stall streaming. */
export const DEFAULT_WRITE_FILE_MAX_BYTES = 80 * 1024;

function countOccurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let index = haystack.indexOf(needle); index !== -1; index = haystack.indexOf(needle, index + needle.length)) count += 1;
  return count;
}

export function readFileTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
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

export function writeFileTool(maxBytes: number, authorizer: SandboxAuthorizer | undefined): AgentTool {
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

export function strReplaceTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
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

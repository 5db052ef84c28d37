import type { AgentTool } from "../engine/types.ts";
import type { SandboxAuthorizer } from "../sandbox/acquire.ts";
import { bashTool } from "./sandbox/bash.ts";
import { DEFAULT_WRITE_FILE_MAX_BYTES, readFileTool, strReplaceTool, writeFileTool } from "./sandbox/files.ts";
import { globTool, grepTool, lsTool } from "./sandbox/search.ts";

/*
 * The file and shell tools of a thread's sandbox. Expected failures (a path outside the sandbox, a
 * missing file, an ambiguous edit) come back as `Error: ...` text the model can act on, never as a
 * thrown exception; ToolErrorHandling then classifies that text into deerflow_tool_meta.
 */
// The tools live in src/tools/sandbox/ by family (bash.ts, files.ts, search.ts, and what they share
// in run.ts); how a run acquires its sandbox is src/sandbox/acquire.ts.

export { DEFAULT_WRITE_FILE_MAX_BYTES } from "./sandbox/files.ts";
export {
  DEFAULT_GLOB_MAX_RESULTS,
  DEFAULT_GREP_MAX_RESULTS,
  GREP_LINE_SUMMARY_CHARS,
  GREP_MAX_FILE_BYTES,
  MAX_GLOB_MAX_RESULTS,
  MAX_GREP_MAX_RESULTS,
  compileGrepPattern,
  globMatcher,
  globPathMatches,
  isIgnoredSearchName,
} from "./sandbox/search.ts";
export { ArgumentError, messageOf, requireString, runSandboxTool, sandboxErrorText, toolMessage, type SandboxToolReply } from "./sandbox/run.ts";

export interface SandboxToolsOptions {
  /** Byte cap of one non-append write_file call; 0 disables it. Default 80 KiB. */
  writeFileMaxBytes?: number;
  /** Gates every sandbox acquisition of these tools; without one, acquisition is always allowed. */
  authorizer?: SandboxAuthorizer;
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

import { DeerflowError } from "../core/errors.ts";
import { TOOL_RESULTS_DIRNAME, isToolResultArtifact } from "../core/path.ts";
import { resolveVirtualPath } from "../sandbox/virtual-path.ts";
import type { AgentTool } from "../engine/types.ts";
import { SandboxError, VIRTUAL_DIRS } from "../ports/sandbox.ts";
import type { Sandbox } from "../ports/sandbox.ts";
import { ArgumentError, runSandboxTool } from "./sandbox-tools.ts";
import { type SandboxAuthorizer } from "../sandbox/acquire.ts";

/*
 * present_files: the model declares which files under /mnt/user-data/outputs are deliverables. The
 * paths land in the `artifacts` channel (an ordered union, so parallel calls and repeats are safe),
 * which is what clients list and offer for download.
 */

/** DeerFlow's tool name (plural); ToolProgress and token attribution already key on it. */
export const PRESENT_FILES_TOOL_NAME = "present_files";
export const PRESENT_FILES_SUCCESS_TEXT = "Successfully presented files";

export interface PresentFileToolOptions {
  /** The outputs subfolder holding externalized tool output (ToolOutputBudget's storage_subdir). */
  readonly toolResultsDirname?: string;
  /** Gates the sandbox acquisition that checks the files exist. */
  readonly authorizer?: SandboxAuthorizer;
}

class PresentRefusal extends DeerflowError {
  constructor(message: string) {
    super("present_file_refused", message);
    this.name = "PresentRefusal";
  }
}

/** The normalized outputs path of one requested file, or a refusal the model can act on. */
function presentablePath(raw: unknown, toolResultsDirname: string): string {
  if (typeof raw !== "string" || raw.length === 0) {
    throw new ArgumentError(`${PRESENT_FILES_TOOL_NAME} takes \`filepaths\` as a list of absolute paths (strings).`);
  }
  let resolved: string | undefined;
  try {
    resolved = raw.startsWith("/") ? resolveVirtualPath(raw) : undefined;
  } catch (error) {
    if (!(error instanceof SandboxError)) throw error;
  }
  if (resolved === undefined || !resolved.startsWith(`${VIRTUAL_DIRS.outputs}/`)) {
    throw new PresentRefusal(`Error: Only files in ${VIRTUAL_DIRS.outputs} can be presented: ${raw}`);
  }
  // Externalized tool output is process feedback, never a deliverable.
  if (isToolResultArtifact(resolved, toolResultsDirname)) {
    throw new PresentRefusal(
      `Error: ${raw} is saved tool output, not a deliverable; files under a ${toolResultsDirname} folder cannot be presented. ` +
        `Write what the user needs into a file under ${VIRTUAL_DIRS.outputs} and present that file instead.`,
    );
  }
  return resolved;
}

/** Marks files under /mnt/user-data/outputs as deliverables by adding them to `artifacts`. */
export function createPresentFileTool(options: PresentFileToolOptions = {}): AgentTool {
  const toolResultsDirname = options.toolResultsDirname ?? TOOL_RESULTS_DIRNAME;
  return {
    name: PRESENT_FILES_TOOL_NAME,
    description:
      "Make files visible to the user for viewing, rendering and download in the client. Use it after creating " +
      `the files under ${VIRTUAL_DIRS.outputs}, to present any file the user should receive (several related files ` +
      "at once if you like). Do not use it for files you only read for your own work, or for intermediate files. " +
      `Only files under ${VIRTUAL_DIRS.outputs} can be presented. Safe to call in parallel with other tools.`,
    schema: {
      type: "object",
      properties: {
        filepaths: {
          type: "array",
          items: { type: "string" },
          minItems: 1,
          description: `Absolute paths of the files to present; only files under ${VIRTUAL_DIRS.outputs}.`,
        },
      },
      required: ["filepaths"],
      additionalProperties: false,
    },
    async invoke(args, context) {
      return runSandboxTool(
        context,
        PRESENT_FILES_TOOL_NAME,
        "presenting files",
        async (sandbox) => {
          const raw = args["filepaths"];
          if (!Array.isArray(raw) || raw.length === 0) {
            throw new ArgumentError(`${PRESENT_FILES_TOOL_NAME} needs \`filepaths\` as a non-empty list of absolute paths.`);
          }
          // All or nothing, as DeerFlow does: one bad path presents none, so the model fixes the list once.
          const paths: string[] = [];
          try {
            for (const item of raw) paths.push(presentablePath(item, toolResultsDirname));
          } catch (error) {
            if (error instanceof PresentRefusal) return error.message;
            throw error;
          }
          for (const path of paths) {
            if (!(await sandbox.exists(path))) {
              return `Error: Not found: ${path} does not exist. Write the file first, then present it.`;
            }
            if (await isDirectory(sandbox, path)) {
              return `Error: ${path} is a directory; present the files inside it instead.`;
            }
          }
          return { text: PRESENT_FILES_SUCCESS_TEXT, update: { artifacts: paths } };
        },
        options.authorizer,
      );
    },
  };
}

async function isDirectory(sandbox: Sandbox, path: string): Promise<boolean> {
  try {
    await sandbox.list(path, { depth: 1 });
    return true;
  } catch (error) {
    if (error instanceof SandboxError && error.code === "not_found") return false;
    throw error;
  }
}

import type { AgentTool } from "../../engine/types.ts";
import type { SandboxAuthorizer } from "../../sandbox/acquire.ts";
import { VIRTUAL_DIRS } from "../../ports/sandbox.ts";
import { ROOTS_TEXT, requireString, runSandboxTool } from "./run.ts";

// `bash`: one command in the thread's sandbox.

function formatExec(stdout: string, stderr: string, exitCode: number): string {
  let output = stdout;
  if (stderr) output += output ? `\nStd Error:\n${stderr}` : stderr;
  if (exitCode !== 0) output += `\nExit Code: ${exitCode}`;
  return output || "(no output)";
}

export function bashTool(authorizer: SandboxAuthorizer | undefined): AgentTool {
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

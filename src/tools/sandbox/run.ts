import { ToolMessage } from "@langchain/core/messages";
import { Command, isGraphBubbleUp } from "@langchain/langgraph/web";
import type { AgentRuntime, ToolContext, ToolOutput } from "../../engine/types.ts";
import { SandboxError, VIRTUAL_DIRS, type Sandbox } from "../../ports/sandbox.ts";
import { SandboxAuthorizationError, acquireRunSandbox, type SandboxAuthorizer } from "../../sandbox/acquire.ts";
import { resolveVirtualPath } from "../../sandbox/virtual-path.ts";
import type { ThreadStateUpdate } from "../../state/thread-state.ts";
import { DeerflowError } from "../../core/errors.ts";

/*
 * What every sandbox tool shares: reading its arguments, a per-file lock for read-modify-write
 * calls, and runSandboxTool, which acquires the run's sandbox and turns every expected failure into
 * `Error: ...` text the model can act on.
 */

export type Args = Record<string, unknown>;

export const ROOTS_TEXT = `${VIRTUAL_DIRS.workspace}, ${VIRTUAL_DIRS.uploads} and ${VIRTUAL_DIRS.outputs}`;

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

export function optionalBoolean(args: Args, key: string, tool: string): boolean {
  const value = args[key];
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") throw new ArgumentError(`${tool} takes \`${key}\` as true or false.`);
  return value;
}

export function optionalInteger(args: Args, key: string, tool: string): number | undefined {
  const value = args[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value)) throw new ArgumentError(`${tool} takes \`${key}\` as a whole number.`);
  return value;
}

export function optionalString(args: Args, key: string, tool: string): string | undefined {
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
export const fileLocks = new Map<string, Promise<void>>();

export async function withFileLock<T>(sandbox: Sandbox, path: string, body: () => Promise<T>): Promise<T> {
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
export function rethrowControlFlow(error: unknown, runtime: AgentRuntime): void {
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

// Python's universal-newline reading, so line numbers match what upstream's read_file reports.
export function splitLines(content: string): string[] {
  const lines = content.split(/\r\n|\r|\n/);
  if (lines.length > 0 && lines.at(-1) === "") lines.pop();
  return lines;
}

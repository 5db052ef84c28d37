import { ToolMessage } from "@langchain/core/messages";
import { isCommand, isGraphBubbleUp } from "@langchain/langgraph/web";
import type { Command } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type { AgentMiddleware, ToolCallRequest, ToolHandler, ToolResult } from "../../engine/types.ts";
import { DEFAULT_SKILLS_CONTAINER_PATH } from "../../skills/registry.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import {
  DEFAULT_SKILL_FILE_READ_TOOL_NAMES,
  SKILL_CONTEXT_ENTRY_KEY,
  normalizeSkillsRoot,
  skillEntryFromRead,
} from "../durable-context/skills.ts";
import { formatSubagentResultMessage, makeSubagentAdditionalKwargs } from "../../tools/subagent-result.ts";
import { stampExceptionMeta, stampToolMeta } from "../tool-result-meta.ts";

export const TOOL_ERROR_HANDLING_NAME = "ToolErrorHandling";

const MISSING_TOOL_CALL_ID = "missing_tool_call_id";
const UNKNOWN_TOOL_NAME = "unknown_tool";
const TASK_TOOL_NAME = "task";
const RECOVERY_HINT = "Continue with available context, or choose an alternative tool.";
const DETAIL_MAX_CHARS = 500;
const PATH_ARG_KEYS = ["path", "file_path", "filepath"] as const;

/**
 * Which reads are skill loads. Mirrors DurableContext's keys (summarization.skill_file_read_tool_names
 * and skills.container_path in config.yaml), so the stamp and its consumer agree on both.
 */
export const ToolErrorHandlingConfigSchema = v.strictObject({
  /** Tools whose successful read of `<skills_container_path>/.../SKILL.md` is stamped; [] turns stamping off. */
  skill_file_read_tool_names: v.optional(v.array(v.string())),
  /** Where skills appear to the model. */
  skills_container_path: v.optional(v.pipe(v.string(), v.startsWith("/", "must be an absolute path such as /mnt/skills"))),
});
export interface ToolErrorHandlingConfig {
  skill_file_read_tool_names?: string[];
  skills_container_path?: string;
}
type _ToolErrorHandlingConfigMatches = Assert<SameType<ToolErrorHandlingConfig, v.InferOutput<typeof ToolErrorHandlingConfigSchema>>>;
export const TOOL_ERROR_HANDLING_DEFAULTS: Readonly<Required<ToolErrorHandlingConfig>> = Object.freeze({
  skill_file_read_tool_names: [...DEFAULT_SKILL_FILE_READ_TOOL_NAMES],
  skills_container_path: DEFAULT_SKILLS_CONTAINER_PATH,
});

function errorName(error: unknown): string {
  if (!(error instanceof Error)) return "Error";
  // A subclass that forgot to set `name` still says more through its constructor.
  if (error.name === "Error" && error.constructor.name && error.constructor.name !== "Error") {
    return error.constructor.name;
  }
  return error.name || "Error";
}

function errorDetail(error: unknown, name: string): string {
  let text: string;
  if (error instanceof Error) text = error.message;
  else if (typeof error === "string") text = error;
  else {
    try {
      text = JSON.stringify(error) ?? String(error);
    } catch {
      text = String(error);
    }
  }
  const detail = text.trim() || name;
  // Counted in code points so a cut never splits a surrogate pair.
  const chars = Array.from(detail);
  return chars.length > DETAIL_MAX_CHARS ? `${chars.slice(0, DETAIL_MAX_CHARS - 3).join("")}...` : detail;
}

/** The ToolMessage a failed tool call becomes, so the model can carry on instead of the run aborting. */
export function buildToolErrorMessage(request: Pick<ToolCallRequest, "toolCall">, error: unknown): ToolMessage {
  const toolName = request.toolCall.name || UNKNOWN_TOOL_NAME;
  const toolCallId = request.toolCall.id || MISSING_TOOL_CALL_ID;
  const name = errorName(error);
  const detail = errorDetail(error, name);
  const structuredError = `${name}: ${detail}`;
  const message = new ToolMessage({
    content: `Error: Tool '${toolName}' failed with ${structuredError}. ${RECOVERY_HINT}`,
    tool_call_id: toolCallId,
    name: toolName,
    status: "error",
  });
  // A task that raised before it could build its own result still owes the ledger and the UI the
  // same structured failure a task result carries.
  if (toolName === TASK_TOOL_NAME) stampTaskFailure(message, structuredError);
  return stampExceptionMeta(message, structuredError);
}

function stampTaskFailure(message: ToolMessage, error: string): void {
  let { content } = formatSubagentResultMessage("failed", { error });
  if (!/[.!?]$/.test(content)) content += ".";
  message.content = `${content} ${RECOVERY_HINT}`;
  message.additional_kwargs = { ...message.additional_kwargs, ...makeSubagentAdditionalKwargs("failed", { error }) };
}

function toolCallPath(request: Pick<ToolCallRequest, "toolCall">): string | undefined {
  const args: unknown = request.toolCall.args;
  if (typeof args !== "object" || args === null) return undefined;
  for (const key of PATH_ARG_KEYS) {
    const value = (args as Record<string, unknown>)[key];
    if (typeof value === "string" && value.length > 0) return value;
  }
  return undefined;
}

/** The read result answering this call, bare or inside a Command (a first read may also bind the sandbox). */
function answeringMessage(result: ToolResult, toolCallId: string | undefined): ToolMessage | undefined {
  if (ToolMessage.isInstance(result)) return result;
  if (!isCommand(result)) return undefined;
  const found: ToolMessage[] = [];
  const collect = (messages: unknown): void => {
    for (const item of Array.isArray(messages) ? messages : [messages]) if (ToolMessage.isInstance(item)) found.push(item);
  };
  const update: unknown = (result as Command).update;
  if (Array.isArray(update)) {
    for (const entry of update) if (Array.isArray(entry) && entry[0] === "messages") collect(entry[1]);
  } else if (typeof update === "object" && update !== null && "messages" in update) {
    collect((update as { messages: unknown }).messages);
  }
  return found.find((message) => message.tool_call_id === toolCallId);
}

function stampCommandMessages(command: Command): void {
  const update: unknown = command.update;
  const stampAll = (messages: unknown): void => {
    const list = Array.isArray(messages) ? messages : [messages];
    for (const item of list) if (ToolMessage.isInstance(item)) stampToolMeta(item);
  };
  if (Array.isArray(update)) {
    for (const entry of update) {
      if (Array.isArray(entry) && entry[0] === "messages") stampAll(entry[1]);
    }
  } else if (typeof update === "object" && update !== null && "messages" in update) {
    stampAll((update as { messages: unknown }).messages);
  }
}

/** Stamps deerflow_tool_meta on a result the tool returned on its own. */
export function stampToolResult(result: ToolResult): ToolResult {
  if (ToolMessage.isInstance(result)) return stampToolMeta(result);
  if (isCommand(result)) stampCommandMessages(result);
  return result;
}

/**
 * Turns tool exceptions into error ToolMessages carrying exception meta (and, for `task`, the
 * structured failed-subagent facts), stamps every normal result with deerflow_tool_meta, and stamps
 * skill-file reads with `skill_context_entry`. Graph interrupts and a cancelled run pass through
 * untouched: they are control flow, not tool failures.
 */
export function createToolErrorHandlingMiddleware(config?: Partial<ToolErrorHandlingConfig>): AgentMiddleware {
  const parsed = parseMiddlewareConfig(ToolErrorHandlingConfigSchema, config, TOOL_ERROR_HANDLING_NAME);
  const skillReadToolNames = [...new Set(parsed.skill_file_read_tool_names ?? TOOL_ERROR_HANDLING_DEFAULTS.skill_file_read_tool_names)];
  const skillReaders = new Set(skillReadToolNames);
  const skillsRoot = normalizeSkillsRoot(parsed.skills_container_path ?? TOOL_ERROR_HANDLING_DEFAULTS.skills_container_path);

  /**
   * A successful read of a SKILL.md gets its reference (path, front-matter description) stamped,
   * parsed from the text the model was shown, so DurableContext can keep "this skill is loaded"
   * after summarization drops the read. Never the body.
   */
  function stampSkillRead(request: ToolCallRequest, result: ToolResult): void {
    if (!skillReaders.has(request.toolCall.name)) return;
    const path = toolCallPath(request);
    if (path === undefined) return;
    const message = answeringMessage(result, request.toolCall.id);
    if (!message || message.status === "error" || typeof message.content !== "string") return;
    const entry = skillEntryFromRead(path, message.content, skillsRoot);
    if (entry === undefined) return;
    message.additional_kwargs = { ...message.additional_kwargs, [SKILL_CONTEXT_ENTRY_KEY]: entry };
  }

  return {
    name: TOOL_ERROR_HANDLING_NAME,
    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      let result: ToolResult;
      try {
        result = await handler(request);
      } catch (error) {
        if (isGraphBubbleUp(error)) throw error;
        if (request.runtime.signal?.aborted) throw error;
        return buildToolErrorMessage(request, error);
      }
      stampSkillRead(request, result);
      return stampToolResult(result);
    },
    releasePolicyParameters() {
      return {
        error_detail_max_chars: DETAIL_MAX_CHARS,
        meta_key: "deerflow_tool_meta",
        task_exception_status: "failed",
        skill_file_read_tool_names: [...skillReadToolNames].sort(),
        skills_container_path: skillsRoot,
        skill_context_key: SKILL_CONTEXT_ENTRY_KEY,
      };
    },
  };
}

import { ToolMessage } from "@langchain/core/messages";
import { isCommand, isGraphBubbleUp } from "@langchain/langgraph/web";
import type { Command } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { AgentMiddleware, ToolCallRequest, ToolHandler, ToolResult } from "../engine/types.ts";
import { parseMiddlewareConfig } from "./config.ts";
import { stampExceptionMeta, stampToolMeta } from "./tool-result-meta.ts";

export const TOOL_ERROR_HANDLING_NAME = "ToolErrorHandling";

const MISSING_TOOL_CALL_ID = "missing_tool_call_id";
const UNKNOWN_TOOL_NAME = "unknown_tool";
const RECOVERY_HINT = "Continue with available context, or choose an alternative tool.";
const DETAIL_MAX_CHARS = 500;

/** No options yet; the schema still rejects unknown keys so a typo in config fails loudly. */
export const ToolErrorHandlingConfigSchema = v.strictObject({});
export type ToolErrorHandlingConfig = v.InferOutput<typeof ToolErrorHandlingConfigSchema>;
export const TOOL_ERROR_HANDLING_DEFAULTS: ToolErrorHandlingConfig = Object.freeze({});

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
  const message = new ToolMessage({
    content: `Error: Tool '${toolName}' failed with ${name}: ${detail}. ${RECOVERY_HINT}`,
    tool_call_id: toolCallId,
    name: toolName,
    status: "error",
  });
  return stampExceptionMeta(message, `${name}: ${detail}`);
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
 * Turns tool exceptions into error ToolMessages carrying exception meta, and stamps every normal
 * result with deerflow_tool_meta. Graph interrupts and a cancelled run pass through untouched:
 * they are control flow, not tool failures.
 */
export function createToolErrorHandlingMiddleware(config?: Partial<ToolErrorHandlingConfig>): AgentMiddleware {
  parseMiddlewareConfig(ToolErrorHandlingConfigSchema, config, TOOL_ERROR_HANDLING_NAME);
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
      return stampToolResult(result);
    },
    releasePolicyParameters() {
      return { error_detail_max_chars: DETAIL_MAX_CHARS, meta_key: "deerflow_tool_meta" };
    },
  };
}

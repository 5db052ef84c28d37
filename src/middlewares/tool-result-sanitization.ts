import type { ToolMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import type { AgentMiddleware, AgentTool, ToolCallRequest, ToolHandler, ToolResult } from "../engine/types.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { BLOCKED_TAGS_HASH, BLOCKED_TAG_NAMES, USER_INPUT_BEGIN, USER_INPUT_END, neutralizeUntrustedTags } from "./input-sanitization.ts";
import { ToolTransform, mapToolResultMessages, replaceToolContent } from "./tool-transform-meta.ts";

/*
 * Remote content a tool fetches (a web page, search snippets, a captured site's status text, any
 * MCP server's answer) is as untrusted as what a user types, yet it enters the model context as a
 * tool result. A page an attacker controls could carry a forged <system-reminder> or a
 * "--- END USER INPUT ---" marker and pass it off as framework context. This applies the user-input
 * guardrail's neutralisation to those results. Local tool output (bash, read_file) is left alone so
 * code and logs keep their angle brackets. Sits inner of ToolOutputBudget: it neutralises the raw
 * output, then the budget externalises or truncates what is already safe.
 */

export const TOOL_RESULT_SANITIZATION_NAME = "ToolResultSanitization";

/** First-party tools whose results are attacker-influenceable remote content. */
export const REMOTE_CONTENT_TOOL_NAMES: readonly string[] = Object.freeze(["image_search", "web_capture", "web_fetch", "web_search"]);
const REMOTE_CONTENT_TOOLS: ReadonlySet<string> = new Set(REMOTE_CONTENT_TOOL_NAMES);

/** Tool metadata key the MCP loader tags every MCP-sourced tool with (`true` or its server facts). */
export const MCP_TOOL_METADATA_KEY = "deerflow_mcp";

export const ToolResultSanitizationConfigSchema = v.strictObject({});
export interface ToolResultSanitizationConfig {}
type _ToolResultSanitizationConfigMatches = Assert<SameType<ToolResultSanitizationConfig, v.InferOutput<typeof ToolResultSanitizationConfigSchema>>>;

/** Remote text made inert as data, exactly as a user's text would be (without the input frame). */
export function sanitizeRemoteToolContent(text: string): string {
  return neutralizeUntrustedTags(text);
}

/**
 * MCP-sourced whatever its name: a server can call its fetcher `fetch_url` or `scrape_page`, and a
 * name heuristic would also mangle local tools such as `file_search`.
 */
export function isMcpTool(tool: AgentTool | undefined): boolean {
  const tag = tool?.metadata?.[MCP_TOOL_METADATA_KEY];
  return tag === true || (typeof tag === "object" && tag !== null && !Array.isArray(tag));
}

/** Whether a call's result is remote content: a first-party web tool, or any MCP tool. */
export function isRemoteContentCall(request: Pick<ToolCallRequest, "toolCall" | "tool">): boolean {
  return REMOTE_CONTENT_TOOLS.has(request.toolCall.name) || isMcpTool(request.tool);
}

/** Content with its text neutralised, in the same shape; the same value when nothing changed. */
export function neutralizeToolContent(content: unknown): unknown {
  if (typeof content === "string") return sanitizeRemoteToolContent(content);
  if (!Array.isArray(content)) return content;
  let changed = false;
  const rebuilt = content.map((block: unknown) => {
    // Bare strings occur in content lists too (some MCP adapters emit them); skipping them would
    // let a whole result through.
    if (typeof block === "string") {
      const text = sanitizeRemoteToolContent(block);
      if (text !== block) changed = true;
      return text;
    }
    if (typeof block === "object" && block !== null && (block as { type?: unknown }).type === "text") {
      const text = (block as { text?: unknown }).text;
      if (typeof text === "string") {
        const sanitized = sanitizeRemoteToolContent(text);
        if (sanitized !== text) {
          changed = true;
          return { ...(block as Record<string, unknown>), text: sanitized };
        }
      }
    }
    return block;
  });
  return changed ? rebuilt : content;
}

function sanitizeMessage(message: ToolMessage, scope: "remote_tool" | "mcp_tool"): ToolMessage {
  const content = neutralizeToolContent(message.content);
  if (content === message.content) return message;
  return replaceToolContent(message, content as ToolMessage["content"], {
    middleware: TOOL_RESULT_SANITIZATION_NAME,
    transform: ToolTransform.TAGS_NEUTRALIZED,
    scope,
  });
}

/**
 * Neutralises framework and injection tags in remote-content tool results (ToolMessage and every
 * ToolMessage a Command carries). Anything else, and any clean result, is returned as the same
 * object. The tool's own errors and interrupts pass through untouched: nothing here catches.
 */
export function createToolResultSanitizationMiddleware(config?: Partial<ToolResultSanitizationConfig>): AgentMiddleware {
  parseMiddlewareConfig(
    ToolResultSanitizationConfigSchema,
    config,
    TOOL_RESULT_SANITIZATION_NAME,
    "ToolResultSanitization takes no settings.",
  );
  return {
    name: TOOL_RESULT_SANITIZATION_NAME,
    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      const result = await handler(request);
      if (!isRemoteContentCall(request)) return result;
      const scope = REMOTE_CONTENT_TOOLS.has(request.toolCall.name) ? "remote_tool" : "mcp_tool";
      return mapToolResultMessages(result, (message) => sanitizeMessage(message, scope));
    },
    releasePolicyParameters() {
      return {
        remote_tool_names: [...REMOTE_CONTENT_TOOL_NAMES],
        mcp_tools: `metadata.${MCP_TOOL_METADATA_KEY}`,
        blocked_tags_hash: BLOCKED_TAGS_HASH,
        blocked_tag_count: BLOCKED_TAG_NAMES.length,
        boundary_markers: [USER_INPUT_BEGIN, USER_INPUT_END],
        content_shapes: ["string", "text_block", "bare_string", "command_messages"],
      };
    },
  };
}

import { ToolMessage } from "@langchain/core/messages";
// @modelcontextprotocol/sdk's "./*" export maps types to "*.js.d.ts", which Deno and JSR take literally
// (modelcontextprotocol/typescript-sdk#2701); each @ts-types names the real declarations, tsc ignores it.
// @ts-types="@modelcontextprotocol/sdk/types"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

/*
 * An MCP result as the model reads it: text. Binary blocks (images, audio, blobs) are named with
 * their type and size instead of being inlined, since a base64 payload in a tool result would
 * swamp the context and most providers cannot read media in a tool message anyway. A result the
 * server flags `isError` (argument validation included, which never rejects the call) becomes an
 * `Error: ...` text with status error, the shape ToolErrorHandling classifies.
 */

type Block = CallToolResult["content"][number];

function base64Bytes(data: string): number {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}

function blockText(block: Block): string {
  switch (block.type) {
    case "text":
      return block.text;
    case "image":
      return `[image ${block.mimeType}, ${base64Bytes(block.data)} bytes, not shown]`;
    case "audio":
      return `[audio ${block.mimeType}, ${base64Bytes(block.data)} bytes, not shown]`;
    case "resource_link":
      return `[resource ${block.name ? `${block.name} ` : ""}${block.uri}${block.mimeType ? ` (${block.mimeType})` : ""}]`;
    case "resource": {
      const resource = block.resource as { uri: string; mimeType?: string; text?: unknown; blob?: unknown };
      if (typeof resource.text === "string") return resource.text;
      const size = typeof resource.blob === "string" ? `, ${base64Bytes(resource.blob)} bytes` : "";
      return `[resource ${resource.uri}${resource.mimeType ? ` (${resource.mimeType})` : ""}${size}, not shown]`;
    }
    default:
      return JSON.stringify(block);
  }
}

/** The text of a result's content blocks, one block per line; structured content when there are none. */
export function mcpResultText(result: CallToolResult): string {
  const blocks = Array.isArray(result.content) ? result.content : [];
  const text = blocks.map(blockText).join("\n");
  if (text === "" && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return text;
}

export interface McpResultTarget {
  /** The tool's name as the model called it. */
  readonly toolName: string;
  readonly toolCallId: string;
}

/** The ToolMessage for a result; `structuredContent` rides along as `artifact.structured_content`. */
export function mcpResultToToolMessage(result: CallToolResult, target: McpResultTarget): ToolMessage {
  const text = mcpResultText(result);
  const artifact = result.structuredContent === undefined ? undefined : { structured_content: result.structuredContent };
  if (result.isError === true) {
    const detail = text.trim() === "" ? `MCP tool '${target.toolName}' reported an error without details.` : text;
    return new ToolMessage({
      content: detail.startsWith("Error:") ? detail : `Error: ${detail}`,
      tool_call_id: target.toolCallId,
      name: target.toolName,
      status: "error",
      ...(artifact ? { artifact } : {}),
    });
  }
  return new ToolMessage({
    content: text,
    tool_call_id: target.toolCallId,
    name: target.toolName,
    ...(artifact ? { artifact } : {}),
  });
}

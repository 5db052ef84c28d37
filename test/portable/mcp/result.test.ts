import { describe, expect, it } from "vitest";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { mcpResultText, mcpResultToToolMessage } from "../../../src/mcp/result.ts";
import { normalizeToolResult } from "../../../src/middlewares/tool-result-meta.ts";
import { isMcpTool, mcpToolOrigin, mcpToolRouting } from "../../../src/mcp/metadata.ts";

const target = { toolName: "srv_tool", toolCallId: "c1" };

describe("MCP results as text", () => {
  it("joins text blocks and names binary blocks instead of inlining them", () => {
    const result: CallToolResult = {
      content: [
        { type: "text", text: "first" },
        { type: "audio", data: "AAAA", mimeType: "audio/wav" },
        { type: "resource", resource: { uri: "file:///a.txt", mimeType: "text/plain", text: "embedded text" } },
        { type: "resource", resource: { uri: "file:///b.bin", mimeType: "application/octet-stream", blob: "AAAAAA==" } },
      ],
    };
    expect(mcpResultText(result)).toBe("first\n[audio audio/wav, 3 bytes, not shown]\nembedded text\n[resource file:///b.bin (application/octet-stream), 4 bytes, not shown]");
  });

  it("a success keeps its status; structured content becomes the artifact", () => {
    const message = mcpResultToToolMessage({ content: [{ type: "text", text: "ok" }], structuredContent: { n: 1 } }, target);
    expect(message).toMatchObject({ content: "ok", name: "srv_tool", tool_call_id: "c1", artifact: { structured_content: { n: 1 } } });
    expect(message.status).not.toBe("error");
  });

  it("isError becomes `Error: …` with status error, which ToolErrorHandling's rules classify", () => {
    const message = mcpResultToToolMessage({ isError: true, content: [{ type: "text", text: "401 Unauthorized: bad token" }] }, target);
    expect(message).toMatchObject({ content: "Error: 401 Unauthorized: bad token", status: "error" });
    expect(normalizeToolResult({ toolName: "srv_tool", content: message.content as string, status: "error" })).toMatchObject({
      status: "error",
      error_type: "auth",
    });
    expect(mcpResultToToolMessage({ isError: true, content: [{ type: "text", text: "Error: already prefixed" }] }, target).content).toBe("Error: already prefixed");
    expect(mcpResultToToolMessage({ isError: true, content: [] }, target).content).toBe("Error: MCP tool 'srv_tool' reported an error without details.");
  });
});

describe("MCP metadata", () => {
  it("reads the origin tag and routing only from MCP tools, and routing only when not off", () => {
    const origin = { server: "s", transport: "http", tool: "t" };
    expect(isMcpTool({ metadata: { deerflow_mcp: origin } })).toBe(true);
    expect(isMcpTool({ metadata: { deerflow_mcp: true } })).toBe(true);
    expect(isMcpTool({ metadata: {} })).toBe(false);
    expect(mcpToolOrigin({ metadata: { deerflow_mcp: origin } })).toEqual(origin);
    expect(mcpToolRouting({ metadata: { deerflow_mcp: origin, deerflow_mcp_routing: { mode: "off" } } })).toBeUndefined();
    expect(mcpToolRouting({ metadata: { deerflow_mcp_routing: { mode: "prefer" } } })).toBeUndefined();
    expect(mcpToolRouting({ metadata: { deerflow_mcp: origin, deerflow_mcp_routing: { mode: "prefer", keywords: ["x"] } } })).toEqual({ mode: "prefer", keywords: ["x"] });
  });
});

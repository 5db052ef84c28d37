import type { AgentTool } from "../engine/types.ts";
import { isRecord } from "../core/guards.ts";

/*
 * The one place the MCP metadata keys live. Deferred-tool assembly, routing, result sanitization
 * and the assembly descriptor all read these keys; a leaf module (no SDK import) so reading them
 * never pulls the MCP client into a build that has no MCP servers.
 */

/** `tool.metadata.deerflow_mcp`: present exactly on tools an MCP server supplied. */
export const MCP_TOOL_METADATA_KEY = "deerflow_mcp";
/** `tool.metadata.deerflow_mcp_routing`: the effective routing hints, absent when routing is off. */
export const MCP_TOOL_ROUTING_METADATA_KEY = "deerflow_mcp_routing";

export type McpTransportKind = "stdio" | "http" | "sse";

/** What `deerflow_mcp` says about a tool's origin. */
export interface McpToolOrigin {
  /** The server's name in `mcpServers`. */
  readonly server: string;
  readonly transport: McpTransportKind;
  /** The tool's name as the server advertises it, before any server-name prefix. */
  readonly tool: string;
}

export type McpRoutingMode = "off" | "prefer";

export interface McpRouting {
  readonly mode: McpRoutingMode;
  readonly priority: number;
  readonly keywords: readonly string[];
}

/** True for a tool an MCP server supplied (any truthy tag, so tags written by older loaders count too). */
export function isMcpTool(tool: Pick<AgentTool, "metadata"> | undefined): boolean {
  const tag = tool?.metadata?.[MCP_TOOL_METADATA_KEY];
  return tag === true || isRecord(tag);
}

export function mcpToolOrigin(tool: Pick<AgentTool, "metadata"> | undefined): McpToolOrigin | undefined {
  const tag = tool?.metadata?.[MCP_TOOL_METADATA_KEY];
  if (!isRecord(tag) || typeof tag["server"] !== "string") return undefined;
  return tag as unknown as McpToolOrigin;
}

/** Routing metadata of an MCP tool whose routing is not off; undefined for every other tool. */
export function mcpToolRouting(tool: Pick<AgentTool, "metadata"> | undefined): Record<string, unknown> | undefined {
  if (!isMcpTool(tool)) return undefined;
  const routing = tool?.metadata?.[MCP_TOOL_ROUTING_METADATA_KEY];
  if (!isRecord(routing) || routing["mode"] === "off") return undefined;
  return routing;
}

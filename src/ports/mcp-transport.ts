// @modelcontextprotocol/sdk's "./*" export maps types to "*.js.d.ts", which Deno and JSR take literally
// (modelcontextprotocol/typescript-sdk#2701); each @ts-types names the real declarations, tsc ignores it.
// @ts-types="@modelcontextprotocol/sdk/shared/transport"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

/*
 * A stdio MCP server is a host process, which only a runtime can start; src/ speaks HTTP to MCP
 * servers itself and asks this port for a stdio transport. Implemented in
 * adapters/shared/mcp-stdio.ts, which every supported runtime shares.
 */

/** The MCP SDK's transport contract: start, send, close and the on* callbacks. */
export type McpTransport = Transport;

/** How to launch one stdio server. */
export interface McpStdioLaunch {
  readonly command: string;
  readonly args: readonly string[];
  /** Added to the small safe base environment (PATH, HOME, ...); the host's full environment is never passed. */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/** A stdio transport that also remembers the end of what the server wrote to stderr, for error messages. */
export interface McpStdioTransport extends McpTransport {
  stderrTail(): string;
}

export interface McpStdioTransportFactory {
  /** A transport that spawns the process when the client starts it and ends it on close. */
  create(launch: McpStdioLaunch): McpStdioTransport;
}

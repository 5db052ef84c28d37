// @modelcontextprotocol/sdk's "./*" export maps types to "*.js.d.ts", which Deno and JSR take literally
// (modelcontextprotocol/typescript-sdk#2701); each @ts-types names the real declarations, tsc ignores it.
// @ts-types="@modelcontextprotocol/sdk/client/index"
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
// @ts-types="@modelcontextprotocol/sdk/client/sse"
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
// @ts-types="@modelcontextprotocol/sdk/client/streamableHttp"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
// @ts-types="@modelcontextprotocol/sdk/types"
import { ErrorCode, McpError, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import type { McpStdioTransport, McpStdioTransportFactory, McpTransport } from "../ports/mcp-transport.ts";
import type { McpServerSettings } from "./config.ts";

/*
 * One live connection to one MCP server. HTTP transports are Web-standard (fetch and streams), so
 * they run on every runtime; a stdio server is a host process and comes from the
 * McpStdioTransportFactory port. Nothing here retries a tool call: a call that reached a server
 * may already have had its effect.
 */

export const DEFAULT_MCP_CLIENT_INFO = Object.freeze({ name: "deerflow-edge", version: "0.1.0" });
/** setTimeout's ceiling (about 24.8 days): what "no time limit" means to the SDK's request timer. */
export const NO_TIMEOUT_MS = 2_147_483_647;

export interface McpClientDeps {
  /** Starts stdio servers; without it a stdio server fails with `mcp_stdio_unavailable`. */
  readonly stdio?: McpStdioTransportFactory;
  /** The fetch HTTP transports use; default the global fetch. */
  readonly fetch?: typeof fetch;
  readonly clientInfo?: { readonly name: string; readonly version: string };
}

export interface McpCallOptions {
  readonly signal?: AbortSignal;
  /** Null: no call-level limit. */
  readonly timeoutMs?: number | null;
}

export interface McpSession {
  readonly server: string;
  /** False once the transport closed; a pool opens a new session instead of reusing this one. */
  readonly open: boolean;
  listTools(options?: McpCallOptions): Promise<Tool[]>;
  callTool(name: string, args: Record<string, unknown>, options?: McpCallOptions): Promise<CallToolResult>;
  close(): Promise<void>;
}

/** Where a server lives, for messages: the command, or the URL without its query (which may carry a token). */
export function describeMcpEndpoint(server: McpServerSettings): string {
  if (server.transport === "stdio") return `stdio: ${[server.command ?? "", ...server.args].join(" ").trim()}`;
  try {
    const url = new URL(server.url ?? "");
    return `${server.transport}: ${url.origin}${url.pathname}`;
  } catch {
    return server.transport;
  }
}

function createTransport(server: McpServerSettings, deps: McpClientDeps): McpTransport {
  if (server.transport === "stdio") {
    if (!deps.stdio) {
      throw new DeerflowError(
        "mcp_stdio_unavailable",
        `MCP server "${server.name}" runs over stdio, which this runtime cannot start. Use the Node, Deno or Bun entry (it provides the stdio port), or serve the server over HTTP and set its type to "http".`,
      );
    }
    return deps.stdio.create({ command: server.command ?? "", args: server.args, env: server.env });
  }
  const url = new URL(server.url ?? "");
  const options = {
    requestInit: { headers: { ...server.headers } },
    ...(deps.fetch ? { fetch: deps.fetch } : {}),
  };
  return server.transport === "sse" ? new SSEClientTransport(url, options) : new StreamableHTTPClientTransport(url, options);
}

function stderrOf(transport: McpTransport): string {
  const tail = (transport as Partial<McpStdioTransport>).stderrTail?.();
  return tail ? ` Server stderr: ${tail}` : "";
}

function requestOptions(options: McpCallOptions | undefined, fallbackMs: number | null) {
  const timeoutMs = options?.timeoutMs === undefined ? fallbackMs : options.timeoutMs;
  return { timeout: timeoutMs ?? NO_TIMEOUT_MS, ...(options?.signal ? { signal: options.signal } : {}) };
}

/** The SDK's own timeout error, as opposed to the server answering with an error. */
export function isMcpTimeout(error: unknown): boolean {
  return error instanceof McpError && error.code === ErrorCode.RequestTimeout;
}

/** A JSON-RPC error the server sent back (bad arguments, unknown tool), not a broken connection or a timeout. */
export function isMcpServerError(error: unknown): error is McpError {
  return error instanceof McpError && error.code !== ErrorCode.RequestTimeout && error.code !== ErrorCode.ConnectionClosed;
}

/**
 * Connects and initializes within the server's session_init_timeout. A failure closes whatever was
 * started (a spawned process included) and throws `mcp_connect_failed`; an abort of `signal`
 * propagates as is.
 */
export async function openMcpSession(server: McpServerSettings, deps: McpClientDeps = {}, signal?: AbortSignal): Promise<McpSession> {
  const transport = createTransport(server, deps);
  const client = new Client({ ...(deps.clientInfo ?? DEFAULT_MCP_CLIENT_INFO) }, { capabilities: {} });
  let open = true;
  client.onclose = () => {
    open = false;
  };
  try {
    await client.connect(transport, requestOptions({ ...(signal ? { signal } : {}) }, server.sessionInitTimeoutMs));
  } catch (error) {
    open = false;
    await client.close().catch(() => undefined);
    if (signal?.aborted) throw error;
    const timedOut = isMcpTimeout(error);
    throw new DeerflowError(
      timedOut ? "mcp_connect_timeout" : "mcp_connect_failed",
      `MCP server "${server.name}" (${describeMcpEndpoint(server)}) ${
        timedOut ? `did not finish starting within ${(server.sessionInitTimeoutMs ?? 0) / 1000} s` : `could not be reached: ${errorMessage(error)}`
      }.${stderrOf(transport)} Check its entry in extensions_config.json (command, url, headers), raise session_init_timeout, or set enabled to false.`,
      { cause: error, details: { server: server.name } },
    );
  }

  return {
    server: server.name,
    get open() {
      return open;
    },
    async listTools(options) {
      const tools: Tool[] = [];
      let cursor: string | undefined;
      // A server may page its catalog; a repeated cursor would otherwise loop forever.
      const seen = new Set<string>();
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor }, requestOptions(options, server.sessionInitTimeoutMs));
        tools.push(...page.tools);
        cursor = page.nextCursor;
        if (cursor !== undefined && seen.has(cursor)) break;
        if (cursor !== undefined) seen.add(cursor);
      } while (cursor !== undefined);
      return tools;
    },
    async callTool(name, args, options) {
      return (await client.callTool({ name, arguments: args }, undefined, requestOptions(options, server.toolCallTimeoutMs))) as CallToolResult;
    },
    async close() {
      open = false;
      if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
        // Ends the server-side session too; a server that does not support DELETE is not an error.
        await transport.terminateSession().catch(() => undefined);
      }
      await client.close().catch(() => undefined);
    },
  };
}

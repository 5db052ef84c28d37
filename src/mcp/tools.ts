import { ToolMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
// @modelcontextprotocol/sdk's "./*" export maps types to "*.js.d.ts", which Deno and JSR take literally
// (modelcontextprotocol/typescript-sdk#2701); each @ts-types names the real declarations, tsc ignores it.
// @ts-types="@modelcontextprotocol/sdk/types"
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { runThreadId, runUserId } from "../engine/run-identity.ts";
import type { AgentRuntime, AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";
import { enabledMcpServers, resolveEffectiveMcpRouting, type McpServerSettings, type McpServersConfig } from "./config.ts";
import { describeMcpEndpoint, isMcpServerError, isMcpTimeout, openMcpSession, type McpClientDeps } from "./client.ts";
import { MCP_TOOL_METADATA_KEY, MCP_TOOL_ROUTING_METADATA_KEY, type McpToolOrigin } from "./metadata.ts";
import { mcpResultToToolMessage } from "./result.ts";
import { DEFAULT_MAX_MCP_SESSIONS, McpSessionPool } from "./session-pool.ts";

/*
 * Every tool of every enabled MCP server as an AgentTool. Servers are discovered independently, so
 * one broken server costs only its own tools (it is reported in `failures`). Names are checked at
 * this boundary: they come verbatim from a server that may be hostile, and a deferred tool's name
 * only ever reaches the model inside the system prompt, where no provider validates it.
 */

/** What a provider accepts as a function name; anything else could also forge prompt structure. */
export const VALID_MCP_TOOL_NAME = /^[A-Za-z0-9_-]+$/;
const DEFAULT_THREAD_ID = "default";

export interface LoadMcpToolsOptions extends McpClientDeps {
  /** Aborts discovery (a hung server is also bounded by its session_init_timeout). */
  readonly signal?: AbortSignal;
  /** Pooled (server, user:thread) sessions kept open at once; default 256. */
  readonly maxSessions?: number;
}

export interface McpServerFailure {
  readonly server: string;
  readonly code: string;
  readonly message: string;
}

export interface McpSkippedTool {
  readonly server: string;
  readonly tool: string;
  readonly reason: string;
}

export interface McpToolset {
  readonly tools: readonly AgentTool[];
  /** Servers whose tools could not be listed; the run goes on without them. */
  readonly failures: readonly McpServerFailure[];
  /** Tools left out: an unusable name, or a name another tool already took. */
  readonly skipped: readonly McpSkippedTool[];
  /** Ends every pooled session (stdio processes included). */
  close(): Promise<void>;
}

/** user:thread, so a stateful server's session follows one conversation of one user. */
export function mcpSessionScope(runtime: AgentRuntime): string {
  return `${runUserId(runtime)}:${runThreadId(runtime) ?? DEFAULT_THREAD_ID}`;
}

/** A tool's argument schema as a function-calling provider expects it: always an object with properties. */
function argumentSchema(tool: Tool): Record<string, unknown> {
  const schema: Record<string, unknown> = { ...(tool.inputSchema as Record<string, unknown>) };
  schema["type"] = "object";
  if (typeof schema["properties"] !== "object" || schema["properties"] === null) schema["properties"] = {};
  return schema;
}

function rethrowIfControlFlow(error: unknown, runtime: AgentRuntime): void {
  if (isGraphBubbleUp(error)) throw error;
  if (runtime.signal?.aborted) throw error;
}

function createMcpTool(server: McpServerSettings, tool: Tool, name: string, pool: McpSessionPool): AgentTool {
  const origin: McpToolOrigin = Object.freeze({ server: server.name, transport: server.transport, tool: tool.name });
  const routing = resolveEffectiveMcpRouting(server, tool.name);
  const metadata: Record<string, unknown> = { [MCP_TOOL_METADATA_KEY]: origin };
  if (routing.mode !== "off") metadata[MCP_TOOL_ROUTING_METADATA_KEY] = Object.freeze({ ...routing, keywords: [...routing.keywords] });
  const timeoutSeconds = server.toolCallTimeoutMs === null ? null : server.toolCallTimeoutMs / 1000;

  return Object.freeze({
    name,
    description: tool.description ?? "",
    schema: argumentSchema(tool),
    metadata: Object.freeze(metadata),
    async invoke(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput> {
      const { runtime, toolCall } = context;
      const scope = mcpSessionScope(runtime);
      const target = { toolName: name, toolCallId: toolCall.id ?? "" };
      const session = await pool.get(server, scope, runtime.signal);
      try {
        const result = await session.callTool(tool.name, args, { ...(runtime.signal ? { signal: runtime.signal } : {}) });
        return mcpResultToToolMessage(result, target);
      } catch (error) {
        rethrowIfControlFlow(error, runtime);
        if (isMcpTimeout(error)) {
          // The server may still be working on the call; a fresh session keeps its late answer out of the next one.
          await pool.discard(server.name, scope, session);
          return errorResult(target, `MCP tool '${name}' timed out after ${timeoutSeconds} s. Try again with a smaller request, or raise tool_call_timeout for server "${server.name}".`);
        }
        if (isMcpServerError(error)) {
          return errorResult(target, `MCP server "${server.name}" rejected the call to '${name}': ${error.message}`);
        }
        await pool.discard(server.name, scope, session);
        throw new DeerflowError(
          "mcp_call_failed",
          `The connection to MCP server "${server.name}" (${describeMcpEndpoint(server)}) failed during '${name}': ${errorMessage(error)}. The next call reconnects; if it keeps failing, check that the server is running.`,
          { cause: error, details: { server: server.name, tool: tool.name } },
        );
      }
    },
  });
}

function errorResult(target: { toolName: string; toolCallId: string }, text: string): ToolMessage {
  return new ToolMessage({ content: `Error: ${text}`, tool_call_id: target.toolCallId, name: target.toolName, status: "error" });
}

async function discover(server: McpServerSettings, deps: McpClientDeps, signal: AbortSignal | undefined): Promise<Tool[]> {
  // Discovery uses a session of its own: calls are scoped per user and thread, listing is not.
  const session = await openMcpSession(server, deps, signal);
  try {
    return await session.listTools(signal ? { signal } : {});
  } finally {
    await session.close();
  }
}

/**
 * Lists the tools of every enabled server (in parallel) and wraps them. Never throws for a server
 * that fails; an abort of `options.signal` does throw.
 */
export async function loadMcpTools(config: McpServersConfig, options: LoadMcpToolsOptions = {}): Promise<McpToolset> {
  const { signal, maxSessions, ...deps } = options;
  const servers = enabledMcpServers(config);
  const pool = new McpSessionPool(deps, maxSessions ?? DEFAULT_MAX_MCP_SESSIONS);
  const failures: McpServerFailure[] = [];
  const skipped: McpSkippedTool[] = [];
  const tools: AgentTool[] = [];
  const taken = new Set<string>();

  const listed = await Promise.all(
    servers.map(async (server) => {
      try {
        return await discover(server, deps, signal);
      } catch (error) {
        if (signal?.aborted) throw error;
        const code = error instanceof DeerflowError ? error.code : "mcp_list_tools_failed";
        const message =
          error instanceof DeerflowError
            ? error.message
            : `MCP server "${server.name}" (${describeMcpEndpoint(server)}) could not list its tools: ${errorMessage(error)}. Check the server, or set enabled to false.`;
        failures.push({ server: server.name, code, message });
        return [];
      }
    }),
  ).catch(async (error: unknown) => {
    await pool.close();
    throw error;
  });

  servers.forEach((server, index) => {
    for (const tool of listed[index]!) {
      const name = server.toolNamePrefix ? `${server.name}_${tool.name}` : tool.name;
      if (!VALID_MCP_TOOL_NAME.test(name)) {
        skipped.push({ server: server.name, tool: tool.name, reason: `the name must match ${VALID_MCP_TOOL_NAME}` });
        continue;
      }
      if (taken.has(name)) {
        skipped.push({ server: server.name, tool: tool.name, reason: `another MCP tool is already named "${name}"; keep tool_name_prefix on` });
        continue;
      }
      taken.add(name);
      tools.push(createMcpTool(server, tool, name, pool));
    }
  });

  return {
    tools: Object.freeze(tools),
    failures: Object.freeze(failures),
    skipped: Object.freeze(skipped),
    close: () => pool.close(),
  };
}

// Runs under Node, Deno and Bun: a real MCP server on 127.0.0.1 (Streamable HTTP) and a real stdio
// server started through the adapter port, loaded as AgentTools and called through the engine.
import { fileURLToPath } from "node:url";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMcpStdioTransportFactory } from "../../adapters/shared/mcp-stdio.ts";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentTool, ToolContext } from "../../src/engine/types.ts";
import { loadMcpTools, parseMcpServersConfig, type McpToolset } from "../../src/mcp/index.ts";
import { createToolErrorHandlingMiddleware } from "../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import { emptyThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "../middlewares/runtime.ts";
import { startTestMcpServer, type TestMcpServer } from "../mcp/http-server.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtimeName = g.Deno ? "deno" : g.Bun ? "bun" : "node";
const STDIO_FIXTURE = fileURLToPath(new URL("../mcp/fixtures/stdio-server.mjs", import.meta.url));
const CRASHING_FIXTURE = fileURLToPath(new URL("../mcp/fixtures/crashing-server.mjs", import.meta.url));

function byName(toolset: McpToolset, name: string): AgentTool {
  const found = toolset.tools.find((t) => t.name === name);
  if (!found) throw new Error(`no tool ${name}; have ${toolset.tools.map((t) => t.name).join(", ")}`);
  return found;
}

function call(tool: AgentTool, args: Record<string, unknown>, options: { threadId?: string; userId?: string; signal?: AbortSignal; id?: string } = {}) {
  const toolCall: ToolCall = { name: tool.name, args, id: options.id ?? "call-1", type: "tool_call" };
  const runtime = makeRuntime({
    threadId: options.threadId ?? "t1",
    context: { user_id: options.userId ?? "u1" },
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const context: ToolContext = { toolCall, state: emptyThreadState(), runtime };
  return tool.invoke(args, context) as Promise<ToolMessage>;
}

describe(`MCP tools (${runtimeName})`, () => {
  let server: TestMcpServer;
  let toolset: McpToolset;

  beforeAll(async () => {
    server = await startTestMcpServer();
    const config = parseMcpServersConfig(
      {
        mcpServers: {
          calc: {
            type: "http",
            url: server.url,
            headers: { "X-Api-Key": "$MCP_TEST_KEY" },
            routing: { mode: "prefer", priority: 10, keywords: ["math"] },
            tools: { weather: { routing: { keywords: ["forecast"], priority: 70 } }, count: { routing: { mode: "off" } } },
          },
          down: { type: "streamable_http", url: "http://127.0.0.1:9/mcp", session_init_timeout: 5 },
          off: { enabled: false, type: "stdio" },
        },
        skills: { untouched: { enabled: true } },
      },
      { env: { get: (name) => (name === "MCP_TEST_KEY" ? "k-123" : undefined) } },
    );
    toolset = await loadMcpTools(config);
  });

  afterAll(async () => {
    await toolset?.close();
    await server?.close();
  });

  it("loads an HTTP server's tools with their schemas and deerflow_mcp metadata; a dead server is reported, not fatal", () => {
    expect(toolset.tools.map((t) => t.name).sort()).toEqual(["calc_add", "calc_count", "calc_fail", "calc_hang", "calc_picture", "calc_weather"]);
    const add = byName(toolset, "calc_add");
    expect(add.description).toBe("Add two numbers.");
    expect(add.schema).toMatchObject({
      type: "object",
      properties: { a: { type: "number", description: "first" }, b: { type: "number" } },
      required: ["a", "b"],
    });
    expect(add.metadata?.["deerflow_mcp"]).toEqual({ server: "calc", transport: "http", tool: "add" });
    expect(byName(toolset, "calc_count").schema).toMatchObject({ type: "object", properties: {} });
    expect(toolset.skipped).toEqual([expect.objectContaining({ server: "calc", tool: "bad name!" })]);
    expect(toolset.failures).toEqual([expect.objectContaining({ server: "down", code: "mcp_connect_failed" })]);
    expect(toolset.failures[0]!.message).toMatch(/MCP server "down" \(http: http:\/\/127\.0\.0\.1:9\/mcp\) could not be reached/);
    // Headers from the config reach the server, with $NAME read from the environment.
    expect(server.stats.headers.some((h) => h["x-api-key"] === "k-123")).toBe(true);
  });

  it("attaches the effective routing: the server's, with per-tool overrides, absent when off", () => {
    expect(byName(toolset, "calc_add").metadata?.["deerflow_mcp_routing"]).toEqual({ mode: "prefer", priority: 10, keywords: ["math"] });
    expect(byName(toolset, "calc_weather").metadata?.["deerflow_mcp_routing"]).toEqual({ mode: "prefer", priority: 70, keywords: ["forecast"] });
    expect(byName(toolset, "calc_count").metadata?.["deerflow_mcp_routing"]).toBeUndefined();
  });

  it("calls a tool and returns its text", async () => {
    const result = await call(byName(toolset, "calc_add"), { a: 2, b: 3 });
    expect(result).toBeInstanceOf(ToolMessage);
    expect(result).toMatchObject({ content: "5", name: "calc_add", tool_call_id: "call-1" });
    expect(result.status).not.toBe("error");
  });

  it("turns isError results, argument validation included, into `Error: …` text with status error", async () => {
    const failed = await call(byName(toolset, "calc_fail"), {});
    expect(failed).toMatchObject({ content: "Error: boom: the widget is broken", status: "error" });
    const invalid = await call(byName(toolset, "calc_add"), { a: "x", b: 1 });
    expect(invalid.status).toBe("error");
    expect(invalid.content).toMatch(/^Error: .*Input validation error/);
  });

  it("renders media as placeholders and keeps structured content as the artifact", async () => {
    const picture = await call(byName(toolset, "calc_picture"), {});
    expect(picture.content).toBe("a red pixel\n[image image/png, 70 bytes, not shown]\n[resource pixel https://example.com/pixel.png (image/png)]");
    const weather = await call(byName(toolset, "calc_weather"), {});
    expect(JSON.parse(weather.content as string)).toEqual({ city: "Paris", celsius: 21 });
    expect(weather.artifact).toEqual({ structured_content: { city: "Paris", celsius: 21 } });
  });

  it("keeps one session per user and thread, so a stateful server's state follows the conversation", async () => {
    const count = byName(toolset, "calc_count");
    expect((await call(count, {}, { threadId: "a" })).content).toBe("count=1");
    expect((await call(count, {}, { threadId: "a" })).content).toBe("count=2");
    expect((await call(count, {}, { threadId: "b" })).content).toBe("count=1");
    expect((await call(count, {}, { threadId: "a", userId: "u2" })).content).toBe("count=1");
    const sessions = new Set(server.stats.calls.filter((c) => c.tool === "count").map((c) => c.session));
    expect(sessions.size).toBe(3);
  });

  it("opens one session for concurrent first calls and evicts the least recently used beyond maxSessions", async () => {
    const own = await loadMcpTools(parseMcpServersConfig({ mcpServers: { lru: { type: "http", url: server.url } } }), { maxSessions: 2 });
    try {
      const count = byName(own, "lru_count");
      const opened = server.stats.opened;
      const [x, y] = await Promise.all([call(count, {}, { threadId: "p" }), call(count, {}, { threadId: "p" })]);
      expect([x.content, y.content].sort()).toEqual(["count=1", "count=2"]);
      expect(server.stats.opened).toBe(opened + 1);
      await call(count, {}, { threadId: "q" });
      await call(count, {}, { threadId: "p" });
      const closed = server.stats.closed;
      await call(count, {}, { threadId: "r" }); // evicts q, the least recently used
      await expect.poll(() => server.stats.closed).toBe(closed + 1);
      expect((await call(count, {}, { threadId: "p" })).content).toBe("count=4");
      expect((await call(count, {}, { threadId: "q" })).content).toBe("count=1");
    } finally {
      await own.close();
    }
  });

  it("rethrows when the run aborts (no error result) and cancels the call on the server", async () => {
    const controller = new AbortController();
    const entered = server.nextHang();
    const cancelled = server.nextCancel();
    const pending = call(byName(toolset, "calc_hang"), {}, { signal: controller.signal, threadId: "abort" });
    await entered;
    controller.abort(new Error("run aborted"));
    await expect(pending).rejects.toThrow(/run aborted/);
    await cancelled;
  });

  it("answers a call that outlives tool_call_timeout with a timed-out error", async () => {
    const timed = await loadMcpTools(parseMcpServersConfig({ mcpServers: { slow: { type: "http", url: server.url, tool_call_timeout: 0.05 } } }));
    try {
      const result = await call(byName(timed, "slow_hang"), {});
      expect(result.status).toBe("error");
      expect(result.content).toBe(
        "Error: MCP tool 'slow_hang' timed out after 0.05 s. Try again with a smaller request, or raise tool_call_timeout for server \"slow\".",
      );
    } finally {
      await timed.close();
    }
  });

  it("keeps server names off tool names when tool_name_prefix is false, and skips a name another server already took", async () => {
    const own = await loadMcpTools(
      parseMcpServersConfig({
        mcpServers: { first: { type: "http", url: server.url, tool_name_prefix: false }, second: { type: "http", url: server.url, tool_name_prefix: false } },
      }),
    );
    try {
      expect(own.tools.map((t) => t.name).sort()).toEqual(["add", "count", "fail", "hang", "picture", "weather"]);
      expect(own.tools.every((t) => (t.metadata?.["deerflow_mcp"] as { server: string }).server === "first")).toBe(true);
      expect(own.skipped.filter((s) => s.server === "second").map((s) => s.tool).sort()).toEqual(["add", "bad name!", "count", "fail", "hang", "picture", "weather"]);
      expect((await call(byName(own, "add"), { a: 1, b: 2 })).content).toBe("3");
    } finally {
      await own.close();
    }
  });

  it("ends the server-side sessions on close", async () => {
    const own = await loadMcpTools(parseMcpServersConfig({ mcpServers: { c2: { type: "http", url: server.url } } }));
    const before = server.stats.closed;
    await call(byName(own, "c2_add"), { a: 1, b: 1 }, { threadId: "close-test" });
    await own.close();
    expect(server.stats.closed).toBeGreaterThan(before);
    await expect(call(byName(own, "c2_add"), { a: 1, b: 1 })).rejects.toThrow(/closed/);
  });

  it("runs an MCP tool inside the engine: the model's call reaches the server and the error path stays recoverable", async () => {
    const model = fakeModel()
      .respondWithTools([
        { name: "calc_add", args: { a: 20, b: 22 }, id: "c1" },
        { name: "calc_fail", args: {}, id: "c2" },
      ])
      .respond(new AIMessage("the sum is 42"));
    const agent = createAgent({ model, tools: toolset.tools, middlewares: [createToolErrorHandlingMiddleware()], services: { clock: systemClock } });
    const final = await agent.invoke({ messages: [new HumanMessage({ content: "add", id: "m1" })] }, { threadId: "engine", context: { user_id: "u1" } });
    const results = final.messages.filter((m): m is ToolMessage => m.type === "tool");
    expect(results.find((m) => m.tool_call_id === "c1")?.content).toBe("42");
    const failed = results.find((m) => m.tool_call_id === "c2")!;
    expect(failed.content).toBe("Error: boom: the widget is broken");
    expect(failed.additional_kwargs["deerflow_tool_meta"]).toMatchObject({ status: "error" });
    expect(final.messages.at(-1)?.content).toBe("the sum is 42");
  });

  it("starts a stdio server through the adapter port with its configured env, one process per session", async () => {
    const stdio = await loadMcpTools(
      parseMcpServersConfig({ mcpServers: { local: { command: "node", args: [STDIO_FIXTURE], env: { MCP_TEST_TOKEN: "t-1" } } } }),
      { stdio: createMcpStdioTransportFactory() },
    );
    try {
      expect(stdio.failures).toEqual([]);
      const whoami = byName(stdio, "local_whoami");
      expect(whoami.metadata?.["deerflow_mcp"]).toEqual({ server: "local", transport: "stdio", tool: "whoami" });
      const first = (await call(whoami, {}, { threadId: "s" })).content as string;
      const second = (await call(whoami, {}, { threadId: "s" })).content as string;
      expect(first).toMatch(/^token=t-1 calls=1 pid=\d+$/);
      expect(second).toMatch(/^token=t-1 calls=2 /);
      expect(second.split("pid=")[1]).toBe(first.split("pid=")[1]);
    } finally {
      await stdio.close();
    }
  });

  it("reports a stdio server that dies at start with its stderr, and stdio without the port as unavailable", async () => {
    const config = parseMcpServersConfig({ mcpServers: { broken: { command: "node", args: [CRASHING_FIXTURE] } } });
    const crashed = await loadMcpTools(config, { stdio: createMcpStdioTransportFactory() });
    expect(crashed.tools).toEqual([]);
    expect(crashed.failures[0]).toMatchObject({ server: "broken", code: "mcp_connect_failed" });
    expect(crashed.failures[0]!.message).toContain("fatal: missing API key for upstream service");

    const portless = await loadMcpTools(config);
    expect(portless.failures[0]).toMatchObject({ server: "broken", code: "mcp_stdio_unavailable" });
  });
});

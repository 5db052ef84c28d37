// A real MCP server over Streamable HTTP on 127.0.0.1 for tests: the SDK's McpServer behind its
// Web-standard transport, served by node:http (which Node, Deno and Bun all provide).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";

export interface TestMcpServer {
  readonly url: string;
  /** Sessions opened (initialize requests answered) and closed (DELETE or transport close). */
  readonly stats: { opened: number; closed: number; calls: Array<{ tool: string; session: string | undefined }>; headers: Array<Record<string, string>> };
  /** Resolves the next time the `hang` tool is entered. */
  nextHang(): Promise<void>;
  /** Resolves the next time a `hang` call is cancelled by its client. */
  nextCancel(): Promise<void>;
  close(): Promise<void>;
}

const PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";

function buildServer(stats: TestMcpServer["stats"], hangs: Array<() => void>, cancels: Array<() => void>): McpServer {
  const server = new McpServer({ name: "test-server", version: "1.0.0" });
  let counter = 0;
  const record = (tool: string, extra: { sessionId?: string }) => stats.calls.push({ tool, session: extra.sessionId });

  server.registerTool(
    "add",
    { description: "Add two numbers.", inputSchema: { a: z.number().describe("first"), b: z.number() } },
    async ({ a, b }, extra) => {
      record("add", extra);
      return { content: [{ type: "text", text: String(a + b) }] };
    },
  );
  server.registerTool("count", { description: "Counts calls in this session." }, async (extra) => {
    record("count", extra);
    counter += 1;
    return { content: [{ type: "text", text: `count=${counter}` }] };
  });
  server.registerTool("fail", { description: "Always fails." }, async (extra) => {
    record("fail", extra);
    return { isError: true, content: [{ type: "text", text: "boom: the widget is broken" }] };
  });
  server.registerTool("picture", { description: "Returns an image and a caption." }, async () => ({
    content: [
      { type: "text", text: "a red pixel" },
      { type: "image", data: PNG_BASE64, mimeType: "image/png" },
      { type: "resource_link", uri: "https://example.com/pixel.png", name: "pixel", mimeType: "image/png" },
    ],
  }));
  server.registerTool(
    "weather",
    { description: "Structured weather.", outputSchema: { city: z.string(), celsius: z.number() } },
    async () => ({ content: [], structuredContent: { city: "Paris", celsius: 21 } }),
  );
  server.registerTool("hang", { description: "Never answers until cancelled." }, async (extra) => {
    record("hang", extra);
    await new Promise<void>((resolve) => {
      hangs.splice(0).forEach((notify) => notify());
      extra.signal.addEventListener(
        "abort",
        () => {
          cancels.splice(0).forEach((notify) => notify());
          resolve();
        },
        { once: true },
      );
    });
    return { content: [{ type: "text", text: "cancelled" }] };
  });
  // The SDK warns on console about the name; that is the point of this tool, so keep the log clean.
  const warn = console.warn;
  console.warn = () => undefined;
  try {
    server.registerTool("bad name!", { description: "A name no provider accepts." }, async () => ({ content: [] }));
  } finally {
    console.warn = warn;
  }
  return server;
}

export async function startTestMcpServer(): Promise<TestMcpServer> {
  const stats: TestMcpServer["stats"] = { opened: 0, closed: 0, calls: [], headers: [] };
  const transports = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const hangWaiters: Array<() => void> = [];
  const cancelWaiters: Array<() => void> = [];

  const handle = async (request: Request): Promise<Response> => {
    stats.headers.push(Object.fromEntries(request.headers));
    const sessionId = request.headers.get("mcp-session-id") ?? undefined;
    if (sessionId && transports.has(sessionId)) return transports.get(sessionId)!.handleRequest(request);
    if (request.method !== "POST") return new Response("unknown session", { status: 404 });
    const body: unknown = await request.json();
    if (!isInitializeRequest(body)) return new Response("unknown session", { status: 404 });
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (id) => {
        stats.opened += 1;
        transports.set(id, transport);
      },
      onsessionclosed: (id) => {
        stats.closed += 1;
        transports.delete(id);
      },
    });
    await buildServer(stats, hangWaiters, cancelWaiters).connect(transport);
    return transport.handleRequest(request, { parsedBody: body });
  };

  const http: Server = createServer(getRequestListener(handle));
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    stats,
    nextHang: () => new Promise<void>((resolve) => hangWaiters.push(resolve)),
    nextCancel: () => new Promise<void>((resolve) => cancelWaiters.push(resolve)),
    async close() {
      await Promise.all([...transports.values()].map((t) => t.close().catch(() => undefined)));
      http.closeAllConnections?.();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

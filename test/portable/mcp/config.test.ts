import { describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/config/index.ts";
import {
  DEFAULT_MCP_SESSION_INIT_TIMEOUT,
  enabledMcpServers,
  parseMcpServersConfig,
  resolveEffectiveMcpRouting,
  resolveEnvPlaceholders,
} from "../../../src/mcp/config.ts";

const env = (values: Record<string, string>) => ({ get: (name: string) => values[name] });

function failure(input: unknown): ConfigError {
  try {
    parseMcpServersConfig(input);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("extensions_config.json mcpServers", () => {
  it("reads upstream's shape with its defaults", () => {
    const config = parseMcpServersConfig({ mcpServers: { github: { command: "npx", args: ["-y", "@modelcontextprotocol/server-github"] } } });
    expect(config.servers["github"]).toEqual({
      name: "github",
      enabled: true,
      transport: "stdio",
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-github"],
      env: {},
      url: undefined,
      headers: {},
      description: "",
      routing: { mode: "off", priority: 0, keywords: [] },
      toolOverrides: {},
      toolNamePrefix: true,
      toolCallTimeoutMs: null,
      sessionInitTimeoutMs: DEFAULT_MCP_SESSION_INIT_TIMEOUT * 1000,
    });
  });

  it("accepts the MCP-spec `transport` spelling, with `type` winning, and streamable_http as http", () => {
    const config = parseMcpServersConfig({
      mcpServers: {
        a: { transport: "sse", url: "https://a.example/sse" },
        b: { type: "http", transport: "sse", url: "https://b.example/mcp" },
        c: { type: "streamable_http", url: "https://c.example/mcp" },
      },
    });
    expect(config.servers["a"]!.transport).toBe("sse");
    expect(config.servers["b"]!.transport).toBe("http");
    expect(config.servers["c"]!.transport).toBe("http");
  });

  it("reads whole-value $NAME placeholders from the environment; an unset one becomes empty", () => {
    const config = parseMcpServersConfig(
      { mcpServers: { s: { type: "http", url: "$MCP_URL", headers: { Authorization: "$MCP_AUTH", "X-Literal": "Bearer $NOT_A_PLACEHOLDER" }, env: { A: "$UNSET" } } } },
      { env: env({ MCP_URL: "https://mcp.example/mcp", MCP_AUTH: "Bearer s3cret" }) },
    );
    expect(config.servers["s"]!.url).toBe("https://mcp.example/mcp");
    expect(config.servers["s"]!.headers).toEqual({ Authorization: "Bearer s3cret", "X-Literal": "Bearer $NOT_A_PLACEHOLDER" });
    expect(config.servers["s"]!.env).toEqual({ A: "" });
    expect(resolveEnvPlaceholders(["$X", 1, { y: "$X" }], env({ X: "x" }))).toEqual(["x", 1, { y: "x" }]);
  });

  it("leaves the file's other sections to their readers", () => {
    expect(parseMcpServersConfig({ skills: { pdf: { enabled: false } }, middlewares: ["a:b"] }).servers).toEqual({});
    expect(parseMcpServersConfig({ mcpServers: null }).servers).toEqual({});
  });

  it("fails with the key path for unknown keys, wrong types and bad URLs", () => {
    expect(failure({ mcpServers: { s: { command: "npx", comand: "x" } } }).message).toMatch(/^extensions_config\.json: mcpServers\.s\.comand: unknown key; expected one of: enabled, type/);
    expect(failure({ mcpServers: { s: { command: "npx", args: "-y" } } }).message).toContain("mcpServers.s.args: expected a list");
    expect(failure({ mcpServers: { s: { type: "http", url: "ftp://x" } } }).message).toContain("mcpServers.s.url: expected an http(s) URL");
    expect(failure({ mcpServers: { s: { type: "websocket", url: "https://x" } } }).message).toContain("mcpServers.s.type");
    expect(failure([]).code).toBe("config_invalid");
  });

  it("checks each enabled server has what its transport needs; a disabled entry may stay incomplete", () => {
    expect(failure({ mcpServers: { s: {} } }).message).toContain("mcpServers.s.command: a stdio server needs a command");
    expect(failure({ mcpServers: { s: { type: "sse" } } }).message).toContain("mcpServers.s.url: a sse server needs a url");
    expect(failure({ mcpServers: { "bad name": { command: "x" } } }).message).toContain("may only use letters, digits");
    const config = parseMcpServersConfig({ mcpServers: { later: { enabled: false }, now: { command: "uvx" } } });
    expect(enabledMcpServers(config).map((s) => s.name)).toEqual(["now"]);
  });

  it("refuses keys this host does not implement, saying what to do instead", () => {
    expect(failure({ mcpServers: { s: { type: "http", url: "https://x", oauth: { token_url: "https://t" } } } }).message).toContain(
      "oauth is not supported by deerflow-edge",
    );
    expect(failure({ mcpServers: { s: { command: "x", task_toolsets: [] } } }).message).toContain("task_toolsets is not supported");
  });

  it("converts timeouts to milliseconds; null lifts the limit; zero is refused", () => {
    const config = parseMcpServersConfig({ mcpServers: { s: { command: "x", tool_call_timeout: 1.5, session_init_timeout: null } } });
    expect(config.servers["s"]!.toolCallTimeoutMs).toBe(1500);
    expect(config.servers["s"]!.sessionInitTimeoutMs).toBeNull();
    expect(failure({ mcpServers: { s: { command: "x", tool_call_timeout: 0 } } }).message).toContain("tool_call_timeout: expected a number of seconds above 0");
  });

  it("clamps routing priority to 0..100 and merges per-tool routing overrides key by key", () => {
    const config = parseMcpServersConfig({
      mcpServers: {
        s: {
          command: "x",
          routing: { mode: "prefer", priority: 500, keywords: ["slack"] },
          tools: { send: { routing: { priority: -3 } }, read: { routing: { mode: "off" } }, dm: { routing: { keywords: ["dm"] } } },
        },
      },
    });
    const server = config.servers["s"]!;
    expect(server.routing).toEqual({ mode: "prefer", priority: 100, keywords: ["slack"] });
    expect(resolveEffectiveMcpRouting(server, "send")).toEqual({ mode: "prefer", priority: 0, keywords: ["slack"] });
    expect(resolveEffectiveMcpRouting(server, "read").mode).toBe("off");
    expect(resolveEffectiveMcpRouting(server, "dm")).toEqual({ mode: "prefer", priority: 100, keywords: ["dm"] });
    expect(resolveEffectiveMcpRouting(server, "other")).toEqual(server.routing);
    expect(resolveEffectiveMcpRouting(undefined, "x")).toEqual({ mode: "off", priority: 0, keywords: [] });
    expect(failure({ mcpServers: { s: { command: "x", routing: { mode: "always" } } } }).message).toContain("mcpServers.s.routing.mode");
  });
});

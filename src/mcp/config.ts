import * as v from "valibot";
import { isHttpUrl } from "../core/url.ts";
import { ConfigError, describeIssue, mapping, type ConfigIssue } from "../config/index.ts";
import type { Env } from "../ports/runtime-ports.ts";
import type { McpRouting, McpTransportKind } from "./metadata.ts";

/*
 * The `mcpServers` section of extensions_config.json, in upstream's public shape so one file serves
 * both hosts. The file's other sections (skills, middlewares) belong to their own readers and are
 * passed over here. Values that are exactly `$NAME` are read from the environment before
 * validation, and an unset variable becomes "" so a literal "$TOKEN" never reaches a server.
 */

export const EXTENSIONS_CONFIG_FILE_NAME = "extensions_config.json";
/** Seconds allowed for bringing a server up (spawn or connect, initialize, tools/list). */
export const DEFAULT_MCP_SESSION_INIT_TIMEOUT = 60;
export const MCP_ROUTING_PRIORITY_MIN = 0;
export const MCP_ROUTING_PRIORITY_MAX = 100;

const TRANSPORT_TYPES = ["stdio", "http", "streamable_http", "sse"] as const;
const SERVER_NAME = /^[A-Za-z0-9_-]+$/;

const positiveSeconds = v.pipe(
  v.number(),
  v.check((n) => Number.isFinite(n) && n > 0, (issue) => `expected a number of seconds above 0, got ${String(issue.input)}`),
);

const integerPriority = v.pipe(
  v.number(),
  v.integer((issue) => `expected a whole number, got ${issue.received}`),
  // Upstream clamps out-of-range priorities rather than failing the whole file.
  v.transform((n) => Math.min(MCP_ROUTING_PRIORITY_MAX, Math.max(MCP_ROUTING_PRIORITY_MIN, n))),
);

function unsupported(key: string, hint: string) {
  return v.custom<never>(() => false, `${key} is not supported by deerflow-edge; ${hint}`);
}

export const McpRoutingConfigSchema = mapping({
  /** prefer: hint the model toward this tool (and auto-promote it when tool_search defers it). */
  mode: v.optional(v.picklist(["off", "prefer"]), "off"),
  /** Higher first; clamped to 0..100. */
  priority: v.optional(integerPriority, 0),
  /** Matched case-insensitively as substrings of the user's latest message. */
  keywords: v.optional(v.array(v.string()), []),
});

export const McpToolOverrideSchema = mapping({
  routing: v.optional(v.partial(McpRoutingConfigSchema.pipe[1])),
});

export const McpServerConfigSchema = mapping({
  enabled: v.optional(v.boolean(), true),
  /** stdio (a local process), http / streamable_http (Streamable HTTP), sse (legacy HTTP+SSE). */
  type: v.optional(v.picklist(TRANSPORT_TYPES)),
  /** The MCP-spec spelling of `type`; `type` wins when both are given. */
  transport: v.optional(v.picklist(TRANSPORT_TYPES)),
  command: v.optional(v.pipe(v.string(), v.minLength(1, "expected a command such as npx or uvx, got \"\""))),
  args: v.optional(v.array(v.string()), []),
  env: v.optional(v.record(v.string(), v.string()), {}),
  url: v.optional(
    v.pipe(v.string(), v.check(isHttpUrl, (issue) => `expected an http(s) URL such as https://mcp.example.com/mcp, got ${JSON.stringify(issue.input)}`)),
  ),
  headers: v.optional(v.record(v.string(), v.string()), {}),
  description: v.optional(v.string(), ""),
  routing: v.optional(McpRoutingConfigSchema),
  /** Per-tool overrides keyed by the tool's name as the server advertises it. */
  tools: v.optional(v.record(v.string(), McpToolOverrideSchema), {}),
  /** Prefix tool names with `<server>_` so two servers' tools cannot collide. */
  tool_name_prefix: v.optional(v.boolean(), true),
  /** Seconds one tool call may take; null: no call-level limit (the run's abort still applies). */
  tool_call_timeout: v.optional(v.nullable(positiveSeconds), null),
  session_init_timeout: v.optional(v.nullable(positiveSeconds), DEFAULT_MCP_SESSION_INIT_TIMEOUT),
  oauth: v.optional(unsupported("oauth", "put a token in an environment variable and send it with headers (\"Authorization\": \"$MCP_TOKEN\")")),
  task_toolsets: v.optional(unsupported("task_toolsets", "remove it; long-running MCP task toolsets need the Python host")),
});

/** The parts of extensions_config.json this module reads; other top-level sections pass through unchecked. */
export const ExtensionsMcpConfigSchema = v.pipe(
  v.custom<Record<string, unknown>>((input) => typeof input === "object" && input !== null && !Array.isArray(input), "expected a JSON object"),
  v.looseObject({
    mcpServers: v.optional(v.nullable(v.record(v.string(), McpServerConfigSchema)), {}),
  }),
);

type RawServer = v.InferOutput<typeof McpServerConfigSchema>;

/** One server, normalized: the transport resolved and checked against the keys it needs. */
export interface McpServerSettings {
  readonly name: string;
  readonly enabled: boolean;
  readonly transport: McpTransportKind;
  readonly command: string | undefined;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly url: string | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly description: string;
  readonly routing: McpRouting;
  readonly toolOverrides: Readonly<Record<string, { readonly routing?: Partial<McpRouting> }>>;
  readonly toolNamePrefix: boolean;
  /** Milliseconds, or null for no call-level limit. */
  readonly toolCallTimeoutMs: number | null;
  /** Milliseconds, or null for no limit. */
  readonly sessionInitTimeoutMs: number | null;
}

export interface McpServersConfig {
  readonly servers: Readonly<Record<string, McpServerSettings>>;
}

export interface ParseMcpConfigOptions {
  /** Resolves `$NAME` values; without it every placeholder reads as unset (""). */
  readonly env?: Env;
  /** Named in error messages; default extensions_config.json. */
  readonly fileName?: string;
}

/** `$NAME` strings (the whole value) read from the environment, recursively; unset means "". */
export function resolveEnvPlaceholders(value: unknown, env: Env | undefined): unknown {
  if (typeof value === "string") return value.startsWith("$") ? (env?.get(value.slice(1)) ?? "") : value;
  if (Array.isArray(value)) return value.map((item) => resolveEnvPlaceholders(item, env));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolveEnvPlaceholders(item, env)]));
  }
  return value;
}

function normalizeTransport(raw: RawServer): McpTransportKind {
  const kind = raw.type ?? raw.transport ?? "stdio";
  return kind === "streamable_http" ? "http" : kind;
}

function crossFieldIssues(name: string, raw: RawServer, transport: McpTransportKind): ConfigIssue[] {
  const at = `mcpServers.${SERVER_NAME.test(name) ? name : JSON.stringify(name)}`;
  const issues: ConfigIssue[] = [];
  if (!SERVER_NAME.test(name)) {
    issues.push({ path: at, message: "a server name may only use letters, digits, \"_\" and \"-\"; it prefixes tool names" });
  }
  // A disabled server is never started, so an incomplete entry may stay in the file.
  if (!raw.enabled) return issues;
  if (transport === "stdio" && raw.command === undefined) {
    issues.push({ path: `${at}.command`, message: "a stdio server needs a command (for example \"npx\"), or set type to \"http\" with a url" });
  }
  if (transport !== "stdio" && raw.url === undefined) {
    issues.push({ path: `${at}.url`, message: `a ${transport} server needs a url` });
  }
  return issues;
}

/**
 * Validates extensions_config.json (already parsed JSON) and returns its MCP servers. Throws a
 * ConfigError naming the key path of every problem, the first in the message.
 */
export function parseMcpServersConfig(input: unknown, options: ParseMcpConfigOptions = {}): McpServersConfig {
  const fileName = options.fileName ?? EXTENSIONS_CONFIG_FILE_NAME;
  const isRecord = typeof input === "object" && input !== null && !Array.isArray(input);
  // Only this section's placeholders are read: the other sections belong to other readers.
  const resolved = isRecord
    ? { ...(input as Record<string, unknown>), mcpServers: resolveEnvPlaceholders((input as Record<string, unknown>)["mcpServers"], options.env) }
    : input;
  const result = v.safeParse(ExtensionsMcpConfigSchema, resolved);
  if (!result.success) {
    throw new ConfigError("config_invalid", fileName, result.issues.map((issue) => describeIssue(issue, ExtensionsMcpConfigSchema, fileName)));
  }
  const servers: Record<string, McpServerSettings> = {};
  const issues: ConfigIssue[] = [];
  for (const [name, raw] of Object.entries(result.output.mcpServers ?? {})) {
    const transport = normalizeTransport(raw);
    issues.push(...crossFieldIssues(name, raw, transport));
    servers[name] = {
      name,
      enabled: raw.enabled,
      transport,
      command: raw.command,
      args: Object.freeze([...raw.args]),
      env: Object.freeze({ ...raw.env }),
      url: raw.url,
      headers: Object.freeze({ ...raw.headers }),
      description: raw.description,
      routing: Object.freeze({
        mode: raw.routing?.mode ?? "off",
        priority: raw.routing?.priority ?? 0,
        keywords: Object.freeze([...(raw.routing?.keywords ?? [])]),
      }),
      toolOverrides: Object.freeze({ ...raw.tools }),
      toolNamePrefix: raw.tool_name_prefix,
      toolCallTimeoutMs: raw.tool_call_timeout === null ? null : Math.round(raw.tool_call_timeout * 1000),
      sessionInitTimeoutMs: raw.session_init_timeout === null ? null : Math.round(raw.session_init_timeout * 1000),
    };
  }
  if (issues.length > 0) throw new ConfigError("config_invalid", fileName, issues);
  return { servers: Object.freeze(servers) };
}

/** The servers to start: enabled ones, in file order. */
export function enabledMcpServers(config: McpServersConfig): McpServerSettings[] {
  return Object.values(config.servers).filter((server) => server.enabled);
}

/**
 * The routing of one tool: the server's routing, with the keys a per-tool override sets replacing
 * the server's (an override that leaves out keywords keeps the server's keywords).
 */
export function resolveEffectiveMcpRouting(server: McpServerSettings | undefined, originalToolName: string): McpRouting {
  const base: McpRouting = server?.routing ?? { mode: "off", priority: 0, keywords: [] };
  const override = server?.toolOverrides[originalToolName]?.routing;
  if (!override) return base;
  return {
    mode: override.mode ?? base.mode,
    priority: override.priority ?? base.priority,
    keywords: override.keywords ?? base.keywords,
  };
}

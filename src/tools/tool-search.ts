import { ToolMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import type { AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";
import { compareCodePoints } from "../extension-api/canonical.ts";
import { sha256HexSync } from "../extension-api/sha256-sync.ts";
import { isMcpTool, mcpToolRouting } from "../mcp/metadata.ts";

/*
 * Deferred tool loading. With tool_search on, MCP tools stay executable but their schemas are
 * withheld from the model (DeferredToolFilter) until `tool_search` returns them or McpRouting
 * promotes them; the model knows them by name only, from <available-deferred-tools>. Promotions
 * live in ThreadState.promoted scoped by the catalog hash, so a promotion recorded against another
 * catalog (a renamed or changed tool) exposes nothing.
 */

export const TOOL_SEARCH_TOOL_NAME = "tool_search";
/** Results of a ranked search; `select:` names its tools and is not capped. */
export const TOOL_SEARCH_MAX_RESULTS = 5;

/** A tool as function-calling providers receive it (LangChain's convert_to_openai_function shape). */
export interface OpenAIFunction {
  readonly name: string;
  readonly description: string;
  readonly parameters: Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// Python-compatible JSON, for a catalog hash equal to the Python host's for the same catalog

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Python's repr of a float: shortest round-trip digits, exponent form below 1e-4 and from 1e16. */
function pythonFloat(n: number): string {
  const [mantissa, exponentText] = Math.abs(n).toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  const exponent = Number(exponentText);
  const sign = n < 0 ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    const fraction = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const expSign = exponent < 0 ? "-" : "+";
    return `${sign}${fraction}e${expSign}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, "0");
  const fraction = digits.slice(exponent + 1);
  return `${sign}${whole}.${fraction === "" ? "0" : fraction}`;
}

/**
 * `json.dumps(value, sort_keys=True, ensure_ascii=False)` as Python writes it: `", "` and `": "`
 * separators, keys in code-point order, non-ASCII raw. Parity limits: JSON cannot tell 1.0 from 1,
 * so a whole-number float below 2^53 is written as an integer, and an integer above 2^53 as a
 * float; other values Python's `default=str` would stringify are written with String().
 */
export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) {
      throw new DeerflowError("invalid_tool_schema", `A tool schema holds ${value}, which JSON cannot represent; fix the MCP server's tool schema.`);
    }
    // Beyond 2^53 a JS number has already lost any integer precision; Python floats are written so.
    return Number.isSafeInteger(value) ? String(value) : pythonFloat(value);
  }
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "string") {
    if (LONE_SURROGATE.test(value)) {
      throw new DeerflowError("invalid_tool_schema", "A tool schema holds a string with a lone UTF-16 surrogate; fix the MCP server's tool schema.");
    }
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((item) => pythonJsonDumps(item)).join(", ")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, item]) => item !== undefined);
    entries.sort(([a], [b]) => compareCodePoints(a, b));
    return `{${entries.map(([key, item]) => `${pythonJsonDumps(key)}: ${pythonJsonDumps(item)}`).join(", ")}}`;
  }
  return JSON.stringify(String(value));
}

// ---------------------------------------------------------------------------------------------
// The catalog

/** LangChain's _rm_titles: drops `title` keys except a property that is itself named "title". */
function removeTitles(schema: Record<string, unknown>, parentKey = ""): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    const isObject = typeof value === "object" && value !== null && !Array.isArray(value);
    if (key === "title") {
      if (isObject && parentKey === "properties") out[key] = removeTitles(value as Record<string, unknown>, key);
      continue;
    }
    out[key] = isObject ? removeTitles(value as Record<string, unknown>, key) : value;
  }
  return out;
}

/**
 * The provider-facing function of a tool, as LangChain's convert_to_openai_function writes it for
 * a JSON-schema tool: the schema's own title and description lifted out (its description used only
 * when the tool has none) and nested titles removed.
 */
export function toOpenAIFunction(tool: Pick<AgentTool, "name" | "description" | "schema">): OpenAIFunction {
  const { title: _title, description: schemaDescription, ...rest } = tool.schema as Record<string, unknown>;
  const fallback = typeof schemaDescription === "string" ? schemaDescription : "";
  return { name: tool.name, description: tool.description || fallback, parameters: removeTitles(rest) };
}

/**
 * SHA-256 over the tools sorted by name as `[{name, schema}]` in Python's json.dumps form, first 16
 * hex digits: equal to the Python host's hash for the same catalog.
 */
export function computeCatalogHash(tools: readonly Pick<AgentTool, "name" | "description" | "schema">[]): string {
  const canon = [...tools]
    .sort((a, b) => compareCodePoints(a.name, b.name))
    .map((tool) => ({ name: tool.name, schema: toOpenAIFunction(tool) }));
  return sha256HexSync(pythonJsonDumps(canon)).slice(0, 16);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");
}

/** The model writes the query, so an invalid pattern degrades to a literal match instead of failing. */
function compileQuery(pattern: string, flags = "i"): RegExp {
  try {
    return new RegExp(pattern, flags);
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    return new RegExp(escapeRegExp(pattern), flags);
  }
}

function searchableText(tool: AgentTool): string {
  return `${tool.name} ${tool.description ?? ""}`;
}

function matchCount(pattern: string, tool: AgentTool): number {
  return searchableText(tool).match(compileQuery(pattern, "gi"))?.length ?? 0;
}

/** The deferred tools of one agent build: names, hash and search. Immutable. */
export class DeferredToolCatalog {
  readonly tools: readonly AgentTool[];
  readonly names: ReadonlySet<string>;
  readonly hash: string;

  constructor(tools: readonly AgentTool[]) {
    this.tools = Object.freeze([...tools]);
    this.names = new Set(this.tools.map((tool) => tool.name));
    this.hash = computeCatalogHash(this.tools);
  }

  /**
   * `select:a,b` returns exactly those tools (catalog order, uncapped); `+req rest` keeps tools whose
   * name contains `req` and ranks them by how often `rest` matches; anything else is a
   * case-insensitive pattern over name and description, name matches first. Ranked modes return at
   * most {@link TOOL_SEARCH_MAX_RESULTS}. A blank query matches nothing.
   */
  search(rawQuery: string): AgentTool[] {
    const query = rawQuery.trim();
    if (query === "") return [];
    if (query.startsWith("select:")) {
      const wanted = new Set(query.slice("select:".length).split(",").map((name) => name.trim()));
      return this.tools.filter((tool) => wanted.has(tool.name));
    }
    if (query.startsWith("+")) {
      const rest = query.slice(1).trim();
      if (rest === "") return [];
      const split = rest.search(/\s/);
      const required = (split === -1 ? rest : rest.slice(0, split)).toLowerCase();
      const ranking = split === -1 ? "" : rest.slice(split).trim();
      const candidates = this.tools.filter((tool) => tool.name.toLowerCase().includes(required));
      if (ranking !== "") {
        const scores = new Map(candidates.map((tool) => [tool, matchCount(ranking, tool)]));
        candidates.sort((a, b) => scores.get(b)! - scores.get(a)!);
      }
      return candidates.slice(0, TOOL_SEARCH_MAX_RESULTS);
    }
    const regex = compileQuery(query);
    const scored: Array<{ tool: AgentTool; score: number }> = [];
    for (const tool of this.tools) {
      if (regex.test(searchableText(tool))) scored.push({ tool, score: regex.test(tool.name) ? 2 : 1 });
    }
    scored.sort((a, b) => b.score - a.score);
    return scored.slice(0, TOOL_SEARCH_MAX_RESULTS).map((entry) => entry.tool);
  }
}

// ---------------------------------------------------------------------------------------------
// The tool

const TOOL_SEARCH_DESCRIPTION = [
  "Fetches the full schemas of deferred tools so they can be called.",
  "Deferred tools are listed by name in <available-deferred-tools>; until their schema is fetched here, calling one fails.",
  "Query forms:",
  '  - "select:name_a,name_b" fetches exactly these tools by name',
  '  - "+slack send" requires "slack" in the tool name and ranks by the remaining terms',
  `  - any other text is a case-insensitive keyword (or pattern) search over names and descriptions, at most ${TOOL_SEARCH_MAX_RESULTS} results`,
].join("\n");

/**
 * `tool_search` over one catalog. Its result is a Command writing `promoted` (this catalog's hash
 * and the matched names) and one ToolMessage named tool_search whose content is the JSON list of
 * the matched functions: the shape SkillToolPolicy inspects and prunes.
 */
export function createToolSearchTool(catalog: DeferredToolCatalog): AgentTool {
  return Object.freeze({
    name: TOOL_SEARCH_TOOL_NAME,
    description: TOOL_SEARCH_DESCRIPTION,
    schema: {
      type: "object",
      properties: { query: { type: "string", description: "Which deferred tools to fetch (see the query forms)." } },
      required: ["query"],
    },
    metadata: Object.freeze({ source: "builtin", deferred_catalog_hash: catalog.hash }),
    async invoke(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput> {
      const query = typeof args["query"] === "string" ? args["query"] : "";
      const matched = catalog.search(query);
      const content =
        matched.length === 0 ? `No tools found matching: ${query}` : JSON.stringify(matched.map((tool) => toOpenAIFunction(tool)), null, 2);
      return new Command({
        update: {
          promoted: { catalog_hash: catalog.hash, names: matched.map((tool) => tool.name) },
          messages: [new ToolMessage({ content, tool_call_id: context.toolCall.id ?? "", name: TOOL_SEARCH_TOOL_NAME })],
        },
      });
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Assembly

/** One routing entry: what McpRouting needs, serialized (no tool objects). */
export interface McpRoutingIndexEntry {
  readonly priority: number;
  readonly keywords: readonly string[];
}
export type McpRoutingIndex = Readonly<Record<string, McpRoutingIndexEntry>>;

export interface DeferredToolSetup {
  /** The agent's tools plus tool_search when something is deferred. */
  readonly tools: readonly AgentTool[];
  /** Empty when nothing is deferred. */
  readonly deferredNames: readonly string[];
  /** Null exactly when nothing is deferred. */
  readonly catalogHash: string | null;
  /** Undefined exactly when nothing is deferred. */
  readonly toolSearch: AgentTool | undefined;
  /** Deferred tools whose routing mode is `prefer` and that carry keywords; empty when none. */
  readonly routingIndex: McpRoutingIndex;
}

export interface AssembleDeferredToolsOptions {
  /** tool_search.enabled; when false nothing is deferred. Default true (the caller decided to defer). */
  readonly enabled?: boolean;
}

function routingPriority(value: unknown): number {
  const n = typeof value === "number" ? value : typeof value === "string" ? Number(value) : Number.NaN;
  return Number.isFinite(n) ? Math.trunc(n) : 0;
}

function routingKeywords(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value.map((item) => String(item).trim()).filter((keyword) => keyword !== "");
}

/** The routing index over the deferred tools of a build (see {@link DeferredToolSetup.routingIndex}). */
export function buildMcpRoutingIndex(tools: readonly AgentTool[], deferredNames: Iterable<string>): McpRoutingIndex {
  const deferred = new Set(deferredNames);
  const index: Record<string, McpRoutingIndexEntry> = {};
  for (const tool of tools) {
    if (!deferred.has(tool.name)) continue;
    const routing = mcpToolRouting(tool);
    if (routing?.["mode"] !== "prefer") continue;
    const keywords = routingKeywords(routing["keywords"]);
    if (keywords.length === 0) continue;
    index[tool.name] = Object.freeze({ priority: routingPriority(routing["priority"]), keywords: Object.freeze(keywords) });
  }
  return Object.freeze(index);
}

/**
 * Defers every MCP tool (`metadata.deerflow_mcp`) among `tools` behind a tool_search over them.
 * With nothing to defer, the tools come back as they are and no tool_search is added.
 */
export function assembleDeferredTools(tools: readonly AgentTool[], options: AssembleDeferredToolsOptions = {}): DeferredToolSetup {
  const empty: DeferredToolSetup = Object.freeze({
    tools: Object.freeze([...tools]),
    deferredNames: Object.freeze([]),
    catalogHash: null,
    toolSearch: undefined,
    routingIndex: Object.freeze({}),
  });
  if (options.enabled === false) return empty;
  const deferred = tools.filter((tool) => isMcpTool(tool));
  if (deferred.length === 0) return empty;
  const catalog = new DeferredToolCatalog(deferred);
  const toolSearch = createToolSearchTool(catalog);
  const deferredNames = Object.freeze([...catalog.names]);
  return Object.freeze({
    tools: Object.freeze([...tools, toolSearch]),
    deferredNames,
    catalogHash: catalog.hash,
    toolSearch,
    routingIndex: buildMcpRoutingIndex(tools, deferredNames),
  });
}

// ---------------------------------------------------------------------------------------------
// Prompt sections

/** `html.escape(quote=False)`: tool names and keywords come from servers and operators, not from us. */
function escapeText(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** `<available-deferred-tools>` with one name per line, sorted; "" when nothing is deferred. */
export function deferredToolsPromptSection(deferredNames: Iterable<string>): string {
  const names = [...deferredNames].sort(compareCodePoints);
  if (names.length === 0) return "";
  return `<available-deferred-tools>\n${names.map(escapeText).join("\n")}\n</available-deferred-tools>`;
}

function keywordList(keywords: readonly string[]): string {
  if (keywords.length === 1) return keywords[0]!;
  return `${keywords.slice(0, -1).join(", ")}, or ${keywords.at(-1)}`;
}

/**
 * `<mcp_routing_hints>` for MCP tools whose routing mode is prefer, highest priority first. A hint
 * for a deferred tool points at tool_search first, since its schema is not bound yet.
 */
export function mcpRoutingHintsPromptSection(tools: readonly AgentTool[], deferredNames: Iterable<string> = []): string {
  const deferred = new Set(deferredNames);
  const hints: Array<{ priority: number; name: string; keywords: string[] }> = [];
  for (const tool of tools) {
    const routing = mcpToolRouting(tool);
    if (routing?.["mode"] !== "prefer") continue;
    const keywords = routingKeywords(routing["keywords"]);
    if (keywords.length === 0) continue;
    hints.push({ priority: routingPriority(routing["priority"]), name: tool.name, keywords: keywords.map(escapeText) });
  }
  if (hints.length === 0) return "";
  hints.sort((a, b) => b.priority - a.priority || compareCodePoints(a.name, b.name));
  const lines = ["<mcp_routing_hints>"];
  for (const hint of hints) {
    lines.push(`When the user's request involves ${keywordList(hint.keywords)}:`);
    lines.push(
      deferred.has(hint.name)
        ? `  use \`${TOOL_SEARCH_TOOL_NAME}\` to fetch \`${escapeText(hint.name)}\`, then prefer that MCP tool.`
        : `  prefer the \`${escapeText(hint.name)}\` tool.`,
    );
  }
  lines.push("</mcp_routing_hints>");
  return lines.join("\n");
}

import type { BaseMessage } from "@langchain/core/messages";
import { contentText } from "../core/content.ts";
import { DeerflowError } from "../core/errors.ts";
import type { AgentMiddleware, AgentState, HookResult } from "../engine/types.ts";
import { compareCodePoints } from "../extension-api/canonical.ts";
import { canonicalHashSync } from "../extension-api/sha256-sync.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import {
  DEFERRED_TOOL_FILTER_NAME,
  ToolSearchConfigSchema,
  clampAutoPromoteTopK,
  promotedNames,
  type ToolSearchConfig,
} from "./deferred-tool-filter.ts";
import { ORIGINAL_USER_CONTENT_KEY, USER_CONTENT_TEXT } from "./input-sanitization.ts";
import { latestRealUserIndex } from "./messages.ts";

/*
 * Operator routing hints ("prefer slack_send when the user mentions Slack") promote the matching
 * deferred MCP tools before the model call, so the model sees their schemas in the same cycle
 * without a tool_search round trip. Only the user's latest real message is matched (a hint or
 * summary the framework injected must not steer routing), and all this writes is the promoted
 * names: it never runs a tool, and DeferredToolFilter still decides what is visible. It must sit
 * before DeferredToolFilter, whose wrapper reads the state this hook wrote.
 */

export const MCP_ROUTING_NAME = "McpRouting";

export const McpRoutingConfigSchema = ToolSearchConfigSchema;
export type McpRoutingConfig = ToolSearchConfig;

/** Serialized routing data only: no tool objects, so the middleware cannot execute anything. */
export interface McpRoutingDeps {
  readonly routingIndex: Readonly<Record<string, { readonly priority?: unknown; readonly keywords?: unknown }>>;
  readonly catalogHash: string | null;
}

interface Route {
  readonly priority: number;
  readonly keywords: readonly string[];
}

/** Case-insensitive matching that, like Python's casefold, also equates ß with ss. */
function fold(text: string): string {
  return text.toUpperCase().toLowerCase();
}

/** Index entries coerced defensively: it may be hand-built, not only assembleDeferredTools' output. */
function normalizeIndex(index: McpRoutingDeps["routingIndex"]): Map<string, Route> {
  const routes = new Map<string, Route>();
  for (const [name, entry] of Object.entries(index ?? {})) {
    if (name === "") continue;
    const rawPriority = typeof entry?.priority === "number" ? entry.priority : Number(entry?.priority ?? 0);
    const priority = Number.isFinite(rawPriority) ? Math.trunc(rawPriority) : 0;
    const keywords = Array.isArray(entry?.keywords)
      ? (entry.keywords as unknown[]).map((keyword) => String(keyword).trim()).filter((keyword) => keyword !== "")
      : [];
    if (keywords.length > 0) routes.set(name, { priority, keywords });
  }
  return routes;
}

/** The text the user typed: `original_user_content` when an outer middleware rewrote the content. */
function userText(message: BaseMessage): string {
  const original = message.additional_kwargs?.[ORIGINAL_USER_CONTENT_KEY];
  return typeof original === "string" ? original : contentText(message.content, USER_CONTENT_TEXT);
}

/** The routed tools the latest real user message asks for, best first: priority descending, then name. */
export function matchRoutedTools(routes: ReadonlyMap<string, Route>, messages: readonly BaseMessage[], topK: number): string[] {
  const index = latestRealUserIndex(messages);
  if (index < 0 || routes.size === 0) return [];
  const text = userText(messages[index]!);
  if (text === "") return [];
  const haystack = fold(text);
  const matched: Array<{ name: string; priority: number }> = [];
  for (const [name, route] of routes) {
    if (route.keywords.some((keyword) => haystack.includes(fold(keyword)))) matched.push({ name, priority: route.priority });
  }
  matched.sort((a, b) => b.priority - a.priority || compareCodePoints(a.name, b.name));
  return matched.slice(0, clampAutoPromoteTopK(topK)).map((entry) => entry.name);
}

export function createMcpRoutingMiddleware(config?: Partial<McpRoutingConfig> | null, deps?: McpRoutingDeps): AgentMiddleware {
  const settings = parseMiddlewareConfig(McpRoutingConfigSchema, config, MCP_ROUTING_NAME);
  const catalogHash = deps?.catalogHash ?? null;
  const routes = settings.enabled && catalogHash ? normalizeIndex(deps?.routingIndex ?? {}) : new Map<string, Route>();
  const topK = settings.auto_promote_top_k;
  const declaredIndex = Object.fromEntries([...routes].sort(([a], [b]) => compareCodePoints(a, b)).map(([name, route]) => [name, route]));

  return {
    name: MCP_ROUTING_NAME,
    beforeModel(state: AgentState): HookResult {
      if (routes.size === 0 || !catalogHash) return undefined;
      const names = matchRoutedTools(routes, state.messages, topK);
      if (names.length === 0) return undefined;
      // The promoted reducer unions names under one hash; writing nothing new would only add a no-op checkpoint write.
      const already = promotedNames(state, catalogHash);
      if (names.every((name) => already.has(name))) return undefined;
      return { promoted: { catalog_hash: catalogHash, names } };
    },
    releasePolicyParameters() {
      return {
        auto_promote_top_k: topK,
        catalog_hash: routes.size > 0 ? catalogHash : null,
        routed_tools: Object.keys(declaredIndex),
        // Keywords are operator text: identified by hash, not copied into the declaration.
        routing_index_hash: canonicalHashSync(declaredIndex),
        match_scope: "latest_real_user_message",
      };
    },
  };
}

/** Fails when McpRouting is installed after DeferredToolFilter: its promotion would come too late for the filter. */
export function assertMcpRoutingBeforeDeferredFilter(middlewares: readonly Pick<AgentMiddleware, "name">[]): void {
  const routing = middlewares.findIndex((mw) => mw.name === MCP_ROUTING_NAME);
  const filter = middlewares.findIndex((mw) => mw.name === DEFERRED_TOOL_FILTER_NAME);
  if (routing !== -1 && filter !== -1 && routing > filter) {
    throw new DeerflowError(
      "middleware_order",
      `${MCP_ROUTING_NAME} must be installed before ${DEFERRED_TOOL_FILTER_NAME} (routing at ${routing}, deferred filter at ${filter}); move it ahead in the chain.`,
    );
  }
}

import { ToolMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { DeerflowError } from "../core/errors.ts";
import type { AgentMiddleware, AgentState, ModelHandler, ModelRequest, ToolCallRequest, ToolHandler } from "../engine/types.ts";
import { compareCodePoints } from "../extension-api/canonical.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";

/*
 * Deferred (MCP) tools stay executable, but their schemas reach the model only once tool_search or
 * McpRouting has promoted them in ThreadState.promoted under this build's catalog hash. A
 * promotion recorded under another hash (a renamed or changed catalog) is ignored, so a stale
 * checkpoint cannot expose a tool that drifted. The deferred set and the hash are fixed at
 * assembly; only the promotions come from state.
 */

export const DEFERRED_TOOL_FILTER_NAME = "DeferredToolFilter";
export const AUTO_PROMOTE_TOP_K_MIN = 1;
export const AUTO_PROMOTE_TOP_K_MAX = 5;
const MISSING_TOOL_CALL_ID = "missing_tool_call_id";

/** How many routed tools McpRouting may promote per model call, kept within 1..5 (clamped, as upstream). */
export function clampAutoPromoteTopK(value: number): number {
  return Math.max(AUTO_PROMOTE_TOP_K_MIN, Math.min(AUTO_PROMOTE_TOP_K_MAX, Math.trunc(value)));
}

/** config.yaml `tool_search`, shared by DeferredToolFilter and McpRouting. */
export const ToolSearchConfigSchema = v.strictObject({
  /** Defer MCP tool schemas behind tool_search. */
  enabled: v.optional(v.boolean(), false),
  /** Routed tools McpRouting promotes per model call; clamped to 1..5. */
  auto_promote_top_k: v.optional(
    v.pipe(v.number(), v.integer((issue) => `expected a whole number, got ${issue.received}`), v.transform(clampAutoPromoteTopK)),
    3,
  ),
});
export interface ToolSearchConfig {
  enabled: boolean;
  auto_promote_top_k: number;
}
type _ToolSearchConfigMatches = Assert<SameType<ToolSearchConfig, v.InferOutput<typeof ToolSearchConfigSchema>>>;

export const DeferredToolFilterConfigSchema = ToolSearchConfigSchema;
export type DeferredToolFilterConfig = ToolSearchConfig;

/** The deferred setup of the build (assembleDeferredTools' result fits). */
export interface DeferredToolFilterDeps {
  readonly deferredNames: Iterable<string>;
  readonly catalogHash: string | null;
}

/** The names promoted for this catalog; a promotion under any other hash counts for nothing. */
export function promotedNames(state: Pick<AgentState, "promoted"> | undefined, catalogHash: string | null): Set<string> {
  const promoted = state?.promoted;
  if (!promoted || catalogHash === null || promoted.catalog_hash !== catalogHash) return new Set();
  return new Set(Array.isArray(promoted.names) ? promoted.names : []);
}

/** What a call to a still-hidden deferred tool gets instead of running. */
export function deferredToolBlockedMessage(toolName: string, toolCallId: string | undefined): ToolMessage {
  return new ToolMessage({
    content: `Error: Tool '${toolName}' is deferred and has not been promoted yet. Call tool_search first to expose and promote this tool's schema, then retry.`,
    tool_call_id: toolCallId || MISSING_TOOL_CALL_ID,
    name: toolName,
    status: "error",
  });
}

export function createDeferredToolFilterMiddleware(
  config?: Partial<DeferredToolFilterConfig> | null,
  deps?: DeferredToolFilterDeps,
): AgentMiddleware {
  const settings = parseMiddlewareConfig(DeferredToolFilterConfigSchema, config, DEFERRED_TOOL_FILTER_NAME);
  const deferred: ReadonlySet<string> = settings.enabled ? new Set(deps?.deferredNames ?? []) : new Set();
  const catalogHash = deps?.catalogHash ?? null;
  if (deferred.size > 0 && !catalogHash) {
    throw new DeerflowError(
      "invalid_middleware_deps",
      `${DEFERRED_TOOL_FILTER_NAME}: deferred tools need their catalog hash; build both with assembleDeferredTools(tools).`,
    );
  }

  const hidden = (state: AgentState | undefined): Set<string> => {
    const promoted = promotedNames(state, catalogHash);
    return new Set([...deferred].filter((name) => !promoted.has(name)));
  };

  return {
    name: DEFERRED_TOOL_FILTER_NAME,
    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      if (deferred.size === 0) return handler(request);
      const hide = hidden(request.state);
      if (hide.size === 0) return handler(request);
      const tools = request.tools.filter((tool) => !hide.has(tool.name));
      return handler(tools.length === request.tools.length ? request : { ...request, tools });
    },
    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler) {
      const name = request.toolCall.name;
      if (deferred.size > 0 && name && hidden(request.state).has(name)) {
        return deferredToolBlockedMessage(name, request.toolCall.id);
      }
      return handler(request);
    },
    releasePolicyParameters() {
      return {
        deferred_names: [...deferred].sort(compareCodePoints),
        catalog_hash: deferred.size > 0 ? catalogHash : null,
        promotion_scope: "graph_state_catalog_hash",
      };
    },
  };
}

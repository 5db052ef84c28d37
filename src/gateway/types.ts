import type { BareGraph, ServedAgent } from "../runtime/served-agent.ts";

/**
 * The seams between the gateway's parts. Everything here is shared by the thread routes, the run
 * routes, the run manager, auth and the embedded client, so each can be built and tested alone.
 */

import { ROUTE_PERMISSIONS } from "../authz/enforcement.ts";
import type { GatewayLimitsConfig } from "../config/gateway.ts";

/** The six route permissions, decided once per request. */
export { ROUTE_PERMISSIONS };
export type RoutePermission = (typeof ROUTE_PERMISSIONS)[number];

export type AuthSource = "auth_disabled" | "api_key" | "session" | "internal" | "embedded";

/** Who is calling, as the auth layer resolved it; stamped on the Hono context as `user`. */
export interface GatewayUser {
  readonly id: string;
  /** `internal` callers act for an owner user and are never admins. */
  readonly systemRole: "admin" | "user" | "internal";
  readonly authSource: AuthSource;
  readonly isInternal: boolean;
  readonly permissions: ReadonlySet<RoutePermission>;
  readonly oauthProvider?: string;
  readonly oauthId?: string;
  /** Copied authorization attributes (groups, tenant ...) that travel into runs and delegations. */
  readonly authzAttributes?: Readonly<Record<string, unknown>>;
}

/** Hono `Variables` every gateway route may read. */
export interface GatewayVariables {
  user: GatewayUser;
  /** `gateway.limits`, stamped by the request-limit middleware (src/gateway/request-limits.ts). */
  limits: GatewayLimitsConfig;
}
export interface GatewayEnv {
  Variables: GatewayVariables;
}

export type { ThreadRecord, ThreadSearchQuery, ThreadStatus, ThreadStore } from "../runtime/thread-types.ts";
import type { ThreadRecord } from "../runtime/thread-types.ts";

/** Builds (or returns a cached) lead agent for one caller; the cache key covers the whole principal. */
export type AgentFactory = (request: AgentRequest) => Promise<ServedAgent>;

/**
 * A gateway's `agentFactory` option: the engine's Agent, or a bare compiled LangGraph graph that
 * the gateway runs on its own checkpointer (the spec keeps a factory returning a bare graph supported).
 */
export type AgentFactoryOption = (request: AgentRequest) => Promise<ServedAgent | BareGraph>;

export interface AgentRequest {
  readonly user: GatewayUser;
  /** The model the run asked for (`context.model_name`), if any. */
  readonly modelName?: string;
  /** The custom agent the run asked for (`context.agent_name`), if any. */
  readonly agentName?: string;
  /** The UI's agent-creation chat (`context.is_bootstrap` with an agent_name): the agent gets setup_agent. */
  readonly bootstrap?: boolean;
  readonly subagentsEnabled?: boolean;
  readonly planMode?: boolean;
}

/**
 * Route authorization, decided once per request: the permission from the caller's set (403
 * `Permission denied: <perm>`), then thread ownership (another owner's thread is a 404, never a
 * 403, so ids cannot be probed). Throws HTTPException; returns the thread row when it exists.
 */
export interface RouteGuard {
  thread(
    c: import("hono").Context<GatewayEnv>,
    permission: RoutePermission,
    threadId: string,
    options?: { readonly requireExisting?: boolean },
  ): Promise<ThreadRecord | undefined>;
  /** Only the permission (routes without a thread: search, stateless runs). */
  permission(c: import("hono").Context<GatewayEnv>, permission: RoutePermission): void;
  /**
   * Deployment-wide settings (skills, the MCP config, custom agents): every user reads them, only
   * an administrator changes them. 403 naming `what` for anyone else, internal callers included.
   */
  administrator(c: import("hono").Context<GatewayEnv>, what: string): void;
}

import { authenticatedUser } from "../auth/context.ts";
import type { Hono } from "hono";
import * as v from "valibot";
import type { LeadConfig } from "../../agents/app-config.ts";
import { httpError, parseRequest } from "../errors.ts";
import { readJsonBody } from "../request-limits.ts";
import { project } from "./threads.ts";
import type { GatewayEnv } from "../types.ts";

/*
 * Assistants are read-only here: one per agent the server can run. The LangGraph API's assistant
 * CRUD and versions are not offered; a run names its agent by assistant id.
 */

export const LEAD_AGENT_ASSISTANT_ID = "lead_agent";

/**
 * Other names a run or a lookup may use for the lead agent. `agent` is the graph id the LangGraph
 * CLI templates, agent-chat-ui and the SDK's examples default to, so those clients work unchanged.
 */
export const ASSISTANT_ID_ALIASES: Readonly<Record<string, string>> = Object.freeze({ agent: LEAD_AGENT_ASSISTANT_ID });

export interface AssistantJson {
  assistant_id: string;
  graph_id: string;
  name: string;
  description: string;
  config: Record<string, unknown>;
  context: Record<string, unknown>;
  metadata: Record<string, unknown>;
  version: number;
  created_at: string;
  updated_at: string;
}

/**
 * The assistants this config offers: the lead agent only. LeadConfig has no custom-agent section
 * yet; when it gets one, each entry becomes an assistant with graph id `lead_agent` here.
 */
export function listAssistants(_config: LeadConfig, createdAt: string): AssistantJson[] {
  return [
    {
      assistant_id: LEAD_AGENT_ASSISTANT_ID,
      graph_id: LEAD_AGENT_ASSISTANT_ID,
      name: LEAD_AGENT_ASSISTANT_ID,
      description: "DeerFlow's lead agent: plans, uses the sandbox and tools, and delegates to subagents.",
      config: {},
      context: {},
      metadata: { created_by: "system" },
      version: 1,
      created_at: createdAt,
      updated_at: createdAt,
    },
  ];
}

/** The assistant id a request names, aliases resolved; undefined when no such assistant exists. */
export function resolveAssistantId(config: LeadConfig, assistantId: string): string | undefined {
  const id = ASSISTANT_ID_ALIASES[assistantId] ?? assistantId;
  return listAssistants(config, "").some((assistant) => assistant.assistant_id === id) ? id : undefined;
}

const AssistantSearchSchema = v.strictObject({
  graph_id: v.nullish(v.string()),
  name: v.nullish(v.string()),
  metadata: v.nullish(v.record(v.string(), v.unknown())),
  limit: v.nullish(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000))),
  offset: v.nullish(v.pipe(v.number(), v.integer(), v.minValue(0))),
  sort_by: v.nullish(v.picklist(["assistant_id", "graph_id", "name", "created_at", "updated_at"])),
  sort_order: v.nullish(v.picklist(["asc", "desc"])),
  select: v.nullish(v.array(v.string())),
});

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export interface AssistantRouteDeps {
  readonly config: LeadConfig;
  /** When the gateway started: the assistants' created_at. */
  readonly createdAt: string;
}

export function registerAssistantRoutes(api: Hono<GatewayEnv>, deps: AssistantRouteDeps): void {
  const assistants = () => listAssistants(deps.config, deps.createdAt);

  function find(assistantId: string): AssistantJson {
    const id = resolveAssistantId(deps.config, assistantId);
    const assistant = id === undefined ? undefined : assistants().find((a) => a.assistant_id === id);
    if (!assistant) {
      const known = assistants().map((a) => a.assistant_id).join(", ");
      throw httpError(404, `Assistant ${assistantId} not found; this server offers: ${known}.`);
    }
    return assistant;
  }

  api.post("/assistants/search", async (c) => {
    authenticatedUser(c);
    const body = parseRequest(AssistantSearchSchema, (await readJsonBody(c)) ?? {});
    const graphId = body.graph_id ? (ASSISTANT_ID_ALIASES[body.graph_id] ?? body.graph_id) : undefined;
    const name = body.name?.toLowerCase();
    let matches = assistants().filter(
      (a) =>
        (graphId === undefined || a.graph_id === graphId) &&
        (name === undefined || a.name.toLowerCase().includes(name)) &&
        Object.entries(body.metadata ?? {}).every(([key, value]) => Object.hasOwn(a.metadata, key) && sameJson(a.metadata[key], value)),
    );
    if (body.sort_by) {
      const key = body.sort_by;
      const direction = body.sort_order === "asc" ? 1 : -1;
      matches = matches.sort((a, b) => direction * (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0));
    }
    const offset = body.offset ?? 0;
    const page = matches.slice(offset, offset + (body.limit ?? 10));
    c.header("X-Pagination-Total", String(matches.length));
    if (offset + page.length < matches.length) c.header("X-Pagination-Next", String(offset + page.length));
    return c.json(page.map((a) => project(a, body.select)));
  });

  api.get("/assistants/:assistant_id", (c) => {
    authenticatedUser(c);
    return c.json(find(c.req.param("assistant_id")));
  });

  api.get("/assistants/:assistant_id/graph", (c) => {
    authenticatedUser(c);
    find(c.req.param("assistant_id"));
    // The middleware chain is assembled per caller; no single static graph is worth drawing.
    return c.json({ nodes: [], edges: [] });
  });

  api.get("/assistants/:assistant_id/schemas", (c) => {
    authenticatedUser(c);
    const assistant = find(c.req.param("assistant_id"));
    return c.json({
      graph_id: assistant.graph_id,
      input_schema: {},
      output_schema: {},
      state_schema: {},
      config_schema: {},
      context_schema: {},
    });
  });
}

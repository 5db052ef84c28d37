import type { Hono } from "hono";
import * as v from "valibot";
import type { LeadConfig } from "../../agents/app-config.ts";
import {
  CUSTOM_AGENT_NAME_MAX_LENGTH,
  normalizeCustomAgentName,
  REASONING_EFFORTS,
  type CustomAgent,
} from "../../agents/custom-agent.ts";
import { availableModelNames } from "../../config/index.ts";
import type { CustomAgentFields, CustomAgentPatch, CustomAgentStore } from "../../runtime/custom-agents.ts";
import { TOOL_GROUP_NAMES } from "../../tools/tool-groups.ts";
import { httpError, jsonObject, parseJsonObjectBody } from "../errors.ts";
import type { GatewayEnv, RouteGuard } from "../types.ts";

/*
 * /api/agents: the deployment's custom agents, as DeerFlow's UI (Agents page, agent chats) reads
 * and writes them. Every signed-in user lists and reads them; only an administrator creates,
 * changes or deletes one. Names follow upstream's rule and are stored lowercased; a run picks an
 * agent with `context.agent_name`.
 */

export interface AgentRouteDeps {
  readonly customAgents: CustomAgentStore;
  readonly guard: RouteGuard;
  readonly config: Pick<LeadConfig, "models" | "default_model">;
}

/** The Agent JSON the UI reads (frontend/src/core/agents/types.ts): the record without its stamps. */
export type AgentJson = Omit<CustomAgent, "created_at" | "updated_at">;

export function agentJson(agent: CustomAgent): AgentJson {
  return {
    name: agent.name,
    description: agent.description,
    model: agent.model,
    tool_groups: agent.tool_groups,
    skills: agent.skills,
    model_settings: agent.model_settings,
    thinking_enabled: agent.thinking_enabled,
    reasoning_effort: agent.reasoning_effort,
    soul: agent.soul,
  };
}

const NAME_RULE = `use 1 to ${CUSTOM_AGENT_NAME_MAX_LENGTH} letters, digits or hyphens (^[A-Za-z0-9-]+$)`;

const NameSchema = v.pipe(
  v.string(),
  v.check((name) => normalizeCustomAgentName(name) !== undefined, (issue) => `${JSON.stringify(issue.input)} is not a valid agent name; ${NAME_RULE}`),
);

const ModelSettingsSchema = jsonObject(
  v.strictObject({
    temperature: v.nullish(v.pipe(v.number(), v.minValue(0, "expected 0 to 2"), v.maxValue(2, "expected 0 to 2"))),
    max_tokens: v.nullish(v.pipe(v.number(), v.integer("expected a whole number"), v.minValue(1, "expected 1 to 200000"), v.maxValue(200_000, "expected 1 to 200000"))),
  }),
);

const ToolGroupsSchema = v.array(
  v.picklist(TOOL_GROUP_NAMES, (issue) => `unknown tool group ${JSON.stringify(issue.input)}; use ${TOOL_GROUP_NAMES.map((g) => JSON.stringify(g)).join(", ")}`),
);

const SkillNamesSchema = v.array(v.pipe(v.string(), v.nonEmpty("expected a skill name")));

const fields = {
  description: v.nullish(v.string()),
  model: v.nullish(v.string()),
  tool_groups: v.nullish(ToolGroupsSchema),
  skills: v.nullish(SkillNamesSchema),
  model_settings: v.nullish(ModelSettingsSchema),
  thinking_enabled: v.nullish(v.boolean()),
  reasoning_effort: v.nullish(v.picklist(REASONING_EFFORTS, `expected one of ${REASONING_EFFORTS.join(", ")}`)),
  soul: v.nullish(v.string()),
};

const AgentCreateSchema = v.strictObject({ name: NameSchema, ...fields });
const AgentUpdateSchema = v.strictObject(fields);

type ParsedSettings = v.InferOutput<typeof ModelSettingsSchema>;

/** Sub-fields left unset or null are dropped: the agent keeps the model entry's values for them. */
function settingsOf(settings: ParsedSettings | null | undefined): CustomAgentFields["model_settings"] {
  if (!settings) return null;
  const out = {
    ...(typeof settings.temperature === "number" ? { temperature: settings.temperature } : {}),
    ...(typeof settings.max_tokens === "number" ? { max_tokens: settings.max_tokens } : {}),
  };
  return Object.keys(out).length === 0 ? null : out;
}

/** A `model` the deployment does not configure would only fail later, on the agent's first run. */
function checkModel(config: AgentRouteDeps["config"], model: string | null | undefined): void {
  if (model === null || model === undefined || model === "") return;
  const known = availableModelNames(config);
  if (!known.includes(model)) {
    throw httpError(422, `Invalid request body: model: unknown model ${JSON.stringify(model)}; use one of ${known.map((n) => JSON.stringify(n)).join(", ")} or null for the default.`);
  }
}

function nameParam(raw: string | undefined): string {
  const name = raw === undefined ? undefined : normalizeCustomAgentName(raw);
  if (name === undefined) {
    throw httpError(422, `Invalid agent name: name: ${JSON.stringify(raw ?? "")} is not a valid agent name; ${NAME_RULE}.`);
  }
  return name;
}

const notFound = (name: string) => httpError(404, `Agent '${name}' not found`);

export function registerAgentRoutes(api: Hono<GatewayEnv>, deps: AgentRouteDeps): void {
  const { customAgents, guard, config } = deps;

  api.get("/agents", async (c) => c.json({ agents: (await customAgents.list()).map(agentJson) }));

  // Before /agents/:name, so "check" is never read as a name.
  api.get("/agents/check", async (c) => {
    const name = nameParam(c.req.query("name"));
    return c.json({ available: (await customAgents.get(name)) === undefined, name });
  });

  api.get("/agents/:name", async (c) => {
    const name = nameParam(c.req.param("name"));
    const agent = await customAgents.get(name);
    if (!agent) throw notFound(name);
    return c.json(agentJson(agent));
  });

  api.post("/agents", async (c) => {
    guard.administrator(c, "custom agents");
    const body = await parseJsonObjectBody(c, AgentCreateSchema);
    checkModel(config, body.model);
    const created = await customAgents.create(body.name, {
      description: body.description ?? "",
      model: body.model || null,
      tool_groups: body.tool_groups ?? null,
      skills: body.skills ?? null,
      model_settings: settingsOf(body.model_settings),
      thinking_enabled: body.thinking_enabled ?? null,
      reasoning_effort: body.reasoning_effort ?? null,
      soul: body.soul ?? "",
    });
    if (!created) throw httpError(409, `Agent '${normalizeCustomAgentName(body.name)}' already exists; pick another name or update it with PUT /api/agents/{name}.`);
    return c.json(agentJson(created), 201);
  });

  api.put("/agents/:name", async (c) => {
    guard.administrator(c, "custom agents");
    const name = nameParam(c.req.param("name"));
    const body = await parseJsonObjectBody(c, AgentUpdateSchema);
    if ("model" in body) checkModel(config, body.model);
    // An absent field is kept. Null clears what can be cleared (model, tool groups, skills,
    // settings, the thinking defaults); a null description or SOUL keeps the current text.
    const patch: CustomAgentPatch = {
      ...(typeof body.description === "string" ? { description: body.description } : {}),
      ...(typeof body.soul === "string" ? { soul: body.soul } : {}),
      ...(Object.hasOwn(body, "model") ? { model: body.model || null } : {}),
      ...(Object.hasOwn(body, "tool_groups") ? { tool_groups: body.tool_groups ?? null } : {}),
      ...(Object.hasOwn(body, "skills") ? { skills: body.skills ?? null } : {}),
      ...(Object.hasOwn(body, "model_settings") ? { model_settings: body.model_settings ?? null } : {}),
      ...(Object.hasOwn(body, "thinking_enabled") ? { thinking_enabled: body.thinking_enabled ?? null } : {}),
      ...(Object.hasOwn(body, "reasoning_effort") ? { reasoning_effort: body.reasoning_effort ?? null } : {}),
    };
    const updated = await customAgents.update(name, patch);
    if (!updated) throw notFound(name);
    return c.json(agentJson(updated));
  });

  api.delete("/agents/:name", async (c) => {
    guard.administrator(c, "custom agents");
    const name = nameParam(c.req.param("name"));
    if (!(await customAgents.delete(name))) throw notFound(name);
    return c.body(null, 204);
  });
}

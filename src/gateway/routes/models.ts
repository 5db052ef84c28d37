import type { Hono } from "hono";
import type { LeadConfig } from "../../agents/app-config.ts";
import { availableModelNames } from "../../config/load.ts";
import { DEMO_MODEL_NAME, type ModelConfig } from "../../config/schema.ts";
import type { GatewayAuthorizer } from "../auth/authorizer.ts";
import { authenticatedUser } from "../auth/context.ts";
import type { GatewayEnv } from "../types.ts";

/*
 * GET /api/models and GET /api/models/:name: what a UI may offer in its model picker. Only
 * display facts leave the server (never base_url, headers or the key's variable). With
 * authorization on, the list is what the provider's filterResources lets the caller see and the
 * single model is what authorize(model, use) lets it use; a failing provider follows fail_closed.
 * `token_usage.enabled` tells DeerFlow's UI whether runs report token usage (the TokenUsage
 * middleware is on), so it shows the counters.
 */

export interface ModelRouteDeps {
  readonly config: Pick<LeadConfig, "models" | "default_model" | "token_usage">;
  readonly authorizer: GatewayAuthorizer;
}

export interface ModelInfo {
  readonly name: string;
  /** The picker's label: the entry's display_name, else its name. */
  readonly display_name: string;
  readonly description?: string;
  readonly provider: ModelConfig["use"];
  readonly model: string;
  readonly is_demo: boolean;
  readonly supports_thinking: boolean;
  readonly supports_vision: boolean;
}

function modelEntry(config: Pick<LeadConfig, "models">, name: string): ModelConfig | undefined {
  const listed = config.models.find((model) => model.name === name);
  if (listed !== undefined) return listed;
  return name === DEMO_MODEL_NAME ? { name: DEMO_MODEL_NAME, use: "demo", base_url: "", timeout_ms: 0 } : undefined;
}

function describe(entry: ModelConfig): ModelInfo {
  const isDemo = entry.use === "demo";
  return {
    name: entry.name,
    display_name: entry.display_name ?? entry.name,
    ...(entry.description === undefined ? {} : { description: entry.description }),
    provider: entry.use,
    model: isDemo ? DEMO_MODEL_NAME : (entry.model ?? ""),
    is_demo: isDemo,
    supports_thinking: entry.supports_thinking === true,
    supports_vision: entry.supports_vision === true,
  };
}

export function registerModelRoutes(app: Hono<GatewayEnv>, deps: ModelRouteDeps): void {
  const { config, authorizer } = deps;

  app.get("/api/models", async (c) => {
    const user = authenticatedUser(c);
    const visible = await authorizer.visibleModels(user, availableModelNames(config));
    // The model a run gets when it names none (the same rule as resolveModelName).
    const preferred = config.default_model ?? config.models[0]?.name ?? DEMO_MODEL_NAME;
    return c.json({
      models: visible.map((name) => describe(modelEntry(config, name)!)),
      default_model: visible.includes(preferred) ? preferred : (visible[0] ?? null),
      // The same switch the lead chain reads (src/agents/lead-agent.ts): on unless disabled.
      token_usage: { enabled: config.token_usage?.enabled !== false },
    });
  });

  app.get("/api/models/:name", async (c) => {
    const user = authenticatedUser(c);
    const name = c.req.param("name");
    const entry = modelEntry(config, name);
    if (entry === undefined) return c.json({ detail: `Model '${name}' not found` }, 404);
    if (!(await authorizer.mayUseModel(user, name))) {
      return c.json({ detail: `Model '${name}' is not available for your role; ask an administrator to grant it.` }, 403);
    }
    return c.json(describe(entry));
  });
}

import type { Hono } from "hono";
import { httpError } from "../errors.ts";
import type { GatewayEnv, RouteGuard } from "../types.ts";

/*
 * Screens DeerFlow's UI always shows, for services this gateway does not run: Settings →
 * Integrations (Lark/Feishu), Settings → Channels and the Scheduled tasks page. Their reads answer
 * the empty or "not available" state in the UI's own shapes, so each screen loads cleanly; their
 * writes answer 501 with a detail that names what is missing. They sit under /api, behind the
 * normal auth layer. `/api/features` (features.ts) already reports all three off.
 */

const GATEWAY_NAME = "deerflow-edge";

function notAvailable(what: string, missing: string): never {
  throw httpError(501, `${what} is not available on this gateway (${GATEWAY_NAME}); ${missing}`);
}

const LARK = "Lark integration";
const LARK_MISSING = "it runs no lark-cli and installs no Lark/Feishu skill pack, so there is nothing to install, configure or authorize.";
const SCHEDULED = "Scheduled tasks";
const SCHEDULED_MISSING = "it runs no scheduler, so tasks cannot be created, changed, paused, resumed, triggered or deleted.";
const CHANNELS = "IM channels";
const CHANNELS_MISSING = "it runs no channel service (Slack, Telegram, Lark...), so providers cannot be connected, configured or disconnected.";

/** The shape of the UI's LarkIntegrationStatus (frontend/src/core/integrations/lark/types.ts). */
export interface LarkIntegrationStatusJson {
  readonly installed: boolean;
  readonly version: string;
  readonly manifest_version: string | null;
  readonly latest_available_version: string | null;
  readonly runtime_version_mismatch: boolean;
  readonly app_configured: boolean;
  readonly app_id: string | null;
  readonly app_brand: string | null;
  readonly skills_expected: number;
  readonly skills_installed: number;
  readonly installed_skills: readonly string[];
  readonly enabled_skills: readonly string[];
  readonly install_path: string;
  readonly cli: { readonly available: boolean; readonly path: string | null; readonly version: string | null; readonly error: string | null };
  readonly auth: { readonly status: "unavailable"; readonly message: string | null; readonly user: string | null; readonly verified: boolean };
  readonly sandbox_runtime_mode: "none";
  readonly sandbox_runtime_ready: boolean;
  readonly sandbox_runtime_detail: string | null;
}

/**
 * Nothing installed, no CLI, auth unavailable, no sandbox runtime (mode "none" hides that row):
 * the Integrations tab shows "not installed" and the CLI's error as the reason, with no error banner.
 */
export const LARK_NOT_AVAILABLE: LarkIntegrationStatusJson = Object.freeze<LarkIntegrationStatusJson>({
  installed: false,
  version: "",
  manifest_version: null,
  latest_available_version: null,
  runtime_version_mismatch: false,
  app_configured: false,
  app_id: null,
  app_brand: null,
  skills_expected: 0,
  skills_installed: 0,
  installed_skills: [],
  enabled_skills: [],
  install_path: "",
  cli: { available: false, path: null, version: null, error: `Not available on this gateway (${GATEWAY_NAME})` },
  auth: { status: "unavailable", message: `${LARK} is not available on this gateway (${GATEWAY_NAME})`, user: null, verified: false },
  sandbox_runtime_mode: "none",
  sandbox_runtime_ready: false,
  sandbox_runtime_detail: null,
});

export interface UnsupportedRouteDeps {
  readonly guard: RouteGuard;
}

export function registerUnsupportedRoutes(api: Hono<GatewayEnv>, deps: UnsupportedRouteDeps): void {
  const { guard } = deps;

  // Settings → Integrations (upstream routers/integrations.py).
  api.get("/integrations/lark/status", (c) => c.json(LARK_NOT_AVAILABLE));
  for (const path of ["install", "config/start", "config/complete", "config/credentials", "auth/start", "auth/complete"]) {
    api.post(`/integrations/lark/${path}`, () => notAvailable(LARK, LARK_MISSING));
  }

  // The Scheduled tasks page (upstream routers/scheduled_tasks.py): there are never any tasks.
  api.get("/scheduled-tasks", (c) => {
    guard.permission(c, "threads:read");
    return c.json([]);
  });
  api.get("/threads/:thread_id/scheduled-tasks", async (c) => {
    await guard.thread(c, "threads:read", c.req.param("thread_id"), { requireExisting: true });
    return c.json([]);
  });
  api.get("/scheduled-tasks/:task_id/runs", (c) => {
    guard.permission(c, "threads:read");
    return c.json([]);
  });
  api.get("/scheduled-tasks/:task_id", (c) => {
    guard.permission(c, "threads:read");
    throw httpError(404, `Scheduled task ${JSON.stringify(c.req.param("task_id").slice(0, 80))} not found: no such scheduled task (this gateway runs no scheduler)`);
  });
  const scheduledWrite = (): never => notAvailable(SCHEDULED, SCHEDULED_MISSING);
  api.post("/scheduled-tasks", scheduledWrite);
  api.patch("/scheduled-tasks/:task_id", scheduledWrite);
  api.delete("/scheduled-tasks/:task_id", scheduledWrite);
  for (const action of ["pause", "resume", "trigger"]) api.post(`/scheduled-tasks/:task_id/${action}`, scheduledWrite);

  // Settings → Channels writes (upstream routers/channel_connections.py); the lists are in features.ts.
  const channelsWrite = (): never => notAvailable(CHANNELS, CHANNELS_MISSING);
  api.post("/channels/:provider/connect", channelsWrite);
  api.post("/channels/:provider/runtime-config", channelsWrite);
  api.delete("/channels/:provider/runtime-config", channelsWrite);
  api.delete("/channels/connections/:connection_id", channelsWrite);
}

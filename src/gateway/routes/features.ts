import type { Hono } from "hono";
import type { GatewayEnv } from "../types.ts";

/*
 * What DeerFlow's UI asks before it shows optional screens. `/api/features` carries the keys its
 * FeaturesResponse reads (agents_api, browser_control, mcp_tasks): the custom-agent routes exist
 * here, a live browser and durable MCP tasks do not, so the UI hides those instead of calling
 * them. channels, integrations and scheduled_tasks are off too; this UI build does not read them
 * (it learns about channels from `/api/channels/providers`, answered below with `enabled: false`
 * and no providers, which hides the channels screens and stops the sidebar's polling). The rest
 * of those screens' routes (Lark status, scheduled tasks, channel writes) are in unsupported.ts.
 */

export interface GatewayFeatures {
  readonly agents_api: { readonly enabled: boolean };
  readonly browser_control: { readonly enabled: boolean };
  readonly mcp_tasks: { readonly enabled: boolean };
  readonly channels: { readonly enabled: boolean };
  readonly integrations: { readonly enabled: boolean };
  readonly scheduled_tasks: { readonly enabled: boolean };
}

export const GATEWAY_FEATURES: GatewayFeatures = Object.freeze({
  agents_api: { enabled: true },
  browser_control: { enabled: false },
  mcp_tasks: { enabled: false },
  channels: { enabled: false },
  integrations: { enabled: false },
  scheduled_tasks: { enabled: false },
});

export function registerFeatureRoutes(api: Hono<GatewayEnv>): void {
  api.get("/features", (c) => c.json(GATEWAY_FEATURES));
  api.get("/channels/providers", (c) => c.json({ enabled: false, providers: [] }));
  api.get("/channels/connections", (c) => c.json({ connections: [] }));
}

import type { Hono } from "hono";
import type { GatewayEnv } from "../types.ts";

/** The package version; test/portable/gateway/app-server.test.ts keeps it equal to package.json's. */
export const GATEWAY_VERSION = "0.1.0";
export const GATEWAY_SERVICE_NAME = "deerflow-edge";

export interface SystemRouteDeps {
  readonly version?: string;
}

/** `GET /info` and `GET /ok`, under /api: what the LangGraph SDK and Studio probe first. */
export function registerSystemRoutes(api: Hono<GatewayEnv>, deps: SystemRouteDeps = {}): void {
  api.get("/info", (c) =>
    c.json({
      version: deps.version ?? GATEWAY_VERSION,
      context: "js",
      flags: { assistants: true, crons: false, langsmith: false, langsmith_tracing_replicas: false },
      host: { kind: GATEWAY_SERVICE_NAME },
    }),
  );
  api.get("/ok", (c) => c.json({ ok: true }));
}

/** `GET /health` at the root, for load balancers and `deerflow-edge serve`'s readiness check. */
export function registerHealthRoute(app: Hono<GatewayEnv>): void {
  app.get("/health", (c) => c.json({ status: "healthy", service: GATEWAY_SERVICE_NAME }));
}

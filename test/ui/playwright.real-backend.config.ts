import { defineConfig, devices } from "@playwright/test";

/*
 * Upstream's frontend/playwright.real-backend.config.ts with only what runs the specs changed:
 * the two server-start commands (our gateway with test/ui/gateway-auth-disabled.yaml instead of
 * upstream's Python replay gateway; `next start` of the build scripts/ui-e2e.sh made instead of
 * `pnpm build && pnpm start`), the gateway port (8001: the UI's own app/api/memory handlers reach
 * the gateway there), Debian's Chromium instead of a downloaded one, and where reports go. The
 * specs, tests/e2e-real-backend/, are upstream's, unchanged. scripts/ui-e2e.sh copies this file
 * into the UI's folder (so @playwright/test resolves to the UI's own copy) and runs it there.
 */

const frontendPort = process.env.E2E_FRONTEND_PORT ?? "3000";
const gatewayPort = process.env.E2E_GATEWAY_PORT ?? "8001";
const frontendUrl = `http://localhost:${frontendPort}`;
const gatewayUrl = `http://localhost:${gatewayPort}`;
const gatewayInternalUrl = `http://127.0.0.1:${gatewayPort}`;
const repo = process.env.DEERFLOW_EDGE_ROOT;
if (!repo) throw new Error("DEERFLOW_EDGE_ROOT names the deerflow-edge checkout (scripts/ui-e2e.sh sets it)");
const reports = process.env.UI_E2E_REPORTS ?? `${repo}/.reports/ui-e2e`;
const gatewayWorkDir = process.env.UI_E2E_GATEWAY_DIR ?? `${reports}/gateway-auth-disabled`;

export default defineConfig({
  testDir: "./tests/e2e-real-backend",
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  retries: process.env.CI ? 1 : 0,
  workers: 1,
  reporter: [["list"], ["json", { outputFile: `${reports}/real-backend.json` }]],
  outputDir: `${reports}/real-backend`,
  timeout: 90_000,

  use: {
    baseURL: frontendUrl,
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    launchOptions: { executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium" },
  },

  projects: [{ name: "chromium", use: { ...devices["Desktop Chrome"] } }],

  webServer: [
    {
      command: `mkdir -p "${gatewayWorkDir}" && cd "${gatewayWorkDir}" && exec node "${repo}/bin/deerflow-edge.mjs" serve --port ${gatewayPort} --config "${repo}/test/ui/gateway-auth-disabled.yaml"`,
      url: `${gatewayUrl}/health`,
      reuseExistingServer: !process.env.CI,
      timeout: 180_000,
      stdout: "pipe",
      stderr: "pipe",
    },
    {
      command: "exec ./node_modules/.bin/next start",
      url: frontendUrl,
      reuseExistingServer: !process.env.CI,
      timeout: 240_000,
      env: {
        PORT: frontendPort,
        SKIP_ENV_VALIDATION: "1",
        DEER_FLOW_AUTH_DISABLED: "1",
        BETTER_AUTH_SECRET: "local-dev-secret",
        DEER_FLOW_INTERNAL_GATEWAY_BASE_URL: gatewayInternalUrl,
      },
    },
  ],
});

import { defineConfig, devices } from "@playwright/test";

/*
 * Our own browser journeys (test/ui/journeys.spec.ts) through DeerFlow's real UI against our
 * gateway with session auth ON (test/ui/gateway-session.yaml; no DEER_FLOW_AUTH_DISABLED on the
 * UI's server), the demo model answering. scripts/ui-e2e.sh copies this file into the UI's folder
 * (so @playwright/test is the UI's own copy) and the spec into tests/deerflow-edge/.
 */

const frontendPort = process.env.E2E_FRONTEND_PORT ?? "3000";
const gatewayPort = process.env.E2E_GATEWAY_PORT ?? "8001";
const frontendUrl = `http://localhost:${frontendPort}`;
const gatewayInternalUrl = `http://127.0.0.1:${gatewayPort}`;
const repo = process.env.DEERFLOW_EDGE_ROOT;
if (!repo) throw new Error("DEERFLOW_EDGE_ROOT names the deerflow-edge checkout (scripts/ui-e2e.sh sets it)");
const reports = process.env.UI_E2E_REPORTS ?? `${repo}/.reports/ui-e2e`;
const gatewayWorkDir = process.env.UI_E2E_GATEWAY_DIR ?? `${reports}/gateway-session`;

export default defineConfig({
  testDir: "./tests/deerflow-edge",
  // The journeys share one deployment (its first administrator, its agents): one after another.
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  retries: 0,
  workers: 1,
  reporter: [["list"], ["json", { outputFile: `${reports}/journeys.json` }]],
  outputDir: `${reports}/journeys`,
  timeout: 120_000,
  expect: { timeout: 15_000 },

  use: {
    baseURL: frontendUrl,
    locale: "en-US",
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    launchOptions: { executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium" },
  },

  projects: [{ name: "chromium", use: { ...devices["Desktop Chrome"] } }],

  webServer: [
    {
      // A fresh folder holding a copy of the config and the fixture skills: what the journeys write stays there.
      command:
        `mkdir -p "${gatewayWorkDir}" && cp "${repo}/test/ui/gateway-session.yaml" "${gatewayWorkDir}/config.yaml" && cp -r "${repo}/test/ui/skills" "${gatewayWorkDir}/" && ` +
        `mkdir -p "${gatewayWorkDir}/fixtures" && cp "${repo}"/test/fixtures/replay/setup_agent.*.json "${gatewayWorkDir}/fixtures/" && ` +
        `cd "${gatewayWorkDir}" && exec node "${repo}/bin/deerflow-edge.mjs" serve --port ${gatewayPort} --config config.yaml`,
      url: `${gatewayInternalUrl}/health`,
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
        DEER_FLOW_INTERNAL_GATEWAY_BASE_URL: gatewayInternalUrl,
        DEER_FLOW_TRUSTED_ORIGINS: frontendUrl,
      },
    },
  ],
});

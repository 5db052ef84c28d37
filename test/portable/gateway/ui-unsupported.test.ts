import { describe, expect, it } from "vitest";
import { acceptanceGateways, call, type SendOptions } from "../../fixtures/plugins/gateway-harness.ts";
import { auth, admin, user, other, withBody, ENV } from "./ui-callers.ts";

/*
 * The screens DeerFlow's UI always shows for services this gateway does not run (Settings →
 * Integrations, Settings → Channels, the Scheduled tasks page), through a real gateway with
 * api_key auth: their reads load the empty / "not available" state in the UI's shapes, their
 * writes answer 501 naming what is missing, and all of them sit behind auth.
 */


const gatewayWith = acceptanceGateways(() => ({ env: ENV }));

async function unsupportedGateway() {
  const { gateway } = await gatewayWith({ gateway: { auth } });
  return gateway;
}

type Method = "GET" | "POST" | "PATCH" | "DELETE";

describe("Settings → Integrations (Lark)", () => {
  it("the status is the not-installed, not-available state in the UI's LarkIntegrationStatus shape", async () => {
    const gateway = await unsupportedGateway();
    const status = await call(gateway, "GET", "/api/integrations/lark/status", user);
    expect(status.status).toBe(200);
    expect(status.body).toEqual({
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
      cli: { available: false, path: null, version: null, error: "Not available on this gateway (deerflow-edge)" },
      auth: { status: "unavailable", message: "Lark integration is not available on this gateway (deerflow-edge)", user: null, verified: false },
      // "none" hides the sandbox-runtime row.
      sandbox_runtime_mode: "none",
      sandbox_runtime_ready: false,
      sandbox_runtime_detail: null,
    });
  });

  it("install, config and auth flows answer 501 naming the missing lark-cli, for admins too", async () => {
    const gateway = await unsupportedGateway();
    for (const path of ["install", "config/start", "config/complete", "config/credentials", "auth/start", "auth/complete"]) {
      const answered = await call(gateway, "POST", `/api/integrations/lark/${path}`, withBody(admin, { brand: "feishu" }));
      expect(answered.status, path).toBe(501);
      expect(answered.body.detail, path).toMatch(/^Lark integration is not available on this gateway \(deerflow-edge\); it runs no lark-cli/);
    }
  });
});

describe("the Scheduled tasks page", () => {
  it("lists no tasks, no thread tasks and no runs; a task id is 404", async () => {
    const gateway = await unsupportedGateway();
    expect((await call(gateway, "POST", "/api/threads", withBody(user, { thread_id: "t-sched" }))).status).toBe(200);
    expect(await call(gateway, "GET", "/api/scheduled-tasks", user)).toMatchObject({ status: 200, body: [] });
    expect(await call(gateway, "GET", "/api/threads/t-sched/scheduled-tasks", user)).toMatchObject({ status: 200, body: [] });
    expect(await call(gateway, "GET", "/api/scheduled-tasks/task-1/runs", user)).toMatchObject({ status: 200, body: [] });
    const one = await call(gateway, "GET", "/api/scheduled-tasks/task-1", user);
    expect(one.status).toBe(404);
    expect(one.body.detail).toContain("no such scheduled task");
  });

  it("a thread's task list follows thread ownership: another user's or a missing thread is 404", async () => {
    const gateway = await unsupportedGateway();
    expect((await call(gateway, "POST", "/api/threads", withBody(user, { thread_id: "t-mine" }))).status).toBe(200);
    expect((await call(gateway, "GET", "/api/threads/t-mine/scheduled-tasks", user)).status).toBe(200);
    expect((await call(gateway, "GET", "/api/threads/t-mine/scheduled-tasks", other)).status).toBe(404);
    expect((await call(gateway, "GET", "/api/threads/t-none/scheduled-tasks", user)).status).toBe(404);
  });

  it("create, update, pause, resume, trigger and delete answer 501 naming the missing scheduler", async () => {
    const gateway = await unsupportedGateway();
    const payload = { title: "Daily", prompt: "Summarise", schedule_type: "cron", schedule_spec: { cron: "0 9 * * *" }, timezone: "UTC" };
    const writes: Array<[Method, string]> = [
      ["POST", "/api/scheduled-tasks"],
      ["PATCH", "/api/scheduled-tasks/task-1"],
      ["POST", "/api/scheduled-tasks/task-1/pause"],
      ["POST", "/api/scheduled-tasks/task-1/resume"],
      ["POST", "/api/scheduled-tasks/task-1/trigger"],
      ["DELETE", "/api/scheduled-tasks/task-1"],
    ];
    for (const [method, path] of writes) {
      const answered = await call(gateway, method, path, withBody(user, payload));
      expect(answered.status, `${method} ${path}`).toBe(501);
      expect(answered.body.detail, `${method} ${path}`).toMatch(/^Scheduled tasks is not available on this gateway \(deerflow-edge\); it runs no scheduler/);
    }
  });
});

describe("Settings → Channels writes", () => {
  it("connect, runtime config and disconnect answer 501 naming the missing channel service", async () => {
    const gateway = await unsupportedGateway();
    const writes: Array<[Method, string]> = [
      ["POST", "/api/channels/slack/connect"],
      ["POST", "/api/channels/slack/runtime-config"],
      ["DELETE", "/api/channels/slack/runtime-config"],
      ["DELETE", "/api/channels/connections/conn-1"],
    ];
    for (const [method, path] of writes) {
      const answered = await call(gateway, method, path, withBody(admin, { values: { bot_token: "x" } }));
      expect(answered.status, `${method} ${path}`).toBe(501);
      expect(answered.body.detail, `${method} ${path}`).toMatch(/^IM channels is not available on this gateway \(deerflow-edge\); it runs no channel service/);
    }
    // The lists the tab loads still answer empty.
    expect(await call(gateway, "GET", "/api/channels/connections", user)).toMatchObject({ status: 200, body: { connections: [] } });
  });
});

describe("behind auth", () => {
  it("every one of these routes is 401 without valid credentials", async () => {
    const gateway = await unsupportedGateway();
    const routes: Array<[Method, string]> = [
      ["GET", "/api/integrations/lark/status"],
      ["POST", "/api/integrations/lark/install"],
      ["GET", "/api/scheduled-tasks"],
      ["GET", "/api/scheduled-tasks/task-1"],
      ["GET", "/api/scheduled-tasks/task-1/runs"],
      ["GET", "/api/threads/t-x/scheduled-tasks"],
      ["POST", "/api/scheduled-tasks"],
      ["POST", "/api/channels/slack/connect"],
      ["DELETE", "/api/channels/connections/conn-1"],
    ];
    // A browser with no session: a write carries the CSRF pair the UI sends, so auth itself answers.
    const signedOut: SendOptions = { headers: { cookie: "csrf_token=tok-1", "X-CSRF-Token": "tok-1" } };
    for (const [method, path] of routes) {
      const answered = await call(gateway, method, path, method === "GET" ? {} : signedOut);
      expect(answered.status, `${method} ${path}`).toBe(401);
    }
    // Without the CSRF pair a write never reaches its route either.
    expect((await call(gateway, "POST", "/api/scheduled-tasks")).status).toBe(403);
  });
});

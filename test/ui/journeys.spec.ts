import { appendFileSync, mkdirSync } from "node:fs";
import { expect, test as base, type Page, type Response } from "@playwright/test";

/*
 * What a person does with DeerFlow's web UI served against our gateway, session auth on
 * (test/ui/gateway-session.yaml), the built-in demo model answering. Run by scripts/ui-e2e.sh
 * through test/ui/playwright.config.ts; the journeys share one deployment and run in order.
 *
 * Throughout, the browser must see no 404 and no uncaught error: every test collects the page's
 * console errors, uncaught exceptions and 404 responses and fails listing them. Every /api
 * response the browser saw is appended to api-calls.jsonl (the script counts them).
 */

const reports = process.env.UI_E2E_REPORTS ?? "test-results";
mkdirSync(reports, { recursive: true });
const ADMIN = { email: "admin@example.com", password: "correct-horse-battery-9" };
const DEMO_SIGNATURE = "built-in demo model";
const HISTORY_ERROR = "Failed to load thread history";

const apiPath = (url: string): string | null => {
  const { pathname } = new URL(url);
  return pathname.startsWith("/api/") ? pathname : null;
};

/** The problems the browser reported during one test. */
interface BrowserWatch {
  readonly problems: string[];
}

/**
 * 404s the UI asks for knowingly: after deleting a thread through the LangGraph API it deletes the
 * thread's local data with DELETE /api/threads/{id} and treats 404 ("already gone") as success, as
 * upstream's gateway answers it too (core/threads/hooks.ts deleteLocalThreadData).
 */
const EXPECTED_404 = [/^DELETE \/api\/threads\/[^/]+$/];

const test = base.extend<{ browserWatch: BrowserWatch }>({
  browserWatch: [
    async ({ page }, use, testInfo) => {
      const problems: string[] = [];
      // Context for a failure, not a failure: requests a navigation cut off.
      const failedRequests: string[] = [];
      page.on("requestfailed", (request) => apiPath(request.url()) !== null && failedRequests.push(`${request.method()} ${new URL(request.url()).pathname}: ${request.failure()?.errorText ?? "failed"}`));
      page.on("console", (message) => {
        if (message.type() !== "error") return;
        // The browser's own line for a 404 repeats a response listed below, with less detail.
        if (message.text().includes("status of 404")) return;
        // A resource from another host (the About page's badges) fails where CI has no internet.
        const source = message.location().url;
        if (message.text().startsWith("Failed to load resource") && source !== "" && !/^https?:\/\/(localhost|127\.0\.0\.1)[:/]/.test(source)) return;
        problems.push(`console error: ${message.text().slice(0, 400)}`);
      });
      page.on("pageerror", (error) => problems.push(`uncaught error: ${error.message.slice(0, 400)}`));
      page.on("response", (response) => {
        const path = apiPath(response.url());
        const method = response.request().method();
        if (path !== null) {
          appendFileSync(`${reports}/api-calls.jsonl`, `${JSON.stringify({ test: testInfo.title, method, path, status: response.status() })}\n`);
        }
        const call = `${method} ${new URL(response.url()).pathname}`;
        if (response.status() === 404 && !EXPECTED_404.some((pattern) => pattern.test(call))) problems.push(`404 ${call}`);
      });
      await use({ problems });
      expect(problems, `the browser saw 404s or errors${failedRequests.length > 0 ? ` (requests cut off: ${failedRequests.join("; ")})` : ""}`).toEqual([]);
    },
    { auto: true },
  ],
});

function metric(name: string, value: number, extra: Record<string, unknown> = {}): void {
  const line = JSON.stringify({ metric: name, value, unit: "ms", ...extra });
  console.log(line);
  appendFileSync(`${reports}/metrics.jsonl`, `${line}\n`);
}

/** Signs the page's browser context in as the administrator (the UI's own form-encoded login). */
async function signIn(page: Page): Promise<void> {
  const response = await page.request.post("/api/v1/auth/login/local", {
    form: { username: ADMIN.email, password: ADMIN.password },
  });
  expect(response.status(), await response.text()).toBe(200);
}

const composer = (page: Page) => page.getByPlaceholder(/how can i assist you/i);
/** The conversation itself, without the sidebar's and the header's copies of the title. */
const messages = (page: Page) => page.getByTestId("main-message-list");

/** Waits until the run streamed by `stream` has ended (its stream closed), not just until its text showed. */
async function runEnded(stream: Promise<Response>): Promise<void> {
  const response = await stream;
  expect(response.status()).toBe(200);
  expect(await response.finished()).toBeNull();
}

/** Sends `text` from the composer and waits for the demo model's answer to it and the run's end. */
async function send(page: Page, text: string): Promise<void> {
  const box = composer(page);
  await expect(box).toBeEditable();
  await box.fill(text);
  const stream = waitForApi(page, "POST", /\/runs\/stream$/);
  await box.press("Enter");
  await expect(messages(page).getByText(`Here is what I did for "${text}"`)).toBeVisible({ timeout: 30_000 });
  await runEnded(stream);
}

/** Opens a new chat and has one exchange; returns the thread's URL. */
async function newChat(page: Page, text: string): Promise<string> {
  await page.goto("/workspace/chats/new");
  await send(page, text);
  await expect(page).toHaveURL(/\/workspace\/chats\/[0-9a-f-]{36}/);
  return page.url();
}

const waitForApi = (page: Page, method: string, pattern: RegExp): Promise<Response> =>
  page.waitForResponse((response) => response.request().method() === method && pattern.test(new URL(response.url()).pathname));

test("first start: the setup page creates the administrator, who logs out and back in", async ({ page }) => {
  await page.goto("/workspace");
  await expect(page).toHaveURL(/\/setup/);
  await page.locator("#email").fill(ADMIN.email);
  await page.locator("#password").fill(ADMIN.password);
  await page.locator("#confirmPassword").fill(ADMIN.password);
  await page.getByRole("button", { name: "Create Admin Account" }).click();
  await expect(page).toHaveURL(/\/workspace\/chats\/new/);
  await expect(composer(page)).toBeVisible();

  await openSettings(page, "Account");
  await page.getByRole("dialog").getByRole("button", { name: "Sign Out" }).click();
  await expect(page).not.toHaveURL(/\/workspace/);
  // Signed out, the workspace sends the browser to the login page.
  await page.goto("/workspace");
  await expect(page).toHaveURL(/\/login/);

  await page.locator("#email").fill(ADMIN.email);
  await page.locator("#password").fill(ADMIN.password);
  await page.getByRole("button", { name: "Sign In" }).click();
  await expect(page).toHaveURL(/\/workspace/);
  await expect(composer(page)).toBeVisible();
});

test("chat: the reply streams in, the thread reloads without an error, and a second turn follows", async ({ page }) => {
  await signIn(page);
  const url = await newChat(page, "Write a note about Deno deployments");
  await expect(messages(page).getByText(DEMO_SIGNATURE)).toHaveCount(1);

  // Opening the thread afresh: history loads and the composer is usable at once.
  const history = waitForApi(page, "GET", /\/messages\/page$/);
  const started = Date.now();
  await page.goto(url);
  await expect(composer(page)).toBeEditable({ timeout: 30_000 });
  const composerEnabledMs = Date.now() - started;
  metric("composer_enabled_ms", composerEnabledMs, { journey: "reload a thread" });
  const historyResponse = await history;
  expect(historyResponse.status()).toBe(200);
  // The gateway's share of that time: the history call, from its request to its last byte.
  const timing = historyResponse.request().timing();
  metric("messages_page_ms", Math.round(timing.responseEnd - Math.max(0, timing.requestStart)), { journey: "reload a thread" });
  // When the page could first act: the document's DOMContentLoaded, from the navigation's start.
  const domReady = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming | undefined;
    return nav ? Math.round(nav.domContentLoadedEventEnd) : -1;
  });
  metric("thread_page_dom_ready_ms", domReady, { journey: "reload a thread" });
  await expect(messages(page).getByText("Write a note about Deno deployments", { exact: true })).toBeVisible();
  await expect(messages(page).getByText(DEMO_SIGNATURE)).toHaveCount(1);
  await expect(page.getByText(HISTORY_ERROR)).toHaveCount(0);
  // Generous: the goal is under a second, today's gateway (before the history route) took about 6 s.
  expect(composerEnabledMs).toBeLessThan(5_000);

  await send(page, "Now list the key terms of those notes");
  await expect(messages(page).getByText(DEMO_SIGNATURE)).toHaveCount(2);
  await expect(page.getByText(HISTORY_ERROR)).toHaveCount(0);
});

test("message actions: regenerate an answer, edit a question, rate an answer", async ({ page }) => {
  await signIn(page);
  const url = await newChat(page, "Write a note about Bun");
  // The actions are taken on the thread opened afresh. Right after a new chat's first send, this
  // UI snapshot can keep its optimistic copy of the user's message beside the server's (seen in
  // about 1 run in 10 with one core kept busy): when the run's first values event lands in the
  // same React commit as the new thread's id, its thread-id effect records the server's message
  // as already counted, so the optimistic copy is never cleared (core/threads/hooks.ts,
  // prevHumanMsgCountRef). That is the UI's race, not the gateway's answer; a reload drops it.
  await page.goto(url);
  await expect(messages(page).getByText("Write a note about Bun", { exact: true })).toHaveCount(1);

  const assistant = page.locator("[data-assistant-turn]").last();
  await assistant.hover();
  const prepared = waitForApi(page, "POST", /\/runs\/regenerate\/prepare$/);
  const rerun = waitForApi(page, "POST", /\/runs\/stream$/);
  await page.getByRole("button", { name: "Regenerate" }).click();
  expect((await prepared).status()).toBe(200);
  await expect(messages(page).getByText('Here is what I did for "Write a note about Bun"')).toBeVisible({ timeout: 30_000 });
  await runEnded(rerun);
  await expect(messages(page).getByText(DEMO_SIGNATURE)).toHaveCount(1);
  // One question, one answer: the regenerated answer replaced the old one and the question stays single.
  await expect(messages(page).getByText("Write a note about Bun", { exact: true })).toHaveCount(1);

  await messages(page).getByText("Write a note about Bun", { exact: true }).hover();
  await page.getByRole("button", { name: "Edit and rerun" }).click();
  const editor = page.locator("textarea").first();
  await expect(editor).toHaveValue("Write a note about Bun");
  await editor.fill("Write a note about Bun workers");
  const editPrepared = waitForApi(page, "POST", /\/runs\/edit-regenerate\/prepare$/);
  const editRun = waitForApi(page, "POST", /\/runs\/stream$/);
  await page.getByRole("button", { name: "Update and rerun" }).click();
  const editAnswer = await editPrepared;
  expect(editAnswer.status(), await editAnswer.text()).toBe(200);
  await expect(messages(page).getByText('Here is what I did for "Write a note about Bun workers"')).toBeVisible({ timeout: 30_000 });
  await runEnded(editRun);
  await expect(messages(page).getByText("Write a note about Bun", { exact: true })).toHaveCount(0);

  // Thumbs: this UI snapshot never renders its thumbs buttons (no caller passes `feedback` to
  // MessageListItem), so the rating goes through the same-origin route its client
  // (core/api/feedback.ts upsertFeedback/deleteFeedback) calls, for the run that answered.
  const threadId = new URL(url).pathname.split("/").pop()!;
  const csrf = { "X-CSRF-Token": (await page.context().cookies()).find((cookie) => cookie.name === "csrf_token")?.value ?? "" };
  const [latest] = (await (await page.request.get(`/api/langgraph/threads/${threadId}/runs?limit=1`)).json()) as Array<{ run_id: string }>;
  const feedbackUrl = `/api/threads/${threadId}/runs/${latest!.run_id}/feedback`;
  const rated = await page.request.put(feedbackUrl, { headers: csrf, data: { rating: 1, comment: null } });
  expect(rated.status(), await rated.text()).toBe(200);
  expect(await rated.json()).toMatchObject({ rating: 1, comment: null, feedback_id: expect.any(String) });
  const again = await page.request.put(feedbackUrl, { headers: csrf, data: { rating: -1, comment: "too long" } });
  expect(await again.json()).toMatchObject({ rating: -1, comment: "too long" });
  expect((await page.request.delete(feedbackUrl, { headers: csrf })).status()).toBeLessThan(300);
});

// A 1x1 PNG: small, and the UI shows an uploaded image inline, served by the artifacts route.
const PIXEL = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64");

test("files: upload an image with a message and open it from the thread", async ({ page }) => {
  await signIn(page);
  await page.goto("/workspace/chats/new");
  await page.getByLabel("Upload files").setInputFiles({ name: "pixel.png", mimeType: "image/png", buffer: PIXEL });
  const uploaded = waitForApi(page, "POST", /\/uploads$/);
  await send(page, "Describe the uploaded picture");
  expect((await uploaded).status()).toBe(200);

  const image = page.getByRole("img", { name: "pixel.png" });
  await expect(image).toBeVisible();
  await expect.poll(() => image.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(1);
  // Clicking the picture opens the file itself, from the thread's artifacts route, in a new tab.
  const href = await page.locator("a", { has: image }).getAttribute("href");
  expect(href).toMatch(/\/artifacts\/mnt\/user-data\/uploads\/pixel\.png/);
  const [opened] = await Promise.all([page.context().waitForEvent("page"), image.click()]);
  await opened.waitForLoadState();
  expect(new URL(opened.url()).pathname).toBe(new URL(href!, page.url()).pathname);
  await expect.poll(() => opened.locator("img").evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(1);
  await opened.close();
});

async function openSettings(page: Page, section: string): Promise<void> {
  await page.getByRole("button", { name: /settings and more/i }).click();
  await page.getByRole("menuitem", { name: "Settings" }).click();
  const dialog = page.getByRole("dialog");
  await expect(dialog).toBeVisible();
  await dialog.getByRole("button", { name: section, exact: true }).click();
}

test("settings: every tab loads; a skill toggles, an MCP server is added, a memory fact is added and deleted", async ({ page }) => {
  await signIn(page);
  await page.goto("/workspace/chats/new");
  await openSettings(page, "Account");
  const dialog = page.getByRole("dialog");
  // Channels and Integrations are shown whatever /api/features says (this UI build does not read
  // those flags): they must load their empty, not-available states, not an error.
  for (const section of ["Account", "Appearance", "Notification", "Channels", "Integrations", "Memory", "Tools", "Skills", "About"]) {
    await dialog.getByRole("button", { name: section, exact: true }).click();
    await expect(dialog.getByText("Loading...")).toHaveCount(0);
    await expect(dialog.getByText(/^Error:/)).toHaveCount(0);
  }

  // Skills: the fixture skill turns off and on again.
  await dialog.getByRole("button", { name: "Skills", exact: true }).click();
  const skillSwitch = dialog.getByRole("switch").first();
  await expect(skillSwitch).toBeVisible();
  const before = await skillSwitch.getAttribute("aria-checked");
  const toggled = waitForApi(page, "PUT", /\/api\/skills\/[^/]+$/);
  await skillSwitch.click();
  expect((await toggled).status()).toBe(200);
  await expect(skillSwitch).not.toHaveAttribute("aria-checked", before ?? "");

  // Tools: the UI lists the MCP servers and switches them; it has no form to add one, so the
  // server is added through the gateway's config API (PUT /api/mcp/config), as an admin would.
  const csrf = (await page.context().cookies()).find((cookie) => cookie.name === "csrf_token")?.value ?? "";
  const added = await page.request.put("/api/mcp/config", {
    headers: { "X-CSRF-Token": csrf },
    data: { mcp_servers: { docs: { enabled: true, type: "http", url: "http://127.0.0.1:9/mcp", description: "Project documentation search" } } },
  });
  expect(added.status(), await added.text()).toBe(200);
  await dialog.getByRole("button", { name: "Skills", exact: true }).click();
  await dialog.getByRole("button", { name: "Tools", exact: true }).click();
  const server = dialog.locator("[data-slot='item']", { hasText: "Project documentation search" });
  await expect(server.getByText("docs", { exact: true })).toBeVisible();
  const serverSwitch = server.getByRole("switch");
  await expect(serverSwitch).toHaveAttribute("aria-checked", "true");
  const switched = waitForApi(page, "PATCH", /\/api\/mcp\/config$/);
  await serverSwitch.click();
  expect((await switched).status()).toBe(200);
  await expect(serverSwitch).toHaveAttribute("aria-checked", "false");

  // Memory: a fact added by hand appears, then goes when deleted.
  const fact = `Prefers metric units in every answer (${Date.now().toString(36)})`;
  await dialog.getByRole("button", { name: "Memory", exact: true }).click();
  await dialog.getByRole("button", { name: "Add fact" }).click();
  await page.getByPlaceholder("Describe the memory fact you want to save").fill(fact);
  const created = waitForApi(page, "POST", /\/api\/memory\/facts$/);
  await page.getByRole("button", { name: "Save fact" }).click();
  expect((await created).status()).toBe(200);
  await expect(dialog.getByText(fact)).toBeVisible();
  await dialog.getByRole("button", { name: "Delete", exact: true }).first().click();
  const deleted = waitForApi(page, "DELETE", /\/api\/memory\/facts\/[^/]+$/);
  await page.getByRole("dialog", { name: "Delete this fact?" }).getByRole("button", { name: "Delete", exact: true }).click();
  expect((await deleted).status()).toBe(200);
  await expect(dialog.getByText(fact)).toHaveCount(0);
});

test("custom agent: named and designed in the UI's agent-creation chat, then chatted with", async ({ page }) => {
  await signIn(page);
  // The creation page sends no model: the deployment's default answers, which must be a model that
  // calls setup_agent. Here that is the recorded agent-designer (a real deployment's default is a
  // real model); the demo model stays the default for every other chat, so the journey names the
  // recorded model in the creation chat's runs only.
  const stream = /\/api\/langgraph\/threads\/[^/]+\/runs\/stream$/;
  await page.route(stream, async (route) => {
    const body = route.request().postDataJSON() as { context?: Record<string, unknown> };
    if (body.context?.is_bootstrap === true) body.context.model_name = "agent-designer";
    await route.continue({ postData: JSON.stringify(body) });
  });
  await page.goto("/workspace/agents/new");
  const checked = waitForApi(page, "GET", /\/api\/agents\/check$/);
  const interview = waitForApi(page, "POST", /\/runs\/stream$/);
  await page.getByPlaceholder("e.g. code-reviewer").fill("ui-helper");
  await page.getByRole("button", { name: "Continue" }).click();
  expect((await checked).status()).toBe(200);
  await runEnded(interview);

  await expect(page.getByText(/choose Save agent when it looks right/)).toBeVisible();
  // Nothing is saved by the interview: the agent exists only once "Save agent" has run setup_agent.
  expect((await page.request.get("/api/agents/ui-helper")).status()).toBe(404);
  // "Save agent" sends the UI's save command as a hidden message (hide_from_ui) in the same
  // bootstrap chat; the recorded model answers it by calling setup_agent, and the page shows its
  // "Agent created!" card once the tool result is in the thread.
  const saving = waitForApi(page, "POST", /\/runs\/stream$/);
  await page.getByRole("button", { name: "More actions" }).click();
  await page.getByRole("menuitem", { name: "Save agent" }).click();
  await runEnded(saving);
  await expect(page.getByText("Agent created!")).toBeVisible();
  await page.unroute(stream);
  const saved = await page.request.get("/api/agents/ui-helper");
  expect(saved.status()).toBe(200);
  expect(((await saved.json()) as { soul?: string }).soul ?? "").not.toBe("");

  await page.goto("/workspace/agents");
  await expect(page.getByText("ui-helper", { exact: true })).toBeVisible();
  await page.goto("/workspace/agents/ui-helper/chats/new");
  await expect(page.locator("header span", { hasText: "ui-helper" })).toBeVisible();
  const run = waitForApi(page, "POST", /\/runs\/stream$/);
  await send(page, "Write a note about tidy notes");
  const body = (await run).request().postDataJSON() as { context?: { agent_name?: string } };
  expect(body.context?.agent_name).toBe("ui-helper");
});

test("scheduled tasks: the sidebar's page loads an empty list (this gateway runs no scheduler)", async ({ page }) => {
  await signIn(page);
  await page.goto("/workspace/chats/new");
  const listed = waitForApi(page, "GET", /\/api\/scheduled-tasks$/);
  await page.getByRole("link", { name: "Scheduled tasks" }).first().click();
  await expect(page).toHaveURL(/\/workspace\/scheduled-tasks/);
  const response = await listed;
  expect(response.status()).toBe(200);
  expect(await response.json()).toEqual([]);
  await expect(page.getByRole("heading", { name: "Scheduled tasks" })).toBeVisible();
  await expect(page.getByText(/^Error:/)).toHaveCount(0);
});

test("threads: rename one from the sidebar, then delete it", async ({ page }) => {
  await signIn(page);
  const url = await newChat(page, "Write a note about renaming things");
  const threadId = new URL(url).pathname.split("/").pop()!;
  const item = page.locator(`[data-sidebar="menu-item"]:has(a[href$="${threadId}"])`);
  await item.hover();
  await item.getByRole("button", { name: "More" }).click();
  await page.getByRole("menuitem", { name: "Rename" }).click();
  await page.getByRole("dialog").getByRole("textbox").fill("Renamed by the journey");
  await page.getByRole("dialog").getByRole("button", { name: "Save" }).click();
  await expect(item.getByText("Renamed by the journey")).toBeVisible();
  await page.reload();
  await expect(page.locator(`a[href$="${threadId}"]`).getByText("Renamed by the journey")).toBeVisible();

  await item.hover();
  await item.getByRole("button", { name: "More" }).click();
  const deleted = waitForApi(page, "DELETE", new RegExp(`/threads/${threadId}$`));
  await page.getByRole("menuitem", { name: "Delete" }).click();
  const confirm = page.getByRole("alertdialog");
  if (await confirm.isVisible().catch(() => false)) await confirm.getByRole("button", { name: /delete/i }).click();
  expect((await deleted).status()).toBeLessThan(300);
  await expect(page.locator(`a[href$="${threadId}"]`)).toHaveCount(0);
  const gone = await page.request.get(`/api/langgraph/threads/${threadId}`);
  expect(gone.status()).toBe(404);
});

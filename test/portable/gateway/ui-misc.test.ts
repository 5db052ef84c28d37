import { describe, expect, it } from "vitest";
import type { SystemModelRequest, SystemModelResult, SystemOperationKind } from "../../../src/extension-api/index.ts";
import type { ModuleLoader } from "../../../src/ports/module-loader.ts";
import { acceptanceGateways, call, human, send } from "../../fixtures/plugins/gateway-harness.ts";
import { startReplayServer, type Fixture } from "../openai-replay.ts";
import { readFile } from "node:fs/promises";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { loadReplayRecordings } from "../../../src/config/load.ts";
import { auth, user, other, withBody, ENV } from "./ui-callers.ts";

/*
 * The small routes DeerFlow's UI calls around a chat, through a real gateway with api_key auth:
 * the model picker's fields, the feature switches that hide screens this gateway does not serve,
 * the empty channel lists, follow-up suggestions and input polishing (system model calls that
 * observers see), and a run's workspace changes.
 */


interface SeenCall {
  readonly kind: SystemOperationKind;
  readonly request: SystemModelRequest;
  readonly result: SystemModelResult;
}

/** A plugin whose system-model-call observer records every call. */
function observingLoader(seen: SeenCall[]): ModuleLoader {
  return {
    async load() {
      return {
        install: (registry: { systemModelObserver(o: { onSystemModelCall(a: unknown, t: unknown, k: SystemOperationKind, r: SystemModelRequest, res: SystemModelResult): void }): void }) =>
          registry.systemModelObserver({ onSystemModelCall: (_app, _task, kind, request, result) => void seen.push({ kind, request, result }) }),
      };
    },
  };
}

const gatewayWith = acceptanceGateways(() => ({ env: ENV }));

async function miscGateway(extra: Record<string, unknown> = {}, seen: SeenCall[] = []) {
  const { gateway } = await gatewayWith(
    { gateway: { auth }, plugins: [{ use: "./observer.ts:install" }], ...extra },
    { loader: observingLoader(seen) },
  );
  return gateway;
}

async function threadOf(gateway: Awaited<ReturnType<typeof miscGateway>>, threadId: string) {
  expect((await call(gateway, "POST", "/api/threads", withBody(user, { thread_id: threadId }))).status).toBe(200);
}

describe("/api/models for the UI's model picker", () => {
  it("labels every model (display_name, else the name) and says whether token usage is reported", async () => {
    const gateway = await miscGateway({
      models: [
        { name: "fast", use: "openai-compatible", model: "gpt-4o-mini", display_name: "Fast model" },
        { name: "plain", use: "openai-compatible", model: "gpt-4o" },
      ],
    });
    const listed = await call(gateway, "GET", "/api/models", user);
    expect(listed.status).toBe(200);
    expect(listed.body.models.map((m: { name: string; display_name: string }) => [m.name, m.display_name])).toEqual([
      ["fast", "Fast model"],
      ["plain", "plain"],
      ["demo", "demo"],
    ]);
    expect(listed.body.token_usage).toEqual({ enabled: true });

    const off = await miscGateway({ token_usage: { enabled: false } });
    expect((await call(off, "GET", "/api/models", user)).body.token_usage).toEqual({ enabled: false });
  });
});

describe("/api/features and /api/channels", () => {
  it("turns on the agents screens and off what this gateway does not serve; channel lists are empty", async () => {
    const gateway = await miscGateway();
    const features = await call(gateway, "GET", "/api/features", user);
    expect(features.status).toBe(200);
    expect(features.body).toMatchObject({
      agents_api: { enabled: true },
      browser_control: { enabled: false },
      mcp_tasks: { enabled: false },
      channels: { enabled: false },
      integrations: { enabled: false },
      scheduled_tasks: { enabled: false },
    });
    // The agents screens it turns on answer.
    expect((await call(gateway, "GET", "/api/agents", user)).status).toBe(200);
    expect(await call(gateway, "GET", "/api/channels/providers", user)).toMatchObject({ status: 200, body: { enabled: false, providers: [] } });
    expect(await call(gateway, "GET", "/api/channels/connections", user)).toMatchObject({ status: 200, body: { connections: [] } });
    // Behind auth like every route.
    expect((await call(gateway, "GET", "/api/features")).status).toBe(401);
  });
});

describe("follow-up suggestions", () => {
  const conversation = {
    messages: [
      { role: "user", content: "How do tides work?" },
      { role: "assistant", content: "The moon's gravity pulls the oceans." },
    ],
    n: 3,
  };

  it("reads its config; a suggestions call is a valid answer whatever the demo model says, and observers see it", async () => {
    const seen: SeenCall[] = [];
    const gateway = await miscGateway({ suggestions: { max_suggestions: 2 } }, seen);
    expect((await call(gateway, "GET", "/api/suggestions/config", user)).body).toEqual({ enabled: true, max_suggestions: 2 });
    await threadOf(gateway, "t-sugg");

    const answered = await call(gateway, "POST", "/api/threads/t-sugg/suggestions", withBody(user, conversation));
    expect(answered.status).toBe(200);
    expect(Array.isArray(answered.body.suggestions)).toBe(true);
    expect(answered.body.suggestions.length).toBeLessThanOrEqual(2);
    for (const item of answered.body.suggestions) expect(typeof item).toBe("string");

    const calls = seen.filter((entry) => entry.kind === "suggestions");
    expect(calls).toHaveLength(1);
    expect(calls[0]!.request.modelName).toBe("demo");
    // The prompt asks for at most the configured count and quotes the conversation.
    const prompt = JSON.stringify(calls[0]!.request.messages);
    expect(prompt).toContain("EXACTLY 2 short questions");
    expect(prompt).toContain("User: How do tides work?");
    expect(calls[0]!.result.error).toBeUndefined();
  });

  it("a model's fenced JSON list becomes the suggestions, capped at n; prose with no list is an empty list", async () => {
    const answer = (content: string, includes: string): Fixture => ({
      file: `inline-${includes}`,
      description: "A one-shot suggestions answer.",
      match: { stream: false, last_content_includes: includes },
      response: {
        status: 200,
        headers: { "content-type": "application/json" },
        body: {
          id: "chatcmpl-suggest",
          object: "chat.completion",
          created: 1764480061,
          model: "gpt-4o-mini",
          choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
          usage: { prompt_tokens: 40, completion_tokens: 20, total_tokens: 60 },
        },
      },
    });
    const provider = await startReplayServer([
      answer('<think>short ones</think>\n```json\n["What causes spring tides?", "How do tides affect currents?", "Third?"]\n```', "How do tides work?"),
      answer("I would rather not suggest anything.", "Tell me a joke"),
    ]);
    try {
      const seen: SeenCall[] = [];
      const { gateway } = await gatewayWith(
        {
          gateway: { auth },
          plugins: [{ use: "./observer.ts:install" }],
          models: [{ name: "gpt", use: "openai-compatible", model: "gpt-4o-mini", base_url: provider.baseUrl, api_key_env: "PROVIDER_KEY" }],
        },
        { loader: observingLoader(seen), env: { ...ENV, PROVIDER_KEY: "sk-test" } },
      );
      await threadOf(gateway, "t-real");
      const answered = await call(gateway, "POST", "/api/threads/t-real/suggestions", withBody(user, { ...conversation, n: 2, model_name: "gpt" }));
      expect(answered).toMatchObject({ status: 200, body: { suggestions: ["What causes spring tides?", "How do tides affect currents?"] } });
      const prose = await call(gateway, "POST", "/api/threads/t-real/suggestions", withBody(user, { messages: [{ role: "user", content: "Tell me a joke" }] }));
      expect(prose).toMatchObject({ status: 200, body: { suggestions: [] } });
      expect(seen.map((entry) => [entry.kind, entry.request.modelName])).toEqual([["suggestions", "gpt"], ["suggestions", "gpt"]]);
      // The provider got a system instruction and the conversation.
      expect(provider.received[0]!.body.messages.map((m: { role: string }) => m.role)).toEqual(["system", "user"]);
    } finally {
      await provider.close();
    }
  });

  it("uses only a model the caller's role may use (403 otherwise, with no model call)", async () => {
    const seen: SeenCall[] = [];
    const gateway = await miscGateway(
      {
        models: [{ name: "fast", use: "openai-compatible", model: "gpt-4o-mini" }],
        authorization: { enabled: true, roles: { user: { models: { allow: ["fast"] } }, admin: {} } },
      },
      seen,
    );
    await threadOf(gateway, "t-authz");
    const denied = await call(gateway, "POST", "/api/threads/t-authz/suggestions", withBody(user, { ...conversation, model_name: "demo" }));
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toMatch(/^Model 'demo' is not available for your role/);
    // The draft polisher takes no model from the caller.
    const picked = await call(gateway, "POST", "/api/input-polish", withBody(user, { text: "hi", model_name: "demo" }));
    expect(picked.status).toBe(422);
    expect(picked.body.detail).toMatch(/model_name: unknown field/);
    expect(seen).toEqual([]);
  });

  it("answers an empty list when disabled or given no messages, without a model call", async () => {
    const seen: SeenCall[] = [];
    const disabled = await miscGateway({ suggestions: { enabled: false } }, seen);
    expect((await call(disabled, "GET", "/api/suggestions/config", user)).body).toEqual({ enabled: false, max_suggestions: 3 });
    await threadOf(disabled, "t-off");
    expect((await call(disabled, "POST", "/api/threads/t-off/suggestions", withBody(user, conversation))).body).toEqual({ suggestions: [] });
    expect((await call(disabled, "POST", "/api/threads/t-off/suggestions", withBody(user, { messages: [] }))).body).toEqual({ suggestions: [] });
    expect(seen).toEqual([]);
  });

  it("refuses bad bodies with a 422 naming the field, another user's thread with a 404, and an unknown model", async () => {
    const gateway = await miscGateway();
    await threadOf(gateway, "t-mine");
    const noMessages = await call(gateway, "POST", "/api/threads/t-mine/suggestions", withBody(user, { n: 2 }));
    expect(noMessages.status).toBe(422);
    expect(noMessages.body.detail).toMatch(/messages/);
    const tooMany = await call(gateway, "POST", "/api/threads/t-mine/suggestions", withBody(user, { ...conversation, n: 9 }));
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.detail).toMatch(/^Invalid request body: n: /);
    const badRole = await call(gateway, "POST", "/api/threads/t-mine/suggestions", withBody(user, { messages: [{ role: "user" }] }));
    expect(badRole.status).toBe(422);
    expect(badRole.body.detail).toMatch(/messages\.0\.content/);
    const unknownModel = await call(gateway, "POST", "/api/threads/t-mine/suggestions", withBody(user, { ...conversation, model_name: "nope" }));
    expect(unknownModel.status).toBe(422);
    expect(unknownModel.body.detail).toMatch(/model_name: unknown model "nope"/);
    expect((await call(gateway, "POST", "/api/threads/t-mine/suggestions", withBody(other, conversation))).status).toBe(404);
    expect((await call(gateway, "POST", "/api/threads/t-none/suggestions", withBody(user, conversation))).status).toBe(404);
  });
});

describe("POST /api/input-polish", () => {
  it("rewrites a draft through the system model (observers see it) and says whether it changed", async () => {
    const seen: SeenCall[] = [];
    const gateway = await miscGateway({}, seen);
    const polished = await call(gateway, "POST", "/api/input-polish", withBody(user, { text: "  make a chart of sales  ", locale: "en-US" }));
    expect(polished.status).toBe(200);
    expect(typeof polished.body.rewritten_text).toBe("string");
    expect(polished.body.rewritten_text.length).toBeGreaterThan(0);
    expect(polished.body.changed).toBe(polished.body.rewritten_text !== "make a chart of sales");
    const calls = seen.filter((entry) => entry.kind === "input_polish");
    expect(calls).toHaveLength(1);
    const prompt = JSON.stringify(calls[0]!.request.messages);
    expect(prompt).toContain("<draft>\\nmake a chart of sales\\n</draft>");
    expect(prompt).toContain("Locale hint: en-US");
  });

  it("refuses an empty or too long draft (422 naming text), another user's thread (404), and answers 404 when disabled", async () => {
    const gateway = await miscGateway({ input_polish: { max_chars: 10 } });
    const empty = await call(gateway, "POST", "/api/input-polish", withBody(user, { text: "   " }));
    expect(empty.status).toBe(422);
    expect(empty.body.detail).toMatch(/^Invalid request body: text: /);
    const long = await call(gateway, "POST", "/api/input-polish", withBody(user, { text: "x".repeat(11) }));
    expect(long.status).toBe(422);
    expect(long.body.detail).toMatch(/text: .*at most 10/);
    const missing = await call(gateway, "POST", "/api/input-polish", withBody(user, { locale: "en" }));
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toMatch(/text/);
    await threadOf(gateway, "t-polish");
    expect((await call(gateway, "POST", "/api/input-polish", withBody(other, { text: "hi", thread_id: "t-polish" }))).status).toBe(404);
    expect((await call(gateway, "POST", "/api/input-polish", withBody(user, { text: "hi", thread_id: "t-polish" }))).status).toBe(200);

    const disabled = await miscGateway({ input_polish: { enabled: false } });
    expect((await call(disabled, "POST", "/api/input-polish", withBody(user, { text: "hi" }))).status).toBe(404);
  });

  it("a config section with a wrong key fails with its path", async () => {
    await expect(miscGateway({ suggestions: { max_suggestions: 9 } })).rejects.toThrow(/suggestions\.max_suggestions/);
    await expect(miscGateway({ input_polish: { model: "x" } })).rejects.toThrow(/input_polish\.model/);
  });
});

describe("GET /api/threads/{id}/runs/{rid}/workspace-changes", () => {
  async function runAndChanges(gateway: Awaited<ReturnType<typeof miscGateway>>, threadId: string, prompt: string, query = "") {
    const done = await call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, withBody(user, { input: human(prompt) }));
    expect(done.status).toBe(200);
    const runs = await call(gateway, "GET", `/api/threads/${threadId}/runs?limit=1`, user);
    const runId = runs.body[0].run_id as string;
    return { runId, changes: await call(gateway, "GET", `/api/threads/${threadId}/runs/${runId}/workspace-changes${query}`, user) };
  }

  it("lists the file a run wrote, with its diff; a later run that rewrites it shows a modification", async () => {
    // The demo model rewrites its notes on every turn; read-before-write would refuse the rewrite.
    const gateway = await miscGateway({ read_before_write: { enabled: false } });
    await threadOf(gateway, "t-ws");
    const first = await runAndChanges(gateway, "t-ws", "Compare tides and currents");
    expect(first.changes.status).toBe(200);
    expect(first.changes.body).toMatchObject({ available: true, version: 1, summary: { created: 1, modified: 0, deleted: 0, truncated: false } });
    const [created] = first.changes.body.files;
    expect(created).toMatchObject({ path: "/mnt/user-data/workspace/notes.md", root: "workspace", status: "created", binary: false, size_before: null, sha256_before: null });
    expect(created.sha256_after).toMatch(/^[0-9a-f]{64}$/);
    expect(created.diff).toMatch(/^--- a\/mnt\/user-data\/workspace\/notes\.md\n\+\+\+ b\/mnt\/user-data\/workspace\/notes\.md\n@@ -0,0 \+1,\d+ @@\n\+# Notes: Compare tides and currents/);
    expect(created.additions).toBeGreaterThan(3);
    expect(first.changes.body.summary.additions).toBe(created.additions);

    const second = await runAndChanges(gateway, "t-ws", "Summarize volcano research", "?include_diff=false");
    expect(second.changes.body.summary).toMatchObject({ created: 0, modified: 1, deleted: 0 });
    const [modified] = second.changes.body.files;
    expect(modified).toMatchObject({ path: "/mnt/user-data/workspace/notes.md", status: "modified", diff: "", sha256_before: created.sha256_after });
    expect(modified.additions).toBeGreaterThan(0);
    expect(modified.deletions).toBeGreaterThan(0);
    // The first run's record is its own: unchanged by the second.
    const again = await call(gateway, "GET", `/api/threads/t-ws/runs/${first.runId}/workspace-changes?include_files=false`, user);
    expect(again.body).toMatchObject({ available: true, summary: { created: 1 }, files: [] });
  });

  // Spec, middleware-chain.md item 2 (ToolOutputBudgetMiddleware): "those files are process
  // feedback, so the workspace-changes scanner excludes that directory and run delivery
  // verification never counts them as produced artifacts".
  it('"the workspace-changes scanner excludes that directory": a run whose tool output was externalised lists no .tool-results file, and its delivery check counts none', async () => {
    const gateway = await miscGateway({ read_before_write: { enabled: false }, tool_output: { externalize_min_chars: 1, exempt_tools: [] } });
    await threadOf(gateway, "t-ws-spill");
    const { changes } = await runAndChanges(gateway, "t-ws-spill", "Compare tides and currents");
    const state = await call(gateway, "GET", "/api/threads/t-ws-spill/state", user);
    const spilled = JSON.stringify(state.body.values.messages).match(/\/mnt\/user-data\/outputs\/\.tool-results\/[A-Za-z0-9_.-]+/g) ?? [];
    expect(spilled.length).toBeGreaterThan(0);
    // The spilled files are really there, under outputs, written by this run.
    expect((await send(gateway, "GET", `/api/threads/t-ws-spill/artifacts${spilled[0]}`, user)).status).toBe(200);
    expect(changes.body.available).toBe(true);
    const paths = (changes.body.files as Array<{ path: string }>).map((file) => file.path);
    expect(paths).toEqual(["/mnt/user-data/workspace/notes.md"]);
    expect(changes.body.summary).toMatchObject({ created: 1, modified: 0, deleted: 0 });
    expect(changes.body.delivery).toEqual({ produced_paths: [], presented_paths: [], matched_paths: [], satisfied: true });
    expect(JSON.stringify(changes.body)).not.toContain(".tool-results");
  });

  it("is off with gateway.workspace_changes: false: no snapshot, the route answers available: false", async () => {
    const gateway = await miscGateway({ gateway: { auth, workspace_changes: false }, read_before_write: { enabled: false } });
    await threadOf(gateway, "t-ws-off");
    const { changes } = await runAndChanges(gateway, "t-ws-off", "Compare tides and currents");
    expect(changes.status).toBe(200);
    expect(changes.body).toMatchObject({ available: false, files: [] });
  });

  it("is the run's own: another user's thread is a 404, an unknown run a 404, a bad flag a 4xx", async () => {
    const gateway = await miscGateway();
    await threadOf(gateway, "t-ws2");
    const { runId } = await runAndChanges(gateway, "t-ws2", "hello there");
    expect((await call(gateway, "GET", `/api/threads/t-ws2/runs/${runId}/workspace-changes`, other)).status).toBe(404);
    expect((await call(gateway, "GET", "/api/threads/t-ws2/runs/no-such-run/workspace-changes", user)).status).toBe(404);
    expect((await call(gateway, "GET", `/api/threads/t-ws2/runs/${runId}/workspace-changes?include_diff=maybe`, user)).status).toBeGreaterThanOrEqual(400);
  });
});

describe("a replayed session (use: replay) as the UI sees it after the answer", () => {
  const FIXTURE_DIR = new URL("../../fixtures/replay/", import.meta.url).href.replace(/\/$/, "");

  it("the recorded suggestions come back, and the run's workspace changes list the file the recording wrote", async () => {
    const recording = JSON.parse(await readFile(new URL(`${FIXTURE_DIR}/write_read_file.ultra.json`), "utf8")) as { prompt: string };
    const raw = {
      gateway: { auth },
      models: [{ name: "scenario-model", use: "replay", fixture: "write_read_file.ultra.json" }],
    };
    const config = await loadReplayRecordings(
      validateLeadConfig(raw, `${FIXTURE_DIR}/config.yaml`),
      { readText: (path) => readFile(new URL(path), "utf8").catch(() => undefined), baseDir: FIXTURE_DIR },
      "config.yaml",
    );
    const { gateway } = await gatewayWith(config as unknown as Record<string, unknown>);
    await threadOf(gateway, "t-replay");
    const context = { mode: "ultra", thinking_enabled: true, is_plan_mode: true, subagent_enabled: true };
    const waited = await call(gateway, "POST", "/api/threads/t-replay/runs/wait", withBody(user, { input: human(recording.prompt), context }));
    expect(waited.body.messages.at(-1).content).toBe("hi from replay.");

    const suggested = await call(gateway, "POST", "/api/threads/t-replay/suggestions", withBody(user, {
      messages: [
        { role: "user", content: recording.prompt },
        { role: "assistant", content: "hi from replay." },
      ],
      n: 3,
    }));
    expect(suggested.status).toBe(200);
    expect(suggested.body.suggestions).toHaveLength(3);
    expect(suggested.body.suggestions[0]).toMatch(/note\.txt/);

    const runId = (await call(gateway, "GET", "/api/threads/t-replay/runs?limit=1", user)).body[0].run_id;
    const changes = await call(gateway, "GET", `/api/threads/t-replay/runs/${runId}/workspace-changes`, user);
    expect(changes.body.summary).toMatchObject({ created: 1, modified: 0, deleted: 0, additions: 1 });
    expect(changes.body.files[0]).toMatchObject({ path: "/mnt/user-data/outputs/note.txt", root: "outputs", status: "created" });
    expect(changes.body.files[0].diff.split("\n").slice(2)).toEqual(["@@ -0,0 +1 @@", "+hi from replay."]);
  });
});

import { resolve } from "node:path";
import * as v from "valibot";
import { createFsKeyValue } from "../../adapters/shared/fs-key-value.ts";
import { extension, type ExtensionInstall, type ExtensionRouteContext } from "../../src/extension-api/index.ts";
import { RunStore } from "../../src/runtime/runs/run-store.ts";
import type { RunRecord } from "../../src/runtime/runs/types.ts";

/*
 * Test-only: POST /api/test-only/seed-runs, the seeder upstream's multi-run-order browser spec
 * calls (upstream mounts backend/tests/seed_runs_router.py on its replay gateway only). Mounted by
 * test/ui/gateway-auth-disabled.yaml alone, never by a deployment's config.
 *
 * It stands up, for the caller, a thread with several finished runs whose messages come back in
 * the order the runs were made, with no model and no key. The thread and its messages are written
 * through the gateway's own public API (create the thread, then update its state), with the
 * caller's cookie and CSRF token, so ownership, validation and the message-sequence bookkeeping are
 * the gateway's; the run rows, which no public route writes without running a model, go into the
 * gateway's run store over the same storage folder (`storage_base`, the config's storage.base).
 */

const SeedMessage = v.strictObject({
  role: v.picklist(["human", "ai"], "expected human or ai"),
  content: v.string("expected a string"),
  id: v.pipe(v.string("expected a string"), v.minLength(1, "expected a message id")),
});

const SeedRun = v.strictObject({
  run_id: v.pipe(v.string("expected a string"), v.minLength(1, "expected a run id")),
  created_at: v.pipe(v.string("expected an ISO timestamp"), v.isoTimestamp("expected an ISO timestamp")),
  messages: v.array(SeedMessage, "expected an array of messages"),
});

const SeedBody = v.strictObject({
  thread_id: v.pipe(v.string("expected a string"), v.minLength(1, "expected a thread id")),
  runs: v.pipe(v.array(SeedRun, "expected an array of runs"), v.minLength(1, "expected at least one run")),
});

type SeedBody = v.InferOutput<typeof SeedBody>;

const json = (body: unknown, status = 200): Response =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

function issuePath(issue: v.BaseIssue<unknown>): string {
  return (issue.path ?? []).map((item) => String(item.key)).join(".") || "body";
}

/** Forwards the caller's credentials: the gateway decides who they are, as for any request. */
function callerHeaders(request: Request): Headers {
  const headers = new Headers({ "content-type": "application/json" });
  for (const name of ["cookie", "x-csrf-token", "x-api-key"]) {
    const value = request.headers.get(name);
    if (value !== null) headers.set(name, value);
  }
  return headers;
}

async function seed(gatewayUrl: string, runs: RunStore, request: Request, ctx: ExtensionRouteContext): Promise<Response> {
  const principal = ctx.principal;
  if (principal === null) return json({ detail: "The seeder needs an identified caller." }, 401);
  let raw: unknown;
  try {
    raw = await request.json();
  } catch {
    return json({ detail: "The body is not JSON." }, 422);
  }
  const parsed = v.safeParse(SeedBody, raw);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    return json({ detail: `${issuePath(issue)}: ${issue.message}` }, 422);
  }
  const body: SeedBody = parsed.output;
  const headers = callerHeaders(request);
  const api = (path: string, payload: unknown): Promise<Response> =>
    fetch(new URL(path, gatewayUrl), { method: "POST", headers, body: JSON.stringify(payload) });

  const created = await api("/api/threads", { thread_id: body.thread_id, if_exists: "do_nothing" });
  if (!created.ok) return json({ detail: `creating the thread: ${created.status} ${await created.text()}` }, 502);
  // One state update holding every run's messages, oldest run first: conversation order.
  const messages = [...body.runs]
    .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0))
    .flatMap((run) => run.messages.map((m) => ({ type: m.role, content: m.content, id: m.id })));
  const updated = await api(`/api/threads/${encodeURIComponent(body.thread_id)}/state`, { values: { messages } });
  if (!updated.ok) return json({ detail: `writing the messages: ${updated.status} ${await updated.text()}` }, 502);

  for (const run of body.runs) {
    const row: RunRecord = {
      run_id: run.run_id,
      thread_id: body.thread_id,
      assistant_id: "lead_agent",
      status: "success",
      metadata: {},
      multitask_strategy: "reject",
      created_at: new Date(run.created_at).toISOString(),
      updated_at: new Date(run.created_at).toISOString(),
      owner_id: principal.userId,
      error: null,
      kwargs: { input: { messages: run.messages.filter((m) => m.role === "human").map((m) => ({ type: "human", content: m.content, id: m.id })) } },
    };
    await runs.put(row);
  }
  return json({ ok: true, thread_id: body.thread_id, runs: body.runs.length });
}

/**
 * plugins[].config: `storage_base` (the gateway's storage.base, resolved like it against the
 * working folder) and `gateway_url` (where this gateway listens; default http://127.0.0.1:8001).
 */
export const install: ExtensionInstall = extension({ api: "0.1", name: "test-only-seed-runs" })((registry, config) => {
  const base = config["storage_base"];
  if (typeof base !== "string" || base === "") throw new Error("seed-runs: plugins[].config.storage_base names the gateway's storage.base");
  const gatewayUrl = typeof config["gateway_url"] === "string" ? config["gateway_url"] : "http://127.0.0.1:8001";
  const runs = new RunStore(createFsKeyValue(resolve(base)));
  registry.routers([{ method: "POST", path: "/api/test-only/seed-runs", handler: (request, ctx) => seed(gatewayUrl, runs, request, ctx) }]);
});

// The web UI's run actions and artifact edits, through a real createGateway (memory storage, the demo model).
import { afterEach, describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { bytesToHex, sha256Bytes } from "../../../src/core/hex.ts";
import { createGateway, type Gateway } from "../../../src/gateway/app.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { call, headerAuthLayer } from "./threads-fixtures.ts";

const gateways: Gateway[] = [];
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.shutdown()));
});

async function gateway(extra: Record<string, unknown> = {}): Promise<Gateway> {
  const config = validateLeadConfig({ models: [{ name: "demo", use: "demo" }], ...extra }, "test");
  const g = await createGateway({ config, storage: createMemoryKeyValue(), authLayer: headerAuthLayer() });
  gateways.push(g);
  return g;
}

async function newThread(g: Gateway, user = "alice"): Promise<string> {
  const created = await call(g, "POST", "/api/threads", {}, { user });
  expect(created.status).toBe(200);
  return created.body.thread_id as string;
}

/** One turn as the UI sends it; resolves when the run ended. */
async function runTurn(g: Gateway, threadId: string, body: Record<string, unknown>): Promise<void> {
  const run = await call(g, "POST", `/api/threads/${threadId}/runs/wait`, { assistant_id: "lead_agent", ...body });
  expect(run.status, JSON.stringify(run.body)).toBe(200);
}

async function stateOf(g: Gateway, threadId: string): Promise<any> {
  const state = await call(g, "GET", `/api/threads/${threadId}/state`);
  expect(state.status).toBe(200);
  return state.body;
}

const visible = (messages: any[]) => messages.filter((m) => (m.type === "human" || m.type === "ai") && m.additional_kwargs?.hide_from_ui !== true);

async function sha256(text: string): Promise<string> {
  return bytesToHex(await sha256Bytes(text));
}

describe("artifact edits (PUT /api/threads/{id}/artifacts/{path})", () => {
  async function withOutput(g: Gateway, content: string, path = "/mnt/user-data/outputs/report.md"): Promise<string> {
    const threadId = await newThread(g);
    const sandbox = await g.deps.sandbox.acquire({ userId: "alice", threadId });
    await sandbox.writeFileBytes(path, new TextEncoder().encode(content));
    return threadId;
  }

  it("replaces a file in the outputs folder when the hash matches, and a GET serves the edit", async () => {
    const g = await gateway();
    const threadId = await withOutput(g, "# draft\n");
    const url = `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/report.md`;
    const put = await call(g, "PUT", url, { content: "# final ✓\n", expected_sha256: await sha256("# draft\n") });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body).toEqual({ path: "/mnt/user-data/outputs/report.md", sha256: await sha256("# final ✓\n"), size: new TextEncoder().encode("# final ✓\n").length });
    const get = await g.fetch(new Request(`http://gateway.test${url}`, { headers: { "x-test-user": "alice" } }));
    expect(await get.text()).toBe("# final ✓\n");
    // Durable: a fresh sandbox of the same scope (loaded from storage) holds the edit.
    const stored = await g.deps.sandbox.acquire({ userId: "alice", threadId });
    expect(await stored.readFile("/mnt/user-data/outputs/report.md")).toBe("# final ✓\n");
  });

  it("answers 412 when the file changed since it was opened, and leaves it as it is", async () => {
    const g = await gateway();
    const threadId = await withOutput(g, "v2");
    const url = `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/report.md`;
    const put = await call(g, "PUT", url, { content: "mine", expected_sha256: await sha256("v1") });
    expect(put.status).toBe(412);
    const get = await g.fetch(new Request(`http://gateway.test${url}`, { headers: { "x-test-user": "alice" } }));
    expect(await get.text()).toBe("v2");
  });

  it("refuses a file outside the outputs folder (403) and a path escape (403)", async () => {
    const g = await gateway();
    const threadId = await withOutput(g, "x", "/mnt/user-data/workspace/notes.md");
    const hash = await sha256("x");
    const outside = await call(g, "PUT", `/api/threads/${threadId}/artifacts/mnt/user-data/workspace/notes.md`, { content: "y", expected_sha256: hash });
    expect(outside.status).toBe(403);
    expect(outside.body.detail).toMatch(/only files under \/mnt\/user-data\/outputs/);
    const escape = await call(g, "PUT", `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/..%2Fworkspace%2Fnotes.md`, { content: "y", expected_sha256: hash });
    expect(escape.status).toBe(403);
    expect(escape.body.detail).toMatch(/traversal/);
    const sandbox = await g.deps.sandbox.acquire({ userId: "alice", threadId });
    expect(await sandbox.readFile("/mnt/user-data/workspace/notes.md")).toBe("x");
  });

  it("answers 422 naming the field for a bad body, 404 for another user's thread and for a missing file", async () => {
    const g = await gateway();
    const threadId = await withOutput(g, "x");
    const url = `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/report.md`;
    const noHash = await call(g, "PUT", url, { content: "y" });
    expect(noHash.status).toBe(422);
    expect(noHash.body.detail).toMatch(/expected_sha256/);
    const badHash = await call(g, "PUT", url, { content: "y", expected_sha256: "nope" });
    expect(badHash.status).toBe(422);
    expect(badHash.body.detail).toMatch(/expected_sha256/);
    const notText = await call(g, "PUT", url, { content: 5, expected_sha256: await sha256("x") });
    expect(notText.status).toBe(422);
    expect(notText.body.detail).toMatch(/content/);
    const other = await call(g, "PUT", url, { content: "y", expected_sha256: await sha256("x") }, { user: "bob" });
    expect(other.status).toBe(404);
    const missing = await call(g, "PUT", `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/none.md`, { content: "y", expected_sha256: await sha256("x") });
    expect(missing.status).toBe(404);
  });

  it("holds the content to the upload size limit (413)", async () => {
    const config = validateLeadConfig({ models: [{ name: "demo", use: "demo" }], gateway: { uploads: { max_file_bytes: 16 } } }, "test");
    const g = await createGateway({ config, storage: createMemoryKeyValue(), authLayer: headerAuthLayer() });
    gateways.push(g);
    const threadId = await withOutput(g, "x");
    const put = await call(g, "PUT", `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/report.md`, { content: "y".repeat(17), expected_sha256: await sha256("x") });
    expect(put.status).toBe(413);
  });
});

describe("regenerate and edit (runs/regenerate/prepare, runs/edit-regenerate/prepare)", () => {
  it("regenerate: a run from the returned checkpoint makes a branch in which the new answer replaces the old one", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, { input: { messages: [{ type: "human", id: "h1", content: "first question" }] } });
    await runTurn(g, threadId, { input: { messages: [{ type: "human", id: "h2", content: "second question" }] } });
    const beforeAll = (await stateOf(g, threadId)).values.messages;
    const before = visible(beforeAll);
    const lastAi = before.at(-1);
    expect(lastAi.type).toBe("ai");

    const prepared = await call(g, "POST", `/api/threads/${threadId}/runs/regenerate/prepare`, { message_id: lastAi.id });
    expect(prepared.status, JSON.stringify(prepared.body)).toBe(200);
    const runs = await call(g, "GET", `/api/threads/${threadId}/runs?limit=1`);
    expect(prepared.body.target_run_id).toBe(runs.body[0].run_id);
    expect(prepared.body.input.messages).toEqual([expect.objectContaining({ type: "human", id: "h2", content: [{ type: "text", text: "second question" }] })]);
    expect(prepared.body.metadata).toEqual({
      regenerate_from_message_id: lastAi.id,
      regenerate_from_run_id: prepared.body.target_run_id,
      regenerate_checkpoint_id: prepared.body.checkpoint.checkpoint_id,
    });
    // The base checkpoint is the first turn's end: it holds h1's turn and not h2.
    const base = await call(g, "GET", `/api/threads/${threadId}/state/${prepared.body.checkpoint.checkpoint_id}`);
    expect(base.status).toBe(200);
    const baseIds = (base.body.values.messages ?? []).map((m: any) => m.id);
    expect(baseIds).not.toContain("h2");

    // What the UI does next: thread.submit(prepared.input, {checkpoint, metadata}).
    await runTurn(g, threadId, { input: prepared.body.input, checkpoint: prepared.body.checkpoint, metadata: prepared.body.metadata });
    const afterAll = (await stateOf(g, threadId)).values.messages;
    const after = visible(afterAll);
    // One answer to h2, not two: the old one is on the abandoned branch.
    expect(after.map((m) => m.type)).toEqual(before.map((m) => m.type));
    // The new answer is new messages: the same prompt from the same checkpoint, yet none of the
    // old answer's message or tool-call ids (the UI merges history and stream by both, and a
    // subagent's thread is derived from its tool call's id).
    const answerIds = (messages: any[]) => {
      const turn = messages.slice(messages.findIndex((m) => m.id === "h2" || m.id === "h2__user") + 1);
      return [...turn.map((m) => m.id), ...turn.flatMap((m) => (m.tool_calls ?? []).map((call: any) => call.id))];
    };
    const oldIds = answerIds(beforeAll);
    const newIds = answerIds(afterAll);
    expect(oldIds.length).toBeGreaterThanOrEqual(3);
    expect(newIds.length).toBe(oldIds.length);
    expect(newIds.filter((id) => oldIds.includes(id))).toEqual([]);
    expect(after.filter((m) => m.type === "human").map((m) => m.id)).toEqual(before.filter((m) => m.type === "human").map((m) => m.id));
    const newest = await call(g, "GET", `/api/threads/${threadId}/runs?limit=1`);
    expect(newest.body[0].metadata).toMatchObject({ regenerate_from_run_id: prepared.body.target_run_id });
    // The branch run finished: judged on where it ended, not on the checkpoint it started from.
    expect(newest.body[0].status).toBe("success");
    // So the regenerated turn can be edited next, as the UI offers at once.
    const human = after.findLast((m) => m.type === "human");
    const edit = await call(g, "POST", `/api/threads/${threadId}/runs/edit-regenerate/prepare`, { human_message_id: human.id, replacement_text: "a third question" });
    expect(edit.status, JSON.stringify(edit.body)).toBe(200);
  });

  it("edit: the branch holds the replacement prompt and its answer, and neither the old prompt nor its answer", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, { input: { messages: [{ type: "human", id: "h1", content: "tell me about owls" }] } });
    const before = visible((await stateOf(g, threadId)).values.messages);
    const human = before.findLast((m) => m.type === "human");
    const oldAnswer = before.at(-1);

    const prepared = await call(g, "POST", `/api/threads/${threadId}/runs/edit-regenerate/prepare`, { human_message_id: human.id, replacement_text: "tell me about foxes" });
    expect(prepared.status, JSON.stringify(prepared.body)).toBe(200);
    expect(prepared.body.source_message_ids).toContain(human.id);
    expect(prepared.body.source_message_ids).toContain(oldAnswer.id);
    expect(prepared.body.input.messages[0]).toMatchObject({ type: "human", id: prepared.body.replacement_human_message_id, content: [{ type: "text", text: "tell me about foxes" }] });
    expect(prepared.body.metadata).toMatchObject({ replay_kind: "edit", edit_from_message_id: human.id, edit_message_id: prepared.body.replacement_human_message_id });

    await runTurn(g, threadId, { input: prepared.body.input, checkpoint: prepared.body.checkpoint, metadata: prepared.body.metadata });
    const after = visible((await stateOf(g, threadId)).values.messages);
    const texts = after.map((m) => JSON.stringify(m.content));
    expect(texts.some((t) => t.includes("foxes"))).toBe(true);
    expect(texts.some((t) => t.includes("owls"))).toBe(false);
    expect(after.map((m) => m.id)).not.toContain(oldAnswer.id);
  });

  it("refuses what cannot be replayed: 409 for an older answer or an unchanged edit, 404 for an unknown message", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, { input: { messages: [{ type: "human", id: "h1", content: "first" }] } });
    const firstAnswer = visible((await stateOf(g, threadId)).values.messages).at(-1);
    await runTurn(g, threadId, { input: { messages: [{ type: "human", id: "h2", content: "second" }] } });
    const older = await call(g, "POST", `/api/threads/${threadId}/runs/regenerate/prepare`, { message_id: firstAnswer.id });
    expect(older.status).toBe(409);
    const unknown = await call(g, "POST", `/api/threads/${threadId}/runs/regenerate/prepare`, { message_id: "nope" });
    expect(unknown.status).toBe(404);
    const unchanged = await call(g, "POST", `/api/threads/${threadId}/runs/edit-regenerate/prepare`, { human_message_id: "h2", replacement_text: " second " });
    expect(unchanged.status).toBe(409);
    const notLatest = await call(g, "POST", `/api/threads/${threadId}/runs/edit-regenerate/prepare`, { human_message_id: "h1", replacement_text: "other" });
    expect(notLatest.status).toBe(409);
  });

  it("answers 422 naming the field for a bad body and 404 for another user's thread", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, { input: { messages: [{ type: "human", id: "h1", content: "first" }] } });
    const missing = await call(g, "POST", `/api/threads/${threadId}/runs/regenerate/prepare`, {});
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toMatch(/message_id/);
    const blank = await call(g, "POST", `/api/threads/${threadId}/runs/edit-regenerate/prepare`, { human_message_id: "h1", replacement_text: "  " });
    expect(blank.status).toBe(422);
    expect(blank.body.detail).toMatch(/replacement_text/);
    const other = await call(g, "POST", `/api/threads/${threadId}/runs/regenerate/prepare`, { message_id: "x" }, { user: "bob" });
    expect(other.status).toBe(404);
    const otherEdit = await call(g, "POST", `/api/threads/${threadId}/runs/edit-regenerate/prepare`, { human_message_id: "h1", replacement_text: "y" }, { user: "bob" });
    expect(otherEdit.status).toBe(404);
  });
});

describe("compaction on demand (POST /api/threads/{id}/compact)", () => {
  it("summarizes through the Summarization middleware, and the thread state afterwards is the compacted one", async () => {
    const g = await gateway({ summarization: { enabled: true, keep: { type: "messages", value: 2 } } });
    const threadId = await newThread(g);
    for (const [id, text] of [["h1", "first question"], ["h2", "second question"], ["h3", "third question"]]) {
      await runTurn(g, threadId, { input: { messages: [{ type: "human", id, content: text }] } });
    }
    const before = (await stateOf(g, threadId)).values.messages.length;
    const compacted = await call(g, "POST", `/api/threads/${threadId}/compact`, { force: true });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body).toMatchObject({ thread_id: threadId, compacted: true, summary_updated: true });
    expect(compacted.body.removed_message_count).toBeGreaterThan(0);
    const state = await stateOf(g, threadId);
    expect(state.values.messages.length).toBe(compacted.body.preserved_message_count);
    expect(state.values.messages.length).toBeLessThan(before);
    expect(typeof state.values.summary_text).toBe("string");
    expect(state.next).toEqual([]);
    expect(state.checkpoint.checkpoint_id).toBe(compacted.body.checkpoint_id);
  });

  it("answers 409 when summarization is off, 422 naming a bad field, 404 for another user's thread", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    const off = await call(g, "POST", `/api/threads/${threadId}/compact`, { force: true });
    expect(off.status).toBe(409);
    const bad = await call(g, "POST", `/api/threads/${threadId}/compact`, { force: "yes" });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toMatch(/force/);
    const other = await call(g, "POST", `/api/threads/${threadId}/compact`, {}, { user: "bob" });
    expect(other.status).toBe(404);
  });
});

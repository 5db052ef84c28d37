// The web UI's thread tools (messages/page, token-usage, branches, goal, run feedback, compaction
// observed by an extension), through a real createGateway with the demo model.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../../adapters/shared/fs-key-value.ts";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import type { CompactionEvent } from "../../../src/extension-api/index.ts";
import { loadExtensions } from "../../../src/extensions/loader.ts";
import { createGateway, type Gateway } from "../../../src/gateway/app.ts";
import { HISTORY_HIDDEN_NAMES, SUMMARY_MESSAGE_NAME } from "../../../src/middlewares/messages.ts";
import { LOOP_WARNING_NAME } from "../../../src/middlewares/loop-detection/loop-detection.ts";
import { TODO_COMPLETION_REMINDER_NAME, TODO_REMINDER_NAME } from "../../../src/middlewares/todo-list.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import type { ModuleLoader } from "../../../src/ports/module-loader.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { call, headerAuthLayer } from "./threads-fixtures.ts";

const gateways: Gateway[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.shutdown()));
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

async function gateway(extra: Record<string, unknown> = {}, storage: KeyValue = createMemoryKeyValue(), loader?: ModuleLoader): Promise<Gateway> {
  const config = validateLeadConfig({ models: [{ name: "demo", use: "demo", context_window: 100000 }], ...extra }, "test");
  const extensions = loader ? (await loadExtensions(config.plugins, loader)).extensions : undefined;
  const g = await createGateway({ config, storage, authLayer: headerAuthLayer(), ...(extensions ? { extensions } : {}) });
  gateways.push(g);
  return g;
}

async function newThread(g: Gateway, user = "alice"): Promise<string> {
  const created = await call(g, "POST", "/api/threads", {}, { user });
  expect(created.status).toBe(200);
  return created.body.thread_id as string;
}

async function runTurn(g: Gateway, threadId: string, id: string, text: string): Promise<void> {
  const run = await call(g, "POST", `/api/threads/${threadId}/runs/wait`, { assistant_id: "lead_agent", input: { messages: [{ type: "human", id, content: text }] } });
  expect(run.status, JSON.stringify(run.body)).toBe(200);
}

async function page(g: Gateway, threadId: string, query = "", user = "alice"): Promise<any> {
  const response = await call(g, "GET", `/api/threads/${threadId}/messages/page${query}`, undefined, { user });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body;
}

async function stateOf(g: Gateway, threadId: string): Promise<any> {
  const state = await call(g, "GET", `/api/threads/${threadId}/state`);
  expect(state.status).toBe(200);
  return state.body;
}

const seqById = (rows: any[]) => Object.fromEntries(rows.map((row) => [row.content.id, row.seq]));

describe("GET /api/threads/{id}/messages/page", () => {
  it("lists the visible history oldest to newest with seqs, run ids and the UI's row shape", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "first question");
    const body = await page(g, threadId);
    expect(body.has_more).toBe(false);
    expect(body.next_before_seq).toBeNull();
    // The user message, the demo model's tool steps (visible: the UI draws them), its answer.
    const types = body.data.map((row: any) => row.content.type);
    expect(types[0]).toBe("human");
    expect(types.at(-1)).toBe("ai");
    const [human] = body.data;
    const ai = body.data.at(-1);
    // DynamicContext keeps the client's id for its hidden date reminder and re-keys the user's message.
    expect(human.content).toMatchObject({ id: "h1__user", type: "human" });
    const seqList = body.data.map((row: any) => row.seq);
    expect(seqList).toEqual([...seqList].sort((a: number, b: number) => a - b));
    const runs = (await call(g, "GET", `/api/threads/${threadId}/runs`)).body;
    for (const row of body.data) expect(row.run_id).toBe(runs[0].run_id);
    expect(human.metadata).toEqual({ caller: "lead_agent" });
    expect(Number.isNaN(Date.parse(human.created_at))).toBe(false);
    expect(ai.feedback).toBeNull();
  });

  it("leaves out system messages, hidden messages and the framework's named notices", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "hello");
    const written = await call(g, "POST", `/api/threads/${threadId}/state`, {
      values: {
        messages: [
          { type: "system", id: "sys", content: "system prompt" },
          { type: "human", id: "hidden", content: "for the model", additional_kwargs: { hide_from_ui: true } },
          { type: "human", id: "warn", name: "loop_warning", content: "stop looping" },
          { type: "human", id: "todo", name: "todo_reminder", content: "your todos" },
          { type: "human", id: "sum", name: "summary", content: "a summary" },
          { type: "human", id: "shown", content: "a visible one" },
        ],
      },
    });
    expect(written.status, JSON.stringify(written.body)).toBe(200);
    const ids = (await page(g, threadId)).data.map((row: any) => row.content.id);
    expect(ids).toContain("shown");
    for (const hidden of ["sys", "hidden", "warn", "todo", "sum"]) expect(ids).not.toContain(hidden);
  });

  it("pages backwards with before_seq: newest page first, next_before_seq the oldest seq of the page, null at the end", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    for (const [id, text] of [["h1", "one"], ["h2", "two"], ["h3", "three"]] as const) await runTurn(g, threadId, id, text);
    const all = (await page(g, threadId)).data;
    expect(all.length).toBeGreaterThan(6);
    const first = await page(g, threadId, "?limit=4");
    expect(first.data.map((row: any) => row.seq)).toEqual(all.slice(-4).map((row: any) => row.seq));
    expect(first.has_more).toBe(true);
    expect(first.next_before_seq).toBe(all.at(-4).seq);
    const middle = await page(g, threadId, `?limit=2&before_seq=${first.next_before_seq}`);
    expect(middle.data.map((row: any) => row.seq)).toEqual(all.slice(-6, -4).map((row: any) => row.seq));
    const second = await page(g, threadId, `?limit=200&before_seq=${first.next_before_seq}`);
    expect(second.data.map((row: any) => row.seq)).toEqual(all.slice(0, -4).map((row: any) => row.seq));
    expect(second.has_more).toBe(false);
    expect(second.next_before_seq).toBeNull();
  });

  it("keeps every seq once given: a new run adds higher seqs, the old ones do not move", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "one");
    const before = seqById((await page(g, threadId)).data);
    await runTurn(g, threadId, "h2", "two");
    // Two readers give the new messages their seqs at once: they agree, and no seq is given twice.
    const [a, b] = await Promise.all([page(g, threadId), page(g, threadId)]);
    expect(seqById(a.data)).toEqual(seqById(b.data));
    const rows = (await page(g, threadId)).data;
    expect(seqById(rows)).toEqual(seqById(a.data));
    const after = seqById(rows);
    for (const [id, seq] of Object.entries(before)) expect(after[id]).toBe(seq);
    const newSeqs = rows.filter((row: any) => !(row.content.id in before)).map((row: any) => row.seq);
    expect(newSeqs.length).toBe(rows.length - Object.keys(before).length);
    expect(newSeqs.length).toBeGreaterThan(0);
    expect(Math.min(...newSeqs)).toBeGreaterThan(Math.max(...(Object.values(before) as number[])));
    expect(new Set(rows.map((row: any) => row.seq)).size).toBe(rows.length);
  });

  it("still lists what a compaction took out of the context, under the same seqs, in conversation order", async () => {
    const g = await gateway({ summarization: { enabled: true, keep: { type: "messages", value: 2 } } });
    const threadId = await newThread(g);
    for (const [id, text] of [["h1", "one"], ["h2", "two"], ["h3", "three"]] as const) await runTurn(g, threadId, id, text);
    const before = (await page(g, threadId)).data;
    const compacted = await call(g, "POST", `/api/threads/${threadId}/compact`, { force: true });
    expect(compacted.body.compacted).toBe(true);
    expect((await stateOf(g, threadId)).values.messages.length).toBeLessThan(before.length);
    const after = (await page(g, threadId)).data;
    expect(after.map((row: any) => [row.content.id, row.seq])).toEqual(before.map((row: any) => [row.content.id, row.seq]));
    // A turn after it comes after everything.
    await runTurn(g, threadId, "h4", "four");
    const later = (await page(g, threadId)).data;
    expect(later.slice(0, before.length).map((row: any) => row.content.id)).toEqual(before.map((row: any) => row.content.id));
    expect(later.at(-1).content.type).toBe("ai");
  });

  it("orders a history compacted before it was ever listed as it was spoken", async () => {
    const g = await gateway({ summarization: { enabled: true, keep: { type: "messages", value: 2 } } });
    const threadId = await newThread(g);
    for (const [id, text] of [["h1", "one"], ["h2", "two"], ["h3", "three"]] as const) await runTurn(g, threadId, id, text);
    const spoken = (await stateOf(g, threadId)).values.messages.filter((m: any) => m.type === "human" && !m.additional_kwargs?.hide_from_ui).map((m: any) => m.id);
    expect((await call(g, "POST", `/api/threads/${threadId}/compact`, { force: true })).body.compacted).toBe(true);
    const humans = (await page(g, threadId)).data.filter((row: any) => row.content.type === "human").map((row: any) => row.content.id);
    expect(humans).toEqual(spoken);
  });

  it("after a regenerate lists the new answer only: the replaced one is on the abandoned line", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "one");
    await runTurn(g, threadId, "h2", "two");
    const before = (await page(g, threadId)).data;
    const lastAi = before.at(-1).content;
    const prepared = await call(g, "POST", `/api/threads/${threadId}/runs/regenerate/prepare`, { message_id: lastAi.id });
    expect(prepared.status).toBe(200);
    const run = await call(g, "POST", `/api/threads/${threadId}/runs/wait`, { assistant_id: "lead_agent", input: prepared.body.input, checkpoint: prepared.body.checkpoint, metadata: prepared.body.metadata });
    expect(run.status).toBe(200);
    const after = (await page(g, threadId)).data;
    const state = (await stateOf(g, threadId)).values.messages;
    const shown = state.filter((m: any) => m.type !== "system" && m.additional_kwargs?.hide_from_ui !== true && !["summary", "loop_warning", "todo_reminder", "todo_completion_reminder"].includes(m.name));
    expect(after.map((row: any) => row.content.id)).toEqual(shown.map((m: any) => m.id));
    expect(after.filter((row: any) => row.content.type === "human").map((row: any) => row.content.id)).toEqual(before.filter((row: any) => row.content.type === "human").map((row: any) => row.content.id));
    // The regenerated turn belongs to the new run.
    const newest = (await call(g, "GET", `/api/threads/${threadId}/runs?limit=1`)).body[0].run_id;
    expect(after.at(-1).run_id).toBe(newest);
    // Its rows are new history: seqs above everything listed before, rising in conversation order.
    const replayed = after.filter((row: any) => row.run_id === newest);
    expect(replayed[0].content.id).toBe("h2");
    expect(Math.min(...replayed.map((row: any) => row.seq))).toBeGreaterThan(Math.max(...before.map((row: any) => row.seq)));
    const order = after.map((row: any) => row.seq);
    expect(order).toEqual([...order].sort((a: number, b: number) => a - b));
  });

  it("answers 422 for a limit outside 1..200, a bad before_seq or after_seq, and 404 for another user's thread", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    for (const query of ["?limit=0", "?limit=201", "?limit=ten"]) {
      const bad = await call(g, "GET", `/api/threads/${threadId}/messages/page${query}`);
      expect(bad.status, query).toBe(422);
      expect(bad.body.detail).toMatch(/limit/);
    }
    const badSeq = await call(g, "GET", `/api/threads/${threadId}/messages/page?before_seq=0`);
    expect(badSeq.status).toBe(422);
    expect(badSeq.body.detail).toMatch(/before_seq/);
    const forward = await call(g, "GET", `/api/threads/${threadId}/messages/page?after_seq=3`);
    expect(forward.status).toBe(422);
    expect(forward.body.detail).toMatch(/after_seq/);
    expect((await call(g, "GET", `/api/threads/${threadId}/messages/page`, undefined, { user: "bob" })).status).toBe(404);
    expect((await page(g, threadId)).data).toEqual([]);
  });

  it("the hidden names are the ones the middlewares use", () => {
    expect([...HISTORY_HIDDEN_NAMES].sort()).toEqual([SUMMARY_MESSAGE_NAME, LOOP_WARNING_NAME, TODO_REMINDER_NAME, TODO_COMPLETION_REMINDER_NAME].sort());
  });
});

describe("GET /api/threads/{id}/token-usage", () => {
  it("sums the usage the model reported on the thread's AI messages, per model and per caller", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "one");
    await runTurn(g, threadId, "h2", "two");
    const ais = (await stateOf(g, threadId)).values.messages.filter((m: any) => m.type === "ai");
    const input = ais.reduce((sum: number, m: any) => sum + m.usage_metadata.input_tokens, 0);
    const output = ais.reduce((sum: number, m: any) => sum + m.usage_metadata.output_tokens, 0);
    expect(input + output).toBeGreaterThan(0);
    const usage = await call(g, "GET", `/api/threads/${threadId}/token-usage`);
    expect(usage.status).toBe(200);
    expect(usage.body).toMatchObject({
      thread_id: threadId,
      total_input_tokens: input,
      total_output_tokens: output,
      total_tokens: input + output,
      total_runs: 2,
      by_model: { demo: { tokens: input + output, runs: 2 } },
      by_caller: { lead_agent: input + output, subagent: 0, middleware: 0 },
    });
    expect(usage.body.context_usage.max_context_tokens).toBe(100000);
    expect(usage.body.context_usage.token_count).toBeGreaterThan(0);
    expect(usage.body.context_usage.percentage).toBe(Math.round((usage.body.context_usage.token_count / 100000) * 1000) / 10);
    expect((await call(g, "GET", `/api/threads/${threadId}/token-usage`, undefined, { user: "bob" })).status).toBe(404);
  });

  it("answers zeros for a thread that has not run", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    const usage = await call(g, "GET", `/api/threads/${threadId}/token-usage`);
    expect(usage.body).toMatchObject({ total_tokens: 0, total_runs: 0, by_model: {}, context_usage: { token_count: 0 } });
  });
});

describe("POST /api/threads/{id}/branches", () => {
  it("forks a new thread at an earlier turn: its history ends with that answer, the parent is untouched", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "one");
    await runTurn(g, threadId, "h2", "two");
    const parent = (await stateOf(g, threadId)).values.messages;
    // The first turn's answer: the last AI message before the second question.
    const firstAnswer = parent.slice(0, parent.findIndex((m: any) => m.id === "h2")).findLast((m: any) => m.type === "ai");
    const branch = await call(g, "POST", `/api/threads/${threadId}/branches`, { message_id: firstAnswer.id, title: "Side path" });
    expect(branch.status, JSON.stringify(branch.body)).toBe(200);
    expect(branch.body).toMatchObject({ parent_thread_id: threadId, branched_from_message_id: firstAnswer.id });
    expect(typeof branch.body.parent_checkpoint_id).toBe("string");
    const branchId = branch.body.thread_id;
    expect(branchId).not.toBe(threadId);
    const thread = (await call(g, "GET", `/api/threads/${branchId}`)).body;
    expect(thread.metadata).toMatchObject({ deerflow_branch: true, branch_parent_thread_id: threadId, branch_parent_message_id: firstAnswer.id });
    expect(thread.values.title).toBe("Side path");
    const ids: string[] = (await page(g, branchId)).data.map((row: any) => row.content.id);
    expect(ids.at(-1)).toBe(firstAnswer.id);
    expect(ids).toContain("h1__user");
    expect(ids.filter((id) => id.startsWith("h2"))).toEqual([]);
    expect((await stateOf(g, threadId)).values.messages.map((m: any) => m.id)).toEqual(parent.map((m: any) => m.id));
    // Its inherited answer can be regenerated: the checkpoint before its user message was written too.
    const prepared = await call(g, "POST", `/api/threads/${branchId}/runs/regenerate/prepare`, { message_id: firstAnswer.id });
    expect(prepared.status, JSON.stringify(prepared.body)).toBe(200);
    expect(prepared.body.input.messages[0].id).toBe("h1");
    // The branch is a thread of its own: it runs on.
    await runTurn(g, branchId, "b1", "three");
    const next: string[] = (await page(g, branchId)).data.map((row: any) => row.content.id);
    expect(next.some((id) => id.startsWith("b1"))).toBe(true);
    expect(next.slice(0, ids.length)).toEqual(ids);
  });

  it("answers 409 for a message that ends no turn, 422 for a bad body, 404 for another user's thread", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "one");
    const unknown = await call(g, "POST", `/api/threads/${threadId}/branches`, { message_id: "nope" });
    expect(unknown.status).toBe(409);
    const human = await call(g, "POST", `/api/threads/${threadId}/branches`, { message_id: "h1" });
    expect(human.status).toBe(409);
    const bad = await call(g, "POST", `/api/threads/${threadId}/branches`, { message_ids: ["x"] });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toMatch(/message_id/);
    const badTitle = await call(g, "POST", `/api/threads/${threadId}/branches`, { message_id: "x", title: "t".repeat(257) });
    expect(badTitle.status).toBe(422);
    expect(badTitle.body.detail).toMatch(/title/);
    expect((await call(g, "POST", `/api/threads/${threadId}/branches`, { message_id: "x" }, { user: "bob" })).status).toBe(404);
  });
});

describe("GET/PUT/DELETE /api/threads/{id}/goal", () => {
  it("sets, reads and clears the goal in the thread state", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    expect((await call(g, "GET", `/api/threads/${threadId}/goal`)).body).toEqual({ goal: null });
    const put = await call(g, "PUT", `/api/threads/${threadId}/goal`, { objective: "Ship the report", max_continuations: 3 });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body.goal).toMatchObject({ objective: "Ship the report", status: "active", continuation_count: 0, max_continuations: 3, no_progress_count: 0, max_no_progress_continuations: 2 });
    expect((await call(g, "GET", `/api/threads/${threadId}/goal`)).body).toEqual(put.body);
    expect((await stateOf(g, threadId)).values.goal).toEqual(put.body.goal);
    // A run keeps it.
    await runTurn(g, threadId, "h1", "one");
    expect((await call(g, "GET", `/api/threads/${threadId}/goal`)).body.goal.objective).toBe("Ship the report");
    const cleared = await call(g, "DELETE", `/api/threads/${threadId}/goal`);
    expect(cleared.status).toBe(200);
    expect(cleared.body).toEqual({ goal: null });
    expect((await call(g, "GET", `/api/threads/${threadId}/goal`)).body).toEqual({ goal: null });
    expect((await stateOf(g, threadId)).values.goal ?? null).toBeNull();
    // The next run does not bring it back.
    await runTurn(g, threadId, "h2", "two");
    expect((await call(g, "GET", `/api/threads/${threadId}/goal`)).body).toEqual({ goal: null });
  });

  it("answers 409 while the thread is held (a run or a delete), and writes nothing", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    const release = await g.runs!.reserveThread(threadId);
    const put = await call(g, "PUT", `/api/threads/${threadId}/goal`, { objective: "Wait" });
    expect(put.status).toBe(409);
    expect((await call(g, "DELETE", `/api/threads/${threadId}/goal`)).status).toBe(409);
    await release();
    expect((await call(g, "GET", `/api/threads/${threadId}/goal`)).body).toEqual({ goal: null });
    expect((await call(g, "PUT", `/api/threads/${threadId}/goal`, { objective: "Now" })).status).toBe(200);
  });

  it("defaults max_continuations to 8 and creates the thread the new-chat page names", async () => {
    const g = await gateway();
    const put = await call(g, "PUT", `/api/threads/fresh-thread/goal`, { objective: "Do it" });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body.goal.max_continuations).toBe(8);
    expect((await call(g, "GET", `/api/threads/fresh-thread/goal`)).body.goal.objective).toBe("Do it");
    expect((await call(g, "GET", `/api/threads/fresh-thread/goal`, undefined, { user: "bob" })).status).toBe(404);
  });

  it("answers 422 naming the field, 404 for another user's thread", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    for (const [body, field] of [
      [{ objective: "" }, /objective/],
      [{ objective: "x".repeat(4001) }, /objective/],
      [{ objective: "ok", max_continuations: 9 }, /max_continuations/],
      [{ objective: "ok", max_continuations: -1 }, /max_continuations/],
      [{}, /objective/],
    ] as const) {
      const bad = await call(g, "PUT", `/api/threads/${threadId}/goal`, body);
      expect(bad.status, JSON.stringify(body)).toBe(422);
      expect(bad.body.detail).toMatch(field);
    }
    expect((await call(g, "PUT", `/api/threads/${threadId}/goal`, { objective: "mine" }, { user: "bob" })).status).toBe(404);
    expect((await call(g, "DELETE", `/api/threads/${threadId}/goal`, undefined, { user: "bob" })).status).toBe(404);
  });
});

describe("PUT/DELETE /api/threads/{id}/runs/{rid}/feedback", () => {
  async function threadWithRun(g: Gateway): Promise<{ threadId: string; runId: string }> {
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "one");
    const runs = (await call(g, "GET", `/api/threads/${threadId}/runs`)).body;
    return { threadId, runId: runs[0].run_id };
  }

  it("keeps the user's rating with the run, shows it on the run's last answer in messages/page, and deletes it", async () => {
    const g = await gateway();
    const { threadId, runId } = await threadWithRun(g);
    const url = `/api/threads/${threadId}/runs/${runId}/feedback`;
    const up = await call(g, "PUT", url, { rating: 1, comment: null });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    expect(up.body).toMatchObject({ run_id: runId, thread_id: threadId, rating: 1, comment: null });
    expect(typeof up.body.feedback_id).toBe("string");
    const down = await call(g, "PUT", url, { rating: -1, comment: "too vague" });
    expect(down.body).toMatchObject({ feedback_id: up.body.feedback_id, rating: -1, comment: "too vague" });
    const rows = (await page(g, threadId)).data;
    const answer = rows.findLast((row: any) => row.content.type === "ai");
    expect(answer.feedback).toEqual({ feedback_id: up.body.feedback_id, rating: -1, comment: "too vague" });
    expect(rows.filter((row: any) => row.feedback !== null)).toHaveLength(1);
    const deleted = await call(g, "DELETE", url);
    expect(deleted.status).toBe(200);
    expect((await page(g, threadId)).data.findLast((row: any) => row.content.type === "ai").feedback).toBeNull();
    expect((await call(g, "DELETE", url)).status).toBe(404);
  });

  it("answers 422 for a rating other than 1 or -1, 404 for an unknown run and for another user's thread", async () => {
    const g = await gateway();
    const { threadId, runId } = await threadWithRun(g);
    const url = `/api/threads/${threadId}/runs/${runId}/feedback`;
    for (const body of [{ rating: 0 }, { rating: 2 }, { rating: "1" }, {}]) {
      const bad = await call(g, "PUT", url, body);
      expect(bad.status, JSON.stringify(body)).toBe(422);
      expect(bad.body.detail).toMatch(/rating/);
    }
    expect((await call(g, "PUT", `/api/threads/${threadId}/runs/no-such-run/feedback`, { rating: 1 })).status).toBe(404);
    expect((await call(g, "PUT", url, { rating: 1 }, { user: "bob" })).status).toBe(404);
    expect((await call(g, "DELETE", url, undefined, { user: "bob" })).status).toBe(404);
  });
});

describe("thread deletion", () => {
  it("removes the thread's message seqs and feedback from storage", async () => {
    const g = await gateway();
    const threadId = await newThread(g);
    await runTurn(g, threadId, "h1", "one");
    await page(g, threadId);
    const runId = (await call(g, "GET", `/api/threads/${threadId}/runs`)).body[0].run_id;
    expect((await call(g, "PUT", `/api/threads/${threadId}/runs/${runId}/feedback`, { rating: 1 })).status).toBe(200);
    const kept = async () => [...(await g.deps.storage.getKeys("gateway:message-seqs")), ...(await g.deps.storage.getKeys("gateway:run-feedback"))];
    expect(await kept()).toHaveLength(2);
    expect((await call(g, "DELETE", `/api/threads/${threadId}`)).status).toBe(200);
    expect(await kept()).toEqual([]);
  });
});

describe("restart over fs storage", () => {
  it("a new gateway over the same folder reads back the same seqs and the feedback", async () => {
    const dir = await mkdtemp(join(tmpdir(), "deerflow-thread-tools-"));
    dirs.push(dir);
    const first = await gateway({}, createFsKeyValue(dir));
    const threadId = await newThread(first);
    await runTurn(first, threadId, "h1", "one");
    const seqs = seqById((await page(first, threadId)).data);
    const runId = (await call(first, "GET", `/api/threads/${threadId}/runs`)).body[0].run_id;
    const put = await call(first, "PUT", `/api/threads/${threadId}/runs/${runId}/feedback`, { rating: 1, comment: "good" });
    expect(put.status).toBe(200);
    await first.shutdown();
    gateways.splice(gateways.indexOf(first), 1);

    const second = await gateway({}, createFsKeyValue(dir));
    const rows = (await page(second, threadId)).data;
    expect(seqById(rows)).toEqual(seqs);
    expect(rows.findLast((row: any) => row.content.type === "ai").feedback).toEqual({ feedback_id: put.body.feedback_id, rating: 1, comment: "good" });
    await runTurn(second, threadId, "h2", "two");
    const after = seqById((await page(second, threadId)).data);
    for (const [id, seq] of Object.entries(seqs)) expect(after[id]).toBe(seq);
  });
});

describe("POST /api/threads/{id}/compact and compaction observers", () => {
  it("tells a compaction observer an extension registered what was compacted", async () => {
    let resolveSeen!: (event: CompactionEvent) => void;
    const seen = new Promise<CompactionEvent>((resolve) => (resolveSeen = resolve));
    const loader: ModuleLoader = {
      async load() {
        return {
          install: (registry: { contextCompactionObserver(o: { onContextCompacted(e: CompactionEvent): void }): void }) =>
            registry.contextCompactionObserver({ onContextCompacted: (event) => resolveSeen(event) }),
        };
      },
    };
    const g = await gateway({ summarization: { enabled: true, keep: { type: "messages", value: 2 } }, plugins: [{ use: "./observer.ts:install" }] }, createMemoryKeyValue(), loader);
    const threadId = await newThread(g);
    for (const [id, text] of [["h1", "first question"], ["h2", "second question"], ["h3", "third question"]] as const) await runTurn(g, threadId, id, text);
    const compacted = await call(g, "POST", `/api/threads/${threadId}/compact`, { force: true });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body.compacted).toBe(true);
    const event = await seen;
    expect(event.compacted_message_count).toBe(compacted.body.removed_message_count);
    expect(event.kept_message_count).toBe(compacted.body.preserved_message_count);
    expect(event.source_content_hashes).toHaveLength(compacted.body.removed_message_count);
    expect(typeof event.summary_content_hash).toBe("string");
  });
});

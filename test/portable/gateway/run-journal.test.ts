import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import { RunJournal } from "../../../src/runtime/runs/journal.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { call, testGateway } from "./threads-fixtures.ts";

describe("RunJournal", () => {
  it("keeps a run's entries in order, in pages, apart from runs whose ids share a prefix", async () => {
    const storage = createMemoryKeyValue();
    const journal = new RunJournal(storage, { clock: new ManualClock(Date.UTC(2026, 10, 30)) });
    for (let i = 0; i < 5; i++) void journal.record("t", "ab", "custom", { i });
    // Custom entries are batched: fewer than 32 are not written before a flush.
    expect(await storage.getKeys()).toEqual([]);
    void journal.record("t", "abc", "status", { status: "running" });
    await journal.close("t", "ab");
    await journal.close("t", "abc");
    const first = await journal.list("t", "ab", { limit: 2 });
    expect(first.events.map((e) => [e.seq, e.kind, e.data])).toEqual([
      [0, "custom", { i: 0 }],
      [1, "custom", { i: 1 }],
    ]);
    expect(first.events[0]!.at).toBe("2026-11-30T00:00:00.000Z");
    expect(first.next_after_seq).toBe(1);
    const rest = await journal.list("t", "ab", { afterSeq: 1 });
    expect(rest.events.map((e) => e.seq)).toEqual([2, 3, 4]);
    expect(rest.next_after_seq).toBeNull();
    expect((await journal.list("t", "abc")).events.map((e) => e.data)).toEqual([{ status: "running" }]);
    await journal.deleteThread("t");
    expect(await storage.getKeys()).toEqual([]);
  });

  it("writes every 32 entries without waiting for the run to end", async () => {
    const storage = createMemoryKeyValue();
    const journal = new RunJournal(storage, { clock: new ManualClock(0) });
    for (let i = 0; i < 33; i++) void journal.record("t", "r", "custom", i);
    expect((await journal.list("t", "r", { limit: 1000 })).events).toHaveLength(32);
    await journal.close("t", "r");
    expect((await journal.list("t", "r", { limit: 1000 })).events).toHaveLength(33);
  });

  it("stores a status or error entry when it is recorded, with the custom entries queued before it, without the run ending", async () => {
    const storage = createMemoryKeyValue();
    const journal = new RunJournal(storage, { clock: new ManualClock(0) });
    void journal.record("t", "r", "custom", "before");
    await journal.record("t", "r", "status", { status: "running" });
    const meanwhile = new RunJournal(storage, { clock: new ManualClock(0) });
    expect((await meanwhile.list("t", "r")).events.map((e) => [e.seq, e.kind])).toEqual([
      [0, "custom"],
      [1, "status"],
    ]);
    await journal.record("t", "r", "error", { name: "Error", message: "boom" });
    // Another process (after a crash) reads them, and appends after them.
    const restarted = new RunJournal(storage, { clock: new ManualClock(0) });
    await restarted.append("t", "r", "status", { status: "interrupted" });
    expect((await restarted.list("t", "r")).events.map((e) => [e.seq, e.kind])).toEqual([
      [0, "custom"],
      [1, "status"],
      [2, "error"],
      [3, "status"],
    ]);
  });

  it("writes the entries of one flush as one key, and pages through it like separate entries (entries stored one a key read too)", async () => {
    const storage = createMemoryKeyValue();
    let writes = 0;
    const setItem = storage.setItem.bind(storage);
    storage.setItem = ((key: string, value: never) => {
      writes++;
      return setItem(key, value);
    }) as typeof storage.setItem;
    const setItems = storage.setItems.bind(storage);
    storage.setItems = ((items: Array<{ key: string; value: never }>) => {
      writes += items.length;
      return setItems(items);
    }) as typeof storage.setItems;
    const journal = new RunJournal(storage, { clock: new ManualClock(0) });
    await journal.record("t", "r", "status", { status: "running" });
    for (let i = 0; i < 4; i++) void journal.record("t", "r", "custom", { i });
    await journal.record("t", "r", "status", { status: "success" });
    expect(writes).toBe(2);
    // A journal written one key per entry, before flushes were grouped.
    for (let seq = 0; seq < 4; seq++) {
      await storage.setItem(`gateway:journal:x74:x6f6c64:0000000${seq}`, { seq, at: "x", kind: "custom", data: seq } as never);
    }

    const restarted = new RunJournal(storage, { clock: new ManualClock(0) });
    const seqs = async (runId: string, query: Parameters<RunJournal["list"]>[2]) => {
      const page = await restarted.list("t", runId, query);
      return [page.events.map((e) => e.seq), page.next_after_seq];
    };
    expect(await seqs("r", {})).toEqual([[0, 1, 2, 3, 4, 5], null]);
    expect(await seqs("r", { limit: 2 })).toEqual([[0, 1], 1]);
    expect(await seqs("r", { afterSeq: 1, limit: 2 })).toEqual([[2, 3], 3]);
    expect(await seqs("r", { afterSeq: 3, limit: 2 })).toEqual([[4, 5], null]);
    const statuses = (entry: { kind: string }) => entry.kind === "status";
    expect(await seqs("r", { accept: statuses, limit: 1 })).toEqual([[0], 0]);
    expect(await seqs("r", { accept: statuses, afterSeq: 0, limit: 1 })).toEqual([[5], null]);
    expect(await seqs("old", {})).toEqual([[0, 1, 2, 3], null]);
    expect(await seqs("old", { afterSeq: 0, limit: 2 })).toEqual([[1, 2], 2]);
    // Appending after a restart goes after the last entry of the last batch.
    await restarted.append("t", "r", "status", { status: "interrupted" });
    expect(await seqs("r", { afterSeq: 4 })).toEqual([[5, 6], null]);
  });
});

describe("GET /api/threads/:id/runs/:run/events", () => {
  it("lists the run's status changes and the custom events its middlewares wrote, even when the client streamed none", async () => {
    const gateway = await testGateway();
    try {
      const { body: thread } = await call(gateway, "POST", "/api/threads", {});
      const threadId = (thread as { thread_id: string }).thread_id;
      const waited = await call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, {
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: "Write a note about journals." }] },
        stream_mode: ["values"],
      });
      expect(waited.status).toBe(200);
      const [run] = (await call(gateway, "GET", `/api/threads/${threadId}/runs`)).body as Array<{ run_id: string }>;
      const { status, body } = await call(gateway, "GET", `/api/threads/${threadId}/runs/${run!.run_id}/events`);
      expect(status).toBe(200);
      // A bare array, as DeerFlow's UI reads it.
      const events = body as Array<{ seq: number; kind: string; event_type: string; run_id: string; content: unknown; data: Record<string, unknown> }>;
      expect(events.filter((e) => e.kind === "status").map((e) => e.data.status)).toEqual(["pending", "running", "success"]);
      // The demo session runs bash once: SandboxAudit records its decision as a custom event; what
      // the run changed in the workspace comes last, before the terminal status.
      const custom = events.filter((e) => e.kind === "custom");
      expect(custom.map((e) => e.data.type)).toEqual(["middleware:sandbox_audit", "workspace_changes"]);
      expect(events.map((e) => e.kind)).toEqual(["status", "status", "custom", "custom", "status"]);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
      expect(events.map((e) => e.event_type)).toEqual(["run.pending", "run.running", "middleware:sandbox_audit", "workspace_changes", "run.success"]);
      for (const e of events) expect([e.run_id, e.content]).toEqual([run!.run_id, e.data]);

      // event_types filters before limit applies; after_seq pages on from the last seq read.
      const url = `/api/threads/${threadId}/runs/${run!.run_id}/events`;
      const statuses = (await call(gateway, "GET", `${url}?event_types=run.running,run.success`)).body as typeof events;
      expect(statuses.map((e) => e.event_type)).toEqual(["run.running", "run.success"]);
      const first = (await call(gateway, "GET", `${url}?event_types=status&limit=1`)).body as typeof events;
      expect(first.map((e) => e.event_type)).toEqual(["run.pending"]);
      const next = (await call(gateway, "GET", `${url}?event_types=status&limit=2&after_seq=${first[0]!.seq}`)).body as typeof events;
      expect(next.map((e) => e.event_type)).toEqual(["run.running", "run.success"]);
      expect((await call(gateway, "GET", `${url}?event_types=middleware:sandbox_audit&task_id=nope`)).body).toEqual([]);

      expect((await call(gateway, "GET", `/api/threads/${threadId}/runs/nope/events`)).status).toBe(404);
      expect((await call(gateway, "GET", `/api/threads/${threadId}/runs/${run!.run_id}/events?limit=0`)).status).toBe(422);
      // Another user cannot read it.
      expect((await call(gateway, "GET", `/api/threads/${threadId}/runs/${run!.run_id}/events`, undefined, { user: "mallory" })).status).toBe(404);
    } finally {
      await gateway.shutdown();
    }
  });
});

import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import { KeyValueThreadStore, ThreadStoreError, PINNED_METADATA_KEY } from "../../../src/runtime/thread-store.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { versionedOver } from "../../../src/storage/versioned.ts";

function store(clock = new ManualClock(Date.UTC(2026, 0, 1))) {
  const storage = createMemoryKeyValue();
  return { storage, clock, threads: new KeyValueThreadStore({ storage, clock }) };
}

const page = { limit: 100, offset: 0 };

describe("KeyValueThreadStore", () => {
  it("creates a thread with a uuid when no id is given, stamped with the clock and its owner", async () => {
    const { threads, storage } = store();
    const { thread, created } = await threads.create({ ownerId: "alice", metadata: { topic: "x" } });
    expect(created).toBe(true);
    expect(thread.thread_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(thread).toMatchObject({
      created_at: "2026-01-01T00:00:00.000Z",
      updated_at: "2026-01-01T00:00:00.000Z",
      status: "idle",
      owner_id: "alice",
      metadata: { topic: "x" },
      display_name: null,
    });
    expect(await storage.hasItem(`gateway:threads:${thread.thread_id}`)).toBe(true);
  });

  it("is idempotent: a second create of the same id returns the stored row unchanged", async () => {
    const { threads, clock } = store();
    await threads.create({ threadId: "t-1", ownerId: "alice", metadata: { a: 1 } });
    await clock.advance(1000);
    const again = await threads.create({ threadId: "t-1", ownerId: "bob", metadata: { a: 2 } });
    expect(again.created).toBe(false);
    expect(again.thread).toMatchObject({ owner_id: "alice", metadata: { a: 1 }, created_at: "2026-01-01T00:00:00.000Z" });
  });

  it("creates a new thread with one compare-and-set write and no read; an existing one is read after the refused write", async () => {
    const storage = createMemoryKeyValue();
    const calls: string[] = [];
    const real = versionedOver(storage);
    const versioned = {
      read: (key: string) => (calls.push("read"), real.read(key)),
      write: (key: string, value: string | null, expected: string | null) => (calls.push(`write ${expected === null ? "absent" : "version"}`), real.write(key, value, expected)),
    };
    const threads = new KeyValueThreadStore({ storage, versioned });
    expect((await threads.create({ threadId: "t-1", ownerId: "alice" })).created).toBe(true);
    expect(calls).toEqual(["write absent"]);
    calls.length = 0;
    const again = await threads.create({ threadId: "t-1", ownerId: "bob" });
    expect(again).toMatchObject({ created: false, thread: { owner_id: "alice" } });
    expect(calls).toEqual(["write absent", "read"]);
  });

  it("refuses ids outside [A-Za-z0-9_-]{1,64} with a message that says what is allowed", async () => {
    const { threads } = store();
    for (const bad of ["", "a/b", "../x", "a b", "x".repeat(65), "é"]) {
      const error = await threads.create({ threadId: bad, ownerId: null }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ThreadStoreError);
      expect((error as ThreadStoreError).code).toBe("invalid_thread_id");
      expect((error as Error).message).toContain('letters, digits, "_" or "-"');
    }
    expect((await threads.create({ threadId: "x".repeat(64), ownerId: null })).created).toBe(true);
    expect(await threads.get("../x")).toBeUndefined();
  });

  it("lists an owner's threads and the ownerless ones, never another owner's", async () => {
    const { threads } = store();
    await threads.create({ threadId: "mine", ownerId: "alice" });
    await threads.create({ threadId: "theirs", ownerId: "bob" });
    await threads.create({ threadId: "shared", ownerId: null });
    const ids = async (ownerId?: string) =>
      (await threads.search({ ...page, ...(ownerId ? { ownerId } : {}) })).map((t) => t.thread_id).sort();
    expect(await ids("alice")).toEqual(["mine", "shared"]);
    expect(await ids("bob")).toEqual(["shared", "theirs"]);
    expect(await ids()).toEqual(["mine", "shared", "theirs"]);
  });

  it("matches metadata exactly on every given key, nested values included", async () => {
    const { threads } = store();
    await threads.create({ threadId: "a", ownerId: null, metadata: { kind: "chat", tags: ["x"], cfg: { deep: 1 } } });
    await threads.create({ threadId: "b", ownerId: null, metadata: { kind: "chat", tags: ["x", "y"] } });
    await threads.create({ threadId: "c", ownerId: null, metadata: { kind: "task" } });
    const ids = async (metadata: Record<string, unknown>) => (await threads.search({ ...page, metadata })).map((t) => t.thread_id).sort();
    expect(await ids({ kind: "chat" })).toEqual(["a", "b"]);
    expect(await ids({ kind: "chat", tags: ["x"] })).toEqual(["a"]);
    expect(await ids({ cfg: { deep: 1 } })).toEqual(["a"]);
    expect(await ids({ cfg: {} })).toEqual([]);
    expect(await ids({ missing: null })).toEqual([]);
  });

  it("lists pinned threads first, then by updated_at newest first, with limit, offset and status", async () => {
    const { threads, clock } = store();
    for (const id of ["old", "mid", "new"]) {
      await threads.create({ threadId: id, ownerId: null });
      await clock.advance(1000);
    }
    await threads.update("old", { metadata: { [PINNED_METADATA_KEY]: true } });
    await clock.advance(1000);
    await threads.update("mid", { status: "interrupted" });
    const order = async (q: object = {}) => (await threads.search({ ...page, ...q })).map((t) => t.thread_id);
    expect(await order()).toEqual(["old", "mid", "new"]);
    expect(await order({ limit: 2 })).toEqual(["old", "mid"]);
    expect(await order({ offset: 1 })).toEqual(["mid", "new"]);
    expect(await order({ status: "interrupted" })).toEqual(["mid"]);
    expect(await order({ sortBy: "created_at", sortOrder: "asc" })).toEqual(["old", "mid", "new"]);
    expect(await order({ ids: ["new", "old", "nope"] })).toEqual(["old", "new"]);
  });

  it("rejects a limit outside 1 to 1000 and a negative offset", async () => {
    const { threads } = store();
    for (const q of [{ limit: 0, offset: 0 }, { limit: 1001, offset: 0 }, { limit: 1.5, offset: 0 }, { limit: 10, offset: -1 }]) {
      await expect(threads.search(q)).rejects.toMatchObject({ code: "invalid_search_query" });
    }
  });

  it("merges metadata and bumps updated_at on update; a missing thread is undefined", async () => {
    const { threads, clock } = store();
    await threads.create({ threadId: "t", ownerId: "alice", metadata: { a: 1, b: 1 } });
    await clock.advance(5000);
    const updated = await threads.update("t", { metadata: { b: 2, c: 3 }, display_name: "Title" });
    expect(updated).toMatchObject({
      metadata: { a: 1, b: 2, c: 3 },
      display_name: "Title",
      created_at: "2026-01-01T00:00:00.000Z",
      updated_at: "2026-01-01T00:00:05.000Z",
      owner_id: "alice",
    });
    expect(await threads.update("nope", { metadata: {} })).toBeUndefined();
  });

  it("lands every one of many concurrent patches to one thread", async () => {
    const { threads } = store();
    await threads.create({ threadId: "t", ownerId: null });
    await Promise.all(Array.from({ length: 20 }, (_, i) => threads.update("t", { metadata: { [`k${i}`]: i } })));
    const row = await threads.get("t");
    expect(Object.keys(row!.metadata)).toHaveLength(20);
  });

  it("deletes a row once", async () => {
    const { threads } = store();
    await threads.create({ threadId: "t", ownerId: null });
    expect(await threads.delete("t")).toBe(true);
    expect(await threads.delete("t")).toBe(false);
    expect(await threads.get("t")).toBeUndefined();
  });

  it("reports a corrupt row on get and leaves it out of listings", async () => {
    const { threads, storage } = store();
    await threads.create({ threadId: "good", ownerId: null });
    await storage.setItem("gateway:threads:bad", { v: 1, thread_id: "bad" });
    await expect(threads.get("bad")).rejects.toMatchObject({ code: "corrupt_thread_record" });
    expect((await threads.search(page)).map((t) => t.thread_id)).toEqual(["good"]);
  });

  it("hands out copies: mutating a returned row's metadata changes nothing stored", async () => {
    const { threads } = store();
    await threads.create({ threadId: "t", ownerId: null, metadata: { nested: { a: 1 } } });
    const row = await threads.get("t");
    expect(Object.isFrozen(row!.metadata)).toBe(true);
    expect((await threads.get("t"))!.metadata).toEqual({ nested: { a: 1 } });
  });
});

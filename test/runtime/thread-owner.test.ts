import { describe, expect, it } from "vitest";
import { isThreadVisibleTo, KeyValueThreadStore } from "../../src/runtime/thread-store.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";

describe("the thread owner rule", () => {
  it("shows a thread to its owner and an ownerless one to everyone, never another's", () => {
    expect(isThreadVisibleTo({ owner_id: "alice" }, "alice")).toBe(true);
    expect(isThreadVisibleTo({ owner_id: null }, "alice")).toBe(true);
    expect(isThreadVisibleTo({ owner_id: "bob" }, "alice")).toBe(false);
    expect(isThreadVisibleTo({ owner_id: "admin" }, "default")).toBe(false);
  });

  it("is the rule the thread store's owner filter applies", async () => {
    const store = new KeyValueThreadStore({ storage: createMemoryKeyValue() });
    await store.create({ threadId: "mine", ownerId: "alice" });
    await store.create({ threadId: "shared", ownerId: null });
    await store.create({ threadId: "theirs", ownerId: "bob" });
    const seen = (await store.search({ ownerId: "alice", limit: 10, offset: 0 })).map((thread) => thread.thread_id).sort();
    expect(seen).toEqual(["mine", "shared"]);
  });
});

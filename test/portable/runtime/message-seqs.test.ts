// Thread-global message seqs: given once, in conversation order, never twice.
import { describe, expect, it } from "vitest";
import { MessageSeqStore } from "../../../src/runtime/message-seqs.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";

const at = "2026-01-01T00:00:00.000Z";
const ids = (...names: string[]) => names.map((key) => ({ key, at }));
const seqsOf = (map: Map<string, { seq: number }>) => Object.fromEntries([...map].map(([id, { seq }]) => [id, seq]));

describe("MessageSeqStore", () => {
  it("gives new ids the next seqs in order and keeps the old ones, whatever the later order", async () => {
    const store = new MessageSeqStore(createMemoryKeyValue());
    expect(seqsOf(await store.assign("t", ids("a", "b")))).toEqual({ a: 1, b: 2 });
    expect(seqsOf(await store.assign("t", ids("c", "b", "d")))).toEqual({ c: 3, b: 2, d: 4 });
    expect(seqsOf(await store.assign("other", ids("a")))).toEqual({ a: 1 });
  });

  it("two stores over one storage writing at once never give one seq twice", async () => {
    const storage = createMemoryKeyValue();
    const [one, two] = [new MessageSeqStore(storage), new MessageSeqStore(storage)];
    const results = await Promise.all([one.assign("t", ids("a", "b")), two.assign("t", ids("c", "d")), one.assign("t", ids("e"))]);
    const all = Object.assign({}, ...results.map(seqsOf)) as Record<string, number>;
    expect(Object.values(all).sort()).toEqual([1, 2, 3, 4, 5]);
    // A later read agrees with what each writer was told.
    expect(seqsOf(await two.assign("t", ids("a", "b", "c", "d", "e")))).toEqual(all);
  });

  it("takes any id the client chose, __proto__ included", async () => {
    const store = new MessageSeqStore(createMemoryKeyValue());
    expect(seqsOf(await store.assign("t", ids("__proto__", "constructor")))).toEqual({ ["__proto__"]: 1, constructor: 2 });
    expect(seqsOf(await store.assign("t", ids("__proto__", "x")))).toEqual({ ["__proto__"]: 1, x: 3 });
  });
});

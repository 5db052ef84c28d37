import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createStorage } from "unstorage";
import type { Storage } from "unstorage";
import memoryDriver from "unstorage/drivers/memory";
import fsDriver from "unstorage/drivers/fs";
import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph/web";
import { ERROR, INTERRUPT, MemorySaver, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import type { BaseCheckpointSaver, Checkpoint, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { CheckpointerError, KeyValueCheckpointSaver } from "../../src/runtime/kv-checkpointer.ts";

const State = Annotation.Root({
  messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  turns: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
});

function echoGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(State)
    .addNode("respond", (s) => ({ messages: [`echo:${s.messages.at(-1)}`], turns: 1 }))
    .addEdge(START, "respond")
    .addEdge("respond", END)
    .compile({ checkpointer });
}

function approvalGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(State)
    .addNode("ask", () => {
      const answer = interrupt<string, string>("approve?");
      return { messages: [`answer:${answer}`] };
    })
    .addEdge(START, "ask")
    .addEdge("ask", END)
    .compile({ checkpointer });
}

const checkpoint = (id = uuid6(-1)): Checkpoint => ({ ...emptyCheckpoint(), id });
const meta = { source: "loop" as const, step: 0, parents: {} };
const memoryStorage = () => createStorage({ driver: memoryDriver() });

const tempRoots: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "deerflow-kv-checkpointer-"));
  tempRoots.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of tempRoots) rmSync(dir, { recursive: true, force: true });
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((p) => join(dir, p))
    .filter((p) => statSync(p).isFile());
}

const HOSTILE_THREAD_IDS = [
  "../../escape",
  "..",
  ".",
  "a/b",
  "a:b",
  "a\\b",
  "/abs",
  "q?x=1#frag",
  "ends-with$",
  "__proto__",
  "constructor",
  "CON",
  "Thread",
  "thread",
  "x",
  "y",
  " spaced ",
  "%2F..%2F",
  "ünïcødé 🦌",
  "L".repeat(300),
];
const HOSTILE_NAMESPACES = ["", "parent:child", "../ns", "a|b"];

async function listAll(saver: BaseCheckpointSaver, configurable: Record<string, unknown>): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const t of saver.list({ configurable })) out.push(t);
  return out;
}

describe("KeyValueCheckpointSaver with a compiled StateGraph", () => {
  it("keeps two turns on one thread, with state, history and persistence across instances", async () => {
    const storage = memoryStorage();
    const graph = echoGraph(new KeyValueCheckpointSaver({ storage }));
    const config = { configurable: { thread_id: "thread-1" } };

    await graph.invoke({ messages: ["hi"] }, config);
    const second = await graph.invoke({ messages: ["again"] }, config);
    expect(second).toEqual({ messages: ["hi", "echo:hi", "again", "echo:again"], turns: 2 });

    const state = await graph.getState(config);
    expect(state.values).toEqual(second);
    expect(state.next).toEqual([]);
    expect(state.metadata?.step).toBe(4);
    expect(state.parentConfig?.configurable?.checkpoint_id).toBeTypeOf("string");

    const history = [];
    for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
    // input, respond per turn: -1, 0, 1 then 2, 3, 4; newest first.
    expect(history.map((s) => s.metadata?.step)).toEqual([4, 3, 2, 1, 0, -1]);
    expect(history.map((s) => s.metadata?.source)).toEqual(["loop", "loop", "input", "loop", "loop", "input"]);
    expect(history[3]!.values).toEqual({ messages: ["hi", "echo:hi"], turns: 1 });
    const ids = history.map((s) => s.config.configurable?.checkpoint_id as string);
    expect([...ids].sort().reverse()).toEqual(ids);

    // A fresh saver over the same storage is a restarted process: same state, same history.
    const reopened = echoGraph(new KeyValueCheckpointSaver({ storage }));
    const reopenedState = await reopened.getState(config);
    expect(reopenedState.values).toEqual(state.values);
    expect(reopenedState.config).toEqual(state.config);
    const reopenedHistory = [];
    for await (const snapshot of reopened.getStateHistory(config)) reopenedHistory.push(snapshot);
    expect(reopenedHistory.map((s) => s.values)).toEqual(history.map((s) => s.values));

    const third = await reopened.invoke({ messages: ["third"] }, config);
    expect(third.turns).toBe(3);
    expect(await graph.getState({ configurable: { thread_id: "other" } })).toMatchObject({ values: {} });
  });

  it("resumes an interrupt from a fresh saver instance (pending writes persist)", async () => {
    const storage = memoryStorage();
    const config = { configurable: { thread_id: "approval" } };
    await approvalGraph(new KeyValueCheckpointSaver({ storage })).invoke({ messages: ["start"] }, config);

    const reopened = approvalGraph(new KeyValueCheckpointSaver({ storage }));
    const paused = await reopened.getState(config);
    expect(paused.next).toEqual(["ask"]);
    expect(paused.tasks[0]?.interrupts[0]?.value).toBe("approve?");
    const resumed = await reopened.invoke(new Command({ resume: "yes" }), config);
    expect(resumed.messages).toEqual(["start", "answer:yes"]);
  });

  it("time travel: a fork from an old checkpoint does not disturb the original branch", async () => {
    const storage = memoryStorage();
    const graph = echoGraph(new KeyValueCheckpointSaver({ storage }));
    const config = { configurable: { thread_id: "fork" } };
    await graph.invoke({ messages: ["one"] }, config);
    await graph.invoke({ messages: ["two"] }, config);
    const history = [];
    for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
    const afterFirstTurn = history.find((s) => s.metadata?.step === 1)!;

    const forkConfig = await graph.updateState(afterFirstTurn.config, { messages: ["edited"] });
    const forked = await graph.invoke({ messages: ["branch"] }, forkConfig);
    expect(forked.messages).toEqual(["one", "echo:one", "edited", "branch", "echo:branch"]);

    const original = await graph.getState(history[0]!.config);
    expect(original.values.messages).toEqual(["one", "echo:one", "two", "echo:two"]);
  });
});

describe("KeyValueCheckpointSaver storage semantics", () => {
  it("stores pending writes like MemorySaver: special channels replace, a repeated (task, idx) is kept once", async () => {
    const memory = new MemorySaver();
    const kv = new KeyValueCheckpointSaver({ storage: memoryStorage() });
    const tuples = await Promise.all(
      [memory, kv].map(async (saver) => {
        const config = await saver.put({ configurable: { thread_id: "t" } }, checkpoint("1"), meta, {});
        await saver.putWrites(config, [["a", 1], ["b", 2]], "task-b", "~x");
        await saver.putWrites(config, [["a", "again"], ["c", 3]], "task-b", "~x");
        await saver.putWrites(config, [[ERROR, "first"]], "task-a");
        await saver.putWrites(config, [[ERROR, "second"], [INTERRUPT, "stop"]], "task-a");
        await saver.putWrites(config, [["z", 0]], "task-a");
        return saver.getTuple(config);
      }),
    );
    expect(tuples[1]!.pendingWrites).toEqual(tuples[0]!.pendingWrites);
    expect(tuples[1]!.pendingWrites).toEqual([
      ["task-a", INTERRUPT, "stop"],
      ["task-a", ERROR, "second"],
      ["task-a", "z", 0],
      ["task-b", "a", 1],
      ["task-b", "b", 2],
    ]);
  });

  it("round-trips binary values larger than one base64 chunk", async () => {
    const kv = new KeyValueCheckpointSaver({ storage: memoryStorage() });
    const config = await kv.put({ configurable: { thread_id: "bin" } }, checkpoint(), meta, {});
    const bytes = new Uint8Array(100_003).map((_, i) => (i * 31) % 256);
    await kv.putWrites(config, [["blob", bytes]], "task");
    const [, , value] = (await kv.getTuple(config))!.pendingWrites![0]!;
    expect(value).toBeInstanceOf(Uint8Array);
    const read = value as Uint8Array;
    expect(read.length).toBe(bytes.length);
    expect(read.every((byte, i) => byte === bytes[i])).toBe(true);
  });

  it("does not lose either of two concurrent puts on the same thread", async () => {
    const kv = new KeyValueCheckpointSaver({ storage: memoryStorage() });
    const base = { configurable: { thread_id: "race", checkpoint_ns: "" } };
    const ids = Array.from({ length: 20 }, () => uuid6(-1));
    await Promise.all(ids.map((id) => kv.put(base, checkpoint(id), meta, {})));
    const listed = await listAll(kv, base.configurable);
    expect(listed.map((t) => t.checkpoint.id)).toEqual([...ids].sort().reverse());
  });

  it("fails with a stable code when the thread is missing or an id is not a string", async () => {
    const kv = new KeyValueCheckpointSaver({ storage: memoryStorage() });
    await expect(kv.put({ configurable: {} }, checkpoint(), meta, {})).rejects.toMatchObject({ code: "missing_thread_id" });
    await expect(kv.putWrites({ configurable: { thread_id: "t" } }, [], "task")).rejects.toMatchObject({
      code: "missing_checkpoint_id",
    });
    await expect(kv.put({ configurable: { thread_id: 42 } }, checkpoint(), meta, {})).rejects.toBeInstanceOf(CheckpointerError);
    await expect(kv.getTuple({ configurable: { thread_id: "\uD800" } })).rejects.toMatchObject({ code: "invalid_config_value" });
    expect(() => new KeyValueCheckpointSaver({ storage: memoryStorage(), prefix: "a/../b" })).toThrow(
      expect.objectContaining({ code: "invalid_prefix" }),
    );
  });

  it("mints channel versions that keep their order as strings and never repeat", () => {
    const kv = new KeyValueCheckpointSaver({ storage: memoryStorage() });
    const v1 = kv.getNextVersion(undefined);
    const v2 = kv.getNextVersion(v1);
    const v10 = kv.getNextVersion(9);
    expect(String(v1) < String(v2)).toBe(true);
    expect(String(v2).localeCompare(String(v10))).toBeLessThan(0);
    expect(kv.getNextVersion(v1)).not.toBe(v2);
  });
});

describe.each([
  ["memory", () => ({ storage: memoryStorage() as Storage, root: undefined as string | undefined })],
  [
    "fs",
    () => {
      const root = tempDir();
      return { storage: createStorage({ driver: fsDriver({ base: join(root, "store") }) }), root };
    },
  ],
])("hostile ids on the %s driver", (_driver, open) => {
  // One retry: on Deno, with every other test file in worker threads of the same process on 2 cores,
  // this test has stalled past its timeout in CI runs of this machine (20 s on 672f0f5, 60 s on 6550ad5),
  // while it takes 2-3 s alone and passed 8 of 8 alone and in 2 of 2 full local Deno passes. The cause
  // is not found; the stock fs driver it runs on is not the gateway's (adapters/shared/fs-key-value.ts).
  // In the green CI of caae574 it took 24.8 s under Deno against 1.6 s on Node and 1.1 s on Bun: slow
  // under the full Deno suite, so far without a stall. A deterministic failure still fails both tries.
  it("stores, lists and deletes every thread id and namespace without escaping the prefix", { timeout: 60_000, retry: 1 }, async () => {
    const { storage, root } = open();
    const saver = new KeyValueCheckpointSaver({ storage, prefix: "deerflow/checkpoints" });
    const expected = new Map<string, string>();
    for (const threadId of HOSTILE_THREAD_IDS) {
      for (const checkpointNs of HOSTILE_NAMESPACES) {
        const id = uuid6(-1);
        const config = await saver.put({ configurable: { thread_id: threadId, checkpoint_ns: checkpointNs } }, checkpoint(id), meta, {});
        await saver.putWrites(config, [["note", `${threadId}|${checkpointNs}`]], "../task:1");
        expected.set(id, `${threadId}|${checkpointNs}`);
      }
    }
    await storage.setItem("deerflow:checkpointsX:decoy", "not ours");
    await storage.setItem("deerflow:checkpoints:c:not-a-segment", "not ours");

    for (const threadId of HOSTILE_THREAD_IDS) {
      for (const checkpointNs of HOSTILE_NAMESPACES) {
        const tuple = await saver.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: checkpointNs } });
        expect(tuple?.config.configurable).toMatchObject({ thread_id: threadId, checkpoint_ns: checkpointNs });
        expect(tuple?.pendingWrites).toEqual([["../task:1", "note", `${threadId}|${checkpointNs}`]]);
      }
      const perThread = await listAll(saver, { thread_id: threadId });
      expect(perThread).toHaveLength(HOSTILE_NAMESPACES.length);
    }
    // "Thread" and "thread" stay apart even on a case-insensitive file system.
    expect((await listAll(saver, { thread_id: "Thread" })).every((t) => t.config.configurable?.thread_id === "Thread")).toBe(true);

    const everything = await listAll(saver, {});
    expect(everything).toHaveLength(expected.size);
    for (const t of everything) {
      const { thread_id, checkpoint_ns } = t.config.configurable!;
      expect(`${thread_id}|${checkpoint_ns}`).toBe(expected.get(t.checkpoint.id));
    }

    if (root) {
      const store = join(root, "store");
      const decoys = [join("deerflow", "checkpointsX", "decoy"), join("deerflow", "checkpoints", "c", "not-a-segment")];
      const files = filesUnder(root).map((file) => relative(store, file));
      expect(files.length).toBeGreaterThan(expected.size);
      for (const rel of files) {
        expect(rel.startsWith("..")).toBe(false);
        if (decoys.includes(rel)) continue;
        const parts = rel.split(sep);
        expect(parts.slice(0, 2)).toEqual(["deerflow", "checkpoints"]);
        for (const part of parts.slice(2)) expect(part).toMatch(/^(?:[xy][0-9a-f]*|[cbw])$/);
        expect(Math.max(...parts.map((p) => p.length))).toBeLessThanOrEqual(201);
      }
    }

    // A fresh instance sees the same data; deleteThread removes one thread and nothing else.
    const reopened = new KeyValueCheckpointSaver({ storage, prefix: "deerflow:checkpoints" });
    await reopened.deleteThread("../../escape");
    expect(await reopened.getTuple({ configurable: { thread_id: "../../escape" } })).toBeUndefined();
    expect(await listAll(reopened, { thread_id: "../../escape" })).toEqual([]);
    expect(await reopened.getTuple({ configurable: { thread_id: ".." } })).toBeDefined();
    expect(await listAll(reopened, {})).toHaveLength(expected.size - HOSTILE_NAMESPACES.length);
    expect(await storage.getItem("deerflow:checkpointsX:decoy")).toBe("not ours");
    await storage.dispose();
  }); // about 80 checkpoints and their writes through the fs driver
});

/** The storage, counting its setItem and setItemRaw calls in `writes`. */
function countingWrites(storage: Storage): Storage & { writes: number } {
  const counter = { writes: 0 };
  return new Proxy(storage, {
    get(target, property, receiver) {
      if (property === "writes") return counter.writes;
      const original = Reflect.get(target, property, receiver);
      if (property === "setItem" || property === "setItemRaw") return (...args: unknown[]) => (counter.writes++, (original as Function).apply(target, args));
      return original;
    },
    set(target, property, value, receiver) {
      if (property === "writes") return ((counter.writes = value as number), true);
      return Reflect.set(target, property, value, receiver);
    },
  }) as Storage & { writes: number };
}

describe("KeyValueCheckpointSaver stored layout", () => {
  const withValues = (id: string, values: Record<string, unknown>, versions: Record<string, string>): Checkpoint => ({
    ...emptyCheckpoint(),
    id,
    channel_values: values,
    channel_versions: versions,
  });

  it("stores a checkpoint with its new channel values as one write, and a child inherits the unchanged ones (also through a fresh saver)", async () => {
    const storage = memoryStorage();
    const counted = countingWrites(storage);
    const saver = new KeyValueCheckpointSaver({ storage: counted });
    const parentId = uuid6(-1);
    const parentConfig = await saver.put(
      { configurable: { thread_id: "one-write" } },
      withValues(parentId, { a: "alpha", b: [1, 2] }, { a: "1", b: "1" }),
      meta,
      { a: "1", b: "1" },
    );
    expect(counted.writes).toBe(1);
    // A second process: nothing of the parent in memory, its record is read from the store.
    const fresh = new KeyValueCheckpointSaver({ storage: counted });
    const childConfig = await fresh.put(parentConfig, withValues(uuid6(-1), { a: "alpha", b: [1, 2, 3] }, { a: "1", b: "2" }), meta, { b: "2" });
    expect(counted.writes).toBe(2);
    const grandchild = await saver.put(childConfig, withValues(uuid6(-1), { a: "alpha", b: [1, 2, 3], c: true }, { a: "1", b: "2", c: "1" }), meta, { c: "1" });
    expect(counted.writes).toBe(3);
    for (const reader of [saver, new KeyValueCheckpointSaver({ storage })]) {
      expect((await reader.getTuple(parentConfig))!.checkpoint.channel_values).toEqual({ a: "alpha", b: [1, 2] });
      expect((await reader.getTuple(childConfig))!.checkpoint.channel_values).toEqual({ a: "alpha", b: [1, 2, 3] });
      expect((await reader.getTuple(grandchild))!.checkpoint.channel_values).toEqual({ a: "alpha", b: [1, 2, 3], c: true });
    }
  });

  it("keeps JSON-typed values as their text, bytes as base64, and reads JSON stored as base64 (earlier records) the same", async () => {
    const storage = memoryStorage();
    const saver = new KeyValueCheckpointSaver({ storage });
    const { bytesToBase64 } = await import("../../src/core/base64.ts");
    const id = uuid6(-1);
    const config = await saver.put(
      { configurable: { thread_id: "text-values" } },
      withValues(id, { a: "ünïcødé \u{1F600} \"quoted\"", raw: new Uint8Array([0, 255, 1]) }, { a: "1", raw: "1" }),
      meta,
      { a: "1", raw: "1" },
    );
    await saver.putWrites(config, [["a", { note: "ok ✓" }]], "task-1");
    const keys = await storage.getKeys("checkpoints");
    const record = (await storage.getItem(keys.find((k) => k.includes(":c:"))!)) as Record<string, any>;
    expect(record.checkpoint.t).toBe("json");
    expect(JSON.parse(record.checkpoint.s).id).toBe(id);
    expect(record.metadata).toEqual({ t: "json", s: JSON.stringify(meta) });
    expect(JSON.parse(record.blobs.a.value.s)).toBe("ünïcødé \u{1F600} \"quoted\"");
    expect(record.blobs.raw.value).toEqual({ t: "bytes", b: bytesToBase64(new Uint8Array([0, 255, 1])) });
    const batch = (await storage.getItem(keys.find((k) => k.includes(":w:"))!)) as Record<string, any>;
    expect(batch.writes[0].value).toEqual({ t: "json", s: JSON.stringify({ note: "ok ✓" }) });
    const read = async () => {
      const tuple = (await new KeyValueCheckpointSaver({ storage }).getTuple(config))!;
      return [tuple.checkpoint.channel_values, tuple.metadata, tuple.pendingWrites];
    };
    const expected = [{ a: "ünïcødé \u{1F600} \"quoted\"", raw: new Uint8Array([0, 255, 1]) }, meta, [["task-1", "a", { note: "ok ✓" }]]];
    expect(await read()).toEqual(expected);
    // The same record as earlier versions wrote it, every value base64: read the same.
    const asBase64 = (value: { t: string; s?: string; b?: string }) => (value.s === undefined ? value : { t: value.t, b: bytesToBase64(new TextEncoder().encode(value.s)) });
    await storage.setItem(keys.find((k) => k.includes(":c:"))!, {
      ...record,
      checkpoint: asBase64(record.checkpoint),
      metadata: asBase64(record.metadata),
      blobs: { a: { ...record.blobs.a, value: asBase64(record.blobs.a.value) }, raw: record.blobs.raw },
    });
    await storage.setItem(keys.find((k) => k.includes(":w:"))!, { ...batch, writes: [{ ...batch.writes[0], value: asBase64(batch.writes[0].value) }] });
    expect(await read()).toEqual(expected);
  });

  it("reads threads stored before values were inline (one BlobRecord per channel version), and continues them", async () => {
    const storage = memoryStorage();
    const saver = new KeyValueCheckpointSaver({ storage });
    const { encodeSegment } = await import("../../src/runtime/kv-checkpoint-keys.ts");
    const { toSerialized } = await import("../../src/runtime/kv-checkpoint-records.ts");
    const ns = `checkpoints:${encodeSegment("old-thread")}:${encodeSegment("")}`;
    const oldId = uuid6(-1);
    // What the saver wrote before: the record without values, each value under b:<channel>:<version>.
    const { channel_values: _values, ...withoutValues } = withValues(oldId, {}, { a: "1", b: "1" });
    await storage.setItem(`${ns}:b:${encodeSegment("a")}:${encodeSegment("1")}`, { v: 1, value: toSerialized(await saver.serde.dumpsTyped("old alpha")) });
    await storage.setItem(`${ns}:b:${encodeSegment("b")}:${encodeSegment("1")}`, { v: 1 });
    await storage.setItem(`${ns}:c:${encodeSegment(oldId)}`, {
      v: 1,
      thread_id: "old-thread",
      checkpoint_ns: "",
      checkpoint_id: oldId,
      checkpoint: toSerialized(await saver.serde.dumpsTyped(withoutValues)),
      metadata: toSerialized(await saver.serde.dumpsTyped(meta)),
    });
    const oldConfig = { configurable: { thread_id: "old-thread", checkpoint_ns: "", checkpoint_id: oldId } };
    expect((await saver.getTuple(oldConfig))!.checkpoint.channel_values).toEqual({ a: "old alpha" });
    // A new checkpoint on the old thread keeps the old values it did not change.
    const next = await saver.put(oldConfig, withValues(uuid6(-1), { a: "old alpha", b: "new" }, { a: "1", b: "2" }), meta, { b: "2" });
    expect((await new KeyValueCheckpointSaver({ storage }).getTuple(next))!.checkpoint.channel_values).toEqual({ a: "old alpha", b: "new" });
    expect((await saver.getTuple({ configurable: { thread_id: "old-thread" } }))!.checkpoint.channel_values).toEqual({ a: "old alpha", b: "new" });
  });
});

describe("KeyValueCheckpointSaver pending-write batches", () => {
  it("stores one putWrites call as one write, and reads old per-write records beside new batches like MemorySaver would", async () => {
    const storage = memoryStorage();
    const counted = countingWrites(storage);
    const saver = new KeyValueCheckpointSaver({ storage: counted });
    const { encodeSegment } = await import("../../src/runtime/kv-checkpoint-keys.ts");
    const { toSerialized } = await import("../../src/runtime/kv-checkpoint-records.ts");
    const id = uuid6(-1);
    const config = await saver.put({ configurable: { thread_id: "wt" } }, checkpoint(id), meta, {});
    // What earlier versions wrote: one record per write, under w:<checkpoint>:<task>:<idx>.
    const old = async (task: string, idx: number, channel: string, value: unknown) =>
      storage.setItem(`checkpoints:${encodeSegment("wt")}:${encodeSegment("")}:w:${encodeSegment(id)}:${encodeSegment(task)}:${encodeSegment(String(idx))}`, {
        v: 1, task_id: task, idx, channel, task_path: "", value: toSerialized(await saver.serde.dumpsTyped(value)),
      });
    await old("task-b", 0, "a", "old a");
    await old("task-a", -1, ERROR, "old error");
    counted.writes = 0;
    await saver.putWrites(config, [["a", "new a"], ["b", 2], ["c", 3]], "task-b");
    expect(counted.writes).toBe(1);
    await new KeyValueCheckpointSaver({ storage: counted }).putWrites(config, [[ERROR, "new error"]], "task-a");
    expect(counted.writes).toBe(2);
    expect((await new KeyValueCheckpointSaver({ storage }).getTuple(config))!.pendingWrites).toEqual([
      ["task-a", ERROR, "new error"],
      ["task-b", "a", "old a"],
      ["task-b", "b", 2],
      ["task-b", "c", 3],
    ]);
  });
});

describe("KeyValueCheckpointSaver thread deletion", () => {
  it("a thread delete that stops halfway leaves every checkpoint still listed with all its values", async () => {
    const storage = memoryStorage();
    const saver = new KeyValueCheckpointSaver({ storage });
    let config = { configurable: { thread_id: "del" } } as { configurable: Record<string, unknown> };
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const id = uuid6(-1);
      ids.push(id);
      // "a" is set once and inherited by every later checkpoint; "n" changes every time.
      const versions = { a: "1", n: String(i + 1) };
      config = (await saver.put(config, { ...emptyCheckpoint(), id, channel_values: { a: "kept", n: i }, channel_versions: versions }, meta, i === 0 ? versions : { n: versions.n })) as typeof config;
    }
    let removals = 0;
    const failing = new Proxy(storage, {
      get(target, property, receiver) {
        const original = Reflect.get(target, property, receiver);
        if (property === "removeItem") {
          return (...args: unknown[]) => {
            if (++removals > 3) return Promise.reject(new Error("store went away"));
            return (original as Function).apply(target, args);
          };
        }
        return original;
      },
    }) as Storage;
    await expect(new KeyValueCheckpointSaver({ storage: failing }).deleteThread("del")).rejects.toThrow("store went away");
    const left = await listAll(new KeyValueCheckpointSaver({ storage }), { thread_id: "del" });
    expect(left.length).toBe(3);
    for (const tuple of left) expect(tuple.checkpoint.channel_values).toEqual({ a: "kept", n: ids.indexOf(tuple.checkpoint.id) });
  });
});

import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import { statusOfError } from "../../../src/gateway/errors.ts";
import { RunStore } from "../../../src/runtime/runs/run-store.ts";
import { MemoryStreamBridge, parseLastEventId, serializedFrameData, type StreamFrame } from "../../../src/runtime/runs/stream-bridge.ts";
import type { RunRecord } from "../../../src/runtime/runs/types.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { thrown } from "../state/helpers.ts";
import { collect } from "./runs-fixtures.ts";

function row(threadId: string, runId: string, createdMs: number, status: RunRecord["status"] = "success"): RunRecord {
  const at = new Date(createdMs).toISOString();
  return {
    run_id: runId,
    thread_id: threadId,
    assistant_id: "lead_agent",
    status,
    metadata: {},
    multitask_strategy: "reject",
    created_at: at,
    updated_at: at,
    owner_id: "alice",
    error: null,
    kwargs: {},
  };
}

describe("RunStore", () => {
  it("keeps rows per thread, lists newest first with limit, offset and status, and survives a new store over the same storage", async () => {
    const storage = createMemoryKeyValue();
    const store = new RunStore(storage);
    await store.put(row("t1", "r1", 1000));
    await store.put(row("t1", "r2", 2000, "error"));
    await store.put(row("t1", "r3", 3000));
    await store.put(row("T1", "r9", 4000));
    const reopened = new RunStore(storage);
    expect((await reopened.list("t1")).map((r) => r.run_id)).toEqual(["r3", "r2", "r1"]);
    expect((await reopened.list("t1", { limit: 1, offset: 1 })).map((r) => r.run_id)).toEqual(["r2"]);
    expect((await reopened.list("t1", { status: "success" })).map((r) => r.run_id)).toEqual(["r3", "r1"]);
    // Ids that differ only by case stay apart (the fs driver may sit on a case-insensitive disk).
    expect((await reopened.list("T1")).map((r) => r.run_id)).toEqual(["r9"]);
    expect(await reopened.get("t1", "r9")).toBeUndefined();
    expect(await reopened.delete("t1", "r2")).toBe(true);
    expect((await reopened.list("t1")).map((r) => r.run_id)).toEqual(["r3", "r1"]);
  });

  it("finds the rows a crashed process left in flight", async () => {
    const store = new RunStore(createMemoryKeyValue());
    await store.put(row("a", "done", 1));
    await store.put(row("a", "live", 2, "running"));
    await store.put(row("b", "queued", 3, "pending"));
    const found = await store.findByStatus(new Set(["pending", "running"]));
    expect(found.map((r) => r.run_id).sort()).toEqual(["live", "queued"]);
  });
});

describe("MemoryStreamBridge", () => {
  it("numbers frames <epoch_ms>-<seq> from 0, strictly increasing, and ends with end (data null)", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const bridge = new MemoryStreamBridge({ clock });
    bridge.open("r");
    await bridge.publish("r", "metadata", { run_id: "r" });
    await bridge.publish("r", "values", { n: 1 });
    await bridge.end("r");
    await bridge.publish("r", "values", { late: true });
    const frames = await collect(bridge.subscribe("r"));
    expect(frames.map((f) => f.event)).toEqual(["metadata", "values", "end"]);
    expect(frames.map((f) => f.id)).toEqual(["1700000000000-0", "1700000000000-1", "1700000000000-2"]);
    expect(frames.at(-1)!.data).toBeNull();
  });

  it("replays what came after Last-Event-ID, then follows live frames", async () => {
    const bridge = new MemoryStreamBridge({ clock: new ManualClock(5) });
    bridge.open("r");
    for (let i = 0; i < 3; i++) await bridge.publish("r", "values", { i });
    const seen: StreamFrame[] = [];
    const reading = (async () => {
      for await (const frame of bridge.subscribe("r", { lastEventId: "5-1" })) seen.push(frame);
    })();
    await bridge.publish("r", "values", { i: 3 });
    await bridge.end("r");
    await reading;
    expect(seen.map((f) => f.data)).toEqual([{ i: 2 }, { i: 3 }, null]);
  });

  it("answers a cursor older than the retained window with exactly one gap frame and no end", async () => {
    const bridge = new MemoryStreamBridge({ clock: new ManualClock(7), retain: 3 });
    bridge.open("r");
    for (let i = 0; i < 6; i++) await bridge.publish("r", "values", { i });
    const frames = await collect(bridge.subscribe("r", { lastEventId: "7-1" }));
    expect(frames).toEqual([
      {
        event: "gap",
        data: {
          code: "stream_replay_gap",
          run_id: "r",
          requested_event_id: "7-1",
          earliest_available_event_id: "7-3",
          latest_available_event_id: "7-5",
          recovery: "reload_durable_state",
        },
      },
    ]);
    // The last frame before the window still resumes exactly: nothing was missed.
    const resumed = bridge.subscribe("r", { lastEventId: "7-2" })[Symbol.asyncIterator]();
    expect((await resumed.next()).value).toMatchObject({ id: "7-3" });
  });

  it("resumes a cursor past the newest frame after the newest, replaying nothing; the seq decides, not the epoch", async () => {
    const bridge = new MemoryStreamBridge({ clock: new ManualClock(9) });
    bridge.open("r");
    for (let i = 0; i < 3; i++) await bridge.publish("r", "values", { i });
    const seen: StreamFrame[] = [];
    const reading = (async () => {
      for await (const frame of bridge.subscribe("r", { lastEventId: "1-99999" })) seen.push(frame);
    })();
    await bridge.publish("r", "values", { i: 3 });
    await bridge.end("r");
    await reading;
    expect(seen.map((f) => f.id)).toEqual(["9-3", "9-4"]);
    // A retained seq with another epoch resumes after that seq.
    expect((await collect(bridge.subscribe("r", { lastEventId: "123-2" }))).map((f) => f.id)).toEqual(["9-3", "9-4"]);
    // Past the end of a finished run: nothing at all.
    expect(await collect(bridge.subscribe("r", { lastEventId: "9-5" }))).toEqual([]);
  });

  it("refuses a malformed cursor instead of replaying the window", async () => {
    const bridge = new MemoryStreamBridge({ clock: new ManualClock(9) });
    bridge.open("r");
    await bridge.publish("r", "values", {});
    for (const bad of ["abc", "1-", "-1", "1-2-3", " 1-x"]) {
      expect(() => parseLastEventId(bad)).toThrow(expect.objectContaining({ code: "invalid_last_event_id" }));
      expect(statusOfError(thrown(() => parseLastEventId(bad)))).toBe(400);
      await expect(collect(bridge.subscribe("r", { lastEventId: bad }))).rejects.toThrow(/Last-Event-ID .* expected <epoch_ms>-<seq>/);
    }
    expect(parseLastEventId(undefined)).toBeUndefined();
    expect(parseLastEventId("  ")).toBeUndefined();
    expect(parseLastEventId(" 5-2 ")).toBe("5-2");
  });

  it("gives a live reader that fell behind the window one gap frame", async () => {
    const bridge = new MemoryStreamBridge({ clock: new ManualClock(1), retain: 2 });
    bridge.open("r");
    await bridge.publish("r", "values", { i: 0 });
    const reader = bridge.subscribe("r")[Symbol.asyncIterator]();
    expect((await reader.next()).value).toMatchObject({ id: "1-0" });
    for (let i = 1; i < 5; i++) await bridge.publish("r", "values", { i });
    const next = await reader.next();
    expect(next.value).toMatchObject({ event: "gap", data: { requested_event_id: "1-0", earliest_available_event_id: "1-3" } });
    expect((await reader.next()).done).toBe(true);
  });

  it("releases a finished run's frames only after the grace period (clock-driven)", async () => {
    const clock = new ManualClock(0);
    const bridge = new MemoryStreamBridge({ clock, releaseAfterMs: 60_000 });
    bridge.open("r");
    await bridge.end("r");
    bridge.release("r");
    await clock.advance(59_999);
    expect(bridge.has("r")).toBe(true);
    await clock.advance(1);
    expect(bridge.has("r")).toBe(false);
  });

  it("releases many finished runs in the order they came due, each after its own grace period", async () => {
    const clock = new ManualClock(0);
    const bridge = new MemoryStreamBridge({ clock, releaseAfterMs: 60_000 });
    for (let i = 0; i < 30; i++) {
      bridge.open(`r${i}`);
      await bridge.end(`r${i}`);
      bridge.release(`r${i}`);
      await clock.advance(1_000);
    }
    // r0 finished at 0 and r29 at 29 s: at 60.5 s only the first 31 seconds' worth are gone.
    await clock.advance(60_500 - 30_000);
    const held = Array.from({ length: 30 }, (_, i) => bridge.has(`r${i}`));
    expect(held.indexOf(true)).toBe(1);
    expect(held.slice(1).every(Boolean)).toBe(true);
    await clock.advance(29_000);
    expect(Array.from({ length: 30 }, (_, i) => bridge.has(`r${i}`)).filter(Boolean)).toEqual([]);
  });

  it("holds at most retainReleasedFrames over the finished runs waiting for release: the longest finished go first", async () => {
    const clock = new ManualClock(0);
    const drained: number[] = [];
    const bridge = new MemoryStreamBridge({ clock, retain: 4, releaseAfterMs: 60_000, retainReleasedFrames: 10, onDrained: () => drained.push(clock.now()) });
    for (let i = 0; i < 5; i++) {
      bridge.open(`r${i}`);
      for (let f = 0; f < 2; f++) await bridge.publish(`r${i}`, "values", { f });
      await bridge.end(`r${i}`);
      bridge.release(`r${i}`);
    }
    // 3 frames each: r0 and r1 went at once to keep 9 of them; the newest three stay readable.
    expect([0, 1, 2, 3, 4].map((i) => bridge.has(`r${i}`))).toEqual([false, false, true, true, true]);
    expect((await collect(bridge.subscribe("r4"))).map((f) => f.event)).toEqual(["values", "values", "end"]);
    // A run still in flight is not counted against it.
    bridge.open("live");
    for (let f = 0; f < 20; f++) await bridge.publish("live", "values", { f });
    expect(bridge.has("r2")).toBe(true);
    await clock.advance(60_000);
    expect([2, 3, 4].map((i) => bridge.has(`r${i}`))).toEqual([false, false, false]);
    expect(drained).toEqual([]);
    await bridge.end("live");
    bridge.release("live", 0);
    expect(drained).toEqual([60_000]);
  });

  it("keeps a frame as the JSON of its data when published: later changes to the object do not reach readers, and SSE writes that text", async () => {
    const bridge = new MemoryStreamBridge({ clock: new ManualClock(5) });
    bridge.open("r");
    const values = { messages: [{ type: "ai", content: "first" }], skipped: undefined };
    await bridge.publish("r", "values", values);
    values.messages[0]!.content = "changed afterwards";
    await bridge.end("r");
    const frames = await collect(bridge.subscribe("r"));
    expect(frames).toEqual([
      { id: "5-0", event: "values", data: { messages: [{ type: "ai", content: "first" }] } },
      { id: "5-1", event: "end", data: null },
    ]);
    expect(serializedFrameData(frames[0]!)).toBe('{"messages":[{"type":"ai","content":"first"}]}');
    expect({ ...frames[0] }).toEqual({ id: "5-0", event: "values", data: { messages: [{ type: "ai", content: "first" }] } });
    expect(serializedFrameData({ event: "gap", data: {} })).toBeUndefined();
  });

  it("ends a waiting subscription when its signal aborts", async () => {
    const bridge = new MemoryStreamBridge();
    bridge.open("r");
    const controller = new AbortController();
    const reading = collect(bridge.subscribe("r", { signal: controller.signal }));
    controller.abort();
    expect(await reading).toEqual([]);
  });
});

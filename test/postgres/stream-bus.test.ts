import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresStreamBus } from "../../adapters/shared/postgres/stream-bus.ts";
import { MemoryStreamBridge, type StreamFrame } from "../../src/runtime/runs/stream-bridge.ts";
import type { BusSignal } from "../../src/runtime/runs/stream-bus.ts";
import { countPool } from "../support/counted-pool.ts";
import { startRunsDatabase, type RunsDatabase } from "./runs-database.ts";

let db: RunsDatabase;
let poolA: pg.Pool;
let poolB: pg.Pool;
let busA: PostgresStreamBus;
let busB: PostgresStreamBus;
const extraBuses: PostgresStreamBus[] = [];

beforeAll(async () => {
  db = await startRunsDatabase();
  poolA = db.pool();
  poolB = db.pool();
  busA = new PostgresStreamBus({ pool: poolA, clientConfig: { connectionString: db.url, application_name: "bus-a-listen" } });
  busB = new PostgresStreamBus({ pool: poolB, clientConfig: { connectionString: db.url, application_name: "bus-b-listen" } });
  await Promise.all([busA.start(), busB.start()]);
}, 60_000);

afterAll(async () => {
  await Promise.all([busA, busB, ...extraBuses].map((bus) => bus?.close()));
  await db?.close();
});

let counter = 0;
const runId = () => `run-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function collect(frames: AsyncIterable<StreamFrame>): Promise<StreamFrame[]> {
  const out: StreamFrame[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

/** A frame id without its epoch part, to compare ids of two buses made at other moments. */
const seqOf = (id: string | undefined) => (id === undefined ? undefined : id.split("-")[1]);
const shape = (frames: StreamFrame[]) =>
  frames.map((f) =>
    f.event === "gap"
      ? {
          event: "gap",
          data: {
            ...(f.data as Record<string, unknown>),
            run_id: "R",
            requested_event_id: seqOf((f.data as { requested_event_id: string | undefined }).requested_event_id),
            earliest_available_event_id: seqOf((f.data as { earliest_available_event_id: string }).earliest_available_event_id),
            latest_available_event_id: seqOf((f.data as { latest_available_event_id: string }).latest_available_event_id),
          },
        }
      : { seq: seqOf(f.id), event: f.event, data: f.data },
  );

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A started bus on a pool of its own whose statements' texts are recorded (countPool). */
async function recordingBus(): Promise<{ bus: PostgresStreamBus; sent: readonly string[] }> {
  const pool = db.pool();
  const sent = countPool(pool).texts;
  const bus = new PostgresStreamBus({ pool, clientConfig: { connectionString: db.url } });
  extraBuses.push(bus);
  await bus.start();
  return { bus, sent };
}

describe("PostgresStreamBus", () => {
  it("delivers frames published on one bus to a subscriber on another, live and in order, ending after end", async () => {
    const id = runId();
    await busA.open(id);
    expect(await busB.has(id)).toBe(true);
    const reading = collect(busB.subscribe(id));
    for (let n = 0; n < 20; n++) await busA.publish(id, "values", { n });
    await busA.end(id);
    await busA.publish(id, "values", { after: "end" });
    const frames = await reading;
    expect(frames.map((f) => f.event)).toEqual([...Array.from({ length: 20 }, () => "values"), "end"]);
    expect(frames.map((f) => seqOf(f.id))).toEqual(Array.from({ length: 21 }, (_, i) => String(i)));
    expect(frames.slice(0, 20).map((f) => (f.data as { n: number }).n)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(frames[20]!.data).toBeNull();
    expect(frames[0]!.id).toMatch(/^\d+-0$/);
  });

  it("carries any text a frame holds: quotes, backslashes, NUL, a lone surrogate, emoji, in a notification and from the table", async () => {
    const awkward = { q: 'say "hi" \\ back\\slash', nul: "a\u0000b", lone: "x\ud800y", emoji: "✓ 🦌", nl: "1\n2\t3", event: "odd" };
    const id = runId();
    await busA.open(id);
    const live = collect(busB.subscribe(id));
    await busA.publish(id, "custom", awkward);
    // Over the notification's inline limit: the reader fetches it from the table.
    await busA.publish(id, "custom", { ...awkward, pad: "é".repeat(9000) });
    await busA.publish(id, 'ev"ent\\', { n: 1 });
    await busA.end(id);
    const expected = ["custom", "custom", 'ev"ent\\', "end"];
    // The JSON a frame's data round-trips through turns a lone surrogate into U+FFFD or keeps it;
    // compare with what JSON.parse(JSON.stringify(...)) gives, as the memory bridge's readers get.
    const same = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;
    for (const frames of [await live, await collect(busB.subscribe(id))]) {
      expect(frames.map((f) => f.event)).toEqual(expected);
      expect(frames[0]!.data).toEqual(same(awkward));
      expect(frames[1]!.data).toEqual(same({ ...awkward, pad: "é".repeat(9000) }));
    }
  });

  it("replays exactly the frames after Last-Event-ID, then end; a future cursor replays nothing", async () => {
    const id = runId();
    await busA.open(id);
    for (let n = 0; n < 5; n++) await busA.publish(id, "values", { n });
    // publish returns before its frame is committed (the outbox); has() waits for what was queued.
    expect(await busA.has(id)).toBe(true);
    const all = await collect(busB.subscribe(id, { signal: AbortSignal.timeout(300) }));
    expect(all).toHaveLength(5);
    await busA.end(id);
    const after = await collect(busB.subscribe(id, { lastEventId: all[2]!.id! }));
    expect(after.map((f) => [seqOf(f.id), f.event])).toEqual([
      ["3", "values"],
      ["4", "values"],
      ["5", "end"],
    ]);
    const live = busB.subscribe(id, { lastEventId: "1-999", signal: AbortSignal.timeout(300) });
    expect(await collect(live)).toEqual([]);
    await expect(collect(busB.subscribe(id, { lastEventId: "nope" }))).rejects.toMatchObject({ code: "invalid_last_event_id" });
  });

  it("writes a run's frames published faster than the database in few statements, in order, end last", async () => {
    let statements = 0;
    const counted = new Proxy(db.pool(), {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (property === "query") return (...args: unknown[]) => (statements++, (value as (...a: unknown[]) => unknown).apply(target, args));
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const bus = new PostgresStreamBus({ pool: counted, clientConfig: { connectionString: db.url, application_name: "bus-batch-listen" } });
    extraBuses.push(bus);
    await bus.start();
    const id = runId();
    await bus.open(id);
    const reading = collect(busB.subscribe(id));
    statements = 0;
    // Each publish resolves at once (no round trip); the outbox writes what queued meanwhile together.
    for (let n = 0; n < 200; n++) await bus.publish(id, "messages", { n });
    await bus.end(id);
    // One statement per frame before; 200 frames and end now take a handful (a trim among them).
    expect(statements, `${statements} statements`).toBeLessThan(20);
    const frames = await reading;
    expect(frames.map((f) => f.data)).toEqual([...Array.from({ length: 200 }, (_, n) => ({ n })), null]);
    expect(frames.map((f) => Number(seqOf(f.id)))).toEqual(Array.from({ length: 201 }, (_, n) => n));
  });

  it("a frame whose write failed makes the run's next publish and its end reject with the error", async () => {
    const pool = db.pool();
    const bus = new PostgresStreamBus({ pool, clientConfig: { connectionString: db.url, application_name: "bus-fail-listen" } });
    extraBuses.push(bus);
    await bus.start();
    const id = runId();
    await bus.open(id);
    await bus.publish(id, "values", { n: 0 });
    expect(await bus.has(id)).toBe(true);
    await pool.end();
    await bus.publish(id, "values", { n: 1 });
    await until(async () => bus.publish(id, "values", { n: 2 }).then(() => false, () => true), "a publish that rejects");
    await expect(bus.end(id)).rejects.toThrow(/pool/i);
    // The frame written before the failure is what a reader finds.
    expect((await collect(busB.subscribe(id, { signal: AbortSignal.timeout(300) }))).map((f) => f.data)).toEqual([{ n: 0 }]);
  });

  it("carries a frame too big for a notification through the table", async () => {
    const id = runId();
    await busA.open(id);
    const reading = collect(busB.subscribe(id));
    const big = "x".repeat(20_000);
    await busA.publish(id, "values", { big });
    await busA.publish(id, "values", { small: true });
    await busA.end(id);
    const frames = await reading;
    expect(frames.map((f) => f.data)).toEqual([{ big }, { small: true }, null]);
  });

  it("keeps the newest 256 frames and answers an older cursor with one gap frame shaped as the memory bridge's", async () => {
    const id = runId();
    const memory = new MemoryStreamBridge({ retain: 256 });
    await busA.open(id);
    memory.open(id);
    for (let n = 0; n < 300; n++) {
      await busA.publish(id, "values", { n });
      await memory.publish(id, "values", { n });
    }
    await busA.end(id);
    await memory.end(id);
    const { rows } = await poolA.query<{ count: string }>(`SELECT count(*) FROM deerflow_run_frames WHERE run_id = $1`, [id]);
    // Trimmed in batches, so at most one batch beyond the window stays.
    expect(Number(rows[0]!.count)).toBeLessThanOrEqual(256 + 64);
    for (const lastEventId of [undefined, "1-3", "1-44", "1-45", "1-46", "1-200"]) {
      const options = lastEventId ? { lastEventId } : {};
      expect(shape(await collect(busB.subscribe(id, options)))).toEqual(shape(await collect(memory.subscribe(id, options))));
    }
    const gap = await collect(busB.subscribe(id, { lastEventId: "1-3" }));
    expect(gap).toHaveLength(1);
    expect(gap[0]).toMatchObject({ event: "gap", data: { code: "stream_replay_gap", run_id: id, requested_event_id: "1-3", recovery: "reload_durable_state" } });
    await memory.close();
  });

  it("loses no frame when the LISTEN connection is killed mid-stream, and listens again after", async () => {
    const id = runId();
    await busA.open(id);
    const frames: StreamFrame[] = [];
    const reading = (async () => {
      for await (const frame of busB.subscribe(id)) frames.push(frame);
    })();
    for (let n = 0; n < 30; n++) await busA.publish(id, "values", { n });
    await until(() => frames.length === 30, "the first 30 frames");
    const killed = await poolA.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bus-b-listen'`);
    expect(killed.rowCount).toBe(1);
    for (let n = 30; n < 60; n++) await busA.publish(id, "values", { n });
    await busA.end(id);
    await reading;
    expect(frames.map((f) => seqOf(f.id))).toEqual(Array.from({ length: 61 }, (_, i) => String(i)));
    const seen: BusSignal[] = [];
    const stop = busB.listen((signal) => seen.push(signal));
    await until(async () => {
      await busA.signal({ kind: "wake", thread_id: `t-${id}` });
      return seen.length > 0;
    }, "a signal through the new LISTEN connection");
    stop();
    const listening = await poolA.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'bus-b-listen'`);
    expect(listening.rowCount).toBe(1);
  });

  it("delivers a signal to every listener of every bus, the sender's own included", async () => {
    const onA: BusSignal[] = [];
    const onB: BusSignal[] = [];
    const signal: BusSignal = { kind: "cancel", run_id: runId(), thread_id: "t-1", action: "rollback" };
    // Only this test's signal: wake-ups an earlier test sent may still be on their way.
    const mine = (s: BusSignal) => s.kind === "cancel" && s.run_id === signal.run_id;
    const stopA = busA.listen((s) => void (mine(s) && onA.push(s)));
    const stopB = busB.listen((s) => void (mine(s) && onB.push(s)));
    await busA.signal(signal);
    await until(() => onA.length > 0 && onB.length > 0, "the signal on both buses");
    expect(onA).toEqual([signal]);
    expect(onB).toEqual([signal]);
    stopA();
    stopB();
  });

  it("keeps a released log readable for its delay, then drops it everywhere; release 0 drops at once", async () => {
    const bus = new PostgresStreamBus({ pool: poolA, clientConfig: { connectionString: db.url }, releaseAfterMs: 300 });
    extraBuses.push(bus);
    await bus.start();
    const id = runId();
    await bus.open(id);
    await bus.publish(id, "values", { n: 1 });
    await bus.end(id);
    bus.release(id);
    expect(await bus.has(id)).toBe(true);
    expect((await collect(busB.subscribe(id))).map((f) => f.event)).toEqual(["values", "end"]);
    await until(async () => !(await busB.has(id)), "the release to come due");
    expect(await collect(busB.subscribe(id))).toEqual([]);
    await until(async () => (await poolA.query(`SELECT 1 FROM deerflow_run_frames WHERE run_id = $1`, [id])).rowCount === 0, "the cleanup");

    const now = runId();
    await busA.open(now);
    await busA.publish(now, "values", { n: 1 });
    const waiting = collect(busB.subscribe(now));
    await sleep(50);
    busA.release(now, 0);
    expect(await busA.has(now)).toBe(false);
    // A reader of a log that went without its end stops instead of waiting forever.
    expect((await waiting).map((f) => f.event)).toEqual(["values"]);
  });

  it("the bus that opened a log answers has() and a reader's start from memory, and skips the reader's first table read; every frame still arrives", async () => {
    const { bus, sent } = await recordingBus();
    const reads = () => sent.filter((text) => /^\s*SELECT[\s\S]*FROM deerflow_run_streams/.test(text)).length;
    const id = runId();
    await bus.open(id);
    await bus.publish(id, "metadata", { n: 0 });
    expect(await bus.has(id)).toBe(true);
    // A reader from the start: frame 0 is committed, so it reads the table once.
    const fromStart = collect(bus.subscribe(id));
    // A reader told "after the newest": nothing committed past it, so no read.
    await until(() => reads() === 1, "the first reader's table read");
    const live = collect(bus.subscribe(id, { lastEventId: `${Date.now()}-0` }));
    for (let n = 1; n <= 5; n++) await bus.publish(id, "values", { n });
    await bus.end(id);
    expect((await fromStart).map((f) => seqOf(f.id))).toEqual(["0", "1", "2", "3", "4", "5", "6"]);
    expect((await live).map((f) => seqOf(f.id))).toEqual(["1", "2", "3", "4", "5", "6"]);
    expect(reads()).toBe(1);
    // Another bus knows nothing of the log: it asks the table, and reads the same frames.
    expect((await collect(busB.subscribe(id))).map((f) => seqOf(f.id))).toEqual(["0", "1", "2", "3", "4", "5", "6"]);
    // Released: from here on this bus asks the table too.
    bus.release(id);
    expect(await bus.has(id)).toBe(true);
    expect(reads()).toBe(2);
  });

  it("forgets a log another bus ended (a sweep after a lost lease): the late publish is refused, and has() asks the table again", async () => {
    const { bus: owner, sent } = await recordingBus();
    const id = runId();
    await owner.open(id);
    await owner.publish(id, "values", { n: 0 });
    await owner.has(id);
    const before = sent.length;
    // The sweeping worker ends the stream of a run it thinks dead.
    await busB.end(id);
    await owner.publish(id, "values", { late: true });
    await owner.has(id);
    expect(sent.slice(before).filter((text) => /SELECT next_seq, ended FROM deerflow_run_streams/.test(text))).toHaveLength(1);
    // Its reader gets what the table holds: the frame before, the sweep's end, not the late one.
    expect((await collect(owner.subscribe(id))).map((f) => [seqOf(f.id), f.event])).toEqual([
      ["0", "values"],
      ["1", "end"],
    ]);
  });

  it("ends its readers when it closes", async () => {
    const bus = new PostgresStreamBus({ pool: poolB, clientConfig: { connectionString: db.url } });
    await bus.start();
    const id = runId();
    await busA.open(id);
    const reading = collect(bus.subscribe(id));
    await busA.publish(id, "values", { n: 1 });
    await sleep(50);
    await bus.close();
    expect((await reading).length).toBeLessThanOrEqual(1);
  });
});

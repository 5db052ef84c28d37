// The behaviour every StreamBus promises (src/runtime/runs/stream-bus.ts), as one suite each
// implementation runs: MemoryStreamBridge (test/runtime/runs/memory-stream-bus.test.ts),
// PostgreSQL, Deno KV. Only vitest and the port types: Deno and Bun run it too.
import { afterEach, describe, expect, it } from "vitest";
import type { StreamFrame } from "../../../src/runtime/runs/stream-bridge.ts";
import type { BusSignal, StreamBus } from "../../../src/runtime/runs/stream-bus.ts";

export interface StreamBusHarness {
  readonly bus: StreamBus;
  /**
   * A bus of another process over the same backend, where the backend can have two (absent for
   * one-process buses: the cross-process cases then run on `bus` alone). Closed by `close`.
   */
  another?(): Promise<StreamBus>;
  close(): Promise<void>;
}

export type StreamBusFactory = () => Promise<StreamBusHarness>;

/** The replay window every bus keeps per run. */
export const CONTRACT_WINDOW = 256;

function uid(prefix: string): string {
  return `${prefix}-${globalThis.crypto.randomUUID()}`;
}

async function collect(frames: AsyncIterable<StreamFrame>): Promise<StreamFrame[]> {
  const out: StreamFrame[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

function seqOf(frame: StreamFrame): number {
  const match = /^(\d+)-(\d+)$/.exec(frame.id ?? "");
  if (!match) throw new Error(`frame id ${JSON.stringify(frame.id)} is not <epoch_ms>-<seq>`);
  return Number(match[2]);
}

/** Polls `check` until it holds (delivery across processes is asynchronous); fails after `timeoutMs`. */
async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function plain(frames: readonly StreamFrame[]): Array<{ event: string; data: unknown }> {
  return frames.map((frame) => ({ event: frame.event, data: frame.data }));
}

export function describeStreamBusContract(name: string, make: StreamBusFactory): void {
  describe(`StreamBus contract: ${name}`, () => {
    const open: StreamBusHarness[] = [];
    async function harness(): Promise<StreamBusHarness> {
      const made = await make();
      open.push(made);
      return made;
    }
    afterEach(async () => {
      while (open.length > 0) await open.pop()!.close();
    });

    it("numbers frames <epoch_ms>-<seq> from 0, keeps their data, ends with end (data null) and takes nothing after it", async () => {
      const { bus } = await harness();
      const run = uid("run");
      await bus.open(run);
      await bus.publish(run, "metadata", { run_id: run });
      await bus.publish(run, "values", { messages: [{ type: "ai", content: "hé ✓" }], n: 1.5, none: null });
      await bus.end(run);
      await bus.publish(run, "values", { late: true });
      await bus.end(run);
      const frames = await collect(bus.subscribe(run));
      expect(plain(frames)).toEqual([
        { event: "metadata", data: { run_id: run } },
        { event: "values", data: { messages: [{ type: "ai", content: "hé ✓" }], n: 1.5, none: null } },
        { event: "end", data: null },
      ]);
      expect(frames.map(seqOf)).toEqual([0, 1, 2]);
      expect(await bus.has(run)).toBe(true);
    });

    it("replays the frames after a given id, then follows live ones; a cursor past the newest replays nothing", async () => {
      const { bus } = await harness();
      const run = uid("run");
      await bus.open(run);
      for (let i = 0; i < 5; i++) await bus.publish(run, "values", { i });
      const all = await takeN(bus.subscribe(run), 5);
      const after = bus.subscribe(run, { lastEventId: all[1]!.id! });
      const future = bus.subscribe(run, { lastEventId: `${Date.now()}-999999` });
      const [resumed, fromFuture] = [collect(after), collect(future)];
      await bus.publish(run, "values", { i: 5 });
      await bus.end(run);
      expect(plain(await resumed).map((f) => f.data)).toEqual([{ i: 2 }, { i: 3 }, { i: 4 }, { i: 5 }, null]);
      expect(plain(await fromFuture)).toEqual([{ event: "values", data: { i: 5 } }, { event: "end", data: null }]);
    });

    it("a malformed Last-Event-ID is refused with invalid_last_event_id", async () => {
      const { bus } = await harness();
      const run = uid("run");
      await bus.open(run);
      await bus.end(run);
      let code: unknown;
      try {
        await collect(bus.subscribe(run, { lastEventId: "not-an-id" }));
      } catch (error) {
        code = (error as { code?: unknown }).code;
      }
      expect(code).toBe("invalid_last_event_id");
    });

    it(`keeps the newest ${CONTRACT_WINDOW} frames; a cursor older than the window gets one gap frame, one just below it resumes`, async () => {
      const { bus } = await harness();
      const run = uid("run");
      await bus.open(run);
      for (let i = 0; i < 300; i++) await bus.publish(run, "values", { i });
      await bus.end(run);
      const retained = await collect(bus.subscribe(run));
      expect(retained).toHaveLength(CONTRACT_WINDOW);
      expect(retained.map(seqOf)).toEqual(Array.from({ length: CONTRACT_WINDOW }, (_, i) => 300 - CONTRACT_WINDOW + 1 + i));
      expect(retained.at(-1)!.event).toBe("end");
      const start = seqOf(retained[0]!);
      const epoch = retained[0]!.id!.split("-")[0];
      const stale = `${epoch}-10`;
      const gapped = await collect(bus.subscribe(run, { lastEventId: stale }));
      expect(gapped).toEqual([
        {
          event: "gap",
          data: {
            code: "stream_replay_gap",
            run_id: run,
            requested_event_id: stale,
            earliest_available_event_id: retained[0]!.id,
            latest_available_event_id: retained.at(-1)!.id,
            recovery: "reload_durable_state",
          },
        },
      ]);
      expect(gapped[0]!.id).toBeUndefined();
      // The frame just before the window was seen: nothing is missing.
      const edge = await collect(bus.subscribe(run, { lastEventId: `${epoch}-${start - 1}` }));
      expect(edge.map(seqOf)).toEqual(retained.map(seqOf));
    });

    it("two subscribers that came before the first frame both wait for it and get every frame", async () => {
      const { bus } = await harness();
      const run = uid("run");
      await bus.open(run);
      const readers = [collect(bus.subscribe(run)), collect(bus.subscribe(run))];
      await bus.publish(run, "values", { a: 1 });
      await bus.publish(run, "updates", { b: 2 });
      await bus.end(run);
      const expected = [
        { event: "values", data: { a: 1 } },
        { event: "updates", data: { b: 2 } },
        { event: "end", data: null },
      ];
      for (const frames of await Promise.all(readers)) expect(plain(frames)).toEqual(expected);
    });

    it("a subscriber ends when its signal aborts", async () => {
      const { bus } = await harness();
      const run = uid("run");
      await bus.open(run);
      await bus.publish(run, "values", { a: 1 });
      const controller = new AbortController();
      const seen: StreamFrame[] = [];
      const reading = (async () => {
        for await (const frame of bus.subscribe(run, { signal: controller.signal })) seen.push(frame);
      })();
      await eventually("the subscriber saw the first frame", () => seen.length === 1);
      controller.abort();
      await reading;
      expect(plain(seen)).toEqual([{ event: "values", data: { a: 1 } }]);
    });

    it("has: false for an unknown run (whose subscription yields nothing), true once opened, false after release", async () => {
      const { bus } = await harness();
      const run = uid("run");
      expect(await bus.has(run)).toBe(false);
      expect(await collect(bus.subscribe(uid("run")))).toEqual([]);
      await bus.open(run);
      expect(await bus.has(run)).toBe(true);
      await bus.publish(run, "values", {});
      await bus.end(run);
      bus.release(run, 0);
      await eventually("the released log is gone", async () => !(await bus.has(run)));
      expect(await collect(bus.subscribe(run))).toEqual([]);
    });

    it("delivers a signal to every listener, this process's included; a throwing listener breaks no other; unsubscribe stops delivery", async () => {
      const { bus } = await harness();
      const got: BusSignal[][] = [[], [], []];
      const offThrower = bus.listen(() => {
        throw new Error("a broken listener");
      });
      const offs = got.map((list) => bus.listen((signal) => void list.push(signal)));
      const cancel: BusSignal = { kind: "cancel", run_id: uid("run"), thread_id: uid("t"), action: "rollback" };
      await bus.signal(cancel);
      await eventually("every listener got the cancel", () => got.every((list) => list.length >= 1));
      for (const list of got) expect(list).toEqual([cancel]);
      offs[0]!();
      const wake: BusSignal = { kind: "wake", thread_id: uid("t") };
      const last: BusSignal = { kind: "wake", thread_id: uid("t") };
      await bus.signal(wake);
      await bus.signal(last);
      await eventually("the remaining listeners got both wake-ups", () => got[1]!.length >= 3 && got[2]!.length >= 3);
      expect(got[0]).toEqual([cancel]);
      expect(got[1]).toEqual([cancel, wake, last]);
      offThrower();
      for (const off of offs) off();
    });

    it("another process over the same backend reads the frames (after an id too) and gets the signals", async () => {
      const made = await harness();
      const bus = made.bus;
      const other = made.another ? await made.another() : bus;
      const run = uid("run");
      await bus.open(run);
      await eventually("the other process sees the opened log", async () => await other.has(run));
      const remote = collect(other.subscribe(run));
      const received: BusSignal[] = [];
      const off = other.listen((signal) => void received.push(signal));
      await bus.publish(run, "values", { a: 1 });
      await bus.publish(run, "values", { a: 2 });
      await bus.end(run);
      expect(plain(await remote)).toEqual([
        { event: "values", data: { a: 1 } },
        { event: "values", data: { a: 2 } },
        { event: "end", data: null },
      ]);
      const local = await collect(bus.subscribe(run));
      const resumed = await collect(other.subscribe(run, { lastEventId: local[0]!.id! }));
      expect(resumed.map((f) => f.id)).toEqual(local.slice(1).map((f) => f.id));
      const cancel: BusSignal = { kind: "cancel", run_id: run, thread_id: uid("t"), action: "interrupt" };
      await bus.signal(cancel);
      await eventually("the other process got the cancel", () => received.length >= 1);
      expect(received).toEqual([cancel]);
      off();
    });
  });
}

/** The first `count` frames of a subscription (which is then left). */
async function takeN(frames: AsyncIterable<StreamFrame>, count: number): Promise<StreamFrame[]> {
  const out: StreamFrame[] = [];
  if (count <= 0) return out;
  for await (const frame of frames) {
    out.push(frame);
    if (out.length >= count) break;
  }
  return out;
}

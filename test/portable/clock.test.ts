import { describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../src/core/clock.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

describe(`ManualClock (${runtime})`, () => {
  it("starts where told and moves only on advance", async () => {
    const clock = new ManualClock(1_000);
    expect(clock.now()).toBe(1_000);
    await clock.advance(250);
    expect(clock.now()).toBe(1_250);
  });

  it("resolves sleeps that fall due, in due order, and leaves later ones pending", async () => {
    const clock = new ManualClock();
    const woke: string[] = [];
    void clock.sleep(300).then(() => woke.push(`c@${clock.now()}`));
    void clock.sleep(100).then(() => woke.push(`a@${clock.now()}`));
    void clock.sleep(200).then(() => woke.push(`b@${clock.now()}`));
    void clock.sleep(1_000).then(() => woke.push("late"));
    await clock.advance(99);
    expect(woke).toEqual([]);
    await clock.advance(201);
    expect(woke).toEqual(["a@100", "b@200", "c@300"]);
    expect(clock.pendingSleeps).toBe(1);
    expect(clock.now()).toBe(300);
  });

  it("fires a sleep started by a woken sleeper within the same advance", async () => {
    const clock = new ManualClock();
    const ticks: number[] = [];
    const loop = (async () => {
      for (let i = 0; i < 3; i++) {
        await clock.sleep(50);
        ticks.push(clock.now());
      }
    })();
    await clock.advance(160);
    await loop;
    expect(ticks).toEqual([50, 100, 150]);
  });

  it("sleep(0) resolves without an advance", async () => {
    await new ManualClock().sleep(0);
  });

  it("an aborted sleep rejects with the signal's reason and is no longer pending", async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const reason = new Error("stop");
    const sleeping = clock.sleep(100, controller.signal);
    expect(clock.pendingSleeps).toBe(1);
    controller.abort(reason);
    await expect(sleeping).rejects.toBe(reason);
    expect(clock.pendingSleeps).toBe(0);
    await expect(clock.sleep(100, AbortSignal.abort(reason))).rejects.toBe(reason);
  });

  it("refuses to go backwards", async () => {
    await expect(new ManualClock().advance(-1)).rejects.toThrow(RangeError);
  });
});

describe(`systemClock (${runtime})`, () => {
  it("now is the wall clock", () => {
    const before = Date.now();
    const now = systemClock.now();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });

  it("sleep resolves", async () => {
    await systemClock.sleep(5);
  });

  it("an abort rejects the sleep with the signal's reason, before it would have ended", async () => {
    const controller = new AbortController();
    const reason = new Error("cancelled");
    const sleeping = systemClock.sleep(60_000, controller.signal);
    setTimeout(() => controller.abort(reason), 5);
    await expect(sleeping).rejects.toBe(reason);
  });

  it("an already-aborted signal rejects at once; a bare abort() gives an AbortError", async () => {
    const reason = new Error("already");
    await expect(systemClock.sleep(60_000, AbortSignal.abort(reason))).rejects.toBe(reason);
    const controller = new AbortController();
    controller.abort();
    await expect(systemClock.sleep(60_000, controller.signal)).rejects.toMatchObject({ name: "AbortError" });
  });
});

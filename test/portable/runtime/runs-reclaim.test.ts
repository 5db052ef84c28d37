// The runs ask the runtime to reclaim memory once they went quiet (the ReclaimMemory port): V8 under
// Node never collects while the process idles, so without the ask a burst's garbage stays.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { RunManager } from "../../../src/runtime/runs/manager.ts";
import { IdleReclaimer } from "../../../src/runtime/runs/reclaim.ts";
import { runRequest } from "../../../src/runtime/runs/types.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { ALICE, MemoryThreads, collect, deferred, scriptedAgentFactory } from "./runs-fixtures.ts";

const say = (text: string) => runRequest({ input: { messages: [{ type: "human", content: text }] } });

function setup() {
  const clock = new ManualClock(1_000_000);
  const storage = createMemoryKeyValue();
  const checkpointer = new KeyValueCheckpointSaver({ storage });
  const threads = new MemoryThreads();
  threads.add("t1");
  threads.add("t2");
  let reclaims = 0;
  const manager = new RunManager({
    storage,
    checkpointer,
    threads,
    agentFactory: scriptedAgentFactory(checkpointer, { gates: { block: deferred<string>() } }),
    clock,
    notifyBudgetMs: Infinity,
    reclaimMemory: () => void reclaims++,
  });
  return { clock, manager, reclaims: () => reclaims };
}

describe("RunManager: memory reclaimed once the runs went quiet", () => {
  it("asks once the quiet time after the last run passed, and again when the last replay window closed", async () => {
    const { clock, manager, reclaims } = setup();
    const a = await manager.create("t1", say("tool:note"), ALICE);
    const b = await manager.create("t2", say("tool:note"), ALICE);
    await Promise.all([collect(manager.stream("t1", a.run_id)), collect(manager.stream("t2", b.run_id))]);
    await manager.join("t1", a.run_id);
    await manager.join("t2", b.run_id);
    expect(reclaims()).toBe(0);
    await clock.advance(1999);
    expect(reclaims()).toBe(0);
    await clock.advance(1);
    expect(reclaims()).toBe(1);
    // The finished runs' frames stay 60 s for replay; once the last window closed, one more ask.
    await clock.advance(58_000);
    expect(manager.bridge.has(a.run_id)).toBe(false);
    expect(reclaims()).toBe(1);
    await clock.advance(2000);
    expect(reclaims()).toBe(2);
    await clock.advance(60_000);
    expect(reclaims()).toBe(2);
    await manager.shutdown();
  });

  it("does not ask while a run started within the quiet time is in flight", async () => {
    const { clock, manager, reclaims } = setup();
    const a = await manager.create("t1", say("tool:note"), ALICE);
    await collect(manager.stream("t1", a.run_id));
    await manager.join("t1", a.run_id);
    await clock.advance(1000);
    const b = await manager.create("t2", say("tool:block"), ALICE);
    await clock.advance(5000);
    expect((await manager.get("t2", b.run_id))?.status).not.toBe("success");
    expect(reclaims()).toBe(0);
    await manager.cancel("t2", b.run_id, { wait: true });
    await clock.advance(2000);
    expect(reclaims()).toBe(1);
    await manager.shutdown();
  });
});

describe("IdleReclaimer", () => {
  it("waits the quiet time after the last idle(), drops it on busy(), and keeps asks apart by the minimum interval", async () => {
    const clock = new ManualClock(0);
    let reclaims = 0;
    const reclaimer = new IdleReclaimer(clock, () => void reclaims++, { quietMs: 100, minIntervalMs: 1000 });
    reclaimer.idle();
    await clock.advance(50);
    reclaimer.busy();
    await clock.advance(500);
    expect(reclaims).toBe(0);
    reclaimer.idle();
    await clock.advance(100);
    expect(reclaims).toBe(1);
    reclaimer.idle();
    await clock.advance(999);
    expect(reclaims).toBe(1);
    await clock.advance(1);
    expect(reclaims).toBe(2);
    reclaimer.idle();
    reclaimer.close();
    await clock.advance(5000);
    expect(reclaims).toBe(2);
  });
  it("a reclaim that throws changes nothing for the caller", async () => {
    const clock = new ManualClock(0);
    const reclaimer = new IdleReclaimer(clock, () => {
      throw new Error("refused");
    });
    reclaimer.idle();
    await clock.advance(10_000);
    expect(clock.pendingSleeps).toBe(0);
  });
});

// The runs ask the runtime to reclaim memory once they went quiet (the ReclaimMemory port): V8 under
// Node never collects while the process idles, so without the ask a burst's garbage stays.
import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { ManualClock } from "../../../src/core/clock.ts";
import { createGateway } from "../../../src/gateway/app.ts";
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

describe("memory an upload let go of is reclaimed too", () => {
  it("RunManager.memoryReleased asks once quiet when no run is active, and leaves it to a running run's end otherwise", async () => {
    const { clock, manager, reclaims } = setup();
    manager.memoryReleased();
    await clock.advance(1999);
    expect(reclaims()).toBe(0);
    await clock.advance(1);
    expect(reclaims()).toBe(1);

    const b = await manager.create("t2", say("tool:block"), ALICE);
    await clock.advance(30_000);
    manager.memoryReleased();
    await clock.advance(5000);
    expect(reclaims()).toBe(1);
    await manager.cancel("t2", b.run_id, { wait: true });
    await clock.advance(2000);
    expect(reclaims()).toBe(2);
    await manager.shutdown();
  });

  it("an upload through the gateway, stored or refused, is followed by one reclaim once quiet (30 uploads of 20 MB left Deno 90 MB up without it)", async () => {
    const clock = new ManualClock(1_000_000);
    let reclaims = 0;
    const gateway = await createGateway({
      config: validateLeadConfig({ gateway: { uploads: { max_file_bytes: 64 } } }, "runs-reclaim"),
      storage: createMemoryKeyValue(),
      clock,
      listening: { host: "127.0.0.1" },
      runs: { reclaimMemory: () => void reclaims++ },
    });
    const upload = (bytes: number) => {
      const form = new FormData();
      form.append("files", new File([new Uint8Array(bytes)], "data.bin"));
      return gateway.fetch(new Request("http://127.0.0.1/api/threads/t-upload/uploads", { method: "POST", body: form }));
    };
    try {
      const stored = await upload(16);
      expect(stored.status).toBe(200);
      await clock.advance(2000);
      expect(reclaims).toBe(1);
      // The next ask waits for the 30 s minimum interval between two reclaims.
      const refused = await upload(1024);
      expect(refused.status).toBe(413);
      await clock.advance(30_000);
      expect(reclaims).toBe(2);
    } finally {
      await gateway.shutdown();
    }
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

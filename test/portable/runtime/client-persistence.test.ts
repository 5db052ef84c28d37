// The embedded client over fs storage (Node's adapter): a new client over the same folder loses
// no thread, state or finished run, and a run a crashed process left in flight reads interrupted.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../../adapters/shared/fs-key-value.ts";
import { createDeerFlowClient, type DeerFlowClientOptions } from "../../../src/runtime/client.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { deferred, eventually, scriptedAgentFactory } from "./runs-fixtures.ts";

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "deerflow-client-"));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

describe("the embedded client over fs storage", () => {
  it("a new client over the same folder sees the thread, its state, its history and its finished runs, and continues the conversation", async () => {
    const dir = await tempDir();
    const config = { storage: { driver: "fs", base: dir } };
    const firstStorage = createFsKeyValue(dir);
    const first = await createDeerFlowClient({ config, storage: firstStorage });
    const turn = await first.chat("Outline a talk on compilers", { threadId: "kept" });
    const history = await first.threads.history("kept", { limit: 100 });
    await first.close();
    await firstStorage.dispose();

    const secondStorage = createFsKeyValue(dir);
    const second = await createDeerFlowClient({ config, storage: secondStorage });
    try {
      expect((await second.threads.list()).map((t) => t.thread_id)).toEqual(["kept"]);
      expect((await second.threads.state("kept")).values.messages).toEqual(turn.messages);
      expect((await second.threads.history("kept", { limit: 100 })).map((s) => s.checkpoint.checkpoint_id)).toEqual(
        history.map((s) => s.checkpoint.checkpoint_id),
      );
      expect(await second.runs.list("kept")).toEqual([expect.objectContaining({ run_id: turn.runId, status: "success" })]);
      const next = await second.chat("Now shorten it", { threadId: "kept" });
      expect(next.messages.filter((m) => m.type === "human")).toHaveLength(2);
    } finally {
      await second.close();
      await secondStorage.dispose();
    }
  });

  it("marks a run a crashed process left running as interrupted when the next client starts", async () => {
    const dir = await tempDir();
    const scripted = (storage: ReturnType<typeof createFsKeyValue>, gates = { block: deferred<string>() }): DeerFlowClientOptions => {
      const checkpointer = new KeyValueCheckpointSaver({ storage });
      return { storage, checkpointer, agentFactory: scriptedAgentFactory(checkpointer, { gates }) as DeerFlowClientOptions["agentFactory"] };
    };
    const crashedStorage = createFsKeyValue(dir);
    const gates = { block: deferred<string>() };
    const crashed = await createDeerFlowClient(scripted(crashedStorage, gates));
    const run = await crashed.runs.start("tool:block", { threadId: "t1" });
    await eventually(async () => (await crashed.runs.get("t1", run.run_id))?.status === "running");

    // The "crashed" client is never closed before the next one reads the folder.
    const nextStorage = createFsKeyValue(dir);
    const next = await createDeerFlowClient(scripted(nextStorage));
    try {
      expect(await next.runs.get("t1", run.run_id)).toMatchObject({ status: "interrupted", error: { name: "GatewayRestarted" } });
      expect((await next.threads.get("t1"))?.status).toBe("interrupted");
    } finally {
      gates.block.resolve("late");
      await crashed.close();
      await next.close();
      await crashedStorage.dispose();
      await nextStorage.dispose();
    }
  });
});

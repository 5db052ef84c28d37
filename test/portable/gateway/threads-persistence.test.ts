import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../../adapters/shared/fs-key-value.ts";
import { createGateway } from "../../../src/gateway/app.ts";
import { KeyValueThreadStore } from "../../../src/runtime/thread-store.ts";
import { call, config, headerAuthLayer } from "./threads-fixtures.ts";

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "deerflow-threads-"));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

describe("threads survive a restart on fs storage", () => {
  it("keeps rows across store instances over the same folder", async () => {
    const dir = await tempDir();
    const before = new KeyValueThreadStore({ storage: createFsKeyValue(dir) });
    await before.create({ threadId: "t-1", ownerId: "alice", metadata: { topic: "fs" } });
    await before.update("t-1", { display_name: "Kept" });
    const after = new KeyValueThreadStore({ storage: createFsKeyValue(dir) });
    expect(await after.get("t-1")).toMatchObject({ owner_id: "alice", metadata: { topic: "fs" }, display_name: "Kept" });
    expect((await after.search({ limit: 10, offset: 0, ownerId: "alice" })).map((t) => t.thread_id)).toEqual(["t-1"]);
  });

  it("a new gateway over the same folder sees the thread, its state and its history", async () => {
    const dir = await tempDir();
    const first = await createGateway({ config, storage: createFsKeyValue(dir), authLayer: headerAuthLayer() });
    await call(first, "POST", "/api/threads", { thread_id: "kept", metadata: { topic: "restart" } });
    await call(first, "POST", "/api/threads/kept/state", {
      values: { messages: [{ type: "human", content: "remember me", id: "m1" }], title: "Remembered" },
      as_node: "model",
    });
    await first.shutdown();

    const second = await createGateway({ config, storage: createFsKeyValue(dir), authLayer: headerAuthLayer() });
    const thread = await call(second, "GET", "/api/threads/kept");
    expect(thread.status).toBe(200);
    expect(thread.body).toMatchObject({ metadata: { topic: "restart" }, values: { title: "Remembered" } });
    const state = await call(second, "GET", "/api/threads/kept/state");
    expect(state.body.values.messages).toEqual([expect.objectContaining({ type: "human", content: "remember me", id: "m1" })]);
    expect((await call(second, "POST", "/api/threads/kept/history", {})).body).toHaveLength(1);
    expect((await call(second, "POST", "/api/threads/search", {})).body).toEqual([
      expect.objectContaining({ thread_id: "kept", values: { title: "Remembered" } }),
    ]);
    expect((await call(second, "GET", "/api/threads/kept", undefined, { user: "bob" })).status).toBe(404);
    await second.shutdown();
  });
});

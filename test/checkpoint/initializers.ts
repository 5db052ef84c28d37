import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createStorage } from "unstorage";
import memoryDriver from "unstorage/drivers/memory";
import fsDriver from "unstorage/drivers/fs";
import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { KeyValueCheckpointSaver } from "../../src/runtime/kv-checkpointer.ts";

// Each suite gets a fresh store: the list specs count every checkpoint the saver can see.

export const memoryInitializer: CheckpointSaverTestInitializer<KeyValueCheckpointSaver> = {
  checkpointerName: "KeyValueCheckpointSaver (unstorage memory)",
  createCheckpointer: () => new KeyValueCheckpointSaver({ storage: createStorage({ driver: memoryDriver() }) }),
  destroyCheckpointer: async (saver) => {
    await saver.storage.dispose();
  },
};

let fsRoot: string | undefined;
let fsCount = 0;

export const fsInitializer: CheckpointSaverTestInitializer<KeyValueCheckpointSaver> = {
  checkpointerName: "KeyValueCheckpointSaver (unstorage fs)",
  createCheckpointer: () => {
    fsRoot ??= mkdtempSync(join(tmpdir(), "deerflow-kv-checkpointer-"));
    const base = join(fsRoot, String(++fsCount));
    return new KeyValueCheckpointSaver({ storage: createStorage({ driver: fsDriver({ base }) }) });
  },
  destroyCheckpointer: async (saver) => {
    await saver.storage.dispose();
  },
  afterAll: () => {
    if (fsRoot) rmSync(fsRoot, { recursive: true, force: true });
    fsRoot = undefined;
  },
};

/**
 * The validation specs call vitest's globals. Under the main config (no globals) this file
 * registers one skipped placeholder instead of failing to load.
 */
export const hasVitestGlobals = typeof (globalThis as { beforeAll?: unknown }).beforeAll === "function";

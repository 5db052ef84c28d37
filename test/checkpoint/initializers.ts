import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFsKeyValue } from "../../adapters/shared/fs-key-value.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { KeyValueCheckpointSaver } from "../../src/runtime/kv-checkpointer.ts";

// Each suite gets a fresh store: the list specs count every checkpoint the saver can see. The stores
// are the ones the gateway and the CLI ship: the prefix-indexed memory driver and the scoped fs driver.

export const memoryInitializer: CheckpointSaverTestInitializer<KeyValueCheckpointSaver> = {
  checkpointerName: "KeyValueCheckpointSaver (memory KeyValue)",
  createCheckpointer: () => new KeyValueCheckpointSaver({ storage: createMemoryKeyValue() }),
  destroyCheckpointer: async (saver) => {
    await saver.storage.dispose();
  },
};

let fsRoot: string | undefined;
let fsCount = 0;

export const fsInitializer: CheckpointSaverTestInitializer<KeyValueCheckpointSaver> = {
  checkpointerName: "KeyValueCheckpointSaver (fs KeyValue)",
  createCheckpointer: () => {
    fsRoot ??= mkdtempSync(join(tmpdir(), "deerflow-kv-checkpointer-"));
    const base = join(fsRoot, String(++fsCount));
    return new KeyValueCheckpointSaver({ storage: createFsKeyValue(base) });
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

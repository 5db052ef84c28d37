import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFsKeyValue } from "../../adapters/shared/fs-key-value.ts";
import { createDenoKvKeyValue } from "../../adapters/deno/kv-key-value.ts";
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

let denoKvRoot: string | undefined;
let denoKvCount = 0;

/** Deno only (CHECKPOINT_STORE=deno-kv, see vitest.checkpoint.config.ts): each saver on its own local KV file. */
export const denoKvInitializer: CheckpointSaverTestInitializer<KeyValueCheckpointSaver> = {
  checkpointerName: "KeyValueCheckpointSaver (deno-kv KeyValue)",
  createCheckpointer: () => {
    denoKvRoot ??= mkdtempSync(join(tmpdir(), "deerflow-deno-kv-checkpointer-"));
    return new KeyValueCheckpointSaver({ storage: createDenoKvKeyValue({ path: join(denoKvRoot, `${++denoKvCount}.kv`) }) });
  },
  destroyCheckpointer: async (saver) => {
    await saver.storage.dispose();
  },
  afterAll: () => {
    if (denoKvRoot) rmSync(denoKvRoot, { recursive: true, force: true });
    denoKvRoot = undefined;
  },
};

// The validation specs call vitest's globals: loaded without them (any config but
// vitest.checkpoint.config.ts), a suite file fails to load with this message, never passes silently.
if (typeof (globalThis as { beforeAll?: unknown }).beforeAll !== "function") {
  throw new Error("test/checkpoint needs vitest's globals: run it with vitest run -c vitest.checkpoint.config.ts");
}

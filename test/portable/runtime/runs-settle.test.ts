import { emptyCheckpoint } from "@langchain/langgraph-checkpoint";
import { describe, expect, it } from "vitest";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { allCheckpointWritesSettled, trackCheckpointWrites } from "../../../src/runtime/runs/settle.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";

/** A tracked saver whose storage writes wait at a gate until the test opens it. */
function gatedSaver() {
  const storage = createMemoryKeyValue();
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const setItem = storage.setItem.bind(storage);
  storage.setItem = (async (key: string, value: unknown, opts?: unknown) => {
    await gate;
    return setItem(key, value as never, opts as never);
  }) as typeof storage.setItem;
  const setItems = storage.setItems.bind(storage);
  storage.setItems = (async (items: Parameters<typeof storage.setItems>[0], opts?: unknown) => {
    await gate;
    return setItems(items, opts as never);
  }) as typeof storage.setItems;
  return { saver: trackCheckpointWrites(new KeyValueCheckpointSaver({ storage })), open };
}

const config = { configurable: { thread_id: "t", checkpoint_ns: "" } };

describe("allCheckpointWritesSettled (the last step before a gateway closes its storage)", () => {
  it("waits for a save still on its way to the storage", async () => {
    const { saver, open } = gatedSaver();
    let saved = false;
    void saver.put(config, emptyCheckpoint(), { source: "input", step: -1, parents: {} }, {}).then(() => (saved = true));
    let settled = false;
    const waiting = allCheckpointWritesSettled(saver, 60_000).then(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(settled).toBe(false);
    open();
    await waiting;
    expect(saved).toBe(true);
  });

  it("gives up after its budget when a save never lands, so shutdown cannot hang on it", async () => {
    const { saver } = gatedSaver();
    void saver.put(config, emptyCheckpoint(), { source: "input", step: -1, parents: {} }, {});
    await allCheckpointWritesSettled(saver, 30);
  });

  it("returns at once for an untracked saver or one with nothing in flight", async () => {
    await allCheckpointWritesSettled(new KeyValueCheckpointSaver({ storage: createMemoryKeyValue() }));
    await allCheckpointWritesSettled(trackCheckpointWrites(new KeyValueCheckpointSaver({ storage: createMemoryKeyValue() })));
  });
});

import * as v from "valibot";
import { MemoryConfigSchema } from "../../../src/middlewares/memory/memory.ts";
import type { MemoryStore, MemoryUpdate } from "../../../src/middlewares/memory/store.ts";

/** A store that only records what it is handed. */
export function recordingStore(): MemoryStore & { updates: MemoryUpdate[] } {
  const updates: MemoryUpdate[] = [];
  return {
    updates,
    settings: v.parse(MemoryConfigSchema, {}),
    extractor: Object.assign(async () => [], { policy: { kind: "recording" } }),
    pendingCount: 0,
    recall: async () => [],
    enqueue(update) {
      updates.push(update);
      return true;
    },
    flush: async () => {},
    close: async () => true,
    policy: () => ({}),
  };
}

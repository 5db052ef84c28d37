import { MemoryRunCoordinator } from "../../../src/runtime/runs/memory-coordinator.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { describeCoordinatorContract } from "./coordinator-contract.ts";

// Two instances over one KeyValue are two processes one after another: the second is what a
// restart after a crash opens (its sweep takes the first one's rows).
describeCoordinatorContract("memory", async () => {
  const storage = createMemoryKeyValue();
  const opened = [new MemoryRunCoordinator({ storage })];
  return {
    coordinator: opened[0]!,
    async another() {
      const next = new MemoryRunCoordinator({ storage });
      opened.push(next);
      return next;
    },
    async close() {
      for (const c of opened) await c.close();
    },
  };
});

import { afterAll, describe, it } from "vitest";
import { deltaChannelHistoryTests } from "@langchain/langgraph-checkpoint-validation";
import { fsInitializer, hasVitestGlobals, memoryInitializer } from "./initializers.ts";

// The suite's opt-in extra (validate() leaves it out): getDeltaChannelHistory, inherited from
// BaseCheckpointSaver, over this saver's storage.
if (hasVitestGlobals) {
  describe(memoryInitializer.checkpointerName, () => deltaChannelHistoryTests(memoryInitializer));
  describe(fsInitializer.checkpointerName, () => deltaChannelHistoryTests(fsInitializer));
  afterAll(() => fsInitializer.afterAll?.());
} else {
  describe.skip("getDeltaChannelHistory", () => it("runs with: vitest run -c vitest.checkpoint.config.ts"));
}

import { afterAll, describe } from "vitest";
import { deltaChannelHistoryTests } from "@langchain/langgraph-checkpoint-validation";
import { fsInitializer, memoryInitializer } from "./initializers.ts";

// The suite's opt-in extra (validate() leaves it out): getDeltaChannelHistory, inherited from
// BaseCheckpointSaver, over this saver's storage.
describe(memoryInitializer.checkpointerName, () => deltaChannelHistoryTests(memoryInitializer));
describe(fsInitializer.checkpointerName, () => deltaChannelHistoryTests(fsInitializer));
afterAll(() => fsInitializer.afterAll?.());

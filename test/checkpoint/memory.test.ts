import { describe, it } from "vitest";
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { hasVitestGlobals, memoryInitializer } from "./initializers.ts";

if (hasVitestGlobals) validate(memoryInitializer);
else describe.skip(memoryInitializer.checkpointerName, () => it("runs with: vitest run -c vitest.checkpoint.config.ts"));

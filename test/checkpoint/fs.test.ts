import { describe, it } from "vitest";
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { fsInitializer, hasVitestGlobals } from "./initializers.ts";

if (hasVitestGlobals) validate(fsInitializer);
else describe.skip(fsInitializer.checkpointerName, () => it("runs with: vitest run -c vitest.checkpoint.config.ts"));

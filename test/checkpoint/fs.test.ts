import { validate } from "@langchain/langgraph-checkpoint-validation";
import { fsInitializer } from "./initializers.ts";

// The official suite calls vitest's globals: vitest.checkpoint.config.ts runs this file (the main
// config leaves test/checkpoint/ out).
validate(fsInitializer);

import { afterAll, describe } from "vitest";
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";
import { denoKvInitializer } from "./initializers.ts";

// Runs only under Deno with --unstable-kv (CHECKPOINT_STORE=deno-kv selects this file, see
// vitest.checkpoint.config.ts): the official suite, plus getDeltaChannelHistory, over Deno KV files.
validate(denoKvInitializer);
describe(`${denoKvInitializer.checkpointerName} getDeltaChannelHistory`, () => deltaChannelHistoryTests(denoKvInitializer));
afterAll(() => denoKvInitializer.afterAll?.());

import { ToolMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { BatchStore, type BatchItemRecord } from "../../../src/tools/batch-store.ts";
import { sha256HexSync } from "../../../src/extension-api/sha256-sync.ts";
import { SUBAGENT_TOKEN_USAGE_KEY, normalizeTokenUsage } from "../../../src/middlewares/token-usage/token-usage.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { BATCH_TASK_PROGRESS_EVENT, BATCH_TASK_RESULT_KEY } from "../../../src/tools/batch-task.ts";
import { createBatchTaskTool } from "../../../src/agents/delegation-tools.ts";
import { GP, ITEM_USAGE, SubagentScript, invokeBatch, task, toolRuntime } from "./batch-task-helpers.ts";

const OWNER = { userId: "default", threadId: "thread-1" };

function asMessage(output: unknown): ToolMessage {
  expect(ToolMessage.isInstance(output)).toBe(true);
  return output as ToolMessage;
}

function statuses(items: readonly BatchItemRecord[]): string[] {
  return items.map((item) => item.status);
}

/** A first call aborted while its second item runs: item 1 done, item 2 cancelled, item 3 never started. */
async function interruptedBatch(storage = createMemoryKeyValue()) {
  const script = new SubagentScript();
  script.blockOn = "beta";
  const abort = new AbortController();
  script.onBlocked = () => abort.abort();
  const events: Record<string, unknown>[] = [];
  const tool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent, config: { max_running: 1 } });
  const call = invokeBatch(
    tool,
    { batch_id: "nightly", description: "three reports", tasks: [task("alpha"), task("beta"), task("gamma")] },
    toolRuntime(storage, { signal: abort.signal, writer: (e) => events.push(e as Record<string, unknown>) }),
  );
  await expect(call).rejects.toBeDefined();
  return { storage, script, events };
}

describe("batch_task durability", () => {
  it("records completed and cancelled items when the run is aborted mid-batch", async () => {
    const { storage, script, events } = await interruptedBatch();
    expect(script.prompts).toEqual(["alpha", "beta"]);
    // A fresh store over the same KeyValue sees exactly what the aborted call left.
    const snapshot = (await new BatchStore(storage).read(OWNER, "nightly"))!;
    expect(statuses(snapshot.items)).toEqual(["completed", "cancelled", "pending"]);
    const [alpha, beta] = snapshot.items;
    expect(alpha).toMatchObject({ attempts: 1, result_brief: "done: alpha", result_sha256: sha256HexSync("done: alpha"), usage: ITEM_USAGE, run_id: "run-1" });
    expect(beta).toMatchObject({ attempts: 1, error: "Task cancelled by user.", result_sha256: null });
    expect(snapshot.record).toMatchObject({ batch_id: "nightly", description: "three reports", limits: { max_total: 16, max_live: 2, max_running: 1 }, created_run_id: "run-1" });
    expect(await new BatchStore(storage).readResult(OWNER, "nightly", alpha!)).toBe("done: alpha");
    const phases = events.filter((e) => e["type"] === BATCH_TASK_PROGRESS_EVENT).map((e) => e["phase"]);
    expect(phases.at(-1)).toBe("cancelled");
  });

  it("resumes by batch_id from a fresh tool and store: reuses completed items and runs only the unfinished", async () => {
    const { storage } = await interruptedBatch();
    const script = new SubagentScript();
    const tool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent });
    const out = asMessage(await invokeBatch(tool, { batch_id: "nightly", description: "collect" }, toolRuntime(storage, { runId: "run-2" }), "bt-9"));
    expect(script.prompts).toEqual(["beta", "gamma"]);
    const content = String(out.content);
    expect(content).toContain('Batch nightly "three reports": 3 items, 3 completed. Ran 2 now; reused 1 stored results.');
    expect(content).toContain("## Item 1 of 3: alpha (general-purpose): completed\nTask Succeeded. Result: done: alpha");
    expect(content).toContain("## Item 2 of 3: beta (general-purpose): completed\nTask Succeeded. Result: done: beta");
    const facts = out.additional_kwargs[BATCH_TASK_RESULT_KEY] as { open: boolean; items: Array<{ status: string; attempts: number; ran_now: boolean }> };
    expect(facts.open).toBe(false);
    expect(facts.items.map((i) => [i.status, i.attempts, i.ran_now])).toEqual([
      ["completed", 1, false],
      ["completed", 2, true],
      ["completed", 1, true],
    ]);
    // Only what this call ran is credited; alpha's tokens belong to the call that ran it.
    expect(normalizeTokenUsage(out.additional_kwargs[SUBAGENT_TOKEN_USAGE_KEY])).toEqual({ input_tokens: 20, output_tokens: 10, total_tokens: 30 });

    const stored = (await new BatchStore(storage).read(OWNER, "nightly"))!;
    expect(statuses(stored.items)).toEqual(["completed", "completed", "completed"]);
    expect(stored.items.map((i) => i.run_id)).toEqual(["run-1", "run-2", "run-2"]);

    // Collecting a finished batch runs nothing.
    const again = asMessage(await invokeBatch(tool, { batch_id: "nightly", description: "collect" }, toolRuntime(storage, { runId: "run-3" }), "bt-10"));
    expect(String(again.content)).toContain("Ran 0 now; reused 3 stored results.");
    expect(script.prompts).toEqual(["beta", "gamma"]);
    expect(normalizeTokenUsage(again.additional_kwargs[SUBAGENT_TOKEN_USAGE_KEY])).toEqual({ input_tokens: 0, output_tokens: 0, total_tokens: 0 });
  });

  it("accepts the original tasks repeated on resume, and re-runs an item a dead process left running", async () => {
    const storage = createMemoryKeyValue();
    const store = new BatchStore(storage);
    const tasks = [task("one"), task("two")];
    const first = new SubagentScript();
    await invokeBatch(createBatchTaskTool({ types: [GP], buildAgent: first.buildAgent }), { batch_id: "b", description: "x", tasks }, toolRuntime(storage));
    // A process that died mid-item leaves it "running" with no verdict.
    const two = (await store.read(OWNER, "b"))!.items[1]!;
    await store.writeItem(OWNER, "b", { ...two, status: "running", result_brief: null, result_sha256: null, finished_at: null });

    const second = new SubagentScript();
    const out = asMessage(await invokeBatch(createBatchTaskTool({ types: [GP], buildAgent: second.buildAgent }), { batch_id: "b", description: "x", tasks }, toolRuntime(storage)));
    expect(second.prompts).toEqual(["two"]);
    expect(String(out.content)).toContain("Ran 1 now; reused 1 stored results.");
  });

  it("keeps failed items as verdicts: a resume does not run them again", async () => {
    const storage = createMemoryKeyValue();
    const script = new SubagentScript();
    script.failOn = "bad";
    const tool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent });
    const out = asMessage(await invokeBatch(tool, { batch_id: "b", description: "x", tasks: [task("good"), task("bad")] }, toolRuntime(storage)));
    expect(String(out.content)).toContain("2 items, 1 completed, 1 failed.");
    expect(String(out.content)).toContain('## Item 2 of 2: bad (general-purpose): failed\nTask failed. Error: work on "bad" exploded');
    const again = asMessage(await invokeBatch(tool, { batch_id: "b", description: "x" }, toolRuntime(storage)));
    expect(String(again.content)).toContain("Ran 0 now; reused 1 stored results.");
    expect(script.prompts).toEqual(["good", "bad"]);
  });

  it("falls back to the stored brief when a completed item's full text is gone", async () => {
    const storage = createMemoryKeyValue();
    const store = new BatchStore(storage);
    await invokeBatch(createBatchTaskTool({ types: [GP], buildAgent: new SubagentScript().buildAgent }), { batch_id: "b", description: "x", tasks: [task("one")] }, toolRuntime(storage));
    await storage.removeItem(store.resultKey(OWNER, "b", 0));
    const out = asMessage(await invokeBatch(createBatchTaskTool({ types: [GP], buildAgent: new SubagentScript().buildAgent }), { batch_id: "b", description: "x" }, toolRuntime(storage)));
    expect(String(out.content)).toContain("Task Succeeded. Result: done: one\n(Only a bounded brief of this result was stored; the full text is not available.)");
  });

  it("refuses a stored batch record it cannot read instead of overwriting it", async () => {
    const storage = createMemoryKeyValue();
    const store = new BatchStore(storage);
    await storage.setItem(store.metaKey(OWNER, "b"), { version: 99 });
    const out = asMessage(await invokeBatch(createBatchTaskTool({ types: [GP], buildAgent: new SubagentScript().buildAgent }), { batch_id: "b", description: "x", tasks: [task("one")] }, toolRuntime(storage)));
    expect(out.additional_kwargs["batch_task_error_code"]).toBe("batch_record_malformed");
    expect(await storage.getItem(store.metaKey(OWNER, "b"))).toEqual({ version: 99 });
  });

  it("keeps batches per user: another user's batch with the same id is a different batch", async () => {
    const storage = createMemoryKeyValue();
    const script = new SubagentScript();
    const tool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent });
    await invokeBatch(tool, { batch_id: "b", description: "x", tasks: [task("mine")] }, toolRuntime(storage, { context: { user_id: "alice" } }));
    const out = asMessage(await invokeBatch(tool, { batch_id: "b", description: "x", tasks: [task("theirs")] }, toolRuntime(storage, { context: { user_id: "bob" } })));
    expect(out.status).not.toBe("error");
    expect(script.prompts).toEqual(["mine", "theirs"]);
    expect(await new BatchStore(storage).listBatchIds({ userId: "alice", threadId: "thread-1" })).toEqual(["b"]);
  });
});

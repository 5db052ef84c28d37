import * as v from "valibot";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it, vi } from "vitest";
import { BatchStore, type BatchRecord } from "../../../src/tools/batch-store.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { ThreadState } from "../../../src/state/thread-state.ts";
import { canonicalHashSync } from "../../../src/extension-api/sha256-sync.ts";
import { createDurableContextMiddleware } from "../../../src/middlewares/durable-context/durable-context.ts";
import { createSubagentLimitMiddleware } from "../../../src/middlewares/subagent-limit.ts";
import { SUBAGENT_TOKEN_USAGE_KEY, createTokenUsageMiddleware, normalizeTokenUsage } from "../../../src/middlewares/token-usage/token-usage.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import {
  BatchTaskConfigSchema,
  BATCH_TASK_ERROR_CODE_KEY,
  BATCH_TASK_PROGRESS_EVENT,
  BATCH_TASK_RESULT_KEY,
  BATCH_TASK_TOOL_NAME,
  batchTaskReleasePolicyParameters,
  defaultBatchId,
  parseBatchTaskConfig,
} from "../../../src/tools/batch-task.ts";
import { TASK_TOOL_NAME } from "../../../src/tools/task.ts";
import { createBatchTaskTool, createTaskTool } from "../../../src/agents/delegation-tools.ts";
import { GP, ITEM_USAGE, SubagentScript, driveGated, invokeBatch, task, toolRuntime } from "./batch-task-helpers.ts";

// The section as its schema fills it in when nothing is configured.
const BATCH_TASK_DEFAULTS = v.parse(BatchTaskConfigSchema, {});

const OWNER = { userId: "default", threadId: "thread-1" };

function asMessage(output: unknown): ToolMessage {
  expect(ToolMessage.isInstance(output)).toBe(true);
  return output as ToolMessage;
}

function errorCode(output: unknown): unknown {
  return asMessage(output).additional_kwargs[BATCH_TASK_ERROR_CODE_KEY];
}

function openRecord(batchId: string, maxLive = 2): BatchRecord {
  const tasks = [task("left over")];
  return {
    version: 1,
    batch_id: batchId,
    user_id: OWNER.userId,
    thread_id: OWNER.threadId,
    description: "earlier batch",
    created_at: "2026-05-08T12:00:00.000Z",
    created_run_id: "run-0",
    limits: { max_total: 16, max_live: maxLive, max_running: 4 },
    tasks,
    tasks_sha256: canonicalHashSync(tasks),
  };
}

describe("batch_task config", () => {
  it("defaults to off with 16 total, 2 live, 4 running, and declares every setting", () => {
    expect(BATCH_TASK_DEFAULTS).toEqual({ enabled: false, max_total: 16, max_live: 2, max_running: 4 });
    expect(parseBatchTaskConfig(undefined)).toEqual(BATCH_TASK_DEFAULTS);
    expect(batchTaskReleasePolicyParameters({ enabled: true, max_running: 2 })).toEqual({ enabled: true, max_total: 16, max_live: 2, max_running: 2 });
  });

  it("clamps limits into their ranges (total 1-64, live 1-8, running 1-16)", () => {
    expect(parseBatchTaskConfig({ max_total: 500, max_live: 0, max_running: 99 })).toMatchObject({ max_total: 64, max_live: 1, max_running: 16 });
    expect(parseBatchTaskConfig({ max_total: -3, max_live: 40, max_running: 0 })).toMatchObject({ max_total: 1, max_live: 8, max_running: 1 });
  });

  it("refuses unknown keys and non-whole numbers with the key's path", () => {
    expect(() => parseBatchTaskConfig({ max_parallel: 3 } as never)).toThrow(/subagents\.batch\.max_parallel/);
    expect(() => parseBatchTaskConfig({ max_running: 2.5 })).toThrow(/subagents\.batch\.max_running: expected a whole number/);
    try {
      parseBatchTaskConfig({ enabled: "yes" } as never);
      expect.unreachable();
    } catch (error) {
      expect((error as { code: string }).code).toBe("invalid_middleware_config");
    }
  });

  it("tells the model its limits and caps the tasks array in the schema", () => {
    const tool = createBatchTaskTool({ types: [GP], buildAgent: new SubagentScript().buildAgent, config: { max_total: 5, max_running: 2, max_live: 3 } });
    expect(tool.name).toBe(BATCH_TASK_TOOL_NAME);
    expect(tool.description).toContain("at most 5 tasks; at most 2 run at once");
    expect(tool.description).toContain("at most 3 unfinished batches");
    const tasks = (tool.schema["properties"] as Record<string, Record<string, unknown>>)["tasks"]!;
    expect(tasks["maxItems"]).toBe(5);
  });
});

describe("batch_task limits", () => {
  it("runs every item and returns the whole batch with per-item results and the summed usage", async () => {
    const script = new SubagentScript();
    const storage = createMemoryKeyValue();
    const tool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent });
    const events: Record<string, unknown>[] = [];
    const out = asMessage(
      await invokeBatch(tool, { batch_id: "b1", description: "three lookups", tasks: [task("one"), task("two"), task("three")] }, toolRuntime(storage, { writer: (e) => events.push(e as Record<string, unknown>) })),
    );
    const content = String(out.content);
    expect(content).toContain('Batch b1 "three lookups": 3 items, 3 completed. Ran 3 now; reused 0 stored results.');
    expect(content).toContain("## Item 1 of 3: one (general-purpose): completed\nTask Succeeded. Result: done: one");
    expect(content).toContain("## Item 3 of 3: three (general-purpose): completed\nTask Succeeded. Result: done: three");
    expect(out.name).toBe(BATCH_TASK_TOOL_NAME);
    expect(out.tool_call_id).toBe("bt-1");
    expect(normalizeTokenUsage(out.additional_kwargs[SUBAGENT_TOKEN_USAGE_KEY])).toEqual({ input_tokens: 30, output_tokens: 15, total_tokens: 45 });
    // Not an ordinary delegation: nothing the ledger or ToolErrorHandling's task path reads.
    expect(out.additional_kwargs["subagent_status"]).toBeUndefined();
    expect(out.additional_kwargs[BATCH_TASK_RESULT_KEY]).toMatchObject({ batch_id: "b1", open: false, counts: { completed: 3 } });
    const phases = events.filter((e) => e["type"] === BATCH_TASK_PROGRESS_EVENT).map((e) => e["phase"]);
    expect(phases[0]).toBe("started");
    expect(phases.at(-1)).toBe("finished");
    expect(phases.filter((p) => p === "item_finished")).toHaveLength(3);
  });

  it("refuses a batch over max_total without running or storing anything", async () => {
    const script = new SubagentScript();
    const storage = createMemoryKeyValue();
    const tool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent, config: { max_total: 2 } });
    const out = await invokeBatch(tool, { description: "too many", tasks: [task("a"), task("b"), task("c")] }, toolRuntime(storage));
    expect(errorCode(out)).toBe("batch_total_limit");
    expect(asMessage(out).status).toBe("error");
    expect(asMessage(out).content).toBe(
      "Error: A batch holds at most 2 tasks (max_total) and this one has 3. Split the work into batches of at most 2, finishing one before the next.",
    );
    expect(script.built).toEqual([]);
    expect(await storage.getKeys()).toEqual([]);
  });

  it("runs at most max_running items at once; the rest wait", async () => {
    const script = new SubagentScript();
    const storage = createMemoryKeyValue();
    const tool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent, config: { max_running: 2 } });
    const tasks = ["a", "b", "c", "d", "e"].map((p) => task(p));
    const out = asMessage(await driveGated(script, 5, 2, invokeBatch(tool, { description: "five", tasks }, toolRuntime(storage))));
    expect(script.maxActive).toBe(2);
    expect(script.finished).toBe(5);
    expect((out.additional_kwargs[BATCH_TASK_RESULT_KEY] as { counts: unknown }).counts).toEqual({ completed: 5 });
  });

  it("keeps the max_running a batch was created with when a later config is more generous", async () => {
    const storage = createMemoryKeyValue();
    const first = new SubagentScript();
    first.blockOn = "b";
    const abort = new AbortController();
    first.onBlocked = () => abort.abort();
    const strict = createBatchTaskTool({ types: [GP], buildAgent: first.buildAgent, config: { max_running: 1 } });
    const tasks = ["a", "b", "c", "d"].map((p) => task(p));
    await expect(invokeBatch(strict, { batch_id: "slow", description: "four", tasks }, toolRuntime(storage, { signal: abort.signal }))).rejects.toBeDefined();

    const second = new SubagentScript();
    const generous = createBatchTaskTool({ types: [GP], buildAgent: second.buildAgent, config: { max_running: 8 } });
    const out = asMessage(await driveGated(second, 3, 1, invokeBatch(generous, { batch_id: "slow", description: "four" }, toolRuntime(storage, { runId: "run-2" }))));
    expect(second.maxActive).toBe(1);
    expect(second.prompts).toEqual(["b", "c", "d"]);
    expect((out.additional_kwargs[BATCH_TASK_RESULT_KEY] as { limits: unknown }).limits).toEqual({ max_total: 16, max_live: 2, max_running: 1 });
  });

  it("refuses a new batch beyond max_live, naming the open batch ids, and allows it once one is finished", async () => {
    const storage = createMemoryKeyValue();
    const store = new BatchStore(storage);
    await store.create(OWNER, openRecord("open-a"));
    await store.create(OWNER, openRecord("open-b"));
    const script = new SubagentScript();
    const tool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent });
    const refused = await invokeBatch(tool, { description: "new", tasks: [task("x")] }, toolRuntime(storage));
    expect(errorCode(refused)).toBe("batch_live_limit");
    expect(asMessage(refused).content).toBe(
      "Error: This thread already has 2 unfinished batches (open-a, open-b), the most allowed at once (max_live=2). " +
        "Call batch_task with one of these batch_id values to finish it, then start the new batch.",
    );
    expect(script.built).toEqual([]);

    // Finishing one frees a slot.
    const finished = asMessage(await invokeBatch(tool, { batch_id: "open-a", description: "finish" }, toolRuntime(storage)));
    expect((finished.additional_kwargs[BATCH_TASK_RESULT_KEY] as { open: boolean }).open).toBe(false);
    const accepted = asMessage(await invokeBatch(tool, { description: "new", tasks: [task("x")] }, toolRuntime(storage), "bt-2"));
    expect(accepted.status).not.toBe("error");
    expect(script.prompts).toEqual(["left over", "x"]);
  });

  it("counts live batches per thread: another thread's open batches do not count", async () => {
    const storage = createMemoryKeyValue();
    const store = new BatchStore(storage);
    await store.create({ userId: "default", threadId: "other" }, openRecord("elsewhere", 1));
    const tool = createBatchTaskTool({ types: [GP], buildAgent: new SubagentScript().buildAgent, config: { max_live: 1 } });
    const out = asMessage(await invokeBatch(tool, { description: "mine", tasks: [task("x")] }, toolRuntime(storage)));
    expect(out.status).not.toBe("error");
  });

  it("keeps a stricter max_live an open batch was created with", async () => {
    const storage = createMemoryKeyValue();
    await new BatchStore(storage).create(OWNER, openRecord("strict", 1));
    const tool = createBatchTaskTool({ types: [GP], buildAgent: new SubagentScript().buildAgent, config: { max_live: 5 } });
    const out = await invokeBatch(tool, { description: "new", tasks: [task("x")] }, toolRuntime(storage));
    expect(errorCode(out)).toBe("batch_live_limit");
    expect(String(asMessage(out).content)).toContain("(strict), the most allowed at once (max_live=1)");
  });
});

describe("batch_task refusals", () => {
  const tool = () => createBatchTaskTool({ types: [GP], buildAgent: new SubagentScript().buildAgent });

  it("names the valid subagent types for an unknown one", async () => {
    const out = await invokeBatch(tool(), { description: "x", tasks: [task("a"), { description: "b", prompt: "b", subagent_type: "wizard" }] }, toolRuntime(createMemoryKeyValue()));
    expect(errorCode(out)).toBe("batch_unknown_subagent_type");
    expect(asMessage(out).content).toBe("Error: tasks[1] names unknown subagent type 'wizard'. Available: general-purpose. Fix it and call batch_task again.");
  });

  it("asks for a prompt, for tasks, and for a well-formed batch_id", async () => {
    const storage = createMemoryKeyValue();
    const noPrompt = await invokeBatch(tool(), { description: "x", tasks: [{ description: "a", prompt: "  ", subagent_type: GP.name }] }, toolRuntime(storage));
    expect(asMessage(noPrompt).content).toBe("Error: tasks[0] needs a non-empty `prompt` telling the subagent what to do. Fix it and call batch_task again.");
    const noTasks = await invokeBatch(tool(), { description: "x" }, toolRuntime(storage));
    expect(asMessage(noTasks).content).toBe("Error: A new batch needs a non-empty `tasks` list of {description, prompt, subagent_type}. Call batch_task again with one.");
    const unknownId = await invokeBatch(tool(), { batch_id: "nope", description: "x" }, toolRuntime(storage));
    expect(asMessage(unknownId).content).toBe(
      'Error: No batch "nope" exists in this thread. To start it, call batch_task again with this batch_id and a non-empty `tasks` list.',
    );
    const badId = await invokeBatch(tool(), { batch_id: "../etc", description: "x", tasks: [task("a")] }, toolRuntime(storage));
    expect(errorCode(badId)).toBe("batch_invalid_arguments");
    expect(String(asMessage(badId).content)).toContain('Invalid batch_id "../etc": use 1-64 letters, digits, "_" or "-"');
    expect(await storage.getKeys()).toEqual([]);
  });

  it("refuses different tasks under an existing batch_id instead of mixing two batches", async () => {
    const storage = createMemoryKeyValue();
    await invokeBatch(tool(), { batch_id: "b", description: "x", tasks: [task("a")] }, toolRuntime(storage));
    const out = await invokeBatch(tool(), { batch_id: "b", description: "x", tasks: [task("z")] }, toolRuntime(storage));
    expect(errorCode(out)).toBe("batch_tasks_mismatch");
    expect(asMessage(out).content).toBe(
      'Error: Batch "b" already exists with different tasks. Call batch_task with batch_id "b" and no tasks to resume it, or leave batch_id out to start a new batch.',
    );
  });

  it("says what to do when the run has no storage or no thread", async () => {
    const noStorage = await invokeBatch(tool(), { description: "x", tasks: [task("a")] }, toolRuntime(undefined));
    expect(errorCode(noStorage)).toBe("batch_storage_unavailable");
    expect(asMessage(noStorage).content).toBe("Error: batch_task needs durable storage and this run has none. Delegate the items one by one with `task` instead.");
    const badThread = await invokeBatch(tool(), { description: "x", tasks: [task("a")] }, toolRuntime(createMemoryKeyValue(), { threadId: "a/b" }));
    expect(errorCode(badThread)).toBe("batch_thread_required");
  });

  it("refuses to run a batch that another call of this tool is running", async () => {
    const storage = createMemoryKeyValue();
    const script = new SubagentScript();
    const shared = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent });
    script.gated = true;
    const first = invokeBatch(shared, { batch_id: "b", description: "x", tasks: [task("a")] }, toolRuntime(storage));
    await vi.waitFor(() => expect(script.waiting).toBe(1));
    const second = await invokeBatch(shared, { batch_id: "b", description: "x" }, toolRuntime(storage), "bt-2");
    expect(errorCode(second)).toBe("batch_busy");
    script.releaseAll();
    expect(asMessage(await first).status).not.toBe("error");
    expect(script.prompts).toEqual(["a"]);
  });

  it("starts a batch without batch_id under an id derived from the call, so a replayed call resumes it", async () => {
    const storage = createMemoryKeyValue();
    const script = new SubagentScript();
    const args = { description: "x", tasks: [task("a")] };
    const first = asMessage(await invokeBatch(createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent }), args, toolRuntime(storage), "call-7"));
    const id = defaultBatchId("thread-1", "call-7");
    expect(id).toMatch(/^batch-[0-9a-f]{20}$/);
    expect(String(first.content)).toContain(`Call batch_task with batch_id "${id}"`);
    const replay = asMessage(await invokeBatch(createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent }), args, toolRuntime(storage, { runId: "run-2" }), "call-7"));
    expect(String(replay.content)).toContain("Ran 0 now; reused 1 stored results.");
    expect(script.prompts).toEqual(["a"]);
  });
});

describe("batch_task in the lead graph", () => {
  it("is neither truncated by SubagentLimit nor recorded in the delegation ledger, and its usage reaches the dispatching step", async () => {
    const script = new SubagentScript();
    const batchTool = createBatchTaskTool({ types: [GP], buildAgent: script.buildAgent });
    const taskTool = createTaskTool({ types: [GP], buildAgent: script.buildAgent });
    const lead = fakeModel()
      .respondWithTools([
        { name: BATCH_TASK_TOOL_NAME, args: { batch_id: "b1", description: "first", tasks: [task("b1-a"), task("b1-b")] }, id: "bt1" },
        { name: BATCH_TASK_TOOL_NAME, args: { batch_id: "b2", description: "second", tasks: [task("b2-a")] }, id: "bt2" },
        { name: TASK_TOOL_NAME, args: { description: "solo", prompt: "solo", subagent_type: GP.name }, id: "t1" },
      ])
      .respond(new AIMessage("Lead summary."));
    const agent = createAgent({
      model: lead,
      tools: [batchTool, taskTool],
      // One ordinary delegation per response: were batch_task counted, two of three calls would go.
      middlewares: [createTokenUsageMiddleware(), createDurableContextMiddleware(), createSubagentLimitMiddleware({ max_concurrent: 1 })],
      services: { clock: systemClock, storage: createMemoryKeyValue() },
    });
    let state: ThreadState | undefined;
    for await (const chunk of agent.stream({ messages: [new HumanMessage("fan out")] }, { threadId: "lead-thread", streamMode: "values" })) {
      state = chunk as ThreadState;
    }
    const messages = state!.messages as BaseMessage[];
    const results = messages.filter((m) => ToolMessage.isInstance(m)) as ToolMessage[];
    expect(results.map((m) => m.tool_call_id).sort()).toEqual(["bt1", "bt2", "t1"]);
    expect(script.prompts.sort()).toEqual(["b1-a", "b1-b", "b2-a", "solo"]);
    expect((state!.delegations ?? []).map((d) => d.id)).toEqual(["t1"]);
    const dispatch = messages.find((m) => AIMessage.isInstance(m) && (m.tool_calls ?? []).length > 0) as AIMessage;
    // Four subagents at 15 tokens each, credited to the step that dispatched them.
    expect(dispatch.usage_metadata?.total_tokens).toBe(4 * ITEM_USAGE.total_tokens);
    expect((messages.at(-1) as AIMessage).content).toBe("Lead summary.");
  });
});

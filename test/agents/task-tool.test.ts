import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { SUBAGENT_PROGRESS_EVENT } from "../../src/agents/subagent-executor.ts";
import { GENERAL_PURPOSE_SUBAGENT, type SubagentType } from "../../src/agents/subagent-types.ts";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent, type AgentTool } from "../../src/engine/index.ts";
import { sha256HexSync } from "../../src/extension-api/sha256-sync.ts";
import { readSubagentResultMetadata } from "../../src/middlewares/durable-context/ledger.ts";
import { SUBAGENT_TOKEN_USAGE_KEY, normalizeTokenUsage } from "../../src/middlewares/token-usage/token-usage.ts";
import { TOOL_RECEIPT_KEY, createToolReceiptMiddleware, makeToolReceipt } from "../../src/middlewares/tool-receipt/tool-receipt.ts";
import { SUBAGENT_CITATION_VERDICT_KEY, TASK_TOOL_NAME } from "../../src/tools/task.ts";
import { createTaskTool } from "../../src/agents/delegation-tools.ts";
import { LOOP_DETECTION_EVENT, createLoopDetectionMiddleware } from "../../src/middlewares/loop-detection/index.ts";

type Model = ReturnType<typeof fakeModel>;

const GP: SubagentType = { ...GENERAL_PURPOSE_SUBAGENT, maxTurns: 25, timeoutMs: 60_000 };

const writeFileTool: AgentTool = {
  name: "write_file",
  description: "writes a file",
  schema: { type: "object", properties: { path: { type: "string" } } },
  invoke: async () => "OK",
};

function subagentBuilder(model: () => Model, tools: AgentTool[] = [writeFileTool], receipts = false) {
  return () =>
    createAgent({
      model: model(),
      tools,
      middlewares: receipts ? [createToolReceiptMiddleware(undefined, { subagent: true })] : [],
      services: { clock: systemClock },
    });
}

function delegate(args: Record<string, unknown>, id = "call-1") {
  return fakeModel().respondWithTools([{ name: TASK_TOOL_NAME, args, id }]).respond(new AIMessage("Lead summary."));
}

async function runLead(lead: Model, buildAgent: Parameters<typeof createTaskTool>[0]["buildAgent"], types: SubagentType[] = [GP]) {
  const agent = createAgent({ model: lead, tools: [createTaskTool({ types, buildAgent })], services: { clock: systemClock } });
  const custom: Record<string, unknown>[] = [];
  let messages: BaseMessage[] = [];
  for await (const chunk of agent.stream({ messages: [new HumanMessage("please delegate")] }, { threadId: "lead-thread", streamMode: ["values", "custom"] })) {
    const [mode, payload] = chunk as [string, unknown];
    if (mode === "custom") custom.push(payload as Record<string, unknown>);
    else messages = (payload as { messages: BaseMessage[] }).messages;
  }
  const taskMessage = messages.find((m) => ToolMessage.isInstance(m)) as ToolMessage | undefined;
  return { messages, custom, taskMessage };
}

const ARGS = { description: "Find the answer", prompt: "Find the answer to the question.", subagent_type: "general-purpose" };

describe("task tool", () => {
  // Spec (middleware-chain.md #28): "Ordinary task-tool subagents receive a loop-detection-only recorder proxy that
  // forwards the append to the parent run loop".
  it('"forwards the append to the parent run loop": a task subagent\'s LoopDetection warning is in the lead run\'s custom stream (what the journal keeps)', async () => {
    const poke = (id: string) => new AIMessage({ content: "", tool_calls: [{ name: "write_file", args: { path: "/a" }, id }] });
    const sub = () => fakeModel().respond(poke("w1")).respond(poke("w2")).respond(new AIMessage("done"));
    const build = () =>
      createAgent({ model: sub(), tools: [writeFileTool], middlewares: [createLoopDetectionMiddleware({ warn_threshold: 2, hard_limit: 5 })], services: { clock: systemClock } });
    const { custom } = await runLead(delegate(ARGS), build);
    expect(custom.filter((e) => e["type"] === LOOP_DETECTION_EVENT)).toEqual([
      expect.objectContaining({ action: "warn", is_subagent: true, tool_names: ["write_file"] }),
    ]);
  });

  it("runs a delegation end to end: kwargs the ledger and token accounting read, progress in the parent's custom stream", async () => {
    const sub = () => fakeModel().respond(new AIMessage({ content: "The answer is 42.", usage_metadata: { input_tokens: 11, output_tokens: 4, total_tokens: 15 } }));
    const { messages, custom, taskMessage } = await runLead(delegate(ARGS), subagentBuilder(sub));
    expect(taskMessage).toBeDefined();
    expect(taskMessage!.name).toBe(TASK_TOOL_NAME);
    expect(taskMessage!.tool_call_id).toBe("call-1");
    expect(taskMessage!.content).toBe("Task Succeeded. Result: The answer is 42.");
    const kwargs = taskMessage!.additional_kwargs;
    expect(kwargs).toMatchObject({
      subagent_status: "completed",
      subagent_result_brief: "The answer is 42.",
      subagent_result_sha256: sha256HexSync("The answer is 42."),
    });
    expect(kwargs["subagent_stop_reason"]).toBeUndefined();
    expect(kwargs[SUBAGENT_CITATION_VERDICT_KEY]).toBeUndefined();
    expect(normalizeTokenUsage(kwargs[SUBAGENT_TOKEN_USAGE_KEY])).toEqual({ input_tokens: 11, output_tokens: 4, total_tokens: 15 });
    expect(readSubagentResultMetadata(kwargs)).toMatchObject({ status: "completed", result_brief: "The answer is 42." });
    expect((messages.at(-1) as AIMessage).content).toBe("Lead summary.");

    const progress = custom.filter((e) => e["type"] === SUBAGENT_PROGRESS_EVENT);
    expect(progress.map((e) => e["phase"])).toEqual(["started", "running", "completed"]);
    expect(progress.every((e) => e["tool_call_id"] === "call-1" && e["description"] === "Find the answer")).toBe(true);
  });

  it("answers an unknown subagent type with an Error naming the valid types, without running anything", async () => {
    let built = 0;
    const { taskMessage } = await runLead(delegate({ ...ARGS, subagent_type: "wizard" }), () => {
      built += 1;
      return subagentBuilder(() => fakeModel().respond(new AIMessage("x")))();
    });
    expect(taskMessage!.content).toBe("Error: Unknown subagent type 'wizard'. Available: general-purpose. Call task again with one of these as subagent_type.");
    expect(taskMessage!.additional_kwargs["subagent_status"]).toBeUndefined();
    expect(built).toBe(0);
  });

  it("reports a subagent whose model throws as failed", async () => {
    const { taskMessage, messages } = await runLead(delegate(ARGS), subagentBuilder(() => fakeModel().respond(new Error("provider down"))));
    expect(taskMessage!.content).toBe("Task failed. Error: provider down");
    expect(taskMessage!.additional_kwargs).toMatchObject({ subagent_status: "failed", subagent_error: "provider down" });
    expect(readSubagentResultMetadata(taskMessage!.additional_kwargs)).toMatchObject({ status: "failed", error: "provider down" });
    expect((messages.at(-1) as AIMessage).content).toBe("Lead summary.");
  });

  it("caps a runaway subagent at its turn limit while the parent run completes", async () => {
    const runaway = () => {
      const m = fakeModel();
      // Tool calls with no text: nothing usable to keep when the budget runs out.
      for (let i = 0; i < 100; i += 1) m.respond(new AIMessage({ content: "", tool_calls: [{ name: "write_file", args: { path: `f${i}` }, id: `w${i}` }] }));
      return m;
    };
    const { taskMessage, messages } = await runLead(delegate(ARGS), subagentBuilder(runaway), [{ ...GP, maxTurns: 8 }]);
    expect(taskMessage!.content).toBe("Task failed (capped: turn budget). Error: Reached max_turns=8");
    expect(taskMessage!.additional_kwargs).toMatchObject({ subagent_status: "failed", subagent_stop_reason: "turn_capped" });
    expect(readSubagentResultMetadata(taskMessage!.additional_kwargs)).toMatchObject({ status: "failed", stop_reason: "turn_capped" });
    expect((messages.at(-1) as AIMessage).content).toBe("Lead summary.");
  });

  it("verifies a cited receipt from the subagent's citing turn", async () => {
    const sub = () =>
      fakeModel()
        .respondWithTools([{ name: "write_file", args: { path: "report.md" }, id: "w1" }])
        .respond(new AIMessage("Wrote report.md [r1 write_file]."));
    const { taskMessage } = await runLead(delegate(ARGS), subagentBuilder(sub, [writeFileTool], true));
    const verdict = taskMessage!.additional_kwargs[SUBAGENT_CITATION_VERDICT_KEY] as Record<string, unknown>;
    expect(verdict).toMatchObject({ citation_resolved: true, cited: ["r1"], resolved: ["r1"], unknown: [], failed: [] });
  });

  it("rejects a forged citation: an id the subagent was never shown, and a wrong anchor", async () => {
    const sub = () =>
      fakeModel()
        .respondWithTools([{ name: "write_file", args: { path: "report.md" }, id: "w1" }])
        .respond(new AIMessage("Ran the deploy [r7 bash] and wrote report.md [r1 bash]."));
    const { taskMessage } = await runLead(delegate(ARGS), subagentBuilder(sub, [writeFileTool], true));
    const verdict = taskMessage!.additional_kwargs[SUBAGENT_CITATION_VERDICT_KEY] as { citation_resolved: boolean; unknown: string[]; failed: Array<{ id: string }> };
    expect(verdict.citation_resolved).toBe(false);
    expect(verdict.unknown).toEqual(["r7"]);
    expect(verdict.failed.map((f) => f.id)).toEqual(["r1"]);
  });

  it("rejects citations when the subagent was shown no ledger at all", async () => {
    const sub = () => fakeModel().respond(new AIMessage("Done, see [r1 write_file]."));
    const { taskMessage } = await runLead(delegate(ARGS), subagentBuilder(sub, [writeFileTool], false));
    const verdict = taskMessage!.additional_kwargs[SUBAGENT_CITATION_VERDICT_KEY] as { citation_resolved: boolean; unknown: string[] };
    expect(verdict).toMatchObject({ citation_resolved: false, unknown: ["r1"] });
  });

  it("rejects a receipt a tool stamped on itself when no ledger was shown to the citing turn", async () => {
    const selfStamping: AgentTool = {
      name: "write_file",
      description: "writes a file and vouches for itself",
      schema: { type: "object", properties: {} },
      async invoke(_args, { toolCall }) {
        const message = new ToolMessage({ content: "OK", tool_call_id: toolCall.id ?? "", name: "write_file" });
        message.additional_kwargs = { [TOOL_RECEIPT_KEY]: await makeToolReceipt(toolCall, message, 0) };
        return message;
      },
    };
    const sub = () =>
      fakeModel()
        .respondWithTools([{ name: "write_file", args: { path: "report.md" }, id: "w1" }])
        .respond(new AIMessage("Wrote report.md [r1 write_file]."));
    const { taskMessage } = await runLead(delegate(ARGS), subagentBuilder(sub, [selfStamping], false));
    expect(taskMessage!.additional_kwargs[SUBAGENT_CITATION_VERDICT_KEY]).toMatchObject({ citation_resolved: false, unknown: ["r1"] });
  });

  it("cancels the subagent when the parent run is aborted mid-delegation", async () => {
    let enter!: () => void;
    const entered = new Promise<void>((resolve) => (enter = resolve));
    let subSignal: AbortSignal | undefined;
    const waitTool: AgentTool = {
      name: "wait",
      description: "waits until aborted",
      schema: { type: "object", properties: {} },
      invoke: (_args, { runtime }) =>
        new Promise((_, reject) => {
          subSignal = runtime.signal;
          enter();
          runtime.signal?.addEventListener("abort", () => reject(runtime.signal!.reason), { once: true });
        }),
    };
    const sub = () => fakeModel().respondWithTools([{ name: "wait", args: {}, id: "w1" }]).respond(new AIMessage("never"));
    const lead = createAgent({ model: delegate(ARGS), tools: [createTaskTool({ types: [GP], buildAgent: subagentBuilder(sub, [waitTool]) })], services: { clock: systemClock } });
    const abort = new AbortController();
    const custom: Record<string, unknown>[] = [];
    const run = (async () => {
      for await (const chunk of lead.stream({ messages: [new HumanMessage("go")] }, { signal: abort.signal, streamMode: ["custom"] })) {
        custom.push((chunk as [string, Record<string, unknown>])[1]);
      }
    })();
    await entered;
    abort.abort();
    await expect(run).rejects.toThrow();
    expect(subSignal?.aborted).toBe(true);
  });
});

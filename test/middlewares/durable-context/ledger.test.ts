import { createHash } from "node:crypto";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import {
  DELEGATION_RESULT_BRIEF_CAP,
  boundText,
  changedDelegations,
  extractDelegations,
  readSubagentResultMetadata,
  renderDelegationLedger,
  withRunId,
} from "../../../src/middlewares/durable-context/ledger.ts";
import { renderSkillContext } from "../../../src/middlewares/durable-context/skills.ts";

const NOW = "2026-07-11T08:00:00.000Z";

function sha256(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

function dispatch(...ids: string[]): AIMessage {
  return new AIMessage({
    content: "",
    tool_calls: ids.map((id) => ({ name: "task", args: { description: `work ${id}`, prompt: "p", subagent_type: "general-purpose" }, id, type: "tool_call" as const })),
  });
}

function result(callId: string, kwargs: Record<string, unknown>, content = "Task Succeeded. Result: misleading"): ToolMessage {
  return new ToolMessage({ content, tool_call_id: callId, additional_kwargs: kwargs });
}

async function single(messages: BaseMessage[]) {
  const entries = await extractDelegations(messages, NOW);
  expect(entries).toHaveLength(1);
  return entries[0]!;
}

describe("delegation ledger capture", () => {
  it("captures a dispatch as in_progress with a bounded description, in dispatch order, ignoring other tools", async () => {
    const long = new AIMessage({
      content: "",
      tool_calls: [
        { name: "web_search", args: {}, id: "s1", type: "tool_call" },
        { name: "task", args: { prompt: "x".repeat(300), subagent_type: "bash" }, id: "b", type: "tool_call" },
        { name: "task", args: { description: "first" }, id: "a", type: "tool_call" },
        { name: "task", args: { description: "no id" }, type: "tool_call" },
      ],
    });
    const entries = await extractDelegations([new HumanMessage("go"), long], NOW);
    expect(entries.map((e) => e.id)).toEqual(["b", "a"]);
    expect(entries[0]).toEqual({ id: "b", description: "x".repeat(200), subagent_type: "bash", status: "in_progress", created_at: NOW });
    expect(entries[1]!.subagent_type).toBe("");
  });

  it("takes terminal statuses, stop reasons and errors from the structured metadata only", async () => {
    expect(await single([dispatch("c"), result("c", { subagent_status: "cancelled" })])).toMatchObject({
      status: "cancelled",
      result_brief: "Task cancelled by user.",
      result_sha256: sha256("Task cancelled by user."),
      result_ref: "c",
    });
    expect(await single([dispatch("c"), result("c", { subagent_status: "timed_out" })])).toMatchObject({ status: "timed_out", result_brief: "Task timed out." });
    expect(await single([dispatch("c"), result("c", { subagent_status: "polling_timed_out" })])).toMatchObject({ status: "polling_timed_out" });
    expect(await single([dispatch("c"), result("c", { subagent_status: "failed", subagent_error: " boom " })])).toMatchObject({ status: "failed", result_brief: "boom" });
    expect(
      await single([dispatch("c"), result("c", { subagent_status: "completed", subagent_stop_reason: "token_capped", subagent_result_brief: "partial" })]),
    ).toMatchObject({ status: "completed", stop_reason: "token_capped", result_brief: "partial", result_sha256: sha256("partial") });
    // A completed status never carries an error; a bogus status keeps the dispatch open.
    expect(await single([dispatch("c"), result("c", { subagent_status: "completed", subagent_error: "ignored" })])).not.toHaveProperty("result_brief");
    expect(await single([dispatch("c"), result("c", { subagent_status: "done" }, "Task Succeeded. Result: x")])).toMatchObject({ status: "in_progress" });
    expect(await single([dispatch("c"), result("c", {}, "Task Succeeded. Result: x")])).toMatchObject({ status: "in_progress" });
  });

  it("maps the retired max_turns_reached status to a turn-capped verdict", () => {
    expect(readSubagentResultMetadata({ subagent_status: "max_turns_reached", subagent_result_brief: "partial" })).toEqual({
      status: "completed",
      stop_reason: "turn_capped",
      result_brief: "partial",
    });
    expect(readSubagentResultMetadata({ subagent_status: "max_turns_reached" })).toEqual({ status: "failed", stop_reason: "turn_capped" });
    expect(readSubagentResultMetadata({ subagent_status: "completed", subagent_result_brief: "r", subagent_result_sha256: "XYZ" })).toEqual({
      status: "completed",
      result_brief: "r",
    });
  });

  it("bounds a large result head and tail but hashes the full text", async () => {
    const big = `${"a".repeat(3000)}${"z".repeat(3000)}`;
    const entry = await single([dispatch("c"), result("c", { subagent_status: "failed", subagent_error: big })]);
    expect((entry.result_brief as string).length).toBe(DELEGATION_RESULT_BRIEF_CAP);
    expect(entry.result_brief).toMatch(/^a+\n\.\.\.\nz+$/);
    expect(boundText("😀".repeat(10), 8)).toBe("😀".repeat(8));
    expect(boundText("short", 10)).toBe("short");
  });

  it("tags only new ids with the run and reports only changed entries", () => {
    const existing = [{ id: "old", run_id: "run-0", description: "d", subagent_type: "t", status: "completed" as const }];
    const tagged = withRunId([{ id: "old", status: "completed", description: "d", subagent_type: "t" }, { id: "new", status: "in_progress" }], "run-1", existing);
    expect(tagged.map((e) => e.run_id)).toEqual(["run-0", "run-1"]);
    expect(changedDelegations(tagged, existing).map((e) => e.id)).toEqual(["new"]);
    // A terminal verdict is never reopened by a late in_progress echo.
    expect(changedDelegations([{ id: "old", status: "in_progress", run_id: "run-0" }], existing)).toEqual([]);
  });
});

describe("delegation ledger rendering", () => {
  it("renders nothing for an empty ledger and guidance per status", () => {
    expect(renderDelegationLedger([])).toBe("");
    const text = renderDelegationLedger([
      { id: "1", description: "research", subagent_type: "general-purpose", status: "in_progress" },
      { id: "2", description: "build", subagent_type: "bash", status: "completed", stop_reason: "turn_capped", result_brief: "half" },
      { id: "3", description: "deploy", subagent_type: "bash", status: "cancelled", result_brief: "Task cancelled by user." },
    ]);
    expect(text.split("\n")).toEqual([
      "## Work already delegated",
      "Newest entries are shown first. In-progress entries are already delegated. Completed entries are reusable results. Failed, cancelled, or timed-out entries are prior attempts.",
      "- [cancelled] deploy (via bash; cancelled attempt; may retry with a changed plan) -> Task cancelled by user.",
      "- [completed] build (via bash; hit a guardrail cap with a partial result; reuse the partial result, retry with a tighter scope, or raise the per-agent budget (max_turns / token_budget)) -> half",
      "- [in_progress] research (via general-purpose; already delegated; do NOT delegate again; wait for or build on the result)",
    ]);
  });

  it("keeps the newest entries within the budget and says how many older ones it left out", () => {
    const entries = Array.from({ length: 60 }, (_, i) => ({ id: `c${i}`, description: `task number ${i} ${"x".repeat(100)}`, subagent_type: "general-purpose", status: "completed", result_brief: "r" }));
    const text = renderDelegationLedger(entries, 2000);
    expect(text.length).toBeLessThanOrEqual(2000);
    const lines = text.split("\n");
    expect(lines[2]).toContain("task number 59");
    expect(lines.at(-1)).toMatch(/^- \.\.\. \d+ older delegation entries omitted from this model view because of context budget$/);
    const shown = lines.filter((l) => l.startsWith("- [")).length;
    expect(Number(/\d+/.exec(lines.at(-1)!)![0])).toBe(60 - shown);
  });

  it("caps each result brief in the view", () => {
    const text = renderDelegationLedger([{ id: "1", description: "d", subagent_type: "t", status: "completed", result_brief: "r".repeat(500) }]);
    const brief = text.split(" -> ")[1]!;
    expect(brief.length).toBe(120);
  });

  it("renders skill references escaped, with capped descriptions", () => {
    expect(renderSkillContext([])).toBe("");
    const text = renderSkillContext([{ name: "a<b>", path: "/mnt/skills/a/SKILL.md", description: `${"d".repeat(600)}`, loaded_at: 0 }]);
    expect(text).toBe(`## Active skills (loaded earlier - re-read the file before applying its instructions)\n- a&lt;b&gt;: ${"d".repeat(500)} -> /mnt/skills/a/SKILL.md`);
  });
});

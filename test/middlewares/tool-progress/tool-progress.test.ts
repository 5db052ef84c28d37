import * as v from "valibot";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, ModelRequest, ToolCallRequest, ToolResult } from "../../../src/engine/types.ts";
import { canonicalHashSync } from "../../../src/extension-api/sha256-sync.ts";
import { HIDE_FROM_UI } from "../../../src/middlewares/messages.ts";
import { createToolErrorHandlingMiddleware } from "../../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import {
  ToolProgressConfigSchema,
  DEFAULT_EXEMPT_TOOLS,
  MAX_PENDING_PROGRESS_HINTS,
  PROGRESS_HINT_NAME,
  TOOL_PROGRESS_EVENT,
  TOOL_PROGRESS_NAME,
  createToolProgressMiddleware,
  type ToolProgressConfigInput,
} from "../../../src/middlewares/tool-progress/tool-progress.ts";
import {
  INITIAL_TOOL_PHASE_STATE,
  PROGRESS_TEXTS,
  assessResult,
  blockReasonText,
  isNearDuplicate,
  parseProgressMeta,
  progressHintText,
  wordSet,
  type ProgressThresholds,
  type ToolPhaseState,
} from "../../../src/middlewares/tool-progress/state.ts";
import { TOOL_META_KEY, type ToolResultMeta } from "../../../src/middlewares/tool-result-meta.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

// The section as its schema fills it in when nothing is configured.
const TOOL_PROGRESS_DEFAULTS = v.parse(ToolProgressConfigSchema, {});

// ---------------------------------------------------------------------------------------------
// Helpers

function meta(overrides: Partial<ToolResultMeta> = {}): ToolResultMeta {
  return {
    status: "success",
    error_type: null,
    recoverable_by_model: true,
    recommended_next_action: "continue",
    source: "content_analysis",
    ...overrides,
  };
}

const NO_RESULTS = meta({ status: "error", error_type: "no_results", recommended_next_action: "rewrite_query", source: "tool_return" });
const RATE_LIMITED = meta({ status: "error", error_type: "rate_limited", recoverable_by_model: false, recommended_next_action: "summarize", source: "tool_return" });
const AUTH = meta({ status: "error", error_type: "auth", recoverable_by_model: false, recommended_next_action: "stop", source: "tool_return" });
const PARTIAL = meta({ status: "partial_success", recommended_next_action: "rewrite_query" });

function toolMessage(content: string, m: ToolResultMeta | Record<string, unknown> | undefined = meta(), name = "web_search"): ToolMessage {
  return new ToolMessage({
    content,
    tool_call_id: `tc-${name}`,
    name,
    status: (m as ToolResultMeta | undefined)?.status === "error" ? "error" : "success",
    additional_kwargs: m === undefined ? {} : { [TOOL_META_KEY]: m },
  });
}

const GOOD = () => toolMessage("A".repeat(300));
const UNIQUE_A = "apple banana cherry delta echo foxtrot golf hotel india juliet";
const UNIQUE_B = "xray yankee zulu alpha bravo charlie sierra tango uniform victor";

function runtimeWith(events?: unknown[]): AgentRuntime {
  const base = makeRuntime({ threadId: "t1", runId: "run-1" });
  return events ? { ...base, writer: (event: unknown) => void events.push(event) } : base;
}

function toolRequest(runtime: AgentRuntime, name = "web_search", id = `tc-${name}`): ToolCallRequest {
  return { toolCall: { name, args: {}, id, type: "tool_call" } as ToolCall, tool: undefined, state: emptyThreadState(), runtime };
}

/** The test-friendly settings upstream's suite uses (min words 5 so short fixtures can repeat). */
function progress(config: ToolProgressConfigInput = {}): AgentMiddleware {
  return createToolProgressMiddleware({ enabled: true, min_word_count_for_similarity: 5, ...config });
}

async function callTool(mw: AgentMiddleware, runtime: AgentRuntime, result: ToolResult | (() => ToolResult), name = "web_search"): Promise<ToolResult> {
  return mw.wrapToolCall!(toolRequest(runtime, name), async () => (typeof result === "function" ? result() : result));
}

async function repeatTool(mw: AgentMiddleware, runtime: AgentRuntime, result: ToolResult, times: number, name = "web_search"): Promise<ToolResult[]> {
  const results: ToolResult[] = [];
  for (let i = 0; i < times; i++) results.push(await callTool(mw, runtime, result, name));
  return results;
}

/** What the model receives on the next request (messages after the middleware's wrapModelCall). */
async function nextRequest(mw: AgentMiddleware, runtime: AgentRuntime, messages: BaseMessage[] = [new HumanMessage("go")]): Promise<readonly BaseMessage[]> {
  let seen: readonly BaseMessage[] = [];
  const request = { model: fakeModel(), systemMessage: undefined, messages, tools: [], state: { ...emptyThreadState(), messages }, runtime } as ModelRequest;
  await mw.wrapModelCall!(request, async (req) => {
    seen = req.messages;
    return new AIMessage("ok");
  });
  return seen;
}

function hintsIn(messages: readonly BaseMessage[]): HumanMessage[] {
  return messages.filter((m): m is HumanMessage => HumanMessage.isInstance(m) && m.name === PROGRESS_HINT_NAME);
}

/** Runs the middleware's beforeAgent the way the engine does at a run's start, if it has one. */
async function beforeAgentIfAny(mw: AgentMiddleware, runtime: AgentRuntime): Promise<void> {
  const hook = mw.beforeAgent;
  if (hook) await (typeof hook === "function" ? hook : hook.hook)(emptyThreadState(), runtime);
}

function isBlocked(result: ToolResult): boolean {
  return ToolMessage.isInstance(result) && String(result.content).startsWith("[TOOL_BLOCKED]");
}

// ---------------------------------------------------------------------------------------------

describe("ToolProgress config and declaration", () => {
  it("is named after the upstream class and is off by default", () => {
    const mw = createToolProgressMiddleware();
    expect(mw.name).toBe(TOOL_PROGRESS_NAME);
    expect(mw.name).toBe("ToolProgress");
    expect(TOOL_PROGRESS_DEFAULTS).toMatchObject({
      enabled: false,
      stagnation_threshold: 3,
      warn_escalation_count: 2,
      inject_assessment: true,
      jaccard_similarity_threshold: 0.8,
      min_word_count_for_similarity: 10,
      max_tracked_threads: 100,
    });
    expect([...TOOL_PROGRESS_DEFAULTS.exempt_tools].sort()).toEqual(["ask_clarification", "batch_task", "present_files", "task", "write_todos"]);
  });

  it("declares every behaviour-affecting setting, texts only as a hash", () => {
    const mw = createToolProgressMiddleware({ enabled: true, stagnation_threshold: 4, exempt_tools: ["b", "a"] });
    const declared = mw.releasePolicyParameters!();
    expect(declared).toEqual({
      enabled: true,
      stagnation_threshold: 4,
      warn_escalation_count: 2,
      inject_assessment: true,
      jaccard_similarity_threshold: 0.8,
      min_word_count_for_similarity: 10,
      exempt_tools: ["a", "b"],
      max_pending_hints: 3,
      recent_result_window: 3,
      word_set_max_chars: 8192,
      max_tracked_threads: 100,
      state_scope: "thread",
      hint_message_name: "progress_hint",
      texts_hash: canonicalHashSync(PROGRESS_TEXTS),
    });
    expect(JSON.stringify(declared)).not.toContain("PROGRESS HINT");
  });

  it("rejects unknown keys and out-of-range values with the key's path", () => {
    expect(() => createToolProgressMiddleware({ enabled: true, stagnaton_threshold: 3 } as never)).toThrow(/ToolProgress/);
    expect(() => createToolProgressMiddleware({ stagnation_threshold: 0 })).toThrow(/ToolProgress\.stagnation_threshold: expected at least 1/);
    expect(() => createToolProgressMiddleware({ warn_escalation_count: 1.5 })).toThrow(/warn_escalation_count/);
    expect(() => createToolProgressMiddleware({ jaccard_similarity_threshold: 1.2 })).toThrow(/jaccard_similarity_threshold: expected a ratio/);
    try {
      createToolProgressMiddleware({ max_tracked_threads: 0 });
      expect.unreachable();
    } catch (error) {
      expect((error as { code?: string }).code).toBe("invalid_middleware_config");
      expect(String(error)).toContain("under tool_progress");
    }
  });

  it("an explicitly empty exempt_tools list exempts nothing", async () => {
    const mw = createToolProgressMiddleware({ enabled: true, stagnation_threshold: 1, exempt_tools: [] });
    const runtime = runtimeWith();
    await callTool(mw, runtime, toolMessage("Error: 401", AUTH, "task"), "task");
    expect(isBlocked(await callTool(mw, runtime, GOOD(), "task"))).toBe(true);
  });
});

describe("ToolProgress word sets and near-duplicates", () => {
  it("keeps lower-cased words of three or more characters", () => {
    const words = wordSet("go Quick brown fox, über_x 42 123");
    expect(words.has("go")).toBe(false);
    expect(words.has("42")).toBe(false);
    expect([...words]).toEqual(expect.arrayContaining(["quick", "brown", "fox", "über_x", "123"]));
  });

  it("only reads the first 8192 characters", () => {
    const words = wordSet(`${"x".repeat(8192)} tailword`);
    expect(words.has("tailword")).toBe(false);
  });

  it("is a duplicate at or above the threshold, not below it", () => {
    const base = new Set("alpha bravo charlie delta echo foxtrot golf hotel".split(" "));
    const below = new Set("alpha bravo charlie delta echo foxtrot golf india".split(" ")); // 7/9
    const above = new Set("alpha bravo charlie delta echo foxtrot golf hotel india".split(" ")); // 8/9
    expect(isNearDuplicate(below, [base], 0.8, 5)).toBe(false);
    expect(isNearDuplicate(above, [base], 0.8, 5)).toBe(true);
    expect(isNearDuplicate(new Set("a b c d e".split(" ")), [new Set("v w x y z".split(" "))], 0.8, 5)).toBe(false);
    // Exactly at the threshold (4 shared of 5) counts.
    expect(isNearDuplicate(new Set(["aaa", "bbb", "ccc", "ddd"]), [new Set(["aaa", "bbb", "ccc", "ddd", "eee"])], 0.8, 4)).toBe(true);
  });

  it("never calls short results duplicates, and compares with the last three only", () => {
    expect(isNearDuplicate(new Set(["apple"]), [new Set(["apple"])], 0.8, 5)).toBe(false);
    const long = new Set(["apple", "banana", "cherry", "delta", "echo"]);
    expect(isNearDuplicate(new Set(["apple"]), [long], 0.1, 5)).toBe(false);
    expect(isNearDuplicate(new Set(["apple"]), [long], 0.1, 1)).toBe(true);
    expect(isNearDuplicate(long, [new Set(["apple"])], 0.1, 5)).toBe(false);
    const old = new Set(UNIQUE_A.split(" "));
    const others = [1, 2, 3].map((n) => new Set(`${UNIQUE_B} n${n}x`.split(" ").map((w) => `${w}${n}`)));
    expect(isNearDuplicate(new Set(UNIQUE_A.split(" ")), [old, ...others], 0.8, 5)).toBe(false);
    expect(isNearDuplicate(new Set(UNIQUE_A.split(" ")), [...others.slice(1), old], 0.8, 5)).toBe(true);
  });
});

describe("ToolProgress state machine (pure)", () => {
  const thresholds: ProgressThresholds = { stagnationThreshold: 2, warnEscalationCount: 1, jaccardThreshold: 0.8, minWords: 5 };

  it("a blocked state stays exactly as it is, whatever arrives", () => {
    const blocked: ToolPhaseState = { ...INITIAL_TOOL_PHASE_STATE, phase: "blocked", consecutiveProblems: 5, blockReason: "x" };
    for (const m of [AUTH, RATE_LIMITED, NO_RESULTS, meta()]) {
      const { state, hint } = assessResult(blocked, m, "", thresholds);
      expect(state).toBe(blocked);
      expect(hint).toBeNull();
    }
  });

  it("counts an immediate block as one problem", () => {
    const { state } = assessResult(INITIAL_TOOL_PHASE_STATE, AUTH, "", { ...thresholds, stagnationThreshold: 5 });
    expect(state).toMatchObject({ phase: "blocked", consecutiveProblems: 1, blockReason: "Authentication failure — this tool cannot be used." });
  });

  it("remembers at most three good results", () => {
    let state = INITIAL_TOOL_PHASE_STATE;
    for (let i = 0; i < 5; i++) {
      const distinct = UNIQUE_B.split(" ").map((word) => `${word}${i}`).join(" ");
      state = assessResult(state, meta(), distinct, thresholds).state;
      expect(state.consecutiveProblems).toBe(0);
    }
    expect(state.recentWordSets).toHaveLength(3);
  });

  it("writes a specific hint per kind, with the recommended action", () => {
    expect(progressHintText(NO_RESULTS)).toBe(
      "[PROGRESS HINT] Your search returned no results. Try rephrasing your search query with different keywords or approach.",
    );
    expect(progressHintText(PARTIAL)).toContain("incomplete results");
    expect(progressHintText(PARTIAL)).not.toContain("not producing new information");
    expect(progressHintText(meta())).toBe("[PROGRESS HINT] The tool is returning duplicate results. Try rephrasing your query or using a different search term.");
    expect(progressHintText(meta({ status: "error", error_type: "unknown", recommended_next_action: "try_alternative" }))).toBe(
      "[PROGRESS HINT] The tool is not producing new information. Consider using a different tool or strategy.",
    );
    expect(blockReasonText(RATE_LIMITED)).toBe("Repeated rate-limiting — summarize current findings and proceed.");
    expect(blockReasonText(meta({ error_type: "config" }))).toBe("Tool is not configured — this tool cannot be used.");
    expect(blockReasonText(meta({ error_type: "constructor" as never }))).toBe(
      "Tool has not produced new information after multiple attempts — summarize and move on.",
    );
  });

  it("reads only meta shaped like deerflow_tool_meta", () => {
    expect(parseProgressMeta(NO_RESULTS)).toEqual(NO_RESULTS);
    expect(parseProgressMeta({ unexpected_field: true })).toBeUndefined();
    expect(parseProgressMeta({ ...NO_RESULTS, status: "great" })).toBeUndefined();
    expect(parseProgressMeta({ ...NO_RESULTS, recoverable_by_model: "yes" })).toBeUndefined();
    expect(parseProgressMeta(null)).toBeUndefined();
    expect(parseProgressMeta([NO_RESULTS])).toBeUndefined();
  });
});

describe("ToolProgress middleware", () => {
  it("a normal call passes through with no hint", async () => {
    const mw = progress();
    const runtime = runtimeWith();
    const message = GOOD();
    expect(await callTool(mw, runtime, message)).toBe(message);
    expect(hintsIn(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("repeated no-results reach WARNED and the next model call gets one hidden progress_hint", async () => {
    const mw = progress({ stagnation_threshold: 2 });
    const runtime = runtimeWith();
    await callTool(mw, runtime, toolMessage("Error: no results found", NO_RESULTS));
    expect(hintsIn(await nextRequest(mw, runtime))).toEqual([]);
    await callTool(mw, runtime, toolMessage("Error: no results found", NO_RESULTS));

    const messages = await nextRequest(mw, runtime);
    const hints = hintsIn(messages);
    expect(hints).toHaveLength(1);
    expect(messages.at(-1)).toBe(hints[0]);
    expect(hints[0]!.content).toBe(progressHintText(NO_RESULTS));
    expect(hints[0]!.additional_kwargs[HIDE_FROM_UI]).toBe(true);
    // Delivered once: the following call carries nothing new.
    expect(hintsIn(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("the hint lives in the request only: the caller's message list is untouched", async () => {
    const mw = progress({ stagnation_threshold: 1 });
    const runtime = runtimeWith();
    await callTool(mw, runtime, toolMessage("Error: no results found", NO_RESULTS));
    const messages = [new HumanMessage("go")];
    await nextRequest(mw, runtime, messages);
    expect(messages).toHaveLength(1);
  });

  it("non-recoverable, non-stop problems escalate WARNED to BLOCKED after warn_escalation_count more", async () => {
    const mw = progress({ stagnation_threshold: 2, warn_escalation_count: 2 });
    const runtime = runtimeWith();
    const calls: number[] = [];
    const handler = async () => (calls.push(1), toolMessage("Error: rate limited", RATE_LIMITED));
    for (let i = 0; i < 3; i++) expect(isBlocked(await mw.wrapToolCall!(toolRequest(runtime), handler))).toBe(false);
    // The 4th problem is threshold + escalation: it blocks; the 5th call never runs.
    await mw.wrapToolCall!(toolRequest(runtime), handler);
    expect(calls).toHaveLength(4);
    const blocked = (await mw.wrapToolCall!(toolRequest(runtime, "web_search", "call-5"), handler)) as ToolMessage;
    expect(calls).toHaveLength(4);
    expect(blocked.content).toBe("[TOOL_BLOCKED] Repeated rate-limiting — summarize current findings and proceed.");
    expect(blocked.tool_call_id).toBe("call-5");
    expect(blocked.name).toBe("web_search");
    expect(blocked.status).toBe("error");
    expect(blocked.additional_kwargs[TOOL_META_KEY]).toEqual({
      status: "error",
      error_type: "blocked_by_progress_guard",
      recoverable_by_model: true,
      recommended_next_action: "summarize",
      source: "progress_middleware",
    });
  });

  it("recoverable problems never block: WARNED is terminal and every later problem re-hints", async () => {
    const mw = progress({ stagnation_threshold: 2, warn_escalation_count: 1 });
    const runtime = runtimeWith();
    const results = await repeatTool(mw, runtime, toolMessage("Error: no results found", NO_RESULTS), 10);
    expect(results.some(isBlocked)).toBe(false);
    // Each model call drains what is pending; a problem past the escalation point hints again.
    expect(hintsIn(await nextRequest(mw, runtime))).toHaveLength(1);
    await callTool(mw, runtime, toolMessage("Error: no results found", NO_RESULTS));
    expect(hintsIn(await nextRequest(mw, runtime))).toHaveLength(1);
  });

  it("auth errors block at once, even below the stagnation threshold", async () => {
    const mw = progress({ stagnation_threshold: 5 });
    const runtime = runtimeWith();
    await callTool(mw, runtime, toolMessage("Error: 401 Unauthorized", AUTH));
    let ran = false;
    const result = (await mw.wrapToolCall!(toolRequest(runtime), async () => ((ran = true), GOOD()))) as ToolMessage;
    expect(ran).toBe(false);
    expect(result.content).toBe("[TOOL_BLOCKED] Authentication failure — this tool cannot be used.");
    // No hint for a block: the blocked answer itself tells the model.
    expect(hintsIn(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("a good result after problems resets the tool to ACTIVE", async () => {
    const mw = progress({ stagnation_threshold: 3, warn_escalation_count: 1 });
    const runtime = runtimeWith();
    await repeatTool(mw, runtime, toolMessage("Error: rate limited", RATE_LIMITED), 3); // WARNED
    await callTool(mw, runtime, GOOD());
    // Had the count survived, the next problem would be the 4th and block the tool.
    await repeatTool(mw, runtime, toolMessage("Error: rate limited", RATE_LIMITED), 2);
    expect(isBlocked(await callTool(mw, runtime, GOOD()))).toBe(false);
  });

  it("tools are tracked independently", async () => {
    const mw = progress({ stagnation_threshold: 2, warn_escalation_count: 1 });
    const runtime = runtimeWith();
    await callTool(mw, runtime, toolMessage("Error: 401", AUTH));
    expect(isBlocked(await callTool(mw, runtime, GOOD()))).toBe(true);
    expect(isBlocked(await callTool(mw, runtime, toolMessage("x", NO_RESULTS, "read_file"), "read_file"))).toBe(false);
  });

  it("a near-duplicate success counts as a problem; different content does not", async () => {
    const mw = progress({ stagnation_threshold: 2, warn_escalation_count: 5 });
    const runtime = runtimeWith();
    await callTool(mw, runtime, toolMessage(UNIQUE_A));
    await callTool(mw, runtime, toolMessage(UNIQUE_B));
    expect(hintsIn(await nextRequest(mw, runtime))).toEqual([]);
    await callTool(mw, runtime, toolMessage(UNIQUE_A));
    await callTool(mw, runtime, toolMessage(UNIQUE_A));
    const hints = hintsIn(await nextRequest(mw, runtime));
    expect(hints).toHaveLength(1);
    expect(hints[0]!.content).toContain("duplicate");
    expect(hints[0]!.content).toMatch(/rephras|different/);
  });

  it("with the default min_word_count_for_similarity (10), short repeated results never stagnate", async () => {
    const mw = createToolProgressMiddleware({ enabled: true, stagnation_threshold: 3 });
    const runtime = runtimeWith();
    await repeatTool(mw, runtime, toolMessage("apple banana cherry delta echo foxtrot golf"), 5);
    expect(hintsIn(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("partial results stagnate with a specific hint", async () => {
    const mw = progress({ stagnation_threshold: 2 });
    const runtime = runtimeWith();
    await repeatTool(mw, runtime, toolMessage("Here are some partial results.", PARTIAL), 2);
    const [hint] = hintsIn(await nextRequest(mw, runtime));
    expect(hint!.content).toContain("incomplete results");
  });

  it("exempt tools are never tracked or blocked", async () => {
    const mw = progress({ stagnation_threshold: 1, warn_escalation_count: 1 });
    const runtime = runtimeWith();
    for (const name of DEFAULT_EXEMPT_TOOLS) {
      await callTool(mw, runtime, toolMessage("Error: 401", AUTH, name), name);
      expect(isBlocked(await callTool(mw, runtime, toolMessage("ok", meta(), name), name))).toBe(false);
    }
    expect(hintsIn(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("with inject_assessment off, states still move but no hint is sent", async () => {
    const mw = progress({ stagnation_threshold: 2, inject_assessment: false });
    const runtime = runtimeWith();
    await repeatTool(mw, runtime, toolMessage("Error: no results found", NO_RESULTS), 2);
    expect(hintsIn(await nextRequest(mw, runtime))).toEqual([]);
    await callTool(mw, runtime, toolMessage("Error: 401", AUTH));
    expect(isBlocked(await callTool(mw, runtime, GOOD()))).toBe(true);
  });

  it("identical hints are sent once, and at most three wait for one call", async () => {
    const mw = progress({ stagnation_threshold: 1 });
    const runtime = runtimeWith();
    await repeatTool(mw, runtime, toolMessage("Error: no results found", NO_RESULTS), 2);
    let [hint] = hintsIn(await nextRequest(mw, runtime));
    expect(hint!.content).toBe(progressHintText(NO_RESULTS));

    const kinds: Array<[string, ToolResultMeta]> = [
      ["a_tool", NO_RESULTS],
      ["b_tool", PARTIAL],
      ["c_tool", meta({ status: "error", error_type: "not_found", recommended_next_action: "rewrite_query" })],
      ["d_tool", meta({ status: "error", error_type: "permission", recommended_next_action: "try_alternative" })],
    ];
    for (const [name, m] of kinds) await callTool(mw, runtime, toolMessage("Error: x", m, name), name);
    [hint] = hintsIn(await nextRequest(mw, runtime));
    expect(MAX_PENDING_PROGRESS_HINTS).toBe(3);
    expect(String(hint!.content).split("\n\n")).toHaveLength(3);
    // The fourth (a permission problem, which gets the generic text) found the queue full.
    expect(hint!.content).not.toContain("not producing new information");
  });

  it("a hint survives a failed model call, so a retry still carries it", async () => {
    const mw = progress({ stagnation_threshold: 1 });
    const runtime = runtimeWith();
    await callTool(mw, runtime, toolMessage("Error: no results found", NO_RESULTS));
    const messages = [new HumanMessage("go")];
    const request = { model: fakeModel(), systemMessage: undefined, messages, tools: [], state: { ...emptyThreadState(), messages }, runtime } as ModelRequest;
    await expect(mw.wrapModelCall!(request, async () => Promise.reject(new Error("503")))).rejects.toThrow("503");
    expect(hintsIn(await nextRequest(mw, runtime))).toHaveLength(1);
  });

  it("Commands, results without meta and malformed meta pass through untracked", async () => {
    const mw = progress({ stagnation_threshold: 1, warn_escalation_count: 1 });
    const runtime = runtimeWith();
    const command = new Command({ update: { messages: [toolMessage("Error: 401", AUTH)] } });
    expect(await callTool(mw, runtime, command)).toBe(command);
    const bare = toolMessage("Error: 401 Unauthorized", undefined);
    expect(await callTool(mw, runtime, bare)).toBe(bare);
    const malformed = toolMessage("Error: 401", { unexpected_field: true });
    expect(await callTool(mw, runtime, malformed)).toBe(malformed);
    expect(isBlocked(await callTool(mw, runtime, GOOD()))).toBe(false);
  });

  it("does nothing while disabled", async () => {
    const mw = createToolProgressMiddleware({ stagnation_threshold: 1 });
    const runtime = runtimeWith();
    await callTool(mw, runtime, toolMessage("Error: 401", AUTH));
    expect(isBlocked(await callTool(mw, runtime, GOOD()))).toBe(false);
    expect(runtime.scope.snapshot()).toEqual({});
  });

  it("a call without a tool name passes through", async () => {
    const mw = progress({ stagnation_threshold: 1 });
    const runtime = runtimeWith();
    const message = toolMessage("Error: 401", AUTH, "");
    expect(await callTool(mw, runtime, message, "")).toBe(message);
    expect(isBlocked(await callTool(mw, runtime, GOOD(), ""))).toBe(false);
  });

  // Spec (middleware-chain.md, ToolProgressMiddleware): "Tracks per-(thread, tool) consecutive
  // "no-new-info" calls across three error categories".
  it("tracks per-(thread, tool): a tool blocked on a thread stays blocked in the thread's next run, other threads and tools are untouched", async () => {
    const mw = progress({ stagnation_threshold: 1 });
    const first = makeRuntime({ threadId: "t1", runId: "run-1" });
    await callTool(mw, first, toolMessage("Error: 401", AUTH));
    expect(isBlocked(await callTool(mw, first, GOOD()))).toBe(true);

    const next = makeRuntime({ threadId: "t1", runId: "run-2" });
    await beforeAgentIfAny(mw, next);
    expect(isBlocked(await callTool(mw, next, GOOD()))).toBe(true);
    expect(isBlocked(await callTool(mw, next, GOOD(), "read_file"))).toBe(false);

    const otherThread = makeRuntime({ threadId: "t2", runId: "run-3" });
    expect(isBlocked(await callTool(mw, otherThread, GOOD()))).toBe(false);
    // A run without a thread has nothing to continue and meets no other run's phases.
    const threadless = makeRuntime({ runId: "run-4" });
    await callTool(mw, threadless, toolMessage("Error: 401", AUTH));
    expect(isBlocked(await callTool(mw, threadless, GOOD()))).toBe(true);
    expect(isBlocked(await callTool(mw, makeRuntime({ runId: "run-5" }), GOOD()))).toBe(false);
  });

  it("a WARNED tool keeps its count into the thread's next run, but a hint never outlives its run", async () => {
    const mw = progress({ stagnation_threshold: 2, warn_escalation_count: 1 });
    const first = makeRuntime({ threadId: "t1", runId: "run-1" });
    await repeatTool(mw, first, toolMessage("Error: rate limited", RATE_LIMITED), 2);
    const next = makeRuntime({ threadId: "t1", runId: "run-2" });
    expect(hintsIn(await nextRequest(mw, next))).toEqual([]);
    await callTool(mw, next, toolMessage("Error: rate limited", RATE_LIMITED));
    expect(isBlocked(await callTool(mw, next, GOOD()))).toBe(true);
  });

  it("forgets the least recently active thread beyond max_tracked_threads", async () => {
    const mw = progress({ stagnation_threshold: 1, max_tracked_threads: 2 });
    const on = (threadId: string) => makeRuntime({ threadId, runId: `run-${threadId}` });
    await callTool(mw, on("a"), toolMessage("Error: 401", AUTH));
    await callTool(mw, on("b"), toolMessage("Error: 401", AUTH));
    expect(isBlocked(await callTool(mw, on("a"), GOOD()))).toBe(true);
    await callTool(mw, on("c"), GOOD());
    // "b" was the least recently active of a, b, c.
    expect(isBlocked(await callTool(mw, on("a"), GOOD()))).toBe(true);
    expect(isBlocked(await callTool(mw, on("b"), GOOD()))).toBe(false);
  });

  it("reports phase changes and intercepts as custom events, without content", async () => {
    const events: unknown[] = [];
    const mw = progress({ stagnation_threshold: 2 });
    const runtime = runtimeWith(events);
    await repeatTool(mw, runtime, toolMessage("Error: secret query no results found", NO_RESULTS), 2);
    await callTool(mw, runtime, GOOD());
    await callTool(mw, runtime, toolMessage("Error: 401", AUTH));
    await callTool(mw, runtime, GOOD());
    expect(events).toEqual([
      expect.objectContaining({ type: TOOL_PROGRESS_EVENT, action: "warned", tool_name: "web_search", consecutive_problems: 2, error_type: "no_results" }),
      expect.objectContaining({ type: TOOL_PROGRESS_EVENT, action: "active", consecutive_problems: 0 }),
      expect.objectContaining({ type: TOOL_PROGRESS_EVENT, action: "blocked", error_type: "auth" }),
      expect.objectContaining({ type: TOOL_PROGRESS_EVENT, action: "intercepted", phase: "blocked" }),
    ]);
    expect(JSON.stringify(events)).not.toContain("secret");
  });
});

describe("ToolProgress through the real engine", () => {
  const services = { clock: systemClock };

  function scriptedTool(name: string, outputs: string[], log: string[]): AgentTool {
    return {
      name,
      description: name,
      schema: { type: "object", properties: { query: { type: "string" } } },
      async invoke(_args, context) {
        log.push(`${name}:${context.toolCall.id}`);
        return outputs.shift() ?? "fresh content";
      },
    };
  }

  const search = (id: string) => [{ name: "web_search", args: { query: `q-${id}` }, id }];

  it("scenario M32: 3x 'No results found' gives the next model call a progress_hint; an auth error blocks the tool without running it, in the thread's next run too; another thread runs it", async () => {
    const log: string[] = [];
    const outputs = ["No results found", "No results found", "No results found", "Error: 401 Unauthorized"];
    const model = fakeModel()
      .respondWithTools(search("s1"))
      .respondWithTools(search("s2"))
      .respondWithTools(search("s3"))
      .respondWithTools(search("s4"))
      .respondWithTools(search("s5"))
      .respond(new AIMessage("I could not search."))
      .respondWithTools(search("s6"))
      .respond(new AIMessage("Still blocked."))
      .respondWithTools(search("s7"))
      .respond(new AIMessage("Found it."));
    const agent = createAgent({
      model,
      tools: [scriptedTool("web_search", outputs, log)],
      middlewares: [createToolProgressMiddleware({ enabled: true }), createToolErrorHandlingMiddleware()],
      services,
    });

    const state = await agent.invoke({ messages: [new HumanMessage("find it")] }, { threadId: "t1" });

    const hintsPerCall = model.calls.slice(0, 6).map((call) => hintsIn(call.messages).length);
    expect(hintsPerCall).toEqual([0, 0, 0, 1, 0, 0]);
    const [hint] = hintsIn(model.calls[3]!.messages);
    expect(hint!.content).toContain("[PROGRESS HINT] The tool has returned incomplete results multiple times.");
    expect(hint!.additional_kwargs[HIDE_FROM_UI]).toBe(true);
    // Request-only: the checkpointed conversation never holds the hint.
    expect(hintsIn(state.messages)).toEqual([]);

    expect(log).toEqual(["web_search:s1", "web_search:s2", "web_search:s3", "web_search:s4"]);
    const blocked = state.messages.find((m) => ToolMessage.isInstance(m) && m.tool_call_id === "s5") as ToolMessage;
    expect(blocked.content).toBe("[TOOL_BLOCKED] Authentication failure — this tool cannot be used.");
    expect(blocked.additional_kwargs[TOOL_META_KEY]).toMatchObject({ error_type: "blocked_by_progress_guard", source: "progress_middleware" });

    // "Tracks per-(thread, tool)": the thread's next run finds web_search still blocked.
    const next = await agent.invoke({ messages: [new HumanMessage("try again")] }, { threadId: "t1" });
    expect(log.at(-1)).toBe("web_search:s4");
    const stillBlocked = next.messages.find((m) => ToolMessage.isInstance(m) && m.tool_call_id === "s6") as ToolMessage;
    expect(stillBlocked.content).toBe("[TOOL_BLOCKED] Authentication failure — this tool cannot be used.");
    expect(hintsIn(model.calls[6]!.messages)).toEqual([]);

    const other = await agent.invoke({ messages: [new HumanMessage("find it")] }, { threadId: "t2" });
    expect(log.at(-1)).toBe("web_search:s7");
    const fresh = other.messages.find((m) => ToolMessage.isInstance(m) && m.tool_call_id === "s7") as ToolMessage;
    expect(fresh.content).toBe("fresh content");
  });
});

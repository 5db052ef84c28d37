import * as v from "valibot";
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent, type RunRecord } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, HookResult, ModelRequest, NodeHook } from "../../../src/engine/types.ts";
import {
  LoopDetectionConfigSchema,
  LOOP_DETECTION_EVENT,
  LOOP_DETECTION_NAME,
  LOOP_HARD_STOP_TEXT,
  LOOP_WARNING_NAME,
  LOOP_WARNING_TEXT,
  MAX_PENDING_LOOP_WARNINGS,
  createLoopDetectionMiddleware,
  toolFrequencyWarningText,
  type LoopDetectionConfigInput,
} from "../../../src/middlewares/loop-detection/loop-detection.ts";
import { appendStopText } from "../../../src/middlewares/loop-detection/forced-stop.ts";
import { hashToolCalls } from "../../../src/middlewares/loop-detection/hash.ts";
import { HIDE_FROM_UI } from "../../../src/middlewares/messages.ts";
import { readStopReason, recordStopReason } from "../../../src/middlewares/stop-reason.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

// The section as its schema fills it in when nothing is configured.
const LOOP_DETECTION_DEFAULTS = v.parse(LoopDetectionConfigSchema, {});

type Call = { name: string; args: unknown; id?: string };

function bash(command = "ls"): Call {
  return { name: "bash", id: `call_${command}`, args: { command } };
}

function read(path: string): Call {
  return { name: "read_file", id: `call_read_${path}`, args: { path } };
}

let counter = 0;
function ai(calls: Call[], content: AIMessage["content"] = "", extra: Partial<ConstructorParameters<typeof AIMessage>[0] & object> = {}): AIMessage {
  return new AIMessage({
    id: `ai-${++counter}`,
    content,
    tool_calls: calls.map((c) => ({ ...c, args: c.args as Record<string, unknown>, type: "tool_call" }) as ToolCall),
    ...extra,
  });
}

function runtimeFor(options: { thread?: string | null; run?: string; context?: Record<string, unknown>; events?: unknown[] } = {}): AgentRuntime {
  const base = makeRuntime({
    ...(options.thread === null ? {} : { threadId: options.thread ?? "test-thread" }),
    runId: options.run ?? "test-run",
    context: options.context ?? {},
  });
  const events = options.events;
  return events ? { ...base, writer: (e: unknown) => void events.push(e) } : base;
}

function hookOf(mw: AgentMiddleware, name: "afterModel" | "afterAgent" | "beforeAgent"): NodeHook {
  const hook = mw[name];
  return (typeof hook === "function" ? hook : hook!.hook) as NodeHook;
}

/** afterModel on a state whose last message is `message`. */
function after(mw: AgentMiddleware, message: BaseMessage, runtime: AgentRuntime): HookResult {
  return hookOf(mw, "afterModel")({ ...emptyThreadState(), messages: [message] }, runtime) as HookResult;
}

function repeat(mw: AgentMiddleware, calls: Call[], times: number, runtime: AgentRuntime): HookResult[] {
  return Array.from({ length: times }, () => after(mw, ai(calls), runtime));
}

/** What the model receives on the next request built from `messages`. */
async function nextRequest(mw: AgentMiddleware, runtime: AgentRuntime, messages: BaseMessage[] = [new HumanMessage("go")]): Promise<BaseMessage[]> {
  let seen: readonly BaseMessage[] = [];
  const request = {
    messages,
    systemMessage: undefined,
    tools: [],
    state: { ...emptyThreadState(), messages },
    runtime,
  } as unknown as ModelRequest;
  await mw.wrapModelCall!(request, async (r) => {
    seen = r.messages;
    return new AIMessage("ok");
  });
  return [...seen];
}

function loopWarnings(messages: readonly BaseMessage[]): HumanMessage[] {
  return messages.filter((m): m is HumanMessage => HumanMessage.isInstance(m) && m.name === LOOP_WARNING_NAME);
}

function replaced(result: HookResult): AIMessage {
  expect(result).toBeTruthy();
  const messages = (result as { messages: BaseMessage[] }).messages;
  expect(messages).toHaveLength(1);
  expect(AIMessage.isInstance(messages[0])).toBe(true);
  return messages[0] as AIMessage;
}

describe("loop-detection hash", () => {
  it("is the same for the same calls and differs for different ones", () => {
    expect(hashToolCalls([bash("ls")])).toBe(hashToolCalls([bash("ls")]));
    expect(hashToolCalls([bash("ls")])).not.toBe(hashToolCalls([bash("pwd")]));
  });

  it("ignores call order, call ids and incidental arguments", () => {
    const a = hashToolCalls([bash("ls"), { name: "read_file", args: { path: "/tmp" } }]);
    const otherId: Call = { name: "read_file", args: { path: "/tmp" }, id: "other" };
    const b = hashToolCalls([otherId, { name: "bash", args: { command: "ls", description: "look again" } }]);
    expect(a).toBe(b);
  });

  it("treats JSON-string args like object args, and survives non-object string args", () => {
    const asObject = { name: "read_file", args: { path: "/tmp/demo.py", start_line: "1", end_line: "150" } };
    const asString = { name: "read_file", args: '{"path":"/tmp/demo.py","start_line":"1","end_line":"150"}' };
    expect(hashToolCalls([asObject])).toBe(hashToolCalls([asString]));
    expect(hashToolCalls([{ name: "bash", args: '"echo hello"' }])).toMatch(/^[0-9a-f]{16}$/);
    expect(hashToolCalls([{ name: "bash", args: "echo hello" }])).toMatch(/^[0-9a-f]{16}$/);
    expect(hashToolCalls([])).toMatch(/^[0-9a-f]{16}$/);
  });

  it("buckets read_file ranges by 200 lines, in either direction", () => {
    const range = (start: unknown, end: unknown) => hashToolCalls([{ name: "read_file", args: { path: "/a.py", start_line: start, end_line: end } }]);
    expect(range(10, 300)).toBe(range(300, 10));
    expect(range(1, 150)).toBe(range(20, 199));
    expect(range(1, 150)).not.toBe(range(201, 350));
  });

  it("keeps grep/glob patterns and write_file/str_replace content significant", () => {
    const h = (name: string, args: Record<string, unknown>) => hashToolCalls([{ name, args }]);
    expect(h("grep", { path: "/tmp", pattern: "foo" })).not.toBe(h("grep", { path: "/tmp", pattern: "bar" }));
    expect(h("glob", { path: "/tmp", pattern: "*.py" })).not.toBe(h("glob", { path: "/tmp", pattern: "*.ts" }));
    expect(h("write_file", { path: "/a.py", content: "v1" })).not.toBe(h("write_file", { path: "/a.py", content: "v2" }));
    expect(h("str_replace", { path: "/a.py", old_str: "foo", new_str: "bar" })).not.toBe(h("str_replace", { path: "/a.py", old_str: "foo", new_str: "baz" }));
  });
});

describe("LoopDetection config", () => {
  it("has upstream's defaults and declares every threshold", () => {
    const mw = createLoopDetectionMiddleware();
    expect(mw.name).toBe(LOOP_DETECTION_NAME);
    expect(mw.name).toBe("LoopDetection");
    expect(LOOP_DETECTION_DEFAULTS).toEqual({
      enabled: true,
      warn_threshold: 3,
      hard_limit: 5,
      window_size: 20,
      max_tracked_threads: 100,
      tool_freq_warn: 30,
      tool_freq_hard_limit: 50,
      tool_freq_overrides: {},
    });
    expect(mw.releasePolicyParameters?.()).toEqual({ ...LOOP_DETECTION_DEFAULTS, tool_freq_window: 50 });
  });

  it("declares overrides and sizes the frequency window to the largest hard limit", () => {
    const mw = createLoopDetectionMiddleware({ tool_freq_overrides: { bash: { warn: 60, hard_limit: 120 } } });
    expect(mw.releasePolicyParameters?.()).toMatchObject({ tool_freq_overrides: { bash: { warn: 60, hard_limit: 120 } }, tool_freq_window: 120 });
  });

  it.each<[LoopDetectionConfigInput, string]>([
    [{ warn_threshold: 0 }, "LoopDetection.warn_threshold"],
    [{ hard_limit: 0 }, "LoopDetection.hard_limit"],
    [{ tool_freq_warn: 0 }, "LoopDetection.tool_freq_warn"],
    [{ tool_freq_hard_limit: 0 }, "LoopDetection.tool_freq_hard_limit"],
    [{ warn_threshold: 2.5 }, "LoopDetection.warn_threshold"],
    [{ warn_threshold: 5, hard_limit: 4 }, "LoopDetection.hard_limit: hard_limit must be greater than or equal to warn_threshold"],
    [{ tool_freq_warn: 5, tool_freq_hard_limit: 4 }, "LoopDetection.tool_freq_hard_limit: tool_freq_hard_limit must be"],
    [{ tool_freq_overrides: { bash: { warn: 0, hard_limit: 10 } } }, "LoopDetection.tool_freq_overrides.bash.warn"],
    [{ tool_freq_overrides: { bash: { warn: 100, hard_limit: 50 } } }, "LoopDetection.tool_freq_overrides.bash.hard_limit: hard_limit must be"],
    [{ window: 3 } as unknown as LoopDetectionConfigInput, "LoopDetection.window"],
  ])("rejects %j naming the key", (config, message) => {
    expect(() => createLoopDetectionMiddleware(config)).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
    expect(() => createLoopDetectionMiddleware(config)).toThrow(message);
  });

  it("accepts custom values and a disabled section does nothing", async () => {
    const mw = createLoopDetectionMiddleware({ enabled: false, warn_threshold: 1, hard_limit: 1 });
    const runtime = runtimeFor();
    expect(after(mw, ai([bash()]), runtime)).toBeUndefined();
    expect(loopWarnings(await nextRequest(mw, runtime))).toEqual([]);
  });
});

describe("LoopDetection: identical tool-call sets", () => {
  it("ignores responses without tool calls, non-AI last messages and empty histories", () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 1, hard_limit: 1 });
    const runtime = runtimeFor();
    expect(after(mw, new AIMessage("hello"), runtime)).toBeUndefined();
    expect(after(mw, new SystemMessage("hello"), runtime)).toBeUndefined();
    expect(hookOf(mw, "afterModel")(emptyThreadState(), runtime)).toBeUndefined();
  });

  it("scenario M49: the third identical set queues a warning without touching state; the next request ends with a hidden loop_warning", async () => {
    const mw = createLoopDetectionMiddleware();
    const runtime = runtimeFor();
    const results = repeat(mw, [bash("ls")], 3, runtime);
    expect(results).toEqual([undefined, undefined, undefined]);

    const assistant = ai([bash("ls")]);
    const toolResult = new ToolMessage({ content: "ok", tool_call_id: "call_ls", name: "bash" });
    const sent = await nextRequest(mw, runtime, [assistant, toolResult]);
    expect(sent[0]).toBe(assistant);
    expect(sent[1]).toBe(toolResult);
    expect(sent).toHaveLength(3);
    const warning = sent[2] as HumanMessage;
    expect(HumanMessage.isInstance(warning)).toBe(true);
    expect(warning.name).toBe(LOOP_WARNING_NAME);
    expect(warning.content).toBe(LOOP_WARNING_TEXT);
    expect(warning.content).toMatch(/^\[LOOP DETECTED\]/);
    expect(warning.additional_kwargs[HIDE_FROM_UI]).toBe(true);
    // Not a stamped injection: provenance is for context blocks, not guard notices.
    expect(warning.additional_kwargs["deerflow_content_kind"]).toBeUndefined();
  });

  it("stays quiet below the threshold", async () => {
    const mw = createLoopDetectionMiddleware();
    const runtime = runtimeFor();
    expect(repeat(mw, [bash("ls")], 2, runtime)).toEqual([undefined, undefined]);
    expect(loopWarnings(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("delivers a warning exactly once, and again after a failed model call", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 3, hard_limit: 10 });
    const runtime = runtimeFor();
    repeat(mw, [bash("ls")], 3, runtime);
    const request = { messages: [new HumanMessage("go")], state: emptyThreadState(), runtime } as unknown as ModelRequest;
    await expect(mw.wrapModelCall!(request, async () => Promise.reject(new Error("503")))).rejects.toThrow("503");
    expect(loopWarnings(await nextRequest(mw, runtime))).toHaveLength(1);
    expect(loopWarnings(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("warns once per hash, however often it repeats before the hard limit", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 3, hard_limit: 10 });
    const runtime = runtimeFor();
    repeat(mw, [bash("ls")], 3, runtime);
    expect(loopWarnings(await nextRequest(mw, runtime))).toHaveLength(1);
    repeat(mw, [bash("ls")], 3, runtime);
    expect(loopWarnings(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("keeps a run's warning to that run, and afterAgent drops one never delivered", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 3, hard_limit: 10 });
    const runA = runtimeFor({ run: "run-A" });
    const runB = runtimeFor({ run: "run-B" });
    repeat(mw, [bash("ls")], 3, runA);
    expect(loopWarnings(await nextRequest(mw, runB))).toEqual([]);

    const runC = runtimeFor({ run: "run-C" });
    repeat(mw, [bash("pwd")], 3, runC);
    hookOf(mw, "afterAgent")(emptyThreadState(), runC);
    expect(loopWarnings(await nextRequest(mw, runC))).toEqual([]);
    expect(loopWarnings(await nextRequest(mw, runA))).toHaveLength(1);
  });

  it("merges queued warnings into one message, deduplicated and capped at the newest four", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 1, hard_limit: 10, tool_freq_warn: 1, tool_freq_hard_limit: 10 });
    const runtime = runtimeFor();
    after(mw, ai([bash("a")]), runtime);
    after(mw, ai([bash("b")]), runtime);
    expect((await nextRequest(mw, runtime)).filter((m) => m.name === LOOP_WARNING_NAME).map((m) => m.content)).toEqual([LOOP_WARNING_TEXT]);

    const quiet = createLoopDetectionMiddleware({ warn_threshold: 10, hard_limit: 10, tool_freq_warn: 1, tool_freq_hard_limit: 10 });
    const names = ["t0", "t1", "t2", "t3", "t4", "t5"];
    for (const name of names) after(quiet, ai([{ name, args: {} }]), runtime);
    const warnings = loopWarnings(await nextRequest(quiet, runtime));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.content).toBe(names.slice(-MAX_PENDING_LOOP_WARNINGS).map((n) => toolFrequencyWarningText(n, 1)).join("\n\n"));
  });

  it("scenario M49: the hard limit strips the calls, appends [FORCED STOP] and records stop_reason=loop_capped", () => {
    const mw = createLoopDetectionMiddleware();
    const runtime = runtimeFor();
    repeat(mw, [bash("ls")], 4, runtime);
    expect(readStopReason(runtime)).toBeUndefined();
    const last = ai([bash("ls")], "thinking...");
    const stopped = replaced(after(mw, last, runtime));
    expect(stopped.id).toBe(last.id);
    expect(stopped.tool_calls).toEqual([]);
    expect(stopped.content).toBe(`thinking...\n\n${LOOP_HARD_STOP_TEXT}`);
    expect(readStopReason(runtime)).toBe("loop_capped");
  });

  it("a warning alone never records a stop reason, and an earlier guard's stop reason wins", () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2, hard_limit: 4 });
    const runtime = runtimeFor();
    repeat(mw, [bash("ls")], 2, runtime);
    expect(readStopReason(runtime)).toBeUndefined();
    recordStopReason(runtime, "token_capped");
    repeat(mw, [bash("ls")], 2, runtime);
    expect(readStopReason(runtime)).toBe("token_capped");
  });

  it("clears raw provider tool-call payloads and flips finish_reason so the stop serialises as plain text", () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2, hard_limit: 4 });
    const runtime = runtimeFor();
    const provider = () =>
      ai([bash("ls")], "thinking...", {
        additional_kwargs: {
          tool_calls: [{ id: "call_ls", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } }],
          function_call: { name: "bash", arguments: '{"command":"ls"}' },
          reasoning_content: "kept",
        },
        response_metadata: { finish_reason: "tool_calls", model_name: "m" },
        usage_metadata: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
      });
    for (let i = 0; i < 3; i++) after(mw, provider(), runtime);
    const stopped = replaced(after(mw, provider(), runtime));
    expect(stopped.tool_calls).toEqual([]);
    expect(stopped.additional_kwargs).toEqual({ reasoning_content: "kept" });
    expect(stopped.response_metadata).toMatchObject({ finish_reason: "stop", model_name: "m" });
    expect(stopped.usage_metadata).toEqual({ input_tokens: 10, output_tokens: 5, total_tokens: 15 });
  });

  it("appends a text block to list content (thinking mode) instead of corrupting it", () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2, hard_limit: 4 });
    const runtime = runtimeFor();
    const blocks = () => [
      { type: "thinking", thinking: "Let me think..." },
      { type: "text", text: "I'll run ls" },
    ];
    for (let i = 0; i < 3; i++) after(mw, ai([bash("ls")], blocks() as AIMessage["content"]), runtime);
    const stopped = replaced(after(mw, ai([bash("ls")], blocks() as AIMessage["content"]), runtime));
    expect(stopped.content).toEqual([...blocks(), { type: "text", text: `\n\n${LOOP_HARD_STOP_TEXT}` }]);
  });

  it("appendStopText handles strings, empty strings, lists (without mutating them) and odd values", () => {
    expect(appendStopText("existing", "appended")).toBe("existing\n\nappended");
    expect(appendStopText("", "appended")).toBe("\n\nappended");
    expect(appendStopText(null, "hello")).toBe("hello");
    expect(appendStopText(42, "stop")).toBe("42\n\nstop");
    const original = [{ type: "text", text: "hello" }];
    expect(appendStopText(original, "stop")).toEqual([...original, { type: "text", text: "\n\nstop" }]);
    expect(original).toHaveLength(1);
    expect(appendStopText([], "stop")).toEqual([{ type: "text", text: "\n\nstop" }]);
  });

  it("never triggers on varied calls, and forgets sets that slid out of the window", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2, hard_limit: 3, window_size: 5 });
    const runtime = runtimeFor();
    for (let i = 0; i < 10; i++) expect(after(mw, ai([bash(`cmd_${i}`)]), runtime)).toBeUndefined();

    const sliding = createLoopDetectionMiddleware({ warn_threshold: 3, window_size: 5 });
    const run = runtimeFor({ thread: "slide" });
    repeat(sliding, [bash("ls")], 2, run);
    for (let i = 0; i < 5; i++) after(sliding, ai([bash(`other_${i}`)]), run);
    after(sliding, ai([bash("ls")]), run);
    expect(loopWarnings(await nextRequest(sliding, run))).toEqual([]);
  });

  it("warns again about a hash that left the window and came back", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2, hard_limit: 100, window_size: 4 });
    const runtime = runtimeFor();
    repeat(mw, [bash("ls")], 2, runtime);
    expect(loopWarnings(await nextRequest(mw, runtime))).toHaveLength(1);
    for (let i = 0; i < 4; i++) after(mw, ai([bash(`other_${i}`)]), runtime);
    await nextRequest(mw, runtime);
    repeat(mw, [bash("ls")], 2, runtime);
    expect(loopWarnings(await nextRequest(mw, runtime))).toHaveLength(1);
  });

  it("keeps threads apart, and a thread's window continues into its next run", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2 });
    const a = runtimeFor({ thread: "thread-A" });
    const b = runtimeFor({ thread: "thread-B" });
    after(mw, ai([bash("ls")]), a);
    after(mw, ai([bash("ls")]), b);
    after(mw, ai([bash("ls")]), a);
    expect(loopWarnings(await nextRequest(mw, a))).toHaveLength(1);
    expect(loopWarnings(await nextRequest(mw, b))).toEqual([]);

    const c1 = runtimeFor({ thread: "thread-C", run: "first" });
    after(mw, ai([bash("pwd")]), c1);
    const c2 = runtimeFor({ thread: "thread-C", run: "second" });
    after(mw, ai([bash("pwd")]), c2);
    expect(loopWarnings(await nextRequest(mw, c2))).toHaveLength(1);
  });

  it("reads the run's own thread first, context.thread_id only without one; runs without a thread never share a window", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2 });
    const viaRun = runtimeFor({ thread: "run-thread", context: { thread_id: "ctx-thread" } });
    after(mw, ai([bash("ls")]), viaRun);
    const sameRunThread = runtimeFor({ thread: "run-thread", run: "r2", context: { thread_id: "other-ctx-thread" } });
    after(mw, ai([bash("ls")]), sameRunThread);
    expect(loopWarnings(await nextRequest(mw, sameRunThread))).toHaveLength(1);
    // The context's thread was not the window the run-thread calls went to.
    const contextOnly = runtimeFor({ thread: null, run: "r3", context: { thread_id: "ctx-thread" } });
    after(mw, ai([bash("ls")]), contextOnly);
    expect(loopWarnings(await nextRequest(mw, contextOnly))).toEqual([]);
    const sameContextThread = runtimeFor({ thread: null, run: "r4", context: { thread_id: "ctx-thread" } });
    after(mw, ai([bash("ls")]), sameContextThread);
    expect(loopWarnings(await nextRequest(mw, sameContextThread))).toHaveLength(1);

    const lone1 = runtimeFor({ thread: null, run: "lone-1" });
    const lone2 = runtimeFor({ thread: null, run: "lone-2" });
    after(mw, ai([bash("pwd")]), lone1);
    after(mw, ai([bash("pwd")]), lone2);
    expect(loopWarnings(await nextRequest(mw, lone2))).toEqual([]);
  });

  it("forgets the least recently active thread beyond max_tracked_threads", async () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2, max_tracked_threads: 2 });
    after(mw, ai([bash("ls")]), runtimeFor({ thread: "thread-0" }));
    after(mw, ai([bash("ls")]), runtimeFor({ thread: "thread-1" }));
    after(mw, ai([bash("ls")]), runtimeFor({ thread: "thread-2" }));
    const again = runtimeFor({ thread: "thread-0", run: "later" });
    after(mw, ai([bash("ls")]), again);
    expect(loopWarnings(await nextRequest(mw, again))).toEqual([]);
    // thread-2 is still remembered.
    const kept = runtimeFor({ thread: "thread-2", run: "later" });
    after(mw, ai([bash("ls")]), kept);
    expect(loopWarnings(await nextRequest(mw, kept))).toHaveLength(1);
  });
});

describe("LoopDetection: per-tool frequency", () => {
  it("warns once at tool_freq_warn about the tool by name", async () => {
    const mw = createLoopDetectionMiddleware({ tool_freq_warn: 3, tool_freq_hard_limit: 10 });
    const runtime = runtimeFor();
    for (let i = 0; i < 2; i++) expect(after(mw, ai([read(`/file_${i}.py`)]), runtime)).toBeUndefined();
    expect(loopWarnings(await nextRequest(mw, runtime))).toEqual([]);
    expect(after(mw, ai([read("/file_2.py")]), runtime)).toBeUndefined();
    const warnings = loopWarnings(await nextRequest(mw, runtime));
    expect(warnings.map((w) => w.content)).toEqual([toolFrequencyWarningText("read_file", 3)]);
    after(mw, ai([read("/file_3.py")]), runtime);
    expect(loopWarnings(await nextRequest(mw, runtime))).toEqual([]);
  });

  it("hard-stops at tool_freq_hard_limit, naming the tool", () => {
    const mw = createLoopDetectionMiddleware({ tool_freq_warn: 3, tool_freq_hard_limit: 6 });
    const runtime = runtimeFor();
    for (let i = 0; i < 5; i++) expect(after(mw, ai([read(`/file_${i}.py`)]), runtime)).toBeUndefined();
    const stopped = replaced(after(mw, ai([read("/file_5.py")]), runtime));
    expect(stopped.tool_calls).toEqual([]);
    expect(stopped.content).toContain("[FORCED STOP] Tool read_file called 6 times");
    expect(readStopReason(runtime)).toBe("loop_capped");
  });

  it("counts within a window: interleaved calls decay, a tight burst still stops", () => {
    // hard limit 4 with window_size 5: the frequency window is max(5, 4) = 5 calls.
    const spread = createLoopDetectionMiddleware({ tool_freq_warn: 4, tool_freq_hard_limit: 4, window_size: 5 });
    const spreadRun = runtimeFor({ thread: "spread" });
    for (let i = 0; i < 8; i++) {
      expect(after(spread, ai([read(`/file_${i}.py`)]), spreadRun), `read ${i}`).toBeUndefined();
      expect(after(spread, ai([bash(`cmd_${i}`)]), spreadRun), `bash ${i}`).toBeUndefined();
    }
    const burst = createLoopDetectionMiddleware({ tool_freq_warn: 4, tool_freq_hard_limit: 4, window_size: 5 });
    const burstRun = runtimeFor({ thread: "burst" });
    for (let i = 0; i < 3; i++) expect(after(burst, ai([read(`/f_${i}.py`)]), burstRun)).toBeUndefined();
    expect(replaced(after(burst, ai([read("/f_3.py")]), burstRun)).content).toContain("FORCED STOP");
  });

  it("re-arms a tool's warning once its burst decayed out of the window", async () => {
    const mw = createLoopDetectionMiddleware({ tool_freq_warn: 2, tool_freq_hard_limit: 3, window_size: 3 });
    const runtime = runtimeFor();
    after(mw, ai([read("/a")]), runtime);
    after(mw, ai([read("/b")]), runtime);
    expect(loopWarnings(await nextRequest(mw, runtime))).toHaveLength(1);
    for (const name of ["t1", "t2", "t3"]) after(mw, ai([{ name, args: {} }]), runtime);
    after(mw, ai([read("/c")]), runtime);
    after(mw, ai([read("/d")]), runtime);
    expect(loopWarnings(await nextRequest(mw, runtime)).map((w) => w.content)).toEqual([toolFrequencyWarningText("read_file", 2)]);
  });

  it("tracks tools independently and counts every call of a multi-call response", async () => {
    const mw = createLoopDetectionMiddleware({ tool_freq_warn: 3, tool_freq_hard_limit: 10 });
    const runtime = runtimeFor();
    for (let i = 0; i < 2; i++) after(mw, ai([read(`/file_${i}.py`)]), runtime);
    for (let i = 0; i < 2; i++) after(mw, ai([bash(`cmd_${i}`)]), runtime);
    expect(loopWarnings(await nextRequest(mw, runtime))).toEqual([]);
    after(mw, ai([read("/file_2.py")]), runtime);
    expect(loopWarnings(await nextRequest(mw, runtime)).map((w) => w.content)).toEqual([toolFrequencyWarningText("read_file", 3)]);

    const multi = createLoopDetectionMiddleware({ tool_freq_warn: 5, tool_freq_hard_limit: 10 });
    const run = runtimeFor({ thread: "multi" });
    after(multi, ai([read("/a.py"), read("/b.py")]), run);
    after(multi, ai([read("/c.py"), read("/d.py")]), run);
    expect(loopWarnings(await nextRequest(multi, run))).toEqual([]);
    after(multi, ai([read("/e.py")]), run);
    expect(loopWarnings(await nextRequest(multi, run)).map((w) => w.content)).toEqual([toolFrequencyWarningText("read_file", 5)]);
  });

  it("identical-set detection fires before the frequency layer", () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 2, hard_limit: 3, tool_freq_warn: 100, tool_freq_hard_limit: 200 });
    const runtime = runtimeFor();
    repeat(mw, [read("/same.py")], 2, runtime);
    expect(replaced(after(mw, ai([read("/same.py")]), runtime)).content).toBe(`\n\n${LOOP_HARD_STOP_TEXT}`);
  });

  it("scenario M50: 50 single read_file calls on different files: the 50th is hard-stopped (defaults)", async () => {
    const mw = createLoopDetectionMiddleware();
    const runtime = runtimeFor();
    for (let i = 1; i <= 49; i++) {
      expect(after(mw, ai([read(`/mnt/user-data/workspace/f${i}.md`)]), runtime), `call ${i}`).toBeUndefined();
      if (i === 30) expect(loopWarnings(await nextRequest(mw, runtime)).map((w) => w.content)).toEqual([toolFrequencyWarningText("read_file", 30)]);
    }
    expect(readStopReason(runtime)).toBeUndefined();
    const stopped = replaced(after(mw, ai([read("/mnt/user-data/workspace/f50.md")]), runtime));
    expect(stopped.tool_calls).toEqual([]);
    expect(stopped.content).toContain("[FORCED STOP] Tool read_file called 50 times");
    expect(readStopReason(runtime)).toBe("loop_capped");
  });

  it("scenario M50: a per-tool override raises that tool's limit only", () => {
    const mw = createLoopDetectionMiddleware({ tool_freq_overrides: { read_file: { warn: 80, hard_limit: 100 } } });
    const runtime = runtimeFor();
    for (let i = 1; i <= 60; i++) expect(after(mw, ai([read(`/f${i}.md`)]), runtime), `read ${i}`).toBeUndefined();
    expect(readStopReason(runtime)).toBeUndefined();

    const other = runtimeFor({ thread: "other" });
    for (let i = 1; i <= 49; i++) expect(after(mw, ai([bash(`cmd_${i}`)]), other), `bash ${i}`).toBeUndefined();
    expect(replaced(after(mw, ai([bash("cmd_50")]), other)).content).toContain("[FORCED STOP] Tool bash called 50 times");
  });
});

describe("LoopDetection: middleware:loop_detection events", () => {
  it("records the warn transition and the hard stop without arguments, content or hashes", async () => {
    const events: unknown[] = [];
    const mw = createLoopDetectionMiddleware();
    const runtime = runtimeFor({ events });
    const secret = { name: "bash", id: "c", args: { command: "cat /mnt/user-data/uploads/secret-plan.txt" } };
    for (let i = 0; i < 5; i++) after(mw, ai([secret], "private words"), runtime);
    expect(events).toEqual([
      {
        type: LOOP_DETECTION_EVENT,
        middleware: "LoopDetection",
        hook: "after_model",
        action: "warn",
        detector: "repeated_tool_calls",
        count: 3,
        threshold: 3,
        tool_names: ["bash"],
        tool_call_count: 1,
        run_id: "test-run",
        is_subagent: false,
      },
      expect.objectContaining({ type: LOOP_DETECTION_EVENT, action: "hard_stop", detector: "repeated_tool_calls", count: 5, threshold: 5 }),
    ]);
    const serialized = JSON.stringify(events);
    expect(serialized).not.toContain("secret-plan");
    expect(serialized).not.toContain("private words");
    expect(serialized).not.toContain(hashToolCalls([secret]));
  });

  it("attributes events to a subagent and records frequency transitions with the tool name", () => {
    const events: Array<Record<string, unknown>> = [];
    const mw = createLoopDetectionMiddleware({ tool_freq_warn: 2, tool_freq_hard_limit: 3 });
    const runtime = runtimeFor({ events, context: { is_subagent: true, agent_id: "researcher" } });
    for (let i = 0; i < 3; i++) after(mw, ai([read(`/f${i}`)]), runtime);
    expect(events.map((e) => [e["action"], e["detector"], e["tool_name"], e["is_subagent"], e["agent_id"]])).toEqual([
      ["warn", "tool_frequency", "read_file", true, "researcher"],
      ["hard_stop", "tool_frequency", "read_file", true, "researcher"],
    ]);
  });

  it("a failing event consumer does not change what the guard does", () => {
    const mw = createLoopDetectionMiddleware({ warn_threshold: 1, hard_limit: 1 });
    const runtime: AgentRuntime = {
      ...runtimeFor(),
      writer: () => {
        throw new Error("consumer down");
      },
    };
    expect(replaced(after(mw, ai([bash()]), runtime)).tool_calls).toEqual([]);
    expect(readStopReason(runtime)).toBe("loop_capped");
  });
});

describe("LoopDetection in the real engine", () => {
  const bashTool: AgentTool = {
    name: "bash",
    description: "Run a fake shell command.",
    schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    async invoke(args) {
      return `ran: ${String(args["command"])}`;
    },
  };

  it("scenario M49: warning in the 4th request only (never persisted), the 5th identical set becomes a forced final answer", async () => {
    let model = fakeModel();
    for (let i = 0; i < 5; i++) model = model.respondWithTools([{ name: "bash", args: { command: "ls" }, id: `call_ls_${i}` }]);
    const agent = createAgent({
      model,
      tools: [bashTool],
      middlewares: [createLoopDetectionMiddleware()],
      services: { clock: systemClock },
    });
    let record: RunRecord | undefined;
    const custom: unknown[] = [];
    let last: { messages: BaseMessage[] } | undefined;
    for await (const chunk of agent.stream(
      { messages: [new HumanMessage("inspect the directory")] },
      { threadId: "integration-thread", streamMode: ["values", "custom"] },
      (r) => (record = r),
    )) {
      const [mode, payload] = chunk as [string, unknown];
      if (mode === "custom") custom.push(payload);
      else last = payload as { messages: BaseMessage[] };
    }

    expect(model.callCount).toBe(5);
    const warningsPerCall = model.calls.map((call) => loopWarnings(call.messages).length);
    expect(warningsPerCall).toEqual([0, 0, 0, 1, 0]);
    const fourth = model.calls[3]!.messages;
    expect(ToolMessage.isInstance(fourth.at(-2))).toBe(true);
    expect((fourth.at(-2) as ToolMessage).tool_call_id).toBe("call_ls_2");
    expect(fourth.at(-1)!.content).toBe(LOOP_WARNING_TEXT);

    const messages = last!.messages;
    expect(loopWarnings(messages)).toEqual([]);
    const final = messages.at(-1) as AIMessage;
    expect(AIMessage.isInstance(final)).toBe(true);
    expect(final.tool_calls).toEqual([]);
    expect(String(final.content)).toContain(LOOP_HARD_STOP_TEXT);
    expect(messages.filter((m) => ToolMessage.isInstance(m))).toHaveLength(4);
    expect(record!.scope.get("stop_reason")).toBe("loop_capped");
    expect(custom).toEqual([
      expect.objectContaining({ type: LOOP_DETECTION_EVENT, action: "warn", count: 3 }),
      expect.objectContaining({ type: LOOP_DETECTION_EVENT, action: "hard_stop", count: 5 }),
    ]);
  });

  it("a warned run that then answers ends normally, with nothing of the warning in state", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "bash", args: { command: "ls" }, id: "a" }])
      .respondWithTools([{ name: "bash", args: { command: "ls" }, id: "b" }])
      .respondWithTools([{ name: "bash", args: { command: "ls" }, id: "c" }])
      .respond(new AIMessage("final answer"));
    const agent = createAgent({ model, tools: [bashTool], middlewares: [createLoopDetectionMiddleware()], services: { clock: systemClock } });
    const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t-final" });
    expect(model.calls.map((call) => loopWarnings(call.messages).length)).toEqual([0, 0, 0, 1]);
    expect(loopWarnings(state.messages)).toEqual([]);
    expect(state.messages.at(-1)!.content).toBe("final answer");
  });
});

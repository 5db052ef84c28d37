import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command, GraphInterrupt, ParentCommand } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentTool, ToolCallRequest, ToolResult } from "../../../src/engine/types.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import {
  TOOL_ERROR_HANDLING_DEFAULTS,
  TOOL_ERROR_HANDLING_NAME,
  buildToolErrorMessage,
  createToolErrorHandlingMiddleware,
} from "../../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import {
  SUBAGENT_ERROR_KEY,
  SUBAGENT_RESULT_BRIEF_KEY,
  SUBAGENT_RESULT_SHA256_KEY,
  SUBAGENT_STATUS_KEY,
  SUBAGENT_STOP_REASON_KEY,
  boundSubagentText,
  formatSubagentResultMessage,
  makeSubagentAdditionalKwargs,
} from "../../../src/tools/subagent-result.ts";
import { sha256HexSync } from "../../../src/extension-api/sha256-sync.ts";
import { TOOL_META_KEY, type ToolResultMeta } from "../../../src/middlewares/tool-result-meta.ts";
import { makeRuntime } from "../runtime.ts";

class ValueError extends Error {
  override name = "ValueError";
}

class RuntimeError extends Error {
  override name = "RuntimeError";
}

function request(toolCall: Partial<ToolCall> = {}, signal?: AbortSignal): ToolCallRequest {
  return {
    toolCall: { name: "x", args: {}, id: "tc-1", ...toolCall } as ToolCall,
    tool: undefined,
    state: emptyThreadState(),
    runtime: makeRuntime({ threadId: "t1", ...(signal ? { signal } : {}) }),
  };
}

function metaOf(result: ToolResult): ToolResultMeta {
  expect(ToolMessage.isInstance(result)).toBe(true);
  return (result as ToolMessage).additional_kwargs[TOOL_META_KEY] as ToolResultMeta;
}

const failing = (error: unknown) => async (): Promise<ToolResult> => {
  throw error;
};

describe("ToolErrorHandling", () => {
  const middleware = createToolErrorHandlingMiddleware();

  it("has a stable name and declares its policy", () => {
    expect(middleware.name).toBe(TOOL_ERROR_HANDLING_NAME);
    expect(middleware.name).toBe("ToolErrorHandling");
    expect(middleware.releasePolicyParameters?.()).toEqual({
      error_detail_max_chars: 500,
      meta_key: "deerflow_tool_meta",
      task_exception_status: "failed",
      skill_file_read_tool_names: ["cat", "read", "read_file", "view"],
      skills_container_path: "/mnt/skills",
      skill_context_key: "skill_context_entry",
    });
    expect(TOOL_ERROR_HANDLING_DEFAULTS).toEqual({ skill_file_read_tool_names: ["read_file", "read", "view", "cat"], skills_container_path: "/mnt/skills" });
    expect(
      createToolErrorHandlingMiddleware({ skill_file_read_tool_names: ["view", "read_file", "view"], skills_container_path: "/custom/skills/" }).releasePolicyParameters?.(),
    ).toMatchObject({ skill_file_read_tool_names: ["read_file", "view"], skills_container_path: "/custom/skills" });
  });

  it("scenario M29: a tool raising ValueError('boom') becomes a recoverable error ToolMessage", async () => {
    const result = (await middleware.wrapToolCall!(request(), failing(new ValueError("boom")))) as ToolMessage;
    expect(result.content).toBe(
      "Error: Tool 'x' failed with ValueError: boom. Continue with available context, or choose an alternative tool.",
    );
    expect(result.status).toBe("error");
    expect(result.tool_call_id).toBe("tc-1");
    expect(result.name).toBe("x");
    expect(metaOf(result)).toEqual({
      status: "error",
      error_type: "unknown",
      recoverable_by_model: true,
      recommended_next_action: "try_alternative",
      source: "exception",
    });
  });

  it("scenario M29: the run continues through the real engine after the tool raised", async () => {
    const boom: AgentTool = {
      name: "x",
      description: "always fails",
      schema: { type: "object", properties: {} },
      invoke: async () => {
        throw new ValueError("boom");
      },
    };
    const model = fakeModel()
      .respondWithTools([{ name: "x", args: {}, id: "c1" }])
      .respond(new AIMessage("recovered"));
    const agent = createAgent({ model, tools: [boom], middlewares: [middleware], services: { clock: systemClock } });
    const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t1" });
    const toolMessage = state.messages.find((m) => ToolMessage.isInstance(m)) as ToolMessage;
    expect(toolMessage.content).toBe(
      "Error: Tool 'x' failed with ValueError: boom. Continue with available context, or choose an alternative tool.",
    );
    expect((toolMessage.additional_kwargs[TOOL_META_KEY] as ToolResultMeta).source).toBe("exception");
    expect(state.messages.at(-1)?.content).toBe("recovered");
  });

  it("classifies the exception text (a timeout is transient)", async () => {
    const error = new Error("upstream timed out after 30s");
    error.name = "TimeoutError";
    const meta = metaOf(await middleware.wrapToolCall!(request({ name: "web_search" }), failing(error)));
    expect(meta).toMatchObject({ status: "error", error_type: "transient", source: "exception", recoverable_by_model: false });
  });

  it("uses the subclass's constructor name when it left `name` as Error", async () => {
    class PermissionError extends Error {}
    const result = (await middleware.wrapToolCall!(request(), failing(new PermissionError("access denied")))) as ToolMessage;
    expect(result.content).toContain("failed with PermissionError: access denied.");
    expect(metaOf(result).error_type).toBe("permission");
  });

  it("falls back to the error name when the message is blank", async () => {
    const result = (await middleware.wrapToolCall!(request(), failing(new ValueError("   ")))) as ToolMessage;
    expect(result.content).toBe(
      "Error: Tool 'x' failed with ValueError: ValueError. Continue with available context, or choose an alternative tool.",
    );
  });

  it("keeps a 500-char detail whole and cuts a longer one to 497 chars plus '...'", async () => {
    const exact = (await middleware.wrapToolCall!(request(), failing(new ValueError("a".repeat(500))))) as ToolMessage;
    expect(exact.content).toContain(`ValueError: ${"a".repeat(500)}. Continue`);
    const long = (await middleware.wrapToolCall!(request(), failing(new ValueError("b".repeat(501))))) as ToolMessage;
    expect(long.content).toContain(`ValueError: ${"b".repeat(497)}.... Continue`);
    expect(long.content).not.toContain("b".repeat(498));
  });

  it("never splits a surrogate pair when cutting", () => {
    const message = buildToolErrorMessage(request(), new ValueError("😀".repeat(600)));
    expect(message.content).toContain(`ValueError: ${"😀".repeat(497)}...`);
  });

  it("falls back to missing_tool_call_id and unknown_tool", async () => {
    const result = (await middleware.wrapToolCall!(request({ id: undefined, name: "" }), failing(new ValueError("x")))) as ToolMessage;
    expect(result.tool_call_id).toBe("missing_tool_call_id");
    expect(result.content).toContain("Tool 'unknown_tool' failed");
  });

  it("handles thrown non-Error values", async () => {
    const result = (await middleware.wrapToolCall!(request(), failing("connection reset"))) as ToolMessage;
    expect(result.content).toContain("failed with Error: connection reset.");
    expect(metaOf(result).error_type).toBe("transient");
  });

  it("lets a graph interrupt through untouched", async () => {
    const interrupt = new GraphInterrupt([{ value: "ask", id: "i1" }]);
    await expect(middleware.wrapToolCall!(request(), failing(interrupt))).rejects.toBe(interrupt);
  });

  it("lets a parent command (also a graph bubble-up) through untouched", async () => {
    const parent = new ParentCommand(new Command({ goto: "x", graph: Command.PARENT }));
    await expect(middleware.wrapToolCall!(request(), failing(parent))).rejects.toBe(parent);
  });

  it("lets the error of a cancelled run through instead of turning it into a tool result", async () => {
    const controller = new AbortController();
    controller.abort();
    const abort = new DOMException("aborted", "AbortError");
    await expect(middleware.wrapToolCall!(request({}, controller.signal), failing(abort))).rejects.toBe(abort);
  });

  it("stamps a normal ToolMessage result and returns the same message", async () => {
    const expected = new ToolMessage({ content: "ok", tool_call_id: "tc-1", name: "web_search" });
    const result = await middleware.wrapToolCall!(request({ name: "web_search" }), async () => expected);
    expect(result).toBe(expected);
    expect(metaOf(result)).toMatchObject({ status: "success", source: "content_analysis" });
  });

  it("classifies an Error: result the tool returned itself as tool_return", async () => {
    const returned = new ToolMessage({ content: "Error: Permission denied: /etc/passwd", tool_call_id: "tc-1", name: "read_file" });
    const meta = metaOf(await middleware.wrapToolCall!(request({ name: "read_file" }), async () => returned));
    expect(meta).toMatchObject({ status: "error", error_type: "permission", source: "tool_return" });
  });

  it("does not overwrite meta a tool already stamped", async () => {
    const own = { status: "partial_success", source: "tool_return" };
    const returned = new ToolMessage({ content: "Error: 404", tool_call_id: "tc-1", additional_kwargs: { [TOOL_META_KEY]: own } });
    const result = (await middleware.wrapToolCall!(request(), async () => returned)) as ToolMessage;
    expect(result.additional_kwargs[TOOL_META_KEY]).toBe(own);
  });

  it("passes a Command through but stamps the ToolMessages in its update", async () => {
    const inner = new ToolMessage({ content: "Error: file not found", tool_call_id: "tc-1", name: "ls" });
    const command = new Command({ update: { sandbox: { sandbox_id: "sb1" }, messages: [inner] } });
    const result = await middleware.wrapToolCall!(request({ name: "ls" }), async () => command);
    expect(result).toBe(command);
    expect((inner.additional_kwargs[TOOL_META_KEY] as ToolResultMeta).error_type).toBe("not_found");
  });

  it("stamps ToolMessages in a tuple-form Command update", async () => {
    const inner = new ToolMessage({ content: "done", tool_call_id: "tc-1", name: "x" });
    const command = new Command({ update: [["messages", [inner]]] });
    await middleware.wrapToolCall!(request(), async () => command);
    expect((inner.additional_kwargs[TOOL_META_KEY] as ToolResultMeta).status).toBe("success");
  });

  it("passes a goto-only Command through untouched", async () => {
    const command = new Command({ goto: "end" });
    expect(await middleware.wrapToolCall!(request(), async () => command)).toBe(command);
  });

  it("rejects unknown config keys with a code, and a relative skills path", () => {
    expect(() => createToolErrorHandlingMiddleware({ nope: 1 } as never)).toThrow(
      expect.objectContaining({ code: "invalid_middleware_config" }),
    );
    expect(() => createToolErrorHandlingMiddleware({ skills_container_path: "skills" })).toThrow(/^ToolErrorHandling\.skills_container_path: /);
  });
});

describe("ToolErrorHandling: task exception wrappers", () => {
  const middleware = createToolErrorHandlingMiddleware();

  it("a raising task gets the subagent formatter's text and failed subagent metadata", async () => {
    const result = (await middleware.wrapToolCall!(request({ name: "task", id: "tc-task" }), failing(new RuntimeError("network down")))) as ToolMessage;
    expect(result).toMatchObject({ tool_call_id: "tc-task", name: "task", status: "error" });
    expect(result.content).toBe("Task failed. Error: RuntimeError: network down. Continue with available context, or choose an alternative tool.");
    expect(result.additional_kwargs[SUBAGENT_STATUS_KEY]).toBe("failed");
    expect(result.additional_kwargs[SUBAGENT_ERROR_KEY]).toBe("RuntimeError: network down");
    expect(metaOf(result)).toMatchObject({ status: "error", source: "exception" });
  });

  it("only task is stamped, and a task's own results are never stamped from their text", async () => {
    const bash = (await middleware.wrapToolCall!(request({ name: "bash" }), failing(new RuntimeError("command failed")))) as ToolMessage;
    expect(bash.additional_kwargs[SUBAGENT_STATUS_KEY]).toBeUndefined();
    const plain = new ToolMessage({ content: "Task Succeeded. Result: ok", tool_call_id: "tc-1", name: "task" });
    const returned = (await middleware.wrapToolCall!(request({ name: "task" }), async () => plain)) as ToolMessage;
    expect(returned.additional_kwargs[SUBAGENT_STATUS_KEY]).toBeUndefined();
    const command = new Command({
      update: {
        messages: [
          new ToolMessage({
            content: "Task Succeeded. Result: ok",
            tool_call_id: "tc-1",
            name: "task",
            additional_kwargs: { subagent_status: "completed", subagent_result_brief: "ok" },
          }),
        ],
      },
    });
    expect(await middleware.wrapToolCall!(request({ name: "task" }), async () => command)).toBe(command);
  });

  it("the subagent result contract builds text and metadata from the same inputs", () => {
    expect(formatSubagentResultMessage("completed", { result: "42" })).toEqual({ content: "Task Succeeded. Result: 42", error: undefined });
    expect(formatSubagentResultMessage("completed", { result: "42", stopReason: "token_capped" }).content).toBe("Task Succeeded (capped: token budget). Result: 42");
    expect(formatSubagentResultMessage("failed")).toEqual({ content: "Task failed.", error: "Task failed." });
    expect(formatSubagentResultMessage("failed", { error: "boom", stopReason: "turn_capped" }).content).toBe("Task failed (capped: turn budget). Error: boom");
    expect(formatSubagentResultMessage("cancelled").content).toBe("Task cancelled by user.");
    expect(formatSubagentResultMessage("timed_out", { error: "after 900s" }).content).toBe("Task timed out. Error: after 900s");
    expect(formatSubagentResultMessage("polling_timed_out").content).toBe("Task polling timed out.");
    expect(makeSubagentAdditionalKwargs("completed", { result: "ok", error: "ignored" })).toEqual({
      [SUBAGENT_STATUS_KEY]: "completed",
      [SUBAGENT_RESULT_BRIEF_KEY]: "ok",
      [SUBAGENT_RESULT_SHA256_KEY]: sha256HexSync("ok"),
    });
    expect(makeSubagentAdditionalKwargs("failed", { error: "  ", stopReason: "loop_capped" })).toEqual({
      [SUBAGENT_STATUS_KEY]: "failed",
      [SUBAGENT_STOP_REASON_KEY]: "loop_capped",
    });
    const long = boundSubagentText("x".repeat(1500) + "y".repeat(1500));
    expect(Array.from(long)).toHaveLength(2000);
    expect(long.startsWith("x".repeat(1333))).toBe(true);
    expect(long.endsWith(`\n...\n${"y".repeat(662)}`)).toBe(true);
  });
});

describe("ToolErrorHandling: skill-read metadata", () => {
  const SKILL = "/mnt/skills/public/data-analysis/SKILL.md";
  const body = "---\nname: data-analysis\ndescription: Analyze data.\n---\nBODY";

  function readOf(path: string, options: { name?: string; id?: string } = {}): ToolCallRequest {
    return request({ name: options.name ?? "read_file", id: options.id ?? "read-1", args: { path } });
  }

  const returning = (content: string, status?: "error") => async (): Promise<ToolResult> =>
    new ToolMessage({ content, tool_call_id: "read-1", name: "read_file", ...(status ? { status } : {}) });

  it("a successful read of a SKILL.md under the skills root stamps its compact reference", async () => {
    const result = (await createToolErrorHandlingMiddleware().wrapToolCall!(readOf(SKILL), returning(body))) as ToolMessage;
    expect(result.additional_kwargs["skill_context_entry"]).toEqual({ path: SKILL, description: "Analyze data." });
    expect(metaOf(result).status).toBe("success");
  });

  it("respects a custom skills root and read-tool list; [] turns stamping off", async () => {
    const custom = createToolErrorHandlingMiddleware({ skills_container_path: "/custom/skills", skill_file_read_tool_names: ["read_file"] });
    const result = (await custom.wrapToolCall!(readOf("/custom/skills/public/x/SKILL.md"), returning("---\ndescription: X\n---\nBody"))) as ToolMessage;
    expect(result.additional_kwargs["skill_context_entry"]).toEqual({ path: "/custom/skills/public/x/SKILL.md", description: "X" });
    const off = createToolErrorHandlingMiddleware({ skill_file_read_tool_names: [] });
    const none = (await off.wrapToolCall!(readOf(SKILL), returning(body))) as ToolMessage;
    expect(none.additional_kwargs["skill_context_entry"]).toBeUndefined();
  });

  it("stamps nothing for errors, other files, other roots, other tools, or Error: text", async () => {
    const mw = createToolErrorHandlingMiddleware();
    const cases: Array<[ToolCallRequest, () => Promise<ToolResult>]> = [
      [readOf(SKILL), returning(body, "error")],
      [readOf(SKILL), returning("Error: Not found: SKILL.md")],
      [readOf("/mnt/skills/public/data-analysis/README.md"), returning(body)],
      [readOf("/mnt/user-data/workspace/SKILL.md"), returning(body)],
      [readOf("/mnt/skills/../user-data/SKILL.md"), returning(body)],
      [readOf(SKILL, { name: "bash" }), returning(body)],
    ];
    for (const [req, handler] of cases) {
      const result = (await mw.wrapToolCall!(req, handler)) as ToolMessage;
      expect(result.additional_kwargs["skill_context_entry"]).toBeUndefined();
    }
  });

  it("normalizes the path, flattens whitespace and caps the description at 500 characters", async () => {
    const long = `---\ndescription: |\n  ${"word ".repeat(150)}\n  tail\n---\nBody`;
    const result = (await createToolErrorHandlingMiddleware().wrapToolCall!(
      readOf("/mnt/skills/public/./data-analysis/SKILL.md"),
      returning(long),
    )) as ToolMessage;
    const entry = result.additional_kwargs["skill_context_entry"] as { path: string; description: string };
    expect(entry.path).toBe(SKILL);
    expect(entry.description).toHaveLength(500);
    expect(entry.description).not.toMatch(/\s{2}|\n/);
    const noFrontMatter = (await createToolErrorHandlingMiddleware().wrapToolCall!(readOf(SKILL), returning("# Just a body"))) as ToolMessage;
    expect(noFrontMatter.additional_kwargs["skill_context_entry"]).toEqual({ path: SKILL, description: "" });
  });

  it("stamps the read answering the call inside a Command (a first read also binding the sandbox)", async () => {
    const message = new ToolMessage({ content: body, tool_call_id: "read-1", name: "read_file" });
    const command = new Command({ update: { sandbox: { sandbox_id: "sb1" }, messages: [message] } });
    expect(await createToolErrorHandlingMiddleware().wrapToolCall!(readOf(SKILL), async () => command)).toBe(command);
    expect(message.additional_kwargs["skill_context_entry"]).toEqual({ path: SKILL, description: "Analyze data." });
  });

  it("through the real engine the read result in state carries the reference", async () => {
    const reader: AgentTool = {
      name: "read_file",
      description: "reads a skill",
      schema: { type: "object", properties: { path: { type: "string" } } },
      invoke: async () => body,
    };
    const model = fakeModel()
      .respondWithTools([{ name: "read_file", args: { path: SKILL }, id: "r1" }])
      .respond(new AIMessage("loaded"));
    const agent = createAgent({ model, tools: [reader], middlewares: [createToolErrorHandlingMiddleware()], services: { clock: systemClock } });
    const state = await agent.invoke({ messages: [new HumanMessage("use the skill")] }, { threadId: "t1" });
    const read = state.messages.find((m) => ToolMessage.isInstance(m)) as ToolMessage;
    expect(read.additional_kwargs["skill_context_entry"]).toEqual({ path: SKILL, description: "Analyze data." });
  });
});

import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command, GraphInterrupt, ParentCommand } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentTool, ToolCallRequest, ToolResult } from "../../src/engine/types.ts";
import { emptyThreadState } from "../../src/state/thread-state.ts";
import {
  TOOL_ERROR_HANDLING_NAME,
  buildToolErrorMessage,
  createToolErrorHandlingMiddleware,
} from "../../src/middlewares/tool-error-handling.ts";
import { TOOL_META_KEY, type ToolResultMeta } from "../../src/middlewares/tool-result-meta.ts";
import { makeRuntime } from "./runtime.ts";

class ValueError extends Error {
  override name = "ValueError";
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
    expect(middleware.releasePolicyParameters?.()).toEqual({ error_detail_max_chars: 500, meta_key: "deerflow_tool_meta" });
  });

  it("scenario 29: a tool raising ValueError('boom') becomes a recoverable error ToolMessage", async () => {
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

  it("scenario 29: the run continues through the real engine after the tool raised", async () => {
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

  it("rejects unknown config keys with a code", () => {
    expect(() => createToolErrorHandlingMiddleware({ nope: 1 } as never)).toThrow(
      expect.objectContaining({ code: "invalid_middleware_config" }),
    );
  });
});

import * as v from "valibot";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentMiddleware, AgentTool, ModelRequest, ToolCallRequest } from "../../src/engine/types.ts";
import { MCP_TOOL_METADATA_KEY } from "../../src/mcp/metadata.ts";
import {
  DeferredToolFilterConfigSchema,
  DEFERRED_TOOL_FILTER_NAME,
  createDeferredToolFilterMiddleware,
  deferredToolBlockedMessage,
} from "../../src/middlewares/deferred-tool-filter.ts";
import { createToolErrorHandlingMiddleware } from "../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import { emptyThreadState, type ThreadState } from "../../src/state/thread-state.ts";
import { assembleDeferredTools } from "../../src/tools/tool-search.ts";
import { makeRuntime } from "./runtime.ts";

// The section as its schema fills it in when nothing is configured.
const DEFERRED_TOOL_FILTER_DEFAULTS = v.parse(DeferredToolFilterConfigSchema, {});

const BLOCKED_TEXT =
  "Error: Tool 'slack_send' is deferred and has not been promoted yet. Call tool_search first to expose and promote this tool's schema, then retry.";

function tool(name: string, mcp = false): AgentTool {
  return {
    name,
    description: `${name} tool`,
    schema: { type: "object", properties: { x: { type: "string" } } },
    ...(mcp ? { metadata: { [MCP_TOOL_METADATA_KEY]: { server: "chat", transport: "http", tool: name } } } : {}),
    async invoke() {
      return `${name} ran`;
    },
  };
}

function state(promoted: ThreadState["promoted"] = null): ThreadState {
  return { ...emptyThreadState(), promoted };
}

function filter(): AgentMiddleware {
  return createDeferredToolFilterMiddleware({ enabled: true }, { deferredNames: ["slack_send", "gmail_send"], catalogHash: "h1" });
}

async function boundNames(middleware: AgentMiddleware, threadState: ThreadState, names = ["slack_send", "gmail_send", "bash"]): Promise<string[]> {
  let seen: readonly AgentTool[] = [];
  const request: ModelRequest = {
    model: fakeModel(),
    systemMessage: undefined,
    messages: [],
    tools: names.map((n) => tool(n)),
    state: threadState,
    runtime: makeRuntime(),
  };
  await middleware.wrapModelCall!(request, async (req) => {
    seen = req.tools;
    return new AIMessage("ok");
  });
  return seen.map((t) => t.name);
}

async function callTool(middleware: AgentMiddleware, name: string, threadState: ThreadState) {
  const toolCall: ToolCall = { name, args: {}, id: "tc1", type: "tool_call" };
  const request: ToolCallRequest = { toolCall, tool: tool(name), state: threadState, runtime: makeRuntime() };
  let ran = false;
  const result = await middleware.wrapToolCall!(request, async () => {
    ran = true;
    return new ToolMessage({ content: `${name} ran`, tool_call_id: "tc1", name });
  });
  return { result: result as ToolMessage, ran };
}

describe("DeferredToolFilter", () => {
  it("scenario M46: an unpromoted slack_send is hidden from the model and its call answers '…deferred and has not been promoted yet…'", async () => {
    const mw = filter();
    expect(await boundNames(mw, state())).toEqual(["bash"]);
    const { result, ran } = await callTool(mw, "slack_send", state());
    expect(ran).toBe(false);
    expect(result.content).toBe(BLOCKED_TEXT);
    expect(result).toMatchObject({ status: "error", name: "slack_send", tool_call_id: "tc1" });
  });

  it("scenario M46: a promotion under the same catalog hash exposes it; one under another hash is ignored", async () => {
    const mw = filter();
    const same = state({ catalog_hash: "h1", names: ["slack_send"] });
    expect(await boundNames(mw, same)).toEqual(["slack_send", "bash"]);
    expect((await callTool(mw, "slack_send", same)).ran).toBe(true);

    const stale = state({ catalog_hash: "STALE", names: ["slack_send"] });
    expect(await boundNames(mw, stale)).toEqual(["bash"]);
    const blocked = await callTool(mw, "slack_send", stale);
    expect(blocked.ran).toBe(false);
    expect(blocked.result.content).toBe(BLOCKED_TEXT);
  });

  it("never blocks a tool that is not deferred, and an empty deferred set or disabled tool_search changes nothing", async () => {
    expect((await callTool(filter(), "bash", state())).ran).toBe(true);
    const none = createDeferredToolFilterMiddleware({ enabled: true }, { deferredNames: [], catalogHash: null });
    expect(await boundNames(none, state())).toEqual(["slack_send", "gmail_send", "bash"]);
    const disabled = createDeferredToolFilterMiddleware(undefined, { deferredNames: ["slack_send"], catalogHash: "h1" });
    expect(await boundNames(disabled, state())).toEqual(["slack_send", "gmail_send", "bash"]);
    expect((await callTool(disabled, "slack_send", state())).ran).toBe(true);
  });

  it("passes the request through untouched when nothing it holds is hidden", async () => {
    const mw = filter();
    const request: ModelRequest = {
      model: fakeModel(),
      systemMessage: undefined,
      messages: [],
      tools: [tool("bash")],
      state: state(),
      runtime: makeRuntime(),
    };
    let received: ModelRequest | undefined;
    await mw.wrapModelCall!(request, async (req) => {
      received = req;
      return new AIMessage("ok");
    });
    expect(received).toBe(request);
  });

  it("validates its config section (tool_search) and needs a catalog hash for deferred names", () => {
    expect(DEFERRED_TOOL_FILTER_DEFAULTS).toEqual({ enabled: false, auto_promote_top_k: 3 });
    expect(() => createDeferredToolFilterMiddleware({ enabled: "yes" } as never)).toThrow(/DeferredToolFilter\.enabled/);
    expect(() => createDeferredToolFilterMiddleware({ bogus: 1 } as never)).toThrow(/DeferredToolFilter\.bogus/);
    expect(() => createDeferredToolFilterMiddleware({ enabled: true }, { deferredNames: ["a"], catalogHash: null })).toThrow(
      expect.objectContaining({ code: "invalid_middleware_deps" }),
    );
  });

  it("declares its deferred set, catalog hash and promotion scope", () => {
    expect(filter().releasePolicyParameters!()).toEqual({
      deferred_names: ["gmail_send", "slack_send"],
      catalog_hash: "h1",
      promotion_scope: "graph_state_catalog_hash",
    });
    expect(filter().name).toBe(DEFERRED_TOOL_FILTER_NAME);
  });

  it("builds its blocked message with a fallback call id", () => {
    expect(deferredToolBlockedMessage("x", undefined).tool_call_id).toBe("missing_tool_call_id");
  });

  it("scenario M46 through the engine: hidden until tool_search promotes it, then bound and callable", async () => {
    const slack = tool("slack_send", true);
    const setup = assembleDeferredTools([tool("bash"), slack]);
    const model = fakeModel()
      .respondWithTools([{ name: "slack_send", args: { x: "hi" }, id: "c1" }])
      .respondWithTools([{ name: "tool_search", args: { query: "select:slack_send" }, id: "c2" }])
      .respondWithTools([{ name: "slack_send", args: { x: "hi" }, id: "c3" }])
      .respond(new AIMessage("sent"));
    const bound: string[][] = [];
    // Innermost, so it sees exactly the tools the provider is bound with.
    const recorder: AgentMiddleware = {
      name: "Recorder",
      async wrapModelCall(request, handler) {
        bound.push(request.tools.map((t) => t.name));
        return handler(request);
      },
    };
    const agent = createAgent({
      model,
      tools: setup.tools,
      middlewares: [createToolErrorHandlingMiddleware(), createDeferredToolFilterMiddleware({ enabled: true }, setup), recorder],
      services: { clock: systemClock },
    });

    const final = await agent.invoke({ messages: [new HumanMessage({ content: "tell the team", id: "m1" })] }, { threadId: "t1" });

    expect(bound).toEqual([
      ["bash", "tool_search"],
      ["bash", "tool_search"],
      ["bash", "slack_send", "tool_search"],
      ["bash", "slack_send", "tool_search"],
    ]);
    const results = final.messages.filter((m): m is ToolMessage => m.type === "tool");
    expect(results.find((m) => m.tool_call_id === "c1")?.content).toBe(BLOCKED_TEXT);
    expect(results.find((m) => m.tool_call_id === "c2")?.name).toBe("tool_search");
    expect(results.find((m) => m.tool_call_id === "c3")?.content).toBe("slack_send ran");
    expect(final.promoted).toEqual({ catalog_hash: setup.catalogHash, names: ["slack_send"] });
  });
});

import * as v from "valibot";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentMiddleware, AgentTool, HookResult, NodeHook } from "../../src/engine/types.ts";
import { MCP_TOOL_METADATA_KEY, MCP_TOOL_ROUTING_METADATA_KEY } from "../../src/mcp/metadata.ts";
import { createDeferredToolFilterMiddleware } from "../../src/middlewares/deferred-tool-filter.ts";
import {
  McpRoutingConfigSchema,
  MCP_ROUTING_NAME,
  assertMcpRoutingBeforeDeferredFilter,
  createMcpRoutingMiddleware,
} from "../../src/middlewares/mcp-routing.ts";
import { reducePromoted } from "../../src/state/reducers.ts";
import { emptyThreadState, type ThreadState } from "../../src/state/thread-state.ts";
import { assembleDeferredTools } from "../../src/tools/tool-search.ts";
import { makeRuntime } from "./runtime.ts";

// The section as its schema fills it in when nothing is configured.
const MCP_ROUTING_DEFAULTS = v.parse(McpRoutingConfigSchema, {});

function routed(name: string, keywords: string[], priority = 0, mode = "prefer"): AgentTool {
  return {
    name,
    description: `${name} tool`,
    schema: { type: "object", properties: { q: { type: "string" } } },
    metadata: {
      [MCP_TOOL_METADATA_KEY]: { server: "srv", transport: "http", tool: name },
      [MCP_TOOL_ROUTING_METADATA_KEY]: { mode, priority, keywords },
    },
    async invoke() {
      return `${name} ran`;
    },
  };
}

const active: AgentTool = {
  name: "active_tool",
  description: "always on",
  schema: { type: "object", properties: {} },
  async invoke() {
    return "active";
  },
};

function state(messages: BaseMessage[], promoted: ThreadState["promoted"] = null): ThreadState {
  return { ...emptyThreadState(), messages, promoted };
}

function routing(index: Record<string, { priority: number; keywords: string[] }>, topK = 3, hash: string | null = "hash1"): AgentMiddleware {
  return createMcpRoutingMiddleware({ enabled: true, auto_promote_top_k: topK }, { routingIndex: index, catalogHash: hash });
}

function run(mw: AgentMiddleware, threadState: ThreadState): HookResult {
  return (mw.beforeModel as NodeHook)(threadState, makeRuntime()) as HookResult;
}

describe("McpRouting", () => {
  it("scenario M47: routing keywords {slack_send: [slack]} and 'post to Slack' promote slack_send", () => {
    const mw = routing({ slack_send: { priority: 0, keywords: ["slack"] } });
    expect(run(mw, state([new HumanMessage("post to Slack")]))).toEqual({ promoted: { catalog_hash: "hash1", names: ["slack_send"] } });
  });

  it("scenario M47: at most top_k tools are promoted, ranked by priority then name (case-folded, any script)", () => {
    const mw = routing(
      {
        z_tool: { priority: 50, keywords: ["订单"] },
        a_tool: { priority: 50, keywords: ["orders"] },
        top_tool: { priority: 100, keywords: ["ORDERS"] },
        low_tool: { priority: 1, keywords: ["orders"] },
      },
      2,
    );
    expect(run(mw, state([new HumanMessage("查订单 and orders")]))).toEqual({ promoted: { catalog_hash: "hash1", names: ["top_tool", "a_tool"] } });
    expect(run(routing({ s: { priority: 0, keywords: ["STRASSE"] } }), state([new HumanMessage("die straße")]))).toEqual({
      promoted: { catalog_hash: "hash1", names: ["s"] },
    });
  });

  it("matches only the latest real user message: not older turns, summaries or hidden hints", () => {
    const mw = routing({ postgres_query: { priority: 100, keywords: ["orders"] }, metrics_query: { priority: 90, keywords: ["metrics"] } });
    expect(run(mw, state([new HumanMessage("orders"), new HumanMessage("no match now")]))).toBeUndefined();
    expect(
      run(
        mw,
        state([
          new HumanMessage("nothing"),
          new HumanMessage({ content: "metrics", name: "summary" }),
          new HumanMessage({ content: "orders", additional_kwargs: { hide_from_ui: true } }),
        ]),
      ),
    ).toBeUndefined();
  });

  it("reads the user's original text when an outer middleware rewrote the content", () => {
    const mw = routing({ postgres_query: { priority: 100, keywords: ["orders"] } });
    const message = new HumanMessage({ content: [{ type: "text", text: "sanitized replacement" }], additional_kwargs: { original_user_content: "show orders" } });
    expect(run(mw, state([message]))).toEqual({ promoted: { catalog_hash: "hash1", names: ["postgres_query"] } });
  });

  it("writes a minimal promoted update that the reducer unions with earlier promotions", () => {
    const mw = routing({ postgres_query: { priority: 100, keywords: ["orders"] } });
    const update = run(mw, state([new HumanMessage("orders")], { catalog_hash: "hash1", names: ["metrics_query"] }));
    expect(update).toEqual({ promoted: { catalog_hash: "hash1", names: ["postgres_query"] } });
    expect(reducePromoted({ catalog_hash: "hash1", names: ["metrics_query"] }, update!.promoted)).toEqual({
      catalog_hash: "hash1",
      names: ["metrics_query", "postgres_query"],
    });
    expect(run(mw, state([new HumanMessage("orders")], { catalog_hash: "hash1", names: ["postgres_query"] }))).toBeUndefined();
  });

  it("does nothing without a match, without a catalog hash, or with tool_search disabled", () => {
    const index = { postgres_query: { priority: 100, keywords: ["orders"] } };
    expect(run(routing(index, 3, null), state([new HumanMessage("orders")]))).toBeUndefined();
    expect(run(routing(index), state([new HumanMessage("nothing")]))).toBeUndefined();
    const disabled = createMcpRoutingMiddleware(undefined, { routingIndex: index, catalogHash: "hash1" });
    expect(run(disabled, state([new HumanMessage("orders")]))).toBeUndefined();
  });

  it("clamps auto_promote_top_k to 1..5 and declares its policy without copying keywords", () => {
    expect(MCP_ROUTING_DEFAULTS.auto_promote_top_k).toBe(3);
    const index = { a: { priority: 0, keywords: ["secret-keyword"] } };
    const low = createMcpRoutingMiddleware({ enabled: true, auto_promote_top_k: 0 }, { routingIndex: index, catalogHash: "h" });
    const high = createMcpRoutingMiddleware({ enabled: true, auto_promote_top_k: 99 }, { routingIndex: index, catalogHash: "h" });
    expect(low.releasePolicyParameters!()["auto_promote_top_k"]).toBe(1);
    const declared = high.releasePolicyParameters!();
    expect(declared).toMatchObject({ auto_promote_top_k: 5, catalog_hash: "h", routed_tools: ["a"], match_scope: "latest_real_user_message" });
    expect(declared["routing_index_hash"]).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(declared)).not.toContain("secret-keyword");
    expect(() => createMcpRoutingMiddleware({ auto_promote_top_k: 2.5 })).toThrow(/McpRouting\.auto_promote_top_k/);
    expect(high.name).toBe(MCP_ROUTING_NAME);
  });

  it("must be installed before DeferredToolFilter", () => {
    const r = routing({ a: { priority: 0, keywords: ["a"] } });
    const f = createDeferredToolFilterMiddleware({ enabled: true }, { deferredNames: ["a"], catalogHash: "hash1" });
    expect(() => assertMcpRoutingBeforeDeferredFilter([r, f])).not.toThrow();
    expect(() => assertMcpRoutingBeforeDeferredFilter([f, r])).toThrow(/McpRouting must be installed before DeferredToolFilter/);
  });

  it("scenario M47 through the engine: the routed schema is bound in the same model cycle and callable without tool_search", async () => {
    const pg = routed("postgres_query", ["orders"], 100);
    const metrics = routed("metrics_query", ["metrics"], 90);
    const setup = assembleDeferredTools([active, pg, metrics]);
    const bound: string[][] = [];
    const recorder: AgentMiddleware = {
      name: "Recorder",
      async wrapModelCall(request, handler) {
        bound.push(request.tools.map((t) => t.name));
        return handler(request);
      },
    };
    const model = fakeModel()
      .respondWithTools([{ name: "postgres_query", args: { q: "select * from orders" }, id: "c1" }])
      .respond(new AIMessage("done"));
    const agent = createAgent({
      model,
      tools: setup.tools,
      middlewares: [
        createMcpRoutingMiddleware({ enabled: true }, setup),
        createDeferredToolFilterMiddleware({ enabled: true }, setup),
        recorder,
      ],
      services: { clock: systemClock },
    });

    const final = await agent.invoke({ messages: [new HumanMessage({ content: "show orders", id: "m1" })] }, { threadId: "t1" });

    expect(bound[0]).toEqual(["active_tool", "postgres_query", "tool_search"]);
    expect(final.promoted).toEqual({ catalog_hash: setup.catalogHash, names: ["postgres_query"] });
    const results = final.messages.filter((m): m is ToolMessage => m.type === "tool");
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ name: "postgres_query", content: "postgres_query ran" });
  });

  it("explicit tool_search promotions merge with routed ones", async () => {
    const setup = assembleDeferredTools([active, routed("postgres_query", ["orders"], 100), routed("metrics_query", ["metrics"], 90)]);
    const model = fakeModel()
      .respondWithTools([{ name: "tool_search", args: { query: "select:metrics_query" }, id: "c1" }])
      .respond(new AIMessage("done"));
    const agent = createAgent({
      model,
      tools: setup.tools,
      middlewares: [createMcpRoutingMiddleware({ enabled: true }, setup), createDeferredToolFilterMiddleware({ enabled: true }, setup)],
      services: { clock: systemClock },
    });
    const final = await agent.invoke({ messages: [new HumanMessage({ content: "show orders", id: "m1" })] }, { threadId: "t1" });
    expect(final.promoted).toEqual({ catalog_hash: setup.catalogHash, names: ["postgres_query", "metrics_query"] });
  });
});

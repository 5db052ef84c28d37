import { describe, expect, it } from "vitest";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { Command, MemorySaver, interrupt, isGraphInterrupt } from "@langchain/langgraph/web";
import { createAgent, type AgentMiddleware, type AgentTool, type AgentRuntime, type RunRecord } from "../../src/engine/index.ts";
import { systemClock } from "../../src/core/clock.ts";

const services = { clock: systemClock };

function tool(name: string, body: AgentTool["invoke"]): AgentTool {
  return { name, description: `the ${name} tool`, schema: { type: "object", properties: {} }, invoke: body };
}

const echo = tool("echo", async (args) => `echo:${JSON.stringify(args)}`);

function human(text: string) {
  return { messages: [new HumanMessage(text)] };
}

/** A middleware whose every hook appends to a shared log. */
function recorder(name: string, log: string[]): AgentMiddleware {
  return {
    name,
    beforeAgent: () => void log.push(`${name}.beforeAgent`),
    beforeModel: () => void log.push(`${name}.beforeModel`),
    afterModel: () => void log.push(`${name}.afterModel`),
    afterAgent: () => void log.push(`${name}.afterAgent`),
    async wrapModelCall(request, handler) {
      log.push(`${name}.wrapModel:in`);
      const out = await handler(request);
      log.push(`${name}.wrapModel:out`);
      return out;
    },
    async wrapToolCall(request, handler) {
      log.push(`${name}.wrapTool:in`);
      const out = await handler(request);
      log.push(`${name}.wrapTool:out`);
      return out;
    },
  };
}

function types(messages: BaseMessage[]) {
  return messages.map((m) => m.getType());
}

describe("engine: hook order", () => {
  it("runs before* in stack order, after* in reverse, and nests wrappers with the first outermost", async () => {
    const log: string[] = [];
    const model = fakeModel().respondWithTools([{ name: "echo", args: { x: 1 }, id: "c1" }]).respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [echo], middlewares: [recorder("A", log), recorder("B", log)], services });
    const state = await agent.invoke(human("hi"), { threadId: "t" });
    expect(types(state.messages)).toEqual(["human", "ai", "tool", "ai"]);
    const modelStep = [
      "A.beforeModel", "B.beforeModel",
      "A.wrapModel:in", "B.wrapModel:in", "B.wrapModel:out", "A.wrapModel:out",
      "B.afterModel", "A.afterModel",
    ];
    expect(log).toEqual([
      "A.beforeAgent", "B.beforeAgent",
      ...modelStep,
      "A.wrapTool:in", "B.wrapTool:in", "B.wrapTool:out", "A.wrapTool:out",
      ...modelStep,
      "B.afterAgent", "A.afterAgent",
    ]);
  });

  it("lets each hook see the state its predecessors wrote in the same step", async () => {
    const seen: Array<string | null> = [];
    const model = fakeModel().respond(new AIMessage("ok"));
    const agent = createAgent({
      model,
      services,
      middlewares: [
        { name: "writer", beforeModel: () => ({ title: "from-writer" }) },
        { name: "reader", beforeModel: (state) => void seen.push(state.title) },
        { name: "late", afterModel: (state) => void seen.push(String(state.messages.at(-1)?.content)) },
      ],
    });
    const state = await agent.invoke(human("hi"));
    expect(seen).toEqual(["from-writer", "ok"]);
    expect(state.title).toBe("from-writer");
  });
});

describe("engine: jumps", () => {
  it("follows a declared afterModel jump back to the model", async () => {
    const model = fakeModel().respond(new AIMessage("first")).respond(new AIMessage("second"));
    let jumped = false;
    const agent = createAgent({
      model,
      services,
      middlewares: [
        {
          name: "retry-once",
          afterModel: {
            canJumpTo: ["model"],
            hook: () => {
              if (jumped) return;
              jumped = true;
              return { jumpTo: "model" };
            },
          },
        },
      ],
    });
    const state = await agent.invoke(human("hi"));
    expect(model.callCount).toBe(2);
    expect(state.messages.map((m) => m.content)).toEqual(["hi", "first", "second"]);
  });

  it("refuses a jump the hook did not declare, naming the middleware", async () => {
    const model = fakeModel().respond(new AIMessage("x"));
    const agent = createAgent({
      model,
      services,
      middlewares: [{ name: "sneaky", afterModel: () => ({ jumpTo: "model" }) }],
    });
    await expect(agent.invoke(human("hi"))).rejects.toMatchObject({ code: "undeclared_jump", message: expect.stringContaining('"sneaky"') });
    expect(model.callCount).toBe(1);
  });

  it("skips the model on a beforeModel jump to end and still runs afterAgent", async () => {
    const log: string[] = [];
    const model = fakeModel().respond(new AIMessage("never"));
    const agent = createAgent({
      model,
      services,
      middlewares: [
        { name: "gate", beforeModel: { canJumpTo: ["end"], hook: () => ({ jumpTo: "end", title: "gated" }) } },
        { name: "finaliser", afterAgent: () => void log.push("afterAgent") },
      ],
    });
    const state = await agent.invoke(human("hi"));
    expect(model.callCount).toBe(0);
    expect(state.title).toBe("gated");
    expect(log).toEqual(["afterAgent"]);
  });
});

describe("engine: wrappers", () => {
  it("short-circuits the model when a wrapModelCall answers without calling the handler", async () => {
    const model = fakeModel().respond(new AIMessage("from the model"));
    const agent = createAgent({
      model,
      services,
      middlewares: [{ name: "cache", wrapModelCall: async () => new AIMessage("from the cache") }],
    });
    const state = await agent.invoke(human("hi"));
    expect(model.callCount).toBe(0);
    expect(state.messages.at(-1)?.content).toBe("from the cache");
  });

  it("lets a wrapModelCall rewrite the request the model receives without touching state", async () => {
    const model = fakeModel().respond(new AIMessage("ok"));
    const agent = createAgent({
      model,
      services,
      middlewares: [
        {
          name: "rewrite",
          wrapModelCall: (request, handler) => handler({ ...request, messages: [new HumanMessage("rewritten")] }),
        },
      ],
    });
    const state = await agent.invoke(human("original"));
    expect(model.calls[0]!.messages.map((m: BaseMessage) => m.content)).toEqual(["rewritten"]);
    expect(state.messages[0]!.content).toBe("original");
  });

  it("applies a Command returned by a tool wrapper: its state update lands and goto end stops the run", async () => {
    const log: string[] = [];
    const model = fakeModel().respondWithTools([{ name: "echo", args: {}, id: "c1" }]).respond(new AIMessage("unreached"));
    const agent = createAgent({
      model,
      tools: [echo],
      services,
      middlewares: [
        {
          name: "stopper",
          wrapToolCall: async (request) =>
            new Command({
              update: {
                title: "stopped by tool",
                messages: [new ToolMessage({ content: "stop here", tool_call_id: request.toolCall.id!, name: "echo" })],
              },
              goto: "__end__",
            }),
        },
        { name: "finaliser", afterAgent: () => void log.push("afterAgent") },
      ],
    });
    const state = await agent.invoke(human("hi"));
    expect(model.callCount).toBe(1);
    expect(state.title).toBe("stopped by tool");
    expect(state.messages.at(-1)?.content).toBe("stop here");
    expect(log).toEqual(["afterAgent"]);
  });

  it("runs the tool calls of one AI message concurrently, each through the wrappers on its own", async () => {
    let started = 0;
    let release!: () => void;
    const bothStarted = new Promise<void>((resolve) => (release = resolve));
    // Each call waits until the other has started: run one after the other, this would never finish.
    const rendezvous = tool("rendezvous", async (args) => {
      started += 1;
      if (started === 2) release();
      await bothStarted;
      return `done ${String(args.n)}`;
    });
    const wrapped: string[] = [];
    const model = fakeModel()
      .respondWithTools([
        { name: "rendezvous", args: { n: 1 }, id: "c1" },
        { name: "rendezvous", args: { n: 2 }, id: "c2" },
      ])
      .respond(new AIMessage("both done"));
    const agent = createAgent({
      model,
      tools: [rendezvous],
      services,
      middlewares: [{ name: "tap", wrapToolCall: (request, handler) => (wrapped.push(request.toolCall.id!), handler(request)) }],
    });
    const state = await agent.invoke(human("go"));
    expect(wrapped.sort()).toEqual(["c1", "c2"]);
    const results = state.messages.filter((m) => m.getType() === "tool").map((m) => m.content).sort();
    expect(results).toEqual(["done 1", "done 2"]);
    expect(state.messages.at(-1)?.content).toBe("both done");
  });

  it("answers a call to an unknown tool with an error ToolMessage and goes on", async () => {
    const model = fakeModel().respondWithTools([{ name: "nope", args: {}, id: "c1" }]).respond(new AIMessage("recovered"));
    const agent = createAgent({ model, tools: [echo], services });
    const state = await agent.invoke(human("hi"));
    const result = state.messages[2] as ToolMessage;
    expect(result.status).toBe("error");
    expect(result.content).toContain("nope is not a valid tool");
    expect(state.messages.at(-1)?.content).toBe("recovered");
  });
});

describe("engine: interrupts", () => {
  it("passes a graph interrupt through every wrapper untouched, pauses, and resumes", async () => {
    const seen: unknown[] = [];
    const afterAgent: string[] = [];
    const ask = tool("ask", async () => `answer: ${String(interrupt({ question: "proceed?" }))}`);
    const passThrough = (name: string): AgentMiddleware => ({
      name,
      async wrapToolCall(request, handler) {
        try {
          return await handler(request);
        } catch (error) {
          seen.push(error);
          throw error;
        }
      },
    });
    const model = fakeModel().respondWithTools([{ name: "ask", args: {}, id: "c1" }]).respond(new AIMessage("finished"));
    const agent = createAgent({
      model,
      tools: [ask],
      checkpointer: new MemorySaver(),
      services,
      middlewares: [passThrough("outer"), passThrough("inner"), { name: "fin", afterAgent: () => void afterAgent.push("ran") }],
    });
    let record: RunRecord | undefined;
    const chunks: unknown[] = [];
    for await (const chunk of agent.stream(human("hi"), { threadId: "t-int", streamMode: "updates" }, (r) => (record = r))) {
      chunks.push(chunk);
    }
    expect(seen).toHaveLength(2);
    expect(isGraphInterrupt(seen[0])).toBe(true);
    expect(seen[1]).toBe(seen[0]);
    expect(record?.outcome).toBe("interrupted");
    expect(afterAgent).toEqual([]);
    expect(JSON.stringify(chunks)).toContain("proceed?");

    const state = await agent.invoke(new Command({ resume: "yes" }), { threadId: "t-int" });
    expect(state.messages.find((m) => m.getType() === "tool")?.content).toBe("answer: yes");
    expect(state.messages.at(-1)?.content).toBe("finished");
    expect(afterAgent).toEqual(["ran"]);
  });
});

describe("engine: afterAgent on every exit path", () => {
  function finaliser(log: string[]): AgentMiddleware {
    return { name: "finaliser", afterAgent: (state) => (log.push(`afterAgent:${state.messages.length}`), { title: "finalised" }) };
  }

  it("runs once on a normal end", async () => {
    const log: string[] = [];
    const agent = createAgent({ model: fakeModel().respond(new AIMessage("ok")), services, middlewares: [finaliser(log)] });
    const state = await agent.invoke(human("hi"));
    expect(log).toEqual(["afterAgent:2"]);
    expect(state.title).toBe("finalised");
  });

  it("runs when the model throws, and the original error reaches the caller", async () => {
    const log: string[] = [];
    const checkpointer = new MemorySaver();
    const agent = createAgent({
      model: fakeModel().alwaysThrow(new Error("provider exploded")),
      services,
      checkpointer,
      middlewares: [finaliser(log)],
    });
    await expect(agent.invoke(human("hi"), { threadId: "t-err" })).rejects.toThrow("provider exploded");
    expect(log).toEqual(["afterAgent:1"]);
    const saved = await agent.graph.getState({ configurable: { thread_id: "t-err" } });
    expect(saved.values.title).toBe("finalised");
  });

  it("runs when a tool throws and nothing converts the error", async () => {
    const log: string[] = [];
    const boom = tool("boom", async () => {
      throw new Error("tool exploded");
    });
    const agent = createAgent({
      model: fakeModel().respondWithTools([{ name: "boom", args: {}, id: "c1" }]),
      tools: [boom],
      services,
      middlewares: [finaliser(log)],
    });
    await expect(agent.invoke(human("hi"))).rejects.toThrow("tool exploded");
    expect(log).toHaveLength(1);
  });

  it("runs when the caller aborts the run", async () => {
    const log: string[] = [];
    const controller = new AbortController();
    const slow = tool("slow", (_args, ctx) =>
      new Promise<string>((_resolve, reject) => {
        ctx.runtime.signal?.addEventListener("abort", () => reject(ctx.runtime.signal?.reason));
        setTimeout(() => controller.abort(new Error("user cancelled")), 5);
      }),
    );
    const agent = createAgent({
      model: fakeModel().respondWithTools([{ name: "slow", args: {}, id: "c1" }]).respond(new AIMessage("never")),
      tools: [slow],
      services,
      middlewares: [finaliser(log)],
    });
    let record: RunRecord | undefined;
    const run = async () => {
      for await (const _ of agent.stream(human("hi"), { signal: controller.signal }, (r) => (record = r))) void _;
    };
    await expect(run()).rejects.toThrow();
    expect(log).toHaveLength(1);
    expect(record?.outcome).toBe("aborted");
  });

  it("keeps the original error when an afterAgent hook also fails, and records the hook failure", async () => {
    let record: RunRecord | undefined;
    const agent = createAgent({
      model: fakeModel().alwaysThrow(new Error("original")),
      services,
      middlewares: [{ name: "broken-cleanup", afterAgent: () => { throw new Error("cleanup failed"); } }],
    });
    const run = async () => {
      for await (const _ of agent.stream(human("hi"), {}, (r) => (record = r))) void _;
    };
    await expect(run()).rejects.toThrow("original");
    expect(record?.cleanupErrors.map((e) => (e as Error).message)).toEqual(["cleanup failed"]);
  });
});

describe("engine: run scope and caller context", () => {
  it("gives each run a fresh scope that hooks share and the caller cannot reach", async () => {
    const seen: unknown[] = [];
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("a")).respond(new AIMessage("b")),
      services,
      middlewares: [
        {
          name: "scoped",
          beforeAgent: (_s, rt) => {
            seen.push(rt.scope.get("stop_reason"));
            rt.scope.set("stop_reason", "loop_capped");
          },
          afterAgent: (_s, rt) => void seen.push(rt.scope.get("stop_reason")),
        },
      ],
    });
    const forged = { stop_reason: "forged" };
    await agent.invoke(human("1"), {
      context: { scope: forged, stop_reason: "forged" },
      configurable: { __deerflow_run_ticket: "forged-ticket" },
    });
    await agent.invoke(human("2"));
    expect(seen).toEqual([undefined, "loop_capped", undefined, "loop_capped"]);
  });

  it("hands hooks a frozen copy of the caller context", async () => {
    const context = { user_id: "u1", nested: { role: "admin" } };
    const errors: unknown[] = [];
    let runtimeSeen: AgentRuntime | undefined;
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("ok")),
      services,
      middlewares: [
        {
          name: "mutator",
          beforeAgent: (_s, rt) => {
            runtimeSeen = rt;
            try {
              (rt.context as Record<string, unknown>).user_id = "root";
            } catch (error) {
              errors.push(error);
            }
            try {
              (rt.context.nested as Record<string, unknown>).role = "root";
            } catch (error) {
              errors.push(error);
            }
          },
        },
      ],
    });
    await agent.invoke(human("hi"), { context });
    expect(errors).toHaveLength(2);
    expect(runtimeSeen?.context).toEqual({ user_id: "u1", nested: { role: "admin" } });
    expect(context.nested.role).toBe("admin");
  });

  it("refuses to run the compiled graph outside the agent's run entry points", async () => {
    const agent = createAgent({ model: fakeModel().respond(new AIMessage("ok")), services });
    await expect(agent.graph.invoke(human("hi") as never)).rejects.toMatchObject({ code: "run_scope_missing" });
  });
});

describe("engine: assembly checks and persistence", () => {
  it("rejects duplicate and malformed middleware names and duplicate tools", () => {
    const model = fakeModel();
    expect(() => createAgent({ model, services, middlewares: [{ name: "a" }, { name: "a" }] })).toThrow(/appears twice/);
    expect(() => createAgent({ model, services, middlewares: [{ name: "bad name" }] })).toThrow(/must match/);
    expect(() => createAgent({ model, services, tools: [echo, echo] })).toThrow(/unique/);
  });

  it("keeps a thread's state across runs through the checkpointer", async () => {
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("one")).respond(new AIMessage("two")),
      services,
      checkpointer: new MemorySaver(),
    });
    await agent.invoke(human("first"), { threadId: "t-p" });
    const state = await agent.invoke(human("second"), { threadId: "t-p" });
    expect(state.messages.map((m) => m.content)).toEqual(["first", "one", "second", "two"]);
  });

  it("binds middleware-contributed tools and puts the system prompt first", async () => {
    const model = fakeModel().respondWithTools([{ name: "mw_tool", args: {}, id: "c1" }]).respond(new AIMessage("ok"));
    const agent = createAgent({
      model,
      services,
      systemPrompt: "You are helpful.",
      middlewares: [{ name: "contributor", tools: [tool("mw_tool", async () => "from middleware tool")] }],
    });
    const state = await agent.invoke(human("hi"));
    expect(state.messages[2]!.content).toBe("from middleware tool");
    expect(model.calls[0]!.messages[0]!.getType()).toBe("system");
  });
});

describe("engine: afterAgent hooks that write nothing run inside the run's last step", () => {
  async function checkpointsOf(checkpointer: MemorySaver, threadId: string): Promise<number> {
    let count = 0;
    for await (const _ of checkpointer.list({ configurable: { thread_id: threadId } })) count++;
    return count;
  }

  it("writes no more checkpoints for a one-step run than an agent without afterAgent hooks", async () => {
    const bare = new MemorySaver();
    await createAgent({ model: fakeModel().respond(new AIMessage("ok")), services, checkpointer: bare }).invoke(human("hi"), { threadId: "t" });
    const hooked = new MemorySaver();
    const seen: string[] = [];
    const state = await createAgent({
      model: fakeModel().respond(new AIMessage("ok")),
      services,
      checkpointer: hooked,
      middlewares: [{ name: "observer", afterAgent: (s) => void seen.push(String(s.messages.at(-1)?.content)) }],
    }).invoke(human("hi"), { threadId: "t" });
    expect(seen).toEqual(["ok"]);
    expect(state.messages.map((m) => m.content)).toEqual(["hi", "ok"]);
    expect(await checkpointsOf(hooked, "t")).toBe(await checkpointsOf(bare, "t"));
  });

  it("streams afterAgent's writes under after_agent, the model's update holding only its step", async () => {
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("answer")),
      services,
      middlewares: [
        { name: "ctx", beforeAgent: () => ({ messages: [new HumanMessage({ content: "context", id: "ctx-1" })] }) },
        { name: "titler", afterAgent: () => ({ title: "done" }) },
      ],
    });
    const updates: Array<Record<string, { messages?: BaseMessage[]; title?: string }>> = [];
    for await (const chunk of agent.stream(human("hi"), { streamMode: "updates" })) updates.push(chunk as (typeof updates)[number]);
    const content = (update: { messages?: BaseMessage[] } | undefined) => update?.messages?.map((m) => m.content);
    expect(updates.map((u) => Object.keys(u)[0])).toEqual(["before_agent", "model", "after_agent"]);
    expect(content(updates[0]!["before_agent"])).toEqual(["context"]);
    expect(content(updates[1]!["model"])).toEqual(["answer"]);
    expect(updates[2]!["after_agent"]).toEqual({ title: "done" });
  });

  it("keeps the model's answer in the checkpoint when an afterAgent hook throws, as its own node did", async () => {
    const checkpointer = new MemorySaver();
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("kept")),
      services,
      checkpointer,
      middlewares: [{ name: "broken", afterAgent: () => { throw new Error("after failed"); } }],
    });
    await expect(agent.invoke(human("hi"), { threadId: "t-after" })).rejects.toThrow("after failed");
    const saved = await agent.graph.getState({ configurable: { thread_id: "t-after" } });
    expect(saved.values.messages.at(-1)?.content).toBe("kept");
    expect(saved.next).toEqual(["after_agent"]);
  });

  it("resumes an interrupt raised in an afterAgent hook at that hook, without calling the model again", async () => {
    const answers: unknown[] = [];
    const model = fakeModel().respond(new AIMessage("answered once"));
    const agent = createAgent({
      model,
      services,
      checkpointer: new MemorySaver(),
      middlewares: [{ name: "asker", afterAgent: () => void answers.push(interrupt({ question: "keep it?" })) }],
    });
    let record: RunRecord | undefined;
    for await (const _ of agent.stream(human("hi"), { threadId: "t-ask" }, (r) => (record = r))) void _;
    expect(record?.outcome).toBe("interrupted");
    const state = await agent.invoke(new Command({ resume: "yes" }), { threadId: "t-ask" });
    expect(answers).toEqual(["yes"]);
    expect(state.messages.at(-1)?.content).toBe("answered once");
    expect(model.callCount).toBe(1);
  });
});

import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, HookResult, NodeHook } from "../../src/engine/types.ts";
import { THREAD_DATA_NAME, createThreadDataMiddleware } from "../../src/middlewares/thread-data.ts";
import { emptyThreadState, type ThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

function stateWith(messages: BaseMessage[]): ThreadState {
  return { ...emptyThreadState(), messages };
}

function runBeforeAgent(middleware: AgentMiddleware, state: ThreadState, runtime: AgentRuntime): HookResult {
  const hook = middleware.beforeAgent;
  const fn = (typeof hook === "function" ? hook : hook?.hook) as NodeHook;
  return fn(state, runtime) as HookResult;
}

type Update = Exclude<HookResult, void | undefined>;

function update(result: HookResult): Update {
  expect(result).toBeTruthy();
  return result as Update;
}

describe("ThreadData", () => {
  const middleware = createThreadDataMiddleware();

  it("has a stable name and no configuration to declare", () => {
    expect(middleware.name).toBe(THREAD_DATA_NAME);
    expect(middleware.name).toBe("ThreadData");
    expect(middleware.releasePolicyParameters).toBeUndefined();
  });

  it("scenario M9: with no thread_id in context or on the run, the agent fails with 'Thread ID is required'", () => {
    const call = () => runBeforeAgent(middleware, stateWith([]), makeRuntime());
    expect(call).toThrow("Thread ID is required");
    expect(call).toThrow(expect.objectContaining({ code: "thread_id_required", message: "Thread ID is required" }));
  });

  it("scenario M9: the real engine run fails too when no thread is given", async () => {
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("never")),
      middlewares: [middleware],
      services: { clock: new ManualClock(0) },
    });
    await expect(agent.invoke({ messages: [new HumanMessage("hi")] })).rejects.toThrow("Thread ID is required");
  });

  it("scenario M10: thread t1 and user u1 get the virtual paths, and the last user message keeps its id but gains name, run_id and an ISO timestamp", () => {
    const clock = new ManualClock(Date.UTC(2026, 4, 8, 9, 30, 15, 250));
    const last = new HumanMessage({ content: "hello", id: "m1", additional_kwargs: { files: [] } });
    const result = update(
      runBeforeAgent(
        middleware,
        stateWith([new HumanMessage({ content: "older", id: "m0" }), new AIMessage({ content: "a", id: "a0" }), last]),
        makeRuntime({ context: { thread_id: "t1", user_id: "u1" }, runId: "run-42", services: { clock } }),
      ),
    );
    expect(result.thread_data).toEqual({
      workspace_path: "/mnt/user-data/workspace",
      uploads_path: "/mnt/user-data/uploads",
      outputs_path: "/mnt/user-data/outputs",
    });
    const messages = result.messages as BaseMessage[];
    expect(messages).toHaveLength(1);
    const stamped = messages[0]!;
    expect(stamped.type).toBe("human");
    expect(stamped.id).toBe("m1");
    expect(stamped.name).toBe("user-input");
    expect(stamped.content).toBe("hello");
    expect(stamped.additional_kwargs).toEqual({ files: [], run_id: "run-42", timestamp: "2026-05-08T09:30:15.250Z" });
    expect(last.additional_kwargs).toEqual({ files: [] });
    expect(last.name).toBeUndefined();
  });

  it("scenario M10: through the real engine the stamped message replaces the original in place", async () => {
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("hi back")),
      middlewares: [middleware],
      services: { clock: new ManualClock(Date.UTC(2026, 4, 8)) },
    });
    const state = await agent.invoke(
      { messages: [new HumanMessage({ content: "hello", id: "m1" })] },
      { threadId: "t1", runId: "run-7", context: { user_id: "u1" } },
    );
    expect(state.thread_data?.workspace_path).toBe("/mnt/user-data/workspace");
    expect(state.messages.map((m) => m.type)).toEqual(["human", "ai"]);
    expect(state.messages[0]).toMatchObject({
      id: "m1",
      name: "user-input",
      additional_kwargs: { run_id: "run-7", timestamp: "2026-05-08T00:00:00.000Z" },
    });
  });

  it("keeps an existing message name", () => {
    const result = update(
      runBeforeAgent(middleware, stateWith([new HumanMessage({ content: "x", id: "m1", name: "alice" })]), makeRuntime({ threadId: "t1" })),
    );
    expect((result.messages as BaseMessage[])[0]!.name).toBe("alice");
  });

  it("takes the thread from context or the run, and records the same virtual paths either way", () => {
    const fromContext = update(runBeforeAgent(middleware, stateWith([]), makeRuntime({ context: { thread_id: "from-context" }, threadId: "from-run" })));
    expect(fromContext.thread_data?.workspace_path).toBe("/mnt/user-data/workspace");
    const fromRun = update(runBeforeAgent(middleware, stateWith([]), makeRuntime({ threadId: "thread-123" })));
    expect(fromRun.thread_data?.uploads_path).toBe("/mnt/user-data/uploads");
    expect(() => runBeforeAgent(middleware, stateWith([]), makeRuntime({ context: { thread_id: "../x" } }))).toThrow(/Invalid thread_id/);
  });

  it("never records the storage base or any host folder in state", () => {
    const result = update(
      runBeforeAgent(middleware, stateWith([]), makeRuntime({ threadId: "t1", context: { user_id: "u1" }, services: { baseDir: "/home/operator/.deer-flow" } })),
    );
    expect(result.thread_data).toEqual({ workspace_path: "/mnt/user-data/workspace", uploads_path: "/mnt/user-data/uploads", outputs_path: "/mnt/user-data/outputs" });
    expect(JSON.stringify(result.thread_data)).not.toContain("/home/operator");
  });

  it("does not touch messages when the last one is not a user message", () => {
    const result = update(
      runBeforeAgent(middleware, stateWith([new HumanMessage({ content: "q", id: "h" }), new AIMessage({ content: "a", id: "a" })]), makeRuntime({ threadId: "t1" })),
    );
    expect(result.messages).toBeUndefined();
  });

  it("does not touch messages when there are none", () => {
    expect(update(runBeforeAgent(middleware, stateWith([]), makeRuntime({ threadId: "t1" }))).messages).toBeUndefined();
  });

  it("never writes the caller's context", () => {
    const runtime = makeRuntime({ context: { thread_id: "t1" } });
    runBeforeAgent(middleware, stateWith([new HumanMessage({ content: "x", id: "m" })]), runtime);
    expect(runtime.context).toEqual({ thread_id: "t1" });
  });

  it.each(["..", "a/b", "", "../etc", "t 1", "a".repeat(129)])("rejects thread id %j as a path segment", (threadId) => {
    expect(() => runBeforeAgent(middleware, stateWith([]), makeRuntime({ context: { thread_id: threadId } }))).toThrow(
      expect.objectContaining({ code: "invalid_thread_id" }),
    );
  });

  it.each(["..", "u/1", "", 42])("rejects user id %j as a path segment", (userId) => {
    expect(() => runBeforeAgent(middleware, stateWith([]), makeRuntime({ threadId: "t1", context: { user_id: userId } }))).toThrow(
      expect.objectContaining({ code: "invalid_user_id" }),
    );
  });

  it("rejects unknown or mistyped config with the key's path", () => {
    expect(() => createThreadDataMiddleware({ lazy: true } as never)).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
    expect(() => createThreadDataMiddleware({ lazy_init: "yes" } as never)).toThrow(/ThreadData\.lazy_init/);
  });

  it("refuses lazy_init, upstream's key, saying why and what to do", () => {
    for (const lazy_init of [true, false]) {
      expect(() => createThreadDataMiddleware({ lazy_init } as never)).toThrow(
        expect.objectContaining({
          code: "invalid_middleware_config",
          message: expect.stringMatching(/^ThreadData\.lazy_init: Invalid key.*ThreadData takes no keys \(lazy_init is not offered: the thread's folders exist without being created\); remove it\.$/),
        }),
      );
    }
  });
});

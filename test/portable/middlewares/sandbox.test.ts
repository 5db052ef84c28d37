import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command, isCommand } from "@langchain/langgraph/web";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, NodeHook, ToolCallRequest } from "../../../src/engine/types.ts";
import {
  SANDBOX_DEFAULTS,
  SANDBOX_NAME,
  SandboxConfigSchema,
  attachSandboxUpdate,
  createSandboxMiddleware,
} from "../../../src/middlewares/sandbox.ts";
import { createToolErrorHandlingMiddleware } from "../../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import type { Sandbox, SandboxProvider, SandboxScope } from "../../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { StateConflictError } from "../../../src/state/errors.ts";
import { emptyThreadState, type ThreadState } from "../../../src/state/thread-state.ts";
import { createSandboxTools } from "../../../src/tools/sandbox-tools.ts";
import {
  DELEGATED_SANDBOX_CONTEXT_KEY,
  SANDBOX_ACQUIRED_SCOPE_KEY,
  acquireRunSandbox,
  bindDelegatedSandbox,
  sandboxScopeOf,
  type SandboxAuthorizer,
} from "../../../src/sandbox/acquire.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";

/** A provider that hands out the given ids in order and records what happened. */
function fakeProvider(ids: readonly string[] = ["sb1"]) {
  const acquired: SandboxScope[] = [];
  const released: string[] = [];
  const held = new Map<string, Sandbox>();
  let next = 0;
  const failRelease = new Set<string>();
  const provider: SandboxProvider = {
    kind: "virtual",
    async acquire(scope) {
      acquired.push(scope);
      const id = ids[Math.min(next++, ids.length - 1)]!;
      const sandbox = { id, scope } as unknown as Sandbox;
      held.set(id, sandbox);
      return sandbox;
    },
    get: (id) => held.get(id),
    async release(id) {
      released.push(id);
      held.delete(id);
      if (failRelease.has(id)) throw new Error(`release of ${id} failed`);
    },
    async close() {},
  };
  return { provider, acquired, released, failRelease };
}

function hookOf(middleware: AgentMiddleware, name: "beforeAgent" | "afterAgent"): NodeHook {
  const hook = middleware[name];
  return (typeof hook === "function" ? hook : hook?.hook) as NodeHook;
}

function stateWith(partial: Partial<ThreadState> = {}): ThreadState {
  return { ...emptyThreadState(), ...partial };
}

function toolRequest(runtime: AgentRuntime, state: ThreadState = stateWith()): ToolCallRequest {
  return { toolCall: { name: "bash", args: {}, id: "call-1", type: "tool_call" } as ToolCall, tool: undefined, state, runtime };
}

const okMessage = () => new ToolMessage({ content: "ok", tool_call_id: "call-1", name: "bash" });

describe("Sandbox", () => {
  it("has a stable name, a strict config schema with lazy_init (default true) and declares its policy", () => {
    const middleware = createSandboxMiddleware();
    expect(middleware.name).toBe(SANDBOX_NAME);
    expect(middleware.name).toBe("Sandbox");
    expect(SANDBOX_DEFAULTS).toEqual({ lazy_init: true });
    expect(middleware.releasePolicyParameters?.()).toEqual({ lazy_init: true, authorization_gate: false, release_on_exit: true });
    expect(createSandboxMiddleware({ lazy_init: false }, { authorizer: async () => true }).releasePolicyParameters?.()).toEqual({
      lazy_init: false,
      authorization_gate: true,
      release_on_exit: true,
    });
    expect(SandboxConfigSchema.entries).toHaveProperty("lazy_init");
    expect(() => createSandboxMiddleware({ eager: true } as never)).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
    expect(() => createSandboxMiddleware({ lazy_init: "no" } as never)).toThrow(/^Sandbox\.lazy_init: /);
  });
});

describe("Sandbox beforeAgent", () => {
  it("acquires nothing by default (lazy)", async () => {
    const { provider, acquired } = fakeProvider();
    const result = await hookOf(createSandboxMiddleware(), "beforeAgent")(stateWith(), makeRuntime({ threadId: "t1", services: { sandbox: provider } }));
    expect(result).toBeUndefined();
    expect(acquired).toEqual([]);
  });

  it("with lazy_init false acquires the sandbox of the run's user and thread and records it in state", async () => {
    const { provider, acquired } = fakeProvider(["eager-1"]);
    const runtime = makeRuntime({ threadId: "t2", context: { user_id: "owner-2" }, services: { sandbox: provider } });
    const result = await hookOf(createSandboxMiddleware({ lazy_init: false }), "beforeAgent")(stateWith(), runtime);
    expect(result).toEqual({ sandbox: { sandbox_id: "eager-1" } });
    expect(acquired).toEqual([{ userId: "owner-2", threadId: "t2" }]);
    expect(runtime.scope.get(SANDBOX_ACQUIRED_SCOPE_KEY)).toBe("eager-1");
  });

  it("does not acquire when the state is already bound, the run has no thread, or there is no provider", async () => {
    const eager = hookOf(createSandboxMiddleware({ lazy_init: false }), "beforeAgent");
    const { provider, acquired } = fakeProvider();
    expect(await eager(stateWith({ sandbox: { sandbox_id: "existing" } }), makeRuntime({ threadId: "t1", services: { sandbox: provider } }))).toBeUndefined();
    expect(await eager(stateWith(), makeRuntime({ services: { sandbox: provider } }))).toBeUndefined();
    expect(await eager(stateWith(), makeRuntime({ threadId: "t1" }))).toBeUndefined();
    expect(acquired).toEqual([]);
  });

  it("a denied authorization skips eager acquisition without throwing (and a throwing authorizer denies)", async () => {
    const { provider, acquired } = fakeProvider();
    const scopes: SandboxScope[] = [];
    const deny: SandboxAuthorizer = async (_context, scope) => {
      scopes.push(scope);
      return false;
    };
    const runtime = makeRuntime({ threadId: "t1", context: { user_id: "u1" }, services: { sandbox: provider } });
    expect(await hookOf(createSandboxMiddleware({ lazy_init: false }, { authorizer: deny }), "beforeAgent")(stateWith(), runtime)).toBeUndefined();
    const broken: SandboxAuthorizer = async () => {
      throw new Error("provider down");
    };
    expect(await hookOf(createSandboxMiddleware({ lazy_init: false }, { authorizer: broken }), "beforeAgent")(stateWith(), runtime)).toBeUndefined();
    expect(acquired).toEqual([]);
    expect(scopes).toEqual([{ userId: "u1", threadId: "t1" }]);
    expect(await hookOf(createSandboxMiddleware({ lazy_init: false }, { authorizer: async () => true }), "beforeAgent")(stateWith(), runtime)).toEqual({
      sandbox: { sandbox_id: "sb1" },
    });
  });
});

describe("Sandbox wrapToolCall", () => {
  const middleware = createSandboxMiddleware();

  it("scenario M13: a tool that lazily acquires sb1 returns a Command setting sandbox.sandbox_id", async () => {
    const { provider } = fakeProvider(["sb1"]);
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: provider } });
    const result = await middleware.wrapToolCall!(toolRequest(runtime), async (request) => {
      await acquireRunSandbox(request.runtime);
      return okMessage();
    });
    expect(isCommand(result)).toBe(true);
    const update = (result as Command).update as { sandbox: unknown; messages: ToolMessage[] };
    expect(update.sandbox).toEqual({ sandbox_id: "sb1" });
    expect(update.messages).toHaveLength(1);
    expect(update.messages[0]).toMatchObject({ content: "ok", tool_call_id: "call-1" });
  });

  it("stores what the tool wrote before its result returns: another provider over the same storage (a restart) sees it", async () => {
    const storage = createMemoryKeyValue();
    const sandboxes = createVirtualSandboxProvider({ storage });
    const runtime = makeRuntime({ threadId: "t-flush", services: { sandbox: sandboxes } });
    const live = await sandboxes.acquire({ userId: "u-flush", threadId: "t-flush" });
    await middleware.wrapToolCall!(toolRequest(runtime, stateWith({ sandbox: { sandbox_id: live.id } })), async () => {
      await live.writeFile("/mnt/user-data/outputs/report.md", "# written by a tool");
      return okMessage();
    });
    // Still acquired (the run goes on), yet already in storage.
    expect(sandboxes.get(live.id)).toBe(live);
    // Another process: the first one never released its sandbox.
    const restarted = createVirtualSandboxProvider({ storage });
    const after = await restarted.acquire({ userId: "u-flush", threadId: "t-flush" });
    expect(await after.readFile("/mnt/user-data/outputs/report.md")).toBe("# written by a tool");
    await restarted.close();
  });

  it("passes the result through when the state was already bound", async () => {
    const { provider } = fakeProvider();
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: provider } });
    const original = okMessage();
    const result = await middleware.wrapToolCall!(toolRequest(runtime, stateWith({ sandbox: { sandbox_id: "existing" } })), async (request) => {
      await acquireRunSandbox(request.runtime);
      return original;
    });
    expect(result).toBe(original);
  });

  it("passes the result through when nothing was acquired, or the acquired sandbox is gone", async () => {
    const { provider } = fakeProvider();
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: provider } });
    const original = okMessage();
    expect(await middleware.wrapToolCall!(toolRequest(runtime), async () => original)).toBe(original);
    runtime.scope.set(SANDBOX_ACQUIRED_SCOPE_KEY, "released-already");
    expect(await middleware.wrapToolCall!(toolRequest(runtime), async () => original)).toBe(original);
  });

  it("merges into an object-form Command update, keeping its other keys and goto/graph/resume", async () => {
    const { provider } = fakeProvider(["sbx-merge"]);
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: provider } });
    const message = okMessage();
    const viewed = { "a.png": { mime_type: "image/png", size: 1, actual_path: "/tmp/a.png" } };
    const result = (await middleware.wrapToolCall!(toolRequest(runtime), async (request) => {
      await acquireRunSandbox(request.runtime);
      return new Command({ update: { messages: [message], viewed_images: viewed }, goto: "next-node", graph: "parent", resume: "token" });
    })) as Command;
    expect(result.update).toEqual({ messages: [message], viewed_images: viewed, sandbox: { sandbox_id: "sbx-merge" } });
    expect(result.goto).toEqual(["next-node"]);
    expect(result.graph).toBe("parent");
    expect(result.resume).toBe("token");
  });

  it("leaves a tuple-form Command update untouched", async () => {
    const { provider } = fakeProvider();
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: provider } });
    const command = new Command({ update: [["messages", [okMessage()]]] });
    const result = await middleware.wrapToolCall!(toolRequest(runtime), async (request) => {
      await acquireRunSandbox(request.runtime);
      return command;
    });
    expect(result).toBe(command);
    expect(attachSandboxUpdate(command, "x")).toBe(command);
  });
});

describe("Sandbox afterAgent", () => {
  const afterAgent = hookOf(createSandboxMiddleware(), "afterAgent");

  it("releases the sandbox bound in state", async () => {
    const { provider, released } = fakeProvider();
    await afterAgent(stateWith({ sandbox: { sandbox_id: "own-sandbox" } }), makeRuntime({ threadId: "t1", services: { sandbox: provider } }));
    expect(released).toEqual(["own-sandbox"]);
  });

  it("releases a sandbox this run acquired even when state never recorded it, and both when they differ", async () => {
    const { provider, released } = fakeProvider();
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: provider } });
    runtime.scope.set(SANDBOX_ACQUIRED_SCOPE_KEY, "scope-sandbox");
    await afterAgent(stateWith(), runtime);
    expect(released).toEqual(["scope-sandbox"]);
    released.length = 0;
    await afterAgent(stateWith({ sandbox: { sandbox_id: "state-sandbox" } }), runtime);
    expect(released).toEqual(["state-sandbox", "scope-sandbox"]);
    released.length = 0;
    runtime.scope.set(SANDBOX_ACQUIRED_SCOPE_KEY, "same");
    await afterAgent(stateWith({ sandbox: { sandbox_id: "same" } }), runtime);
    expect(released).toEqual(["same"]);
  });

  it("a chain built with releaseOnExit false never releases", async () => {
    const { provider, released } = fakeProvider();
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: provider } });
    runtime.scope.set(SANDBOX_ACQUIRED_SCOPE_KEY, "scope-sandbox");
    const nonOwner = createSandboxMiddleware({}, { releaseOnExit: false });
    await hookOf(nonOwner, "afterAgent")(stateWith({ sandbox: { sandbox_id: "parent" } }), runtime);
    expect(released).toEqual([]);
    expect(nonOwner.releasePolicyParameters?.()).toMatchObject({ release_on_exit: false });
  });

  // Spec (middleware-chain.md #6): "delegated subagents and the prompt-only bootstrap agent are non-owners".
  it("a delegated subagent (non-owner) never releases, works in the lead thread's sandbox, and a forged delegation is ignored", async () => {
    const { provider, released, acquired } = fakeProvider();
    const leadScope = { userId: "u1", threadId: "t-lead" };
    const runtime = makeRuntime({ threadId: "t-sub", context: { user_id: "u1", ...bindDelegatedSandbox(leadScope) }, services: { sandbox: provider } });
    await acquireRunSandbox(runtime);
    expect(acquired).toEqual([leadScope]);
    await afterAgent(stateWith({ sandbox: { sandbox_id: "sb1" } }), runtime);
    expect(released).toEqual([]);
    const forged = makeRuntime({ threadId: "t-sub", context: { [DELEGATED_SANDBOX_CONTEXT_KEY]: { scope: leadScope } }, services: { sandbox: provider } });
    expect(sandboxScopeOf(forged)).toEqual({ userId: "default", threadId: "t-sub" });
    await afterAgent(stateWith({ sandbox: { sandbox_id: "sb1" } }), forged);
    expect(released).toEqual(["sb1"]);
  });

  it("does nothing without a sandbox, and attempts every release before raising the first failure", async () => {
    const { provider, released, failRelease } = fakeProvider();
    expect(await afterAgent(stateWith(), makeRuntime({ threadId: "t1", services: { sandbox: provider } }))).toBeUndefined();
    expect(released).toEqual([]);
    failRelease.add("a");
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: provider } });
    runtime.scope.set(SANDBOX_ACQUIRED_SCOPE_KEY, "b");
    await expect(afterAgent(stateWith({ sandbox: { sandbox_id: "a" } }), runtime)).rejects.toThrow("release of a failed");
    expect(released).toEqual(["a", "b"]);
  });
});

describe("Sandbox through the real engine", () => {
  const providers: SandboxProvider[] = [];
  afterEach(async () => {
    await Promise.all(providers.splice(0).map((p) => p.close()));
  });

  /** A tool that acquires the sandbox but, unlike the sandbox tools, never reports the id itself. */
  const probe: AgentTool = {
    name: "probe",
    description: "touches the sandbox",
    schema: { type: "object", properties: {} },
    async invoke(_args, context) {
      const sandbox = await acquireRunSandbox(context.runtime);
      return `touched ${sandbox.id}`;
    },
  };

  it("scenario M13: the lazily acquired sb1 lands in state through the step update, and is released at the end", async () => {
    const { provider, released } = fakeProvider(["sb1"]);
    const model = fakeModel()
      .respondWithTools([{ name: "probe", args: {}, id: "c1" }])
      .respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [probe], middlewares: [createSandboxMiddleware()], services: { clock: systemClock, sandbox: provider } });
    const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t1" });
    expect(state.sandbox).toEqual({ sandbox_id: "sb1" });
    expect(state.messages.find((m) => ToolMessage.isInstance(m))?.content).toBe("touched sb1");
    expect(released).toEqual(["sb1"]);
  });

  it("scenario M13: a conflicting sandbox id raises, and the thread's sandbox is still released", async () => {
    const { provider, released } = fakeProvider(["sb1"]);
    const rebinder: AgentTool = {
      name: "rebind",
      description: "claims another sandbox",
      schema: { type: "object", properties: {} },
      async invoke(_args, context) {
        const message = new ToolMessage({ content: "switched", tool_call_id: context.toolCall.id ?? "" });
        return new Command({ update: { sandbox: { sandbox_id: "sb2" }, messages: [message] } });
      },
    };
    const model = fakeModel()
      .respondWithTools([{ name: "rebind", args: {}, id: "c1" }])
      .respond(new AIMessage("never"));
    const agent = createAgent({ model, tools: [rebinder], middlewares: [createSandboxMiddleware()], services: { clock: systemClock, sandbox: provider } });
    const failure = agent.invoke({ messages: [new HumanMessage("go")], sandbox: { sandbox_id: "sb1" } }, { threadId: "t1" });
    await expect(failure).rejects.toBeInstanceOf(StateConflictError);
    await expect(failure).rejects.toMatchObject({ code: "sandbox_conflict", existingId: "sb1", incomingId: "sb2" });
    expect(released).toEqual(["sb1"]);
  });

  it("eager acquisition binds the thread before the model runs; release persists the files for the next run", async () => {
    const sandboxes = createVirtualSandboxProvider();
    providers.push(sandboxes);
    const model = fakeModel()
      .respondWithTools([{ name: "write_file", args: { path: "/mnt/user-data/outputs/r.md", content: "# R" }, id: "c1" }])
      .respond(new AIMessage("written"));
    const agent = createAgent({
      model,
      tools: createSandboxTools(),
      middlewares: [createSandboxMiddleware({ lazy_init: false }), createToolErrorHandlingMiddleware()],
      services: { clock: systemClock, sandbox: sandboxes },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("write")] }, { threadId: "t9", context: { user_id: "u9" } });
    const id = state.sandbox?.sandbox_id;
    expect(id).toBeTruthy();
    expect(sandboxes.get(id!)).toBeUndefined();
    const again = await sandboxes.acquire({ userId: "u9", threadId: "t9" });
    expect(again.id).toBe(id);
    expect(await again.readFile("/mnt/user-data/outputs/r.md")).toBe("# R");
  });

  it("an eager run whose authorization is denied still runs; the sandbox tools answer with the permission error", async () => {
    const { provider, acquired } = fakeProvider();
    const deny: SandboxAuthorizer = async () => false;
    const model = fakeModel()
      .respondWithTools([{ name: "ls", args: { path: "/mnt/user-data/workspace" }, id: "c1" }])
      .respond(new AIMessage("no sandbox for me"));
    const agent = createAgent({
      model,
      tools: createSandboxTools({ authorizer: deny }),
      middlewares: [createSandboxMiddleware({ lazy_init: false }, { authorizer: deny })],
      services: { clock: systemClock, sandbox: provider },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("list")] }, { threadId: "t1" });
    expect(acquired).toEqual([]);
    expect(state.sandbox).toBeNull();
    expect(String(state.messages.find((m) => ToolMessage.isInstance(m))?.content)).toMatch(/^Error: Permission denied: .*sandbox:execute was denied/);
    expect(state.messages.at(-1)?.content).toBe("no sandbox for me");
  });

  it("releases on an error exit too", async () => {
    const { provider, released } = fakeProvider(["sb1"]);
    const exploding: AgentTool = {
      name: "explode",
      description: "acquires, then fails the run",
      schema: { type: "object", properties: {} },
      async invoke(_args, context) {
        await acquireRunSandbox(context.runtime);
        throw new Error("kaboom");
      },
    };
    const model = fakeModel().respondWithTools([{ name: "explode", args: {}, id: "c1" }]);
    const agent = createAgent({ model, tools: [exploding], middlewares: [createSandboxMiddleware()], services: { clock: systemClock, sandbox: provider } });
    await expect(agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t1" })).rejects.toThrow("kaboom");
    expect(released).toEqual(["sb1"]);
  });
});

import { describe, expect, it } from "vitest";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { Command, interrupt } from "@langchain/langgraph/web";
import { assembleLeadAgent } from "../../src/agents/lead-agent.ts";
import { validateLeadConfig } from "../../src/agents/app-config.ts";
import { systemClock } from "../../src/core/clock.ts";
import { mapEnv } from "../../src/core/env.ts";
import { createAgent } from "../../src/engine/index.ts";
import { KeyValueCheckpointSaver } from "../../src/runtime/kv-checkpointer.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { fakeModel } from "@langchain/core/testing";
import { AIMessage } from "@langchain/core/messages";

// The same lead chain, sandbox and checkpointer on whichever runtime runs this file (Node, Deno, Bun).
describe("lead agent on this runtime", () => {
  it("plays the demo session through the whole chain and persists the thread", async () => {
    const storage = createMemoryKeyValue();
    const sandbox = createVirtualSandboxProvider({ storage });
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    const assembly = await assembleLeadAgent({
      config: validateLeadConfig({}, "test"),
      services: { clock: systemClock, storage, sandbox },
      env: mapEnv({}),
      checkpointer,
    });
    const state = await assembly.agent.invoke(
      { messages: [new HumanMessage("Write a note about portable runtimes and count its words.")] },
      { threadId: "portable-thread" },
    );
    // DynamicContext's hidden date reminder leads; then the conversation itself.
    const visible = state.messages.filter((m) => m.getType() !== "system");
    expect(state.messages[0]!.getType()).toBe("system");
    expect(visible.map((m) => m.getType())).toEqual(["human", "ai", "tool", "ai", "tool", "ai"]);
    const results = state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
    expect(results.map((m) => m.additional_kwargs.deerflow_tool_meta)).toEqual([
      expect.objectContaining({ status: "success" }),
      expect.objectContaining({ status: "success" }),
    ]);
    const box = await sandbox.acquire({ userId: "default", threadId: "portable-thread" });
    expect(await box.readFile("/mnt/user-data/workspace/notes.md")).toContain("portable runtimes");
    const saved = await assembly.graph.getState({ configurable: { thread_id: "portable-thread" } });
    expect(saved.values.messages).toHaveLength(state.messages.length);
    expect(assembly.fingerprint).toMatch(/^[0-9a-f]{64}$/);
  });

  it("pauses on an interrupt and resumes with Command({ resume })", async () => {
    const ask = {
      name: "ask",
      description: "ask the user",
      schema: { type: "object", properties: {} },
      invoke: async () => `user said ${String(interrupt("continue?"))}`,
    };
    const agent = createAgent({
      model: fakeModel().respondWithTools([{ name: "ask", args: {}, id: "c1" }]).respond(new AIMessage("thanks")),
      tools: [ask],
      services: { clock: systemClock },
      checkpointer: new KeyValueCheckpointSaver({ storage: createMemoryKeyValue() }),
    });
    await agent.invoke({ messages: [new HumanMessage("hi")] }, { threadId: "p-int" });
    const paused = await agent.graph.getState({ configurable: { thread_id: "p-int" } });
    expect(paused.next).toEqual(["tools"]);
    const state = await agent.invoke(new Command({ resume: "yes" }), { threadId: "p-int" });
    expect(state.messages.find((m) => m.getType() === "tool")?.content).toBe("user said yes");
  });
});

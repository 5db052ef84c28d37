import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { mapEnv } from "../../../src/core/env.ts";
import type { AgentFactory, AgentRequest } from "../../../src/gateway/types.ts";
import { createLeadAgentFactory } from "../../../src/runtime/agent-factory.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { call, config, testGateway } from "./threads-fixtures.ts";

/** The gateway's default agent factory, recording what each run asked for and which tools it got. */
function recordingFactory() {
  const storage = createMemoryKeyValue();
  const inner = createLeadAgentFactory({
    config,
    env: mapEnv({}),
    checkpointer: new KeyValueCheckpointSaver({ storage }),
    services: { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) },
  });
  const seen: Array<{ request: AgentRequest; tools: string[] }> = [];
  const factory: AgentFactory = async (request) => {
    const agent = await inner(request);
    seen.push({ request, tools: agent.tools.map((tool) => tool.name) });
    return agent;
  };
  return { factory, seen, storage, checkpointer: new KeyValueCheckpointSaver({ storage }) };
}

describe("delegation through the gateway", () => {
  it("context.subagent_enabled is the switch: the run's lead agent gets the task tool only when it is on", async () => {
    const recording = recordingFactory();
    const gateway = await testGateway({ agentFactory: recording.factory, storage: recording.storage, checkpointer: recording.checkpointer });
    try {
      const { body: thread } = await call(gateway, "POST", "/api/threads", {});
      const threadId = (thread as { thread_id: string }).thread_id;
      const run = (context: Record<string, unknown>) =>
        call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, {
          assistant_id: "lead_agent",
          input: { messages: [{ type: "human", content: "hello" }] },
          context,
        });
      expect((await run({})).status).toBe(200);
      expect((await run({ subagent_enabled: true })).status).toBe(200);
      expect(recording.seen.map((entry) => entry.request.subagentsEnabled)).toEqual([false, true]);
      expect(recording.seen[0]!.tools).not.toContain("task");
      expect(recording.seen[1]!.tools).toContain("task");
    } finally {
      await gateway.shutdown();
    }
  });
});

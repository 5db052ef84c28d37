// Delegation wired into the assembled lead agent: the task tool builds real subagents on the subagent chain.
import { describe, expect, it } from "vitest";
import type { ToolMessage } from "@langchain/core/messages";
import { validateLeadConfig } from "../../src/agents/app-config.ts";
import { assembleLeadAgent } from "../../src/agents/lead-agent.ts";
import { systemClock } from "../../src/core/clock.ts";
import { mapEnv } from "../../src/core/env.ts";
import { emptyThreadState } from "../../src/state/thread-state.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { makeRuntime } from "../middlewares/runtime.ts";
import { HostExtensionRegistry } from "../../src/extensions/registry.ts";
import { EXTENSION_SNAPSHOT_CONTEXT_KEY, bindExtensionSnapshot } from "../../src/extensions/run-context.ts";
import type { AgentAssemblyDescriptor, TaskInfo } from "../../src/extension-api/index.ts";
import { DEMO_NOTES_PATH } from "../../src/models/demo.ts";
import { acquiredSandboxId } from "../../src/sandbox/acquire.ts";
import type { NodeHook } from "../../src/engine/types.ts";

function services() {
  const storage = createMemoryKeyValue();
  return { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) };
}

describe("lead agent with delegation on", () => {
  it("binds task, caps it with SubagentLimit, and declares it in the descriptor", async () => {
    const assembly = await assembleLeadAgent({ config: validateLeadConfig({}, "t"), services: services(), env: mapEnv({}), subagentsEnabled: true });
    const names = assembly.agent.middlewares.map((m) => m.name);
    expect(names[names.indexOf("SystemMessageCoalescing") + 1]).toBe("SubagentLimit");
    expect(assembly.agent.tools.map((t) => t.name)).toContain("task");
    expect(assembly.descriptor.effective_policies.subagents).toBe(true);
    const off = await assembleLeadAgent({ config: validateLeadConfig({}, "t"), services: services(), env: mapEnv({}) });
    expect(off.agent.tools.map((t) => t.name)).not.toContain("task");
    expect(off.agent.middlewares.map((m) => m.name)).not.toContain("SubagentLimit");
  });

  // Spec (middleware-chain.md #27): "the per-response concurrency limit (max_concurrent_subagents, resolved
  // against startup subagent_runtime.max_running and the 1-64 safety range before construction)".
  it('"max_concurrent_subagents, resolved against startup subagent_runtime.max_running": the startup setting caps SubagentLimit', async () => {
    const limitOf = async (config: Record<string, unknown>) => {
      const assembly = await assembleLeadAgent({ config: validateLeadConfig(config, "t"), services: services(), env: mapEnv({}), subagentsEnabled: true });
      return assembly.agent.middlewares.find((m) => m.name === "SubagentLimit")!.releasePolicyParameters!();
    };
    expect(await limitOf({ subagents: { max_concurrent: 5 } })).toMatchObject({ max_concurrent: 5 });
    expect(await limitOf({ subagents: { max_concurrent: 5 }, subagent_runtime: { max_running: 2 } })).toMatchObject({ max_concurrent: 2 });
    expect(await limitOf({ subagent_runtime: { max_running: 8 } })).toMatchObject({ max_concurrent: 3 });
    expect(() => validateLeadConfig({ subagent_runtime: { max_running: 0 } }, "t")).toThrow(/subagent_runtime\.max_running/);
    expect(() => validateLeadConfig({ subagent_runtime: { max_running: 65 } }, "t")).toThrow(/subagent_runtime\.max_running/);
    expect(() => validateLeadConfig({ subagent_runtime: { max_running: 1.5 } }, "t")).toThrow(/subagent_runtime\.max_running/);
  });

  it("runs a delegated general-purpose subagent end to end on the subagent chain (demo model)", async () => {
    const svc = services();
    const assembly = await assembleLeadAgent({ config: validateLeadConfig({}, "t"), services: svc, env: mapEnv({}), subagentsEnabled: true });
    const task = assembly.agent.tools.find((t) => t.name === "task")!;
    const events: unknown[] = [];
    const runtime = { ...makeRuntime({ threadId: "t-lead", services: svc }), writer: (e: unknown) => void events.push(e) };
    const toolCall = { id: "call-task-1", name: "task", args: {}, type: "tool_call" as const };
    const result = (await task.invoke(
      { description: "write a note", prompt: "Write a note about delegation and count its words.", subagent_type: "general-purpose" },
      { toolCall, state: emptyThreadState(), runtime },
    )) as ToolMessage;
    expect(result.additional_kwargs.subagent_status).toBe("completed");
    expect(String(result.content)).toContain("words");
    expect(events.some((e) => (e as { type?: string }).type === "subagent_progress")).toBe(true);
  });

  // Spec (middleware-chain.md #6): "delegated subagents and the prompt-only bootstrap agent are non-owners, so their
  // narrower discovery allowlists never rebuild the shared thread view or force eager sandbox acquisition".
  it('"delegated subagents ... are non-owners": a subagent\'s file is in the lead thread\'s sandbox after the task, and after a restart', async () => {
    const storage = createMemoryKeyValue();
    const svc = { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) };
    const config = validateLeadConfig({ sandbox: { lazy_init: false } }, "t");
    const assembly = await assembleLeadAgent({ config, services: svc, env: mapEnv({}), subagentsEnabled: true });
    const task = assembly.agent.tools.find((t) => t.name === "task")!;
    const leadRuntime = makeRuntime({ threadId: "t-lead", runId: "run-lead", services: svc });
    const toolCall = { id: "call-task-1", name: "task", args: {}, type: "tool_call" as const };
    const result = (await task.invoke(
      { description: "write a note", prompt: "Write a note about delegation and count its words.", subagent_type: "general-purpose" },
      { toolCall, state: emptyThreadState(), runtime: leadRuntime },
    )) as ToolMessage;
    expect(result.additional_kwargs.subagent_status).toBe("completed");
    // The lead reads it once the task returns: the subagent wrote into the lead thread's sandbox.
    const lead = await svc.sandbox.acquire({ userId: "default", threadId: "t-lead" });
    expect(await lead.exists(DEMO_NOTES_PATH)).toBe(true);
    // The sandbox is the lead run's: its Sandbox middleware releases it when the lead run ends, which saves the files.
    expect(acquiredSandboxId(leadRuntime)).toBe(lead.id);
    const leadSandbox = assembly.agent.middlewares.find((m) => m.name === "Sandbox")!;
    await (leadSandbox.afterAgent as NodeHook)(emptyThreadState(), leadRuntime);
    expect(svc.sandbox.get(lead.id)).toBeUndefined();
    // A restart: a new provider over the same storage.
    const restarted = createVirtualSandboxProvider({ storage });
    const again = await restarted.acquire({ userId: "default", threadId: "t-lead" });
    expect(await again.readFile(DEMO_NOTES_PATH)).toContain("delegation");
  });

  // Spec (extension-system.md): "SubagentExecutor binds it at construction ... Absent the key — embedded DeerFlowClient,
  // standalone LangGraph Server — the executor keeps its get_loaded_extensions() fallback."
  it('scenario G26, "the executor keeps its get_loaded_extensions() fallback": a subagent is a task of kind subagent whose parent is the run, with the run\'s snapshot, else the assembly\'s', async () => {
    const seen: Array<[string, string, TaskInfo, string?]> = [];
    const lifecycle = (name: string) => {
      const registry = new HostExtensionRegistry();
      registry.attributedTo(`${name}:install`, (r) =>
        r.taskLifecycle({
          onTaskStart: (_a, _t, info) => void seen.push([name, "start", info]),
          onTaskStop: (_a, _t, info, outcome) => void seen.push([name, "stop", info, outcome]),
        }),
      );
      return registry.build();
    };
    const assembled = lifecycle("assembled");
    const svc = services();
    const assembly = await assembleLeadAgent({ config: validateLeadConfig({}, "t"), services: svc, env: mapEnv({}), subagentsEnabled: true, extensions: assembled });
    const task = assembly.agent.tools.find((t) => t.name === "task")!;
    const args = { description: "d", prompt: "Say hello.", subagent_type: "general-purpose" };
    const toolCall = { id: "call-7", name: "task", args: {}, type: "tool_call" as const };
    const phases = () => seen.splice(0).map(([name, phase, info, outcome]) => [name, phase, info.kind, info.parentTaskId, outcome]);

    // No snapshot on the run (an embedded caller): the extensions the lead was assembled with.
    const bare = makeRuntime({ threadId: "t-parent", runId: "run-parent", services: svc });
    await task.invoke(args, { toolCall, state: emptyThreadState(), runtime: bare });
    expect(phases()).toEqual([
      ["assembled", "start", "subagent", "run-parent", undefined],
      ["assembled", "stop", "subagent", "run-parent", "completed"],
    ]);

    // A forged key is no snapshot: still the fallback.
    const forged = makeRuntime({ threadId: "t-parent", runId: "run-parent", services: svc, context: { [EXTENSION_SNAPSHOT_CONTEXT_KEY]: { extensions: lifecycle("forged") } } });
    await task.invoke(args, { toolCall, state: emptyThreadState(), runtime: forged });
    expect(phases().map(([name]) => name)).toEqual(["assembled", "assembled"]);

    // The run's own snapshot wins over the assembly's.
    const bound = makeRuntime({ threadId: "t-parent", runId: "run-parent", services: svc, context: bindExtensionSnapshot(lifecycle("run")) });
    await task.invoke(args, { toolCall, state: emptyThreadState(), runtime: bound });
    expect(phases()).toEqual([
      ["run", "start", "subagent", "run-parent", undefined],
      ["run", "stop", "subagent", "run-parent", "completed"],
    ]);
  });

  // Spec (extension-system.md): "SubagentExecutor publishes the same descriptor kind for each delegated agent on
  // self.assembly_descriptor" and "Registered AgentAssemblyObservers are notified synchronously at the end of construction".
  it('"publishes the same descriptor kind for each delegated agent": assembly observers see each subagent\'s descriptor, as the lead\'s', async () => {
    const described: AgentAssemblyDescriptor[] = [];
    const registry = new HostExtensionRegistry();
    registry.attributedTo("acme:install", (r) => r.agentAssemblyObserver({ onAgentAssembled: (d) => void described.push(d) }));
    const extensions = registry.build();
    const svc = services();
    const assembly = await assembleLeadAgent({ config: validateLeadConfig({}, "t"), services: svc, env: mapEnv({}), subagentsEnabled: true, extensions });
    expect(described.map((d) => d.agent_name)).toEqual(["lead-agent"]);
    const task = assembly.agent.tools.find((t) => t.name === "task")!;
    const toolCall = { id: "call-8", name: "task", args: {}, type: "tool_call" as const };
    const runtime = makeRuntime({ threadId: "t-parent", runId: "run-parent", services: svc, context: bindExtensionSnapshot(extensions) });
    await task.invoke({ description: "d", prompt: "Say hello.", subagent_type: "bash" }, { toolCall, state: emptyThreadState(), runtime });
    expect(described.map((d) => d.agent_name)).toEqual(["lead-agent", "subagent:bash"]);
    const sub = described[1]!;
    expect(sub.namespace).toBe(assembly.descriptor.namespace);
    expect(sub.middlewares.map((m) => m.name)).toContain("SubagentDateContext");
    expect(sub.middlewares.find((m) => m.name === "Sandbox")!.policy_parameters).toMatchObject({ lazy_init: true });
    expect(sub.tools.map((t) => t.name)).not.toContain("task");
    expect(sub.effective_policies).toMatchObject({ subagent: true, prompt_template_id: "subagent:bash" });
  });
});

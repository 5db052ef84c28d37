import { describe, expect, it } from "vitest";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph/web";
import { assembleLeadAgent } from "../../src/agents/lead-agent.ts";
import { validateLeadConfig } from "../../src/agents/app-config.ts";
import { systemClock } from "../../src/core/clock.ts";
import { mapEnv } from "../../src/core/env.ts";
import { assemblyFingerprint } from "../../src/extension-api/index.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";

function services() {
  const storage = createMemoryKeyValue();
  return { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) };
}

const config = validateLeadConfig({}, "test");

const DEFAULT_CHAIN = [
  "InputSanitization",
  "ToolOutputBudget",
  "ToolResultSanitization",
  "ThreadData",
  "Uploads",
  "Sandbox",
  "DanglingToolCall",
  "LLMErrorHandling",
  "ToolReceipt",
  "SandboxAudit",
  "ReadBeforeWrite",
  "ToolErrorHandling",
  "DynamicContext",
  "SkillActivation",
  "SkillToolPolicy",
  "DurableContext",
  "TokenUsage",
  "Title",
  "Memory",
  "SystemMessageCoalescing",
  "LoopDetection",
  "TerminalResponse",
  "ModelLengthFinishReason",
  "SafetyFinishReason",
  "Clarification",
];

describe("lead agent assembly", () => {
  it("scenario M58: builds the code-default chain in the spec's order", async () => {
    const assembly = await assembleLeadAgent({ config, services: services(), env: mapEnv({}) });
    // Upstream's default chain plus ToolReceipt (on by default in the spec, PR #4659 upstream),
    // registered ahead of the gates so none of their short-circuits gaps the receipt ledger.
    expect(assembly.agent.middlewares.map((m) => m.name)).toEqual(DEFAULT_CHAIN);
    expect(assembly.agent.tools.map((t) => t.name).sort()).toEqual(["ask_clarification", "bash", "glob", "grep", "ls", "present_files", "read_file", "str_replace", "web_fetch", "write_file"]);
    expect(assembly.model).toMatchObject({ name: "demo", is_demo: true });
  });

  it("returns a descriptor whose fingerprint is the canonical hash of its identity", async () => {
    const assembly = await assembleLeadAgent({ config, services: services(), env: mapEnv({}) });
    const { descriptor, fingerprint } = assembly;
    expect(fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(fingerprint).toBe(await assemblyFingerprint(descriptor));
    expect(descriptor.middlewares.map((m) => m.name)).toEqual(DEFAULT_CHAIN);
    expect(descriptor.middlewares.find((m) => m.name === "SystemMessageCoalescing")?.policy_parameters).toEqual({
      strategy: "merge_leading_system_message",
      dynamic_context_reminder_dedup: "keep_last",
    });
    expect(descriptor.tools.every((t) => /^[0-9a-f]{64}$/.test(t.schema_hash))).toBe(true);
    expect(descriptor.effective_model).toBe("demo");
    expect(descriptor.requested_model).toBeNull();
  });

  it("keeps the fingerprint when only the requested name differs, and moves it when the prompt changes", async () => {
    const a = await assembleLeadAgent({ config, services: services(), env: mapEnv({}) });
    const b = await assembleLeadAgent({ config, services: services(), env: mapEnv({}), model: "demo" });
    expect(b.descriptor.requested_model).toBe("demo");
    expect(b.fingerprint).toBe(a.fingerprint);
    const custom = validateLeadConfig({ agent: { system_prompt: "You are terse." } }, "test");
    const c = await assembleLeadAgent({ config: custom, services: services(), env: mapEnv({}) });
    expect(c.fingerprint).not.toBe(a.fingerprint);
  });

  it("runs a whole demo session: the files the model writes are really in the thread's sandbox", async () => {
    const svc = services();
    const assembly = await assembleLeadAgent({ config, services: svc, env: mapEnv({}), checkpointer: new MemorySaver() });
    const state = await assembly.agent.invoke(
      { messages: [new HumanMessage("Write a note about edge runtimes and count its words.")] },
      { threadId: "t-lead", context: { user_id: "u1" } },
    );
    const tools = state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
    expect(tools.length).toBeGreaterThanOrEqual(2);
    for (const result of tools) expect(result.additional_kwargs.deerflow_tool_meta).toMatchObject({ status: "success" });
    expect(state.thread_data?.workspace_path).toBe("/mnt/user-data/workspace");
    expect(state.sandbox?.sandbox_id).toBeTruthy();
    const sandbox = await svc.sandbox.acquire({ userId: "u1", threadId: "t-lead" });
    const written = await sandbox.readFile("/mnt/user-data/workspace/notes.md");
    expect(written).toContain("edge runtimes");
    const final = String(state.messages.at(-1)?.content);
    const words = written.trim().split(/\s+/).length;
    expect(final).toContain(String(words));
  });

  it("fails a run without a thread id with the upstream message", async () => {
    const assembly = await assembleLeadAgent({ config, services: services(), env: mapEnv({}) });
    await expect(assembly.agent.invoke({ messages: [new HumanMessage("hi")] })).rejects.toThrow("Thread ID is required");
  });

  it("reports a missing sandbox as a classified error result and lets the run continue", async () => {
    const svc = services();
    const assembly = await assembleLeadAgent({ config, services: { ...svc, sandbox: undefined }, env: mapEnv({}) });
    const state = await assembly.agent.invoke(
      { messages: [new HumanMessage("Write a note and count its words.")] },
      { threadId: "t-nosandbox" },
    );
    const failed = state.messages.find((m): m is ToolMessage => ToolMessage.isInstance(m) && m.status === "error");
    expect(failed?.content).toContain("Sandbox is not configured");
    expect(failed?.additional_kwargs.deerflow_tool_meta).toMatchObject({ status: "error", error_type: "config", recommended_next_action: "stop" });
    expect(state.messages.at(-1)?.getType()).toBe("ai");
  });
});

import { describe, expect, it } from "vitest";
import { validateLeadConfig, type LeadConfig } from "../../src/agents/app-config.ts";
import { assembleLeadAgent } from "../../src/agents/lead-agent.ts";
import { systemClock } from "../../src/core/clock.ts";
import { mapEnv } from "../../src/core/env.ts";
import type { AgentMiddleware } from "../../src/engine/types.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";

function services() {
  const storage = createMemoryKeyValue();
  return { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) };
}

async function assemble(raw: Record<string, unknown>, extra: Partial<Parameters<typeof assembleLeadAgent>[0]> = {}) {
  const config: LeadConfig = validateLeadConfig(raw, "config.yaml");
  return assembleLeadAgent({ config, services: services(), env: mapEnv({}), ...extra });
}

async function names(raw: Record<string, unknown>, extra: Partial<Parameters<typeof assembleLeadAgent>[0]> = {}) {
  return (await assemble(raw, extra)).agent.middlewares.map((m) => m.name);
}

function after(list: string[], name: string): string | undefined {
  return list[list.indexOf(name) + 1];
}

describe("lead chain: each optional middleware under its condition", () => {
  it("Summarization only when enabled, right after DurableContext", async () => {
    expect(await names({})).not.toContain("Summarization");
    const list = await names({ summarization: { enabled: true, trigger: { tokens: 4000 } } });
    expect(after(list, "DurableContext")).toBe("Summarization");
  });

  it("Todo only in plan mode, with its write_todos tool", async () => {
    const plain = await assemble({});
    expect(plain.agent.middlewares.map((m) => m.name)).not.toContain("Todo");
    const plan = await assemble({}, { planMode: true });
    expect(after(plan.agent.middlewares.map((m) => m.name), "DurableContext")).toBe("Todo");
    expect(plan.agent.tools.map((t) => t.name)).toContain("write_todos");
  });

  it("TokenUsage unless token_usage.enabled is false", async () => {
    expect(await names({ token_usage: { enabled: false } })).not.toContain("TokenUsage");
  });

  it("Memory unless memory.enabled is false; DynamicContext stays for the date", async () => {
    const list = await names({ memory: { enabled: false } });
    expect(list).not.toContain("Memory");
    expect(list).toContain("DynamicContext");
  });

  it("ViewImage and its tool only for a model that supports vision, inside the coalescer", async () => {
    expect(await names({})).not.toContain("ViewImage");
    const vision = await assemble({ models: [{ name: "eyes", use: "demo", supports_vision: true }], default_model: "eyes" });
    const list = vision.agent.middlewares.map((m) => m.name);
    expect(after(list, "ViewImage")).toBe("SystemMessageCoalescing");
    expect(vision.agent.tools.map((t) => t.name)).toContain("view_image");
  });

  it("LoopDetection unless disabled; TokenBudget only when enabled, after it", async () => {
    expect(await names({ loop_detection: { enabled: false } })).not.toContain("LoopDetection");
    expect(await names({})).not.toContain("TokenBudget");
    const list = await names({ token_budget: { enabled: true, max_tokens: 50_000 } });
    expect(after(list, "LoopDetection")).toBe("TokenBudget");
  });

  it("SafetyFinishReason unless disabled, after the terminal tail and before Clarification", async () => {
    expect(await names({ safety_finish_reason: { enabled: false } })).not.toContain("SafetyFinishReason");
    const list = await names({});
    expect(list.slice(-4)).toEqual(["TerminalResponse", "ModelLengthFinishReason", "SafetyFinishReason", "Clarification"]);
  });

  it("custom then configured extension middlewares after the guards and before the terminal tail", async () => {
    const custom: AgentMiddleware = { name: "acme.custom" };
    const configured: AgentMiddleware = { name: "acme.configured" };
    const list = await names({}, { customMiddlewares: [custom], configuredMiddlewares: [configured] });
    const at = list.indexOf("LoopDetection");
    expect(list.slice(at, at + 4)).toEqual(["LoopDetection", "acme.custom", "acme.configured", "TerminalResponse"]);
  });
});

describe("lead chain: the tool side under its conditions", () => {
  const mcpTool = {
    name: "slack_send",
    description: "post a message to Slack",
    schema: { type: "object", properties: { text: { type: "string" } } },
    metadata: { deerflow_mcp: { server: "slack", transport: "http" }, deerflow_mcp_routing: { mode: "prefer", priority: 1, keywords: ["slack"] } },
    invoke: async () => "sent",
  };

  it("ToolReceipt unless receipts are off; it wraps every gate", async () => {
    expect(await names({ verification: { receipts_enabled: false } })).not.toContain("ToolReceipt");
    const list = await names({});
    expect(list.indexOf("ToolReceipt")).toBeLessThan(list.indexOf("SandboxAudit"));
  });

  it("Authorization and Guardrail only when enabled, between ToolReceipt and SandboxAudit", async () => {
    const list = await names({
      authorization: { enabled: true, default_role: "user", roles: { user: { tools: { allow: "*" }, models: { allow: "*" } } } },
      guardrails: { enabled: true, provider: "allowlist", allowed_tools: ["bash", "read_file"] },
    });
    const at = list.indexOf("ToolReceipt");
    expect(list.slice(at, at + 4)).toEqual(["ToolReceipt", "Authorization", "Guardrail", "SandboxAudit"]);
    expect(await names({})).not.toContain("Authorization");
  });

  it("Layer 1: the model never sees a tool the principal's role denies", async () => {
    const assembly = await assemble({
      authorization: { enabled: true, default_role: "user", roles: { user: { tools: { allow: "*", deny: ["bash"] }, models: { allow: "*" } } } },
    });
    const tools = assembly.agent.tools.map((t) => t.name);
    expect(tools).not.toContain("bash");
    expect(tools).toContain("read_file");
  });

  it("a model the role may not use falls back to one it may list and use", async () => {
    const roles = { user: { tools: { allow: "*" }, models: { allow: ["cheap"] } } };
    const models = [
      { name: "premium", use: "demo" },
      { name: "cheap", use: "demo" },
    ];
    const assembly = await assemble({ models, default_model: "premium", authorization: { enabled: true, default_role: "user", roles } });
    expect(assembly.model.name).toBe("cheap");
    expect(assembly.descriptor.effective_model).toBe("cheap");
    const none = { user: { tools: { allow: "*" }, models: { allow: [] } } };
    await expect(assemble({ models, default_model: "premium", authorization: { enabled: true, default_role: "user", roles: none } })).rejects.toMatchObject({ code: "model_not_authorized" });
  });

  it("an unknown default role stops the assembly", async () => {
    await expect(assemble({ authorization: { enabled: true, default_role: "ghost", roles: { user: {} } } })).rejects.toThrow(/ghost/);
  });

  it("ReadBeforeWrite unless disabled; ToolProgress only when enabled, outside ToolErrorHandling", async () => {
    expect(await names({ read_before_write: { enabled: false } })).not.toContain("ReadBeforeWrite");
    expect(await names({})).not.toContain("ToolProgress");
    expect(after(await names({ tool_progress: { enabled: true } }), "ToolProgress")).toBe("ToolErrorHandling");
  });

  it("McpRouting and DeferredToolFilter only with tool_search on and MCP tools to defer", async () => {
    expect(await names({}, { extraTools: [mcpTool] })).not.toContain("DeferredToolFilter");
    const assembly = await assemble({ tool_search: { enabled: true } }, { extraTools: [mcpTool] });
    const list = assembly.agent.middlewares.map((m) => m.name);
    expect(list.slice(list.indexOf("McpRouting"), list.indexOf("McpRouting") + 3)).toEqual(["McpRouting", "DeferredToolFilter", "SystemMessageCoalescing"]);
    expect(assembly.agent.tools.map((t) => t.name)).toContain("tool_search");
    expect(assembly.descriptor.deferred_tool_names).toEqual(["slack_send"]);
  });

  it("a chain with every optional member on keeps every ordering invariant", async () => {
    const { orderingViolations } = await import("../../src/extensions/ordering.ts");
    const everything = await names(
      {
        authorization: { enabled: true, default_role: "user", roles: { user: { tools: { allow: "*" }, models: { allow: "*" } } } },
        guardrails: { enabled: true, provider: "allowlist", allowed_tools: ["bash"] },
        tool_progress: { enabled: true },
        summarization: { enabled: true, trigger: { tokens: 4000 } },
        token_budget: { enabled: true },
        tool_search: { enabled: true },
        models: [{ name: "eyes", use: "demo", supports_vision: true }],
        default_model: "eyes",
      },
      { planMode: true, extraTools: [mcpTool], customMiddlewares: [{ name: "acme.custom" }] },
    );
    expect(everything).toHaveLength(35); // the 25 defaults and 10 optional members
    expect(orderingViolations(everything)).toEqual([]);
  });

  // Spec (middleware-chain.md): "Lead-agent middlewares are assembled in strict order across three functions"
  // — the shared base (1-13, ToolReceipt registered ahead of 9-12 as "the outermost wrap_tool_call layer"),
  // then the lead-only list 14-35. Every optional member on, the whole order by name, from the spec's table.
  it('"assembled in strict order": with every optional member on, the exact chain order of the spec\'s table', async () => {
    const everything = await names(
      {
        authorization: { enabled: true, default_role: "user", roles: { user: { tools: { allow: "*" }, models: { allow: "*" } } } },
        guardrails: { enabled: true, provider: "allowlist", allowed_tools: ["bash"] },
        tool_progress: { enabled: true },
        summarization: { enabled: true, trigger: { tokens: 4000 } },
        token_budget: { enabled: true },
        tool_search: { enabled: true },
        models: [{ name: "eyes", use: "demo", supports_vision: true }],
        default_model: "eyes",
      },
      {
        planMode: true,
        subagentsEnabled: true,
        extraTools: [mcpTool],
        customMiddlewares: [{ name: "acme.custom" }],
        configuredMiddlewares: [{ name: "acme.configured" }],
      },
    );
    expect(everything).toEqual([
      "InputSanitization", // 1
      "ToolOutputBudget", // 2
      "ToolResultSanitization", // 3
      "ThreadData", // 4
      "Uploads", // 5
      "Sandbox", // 6
      "DanglingToolCall", // 7
      "LLMErrorHandling", // 8
      "ToolReceipt", // 13 (registered ahead of 9-12)
      "Authorization", // 9
      "Guardrail", // 9
      "SandboxAudit", // 10
      "ReadBeforeWrite", // 11
      "ToolProgress", // 12
      "ToolErrorHandling", // 13
      "DynamicContext", // 14
      "SkillActivation", // 15
      "SkillToolPolicy", // 16
      "DurableContext", // 17
      "Summarization", // 18
      "Todo", // 19
      "TokenUsage", // 20
      "Title", // 21
      "Memory", // 22
      "ViewImage", // 23
      "McpRouting", // 24
      "DeferredToolFilter", // 25
      "SystemMessageCoalescing", // 26
      "SubagentLimit", // 27
      "LoopDetection", // 28
      "TokenBudget", // 29
      "acme.custom", // 30
      "acme.configured", // 31
      "TerminalResponse", // 32
      "ModelLengthFinishReason", // 33
      "SafetyFinishReason", // 34
      "Clarification", // 35
    ]);
  });
});

describe("lead chain: the fingerprint follows behaviour", () => {
  const behaviour: Array<[string, Record<string, unknown>]> = [
    ["llm_call.retry_max_attempts", { llm_call: { retry_max_attempts: 5 } }],
    ["circuit_breaker.failure_threshold", { circuit_breaker: { failure_threshold: 9 } }],
    ["dynamic_context.current_date_timezone", { dynamic_context: { current_date_timezone: "Asia/Shanghai" } }],
    ["memory.debounce_seconds", { memory: { debounce_seconds: 5 } }],
    ["memory.enabled", { memory: { enabled: false } }],
    ["summarization.enabled", { summarization: { enabled: true, trigger: { tokens: 4000 } } }],
    ["title.max_chars", { title: { max_chars: 40 } }],
    ["token_usage.enabled", { token_usage: { enabled: false } }],
    ["loop_detection.warn_threshold", { loop_detection: { warn_threshold: 4 } }],
    ["token_budget.enabled", { token_budget: { enabled: true } }],
    ["safety_finish_reason.enabled", { safety_finish_reason: { enabled: false } }],
    ["agent.system_prompt", { agent: { system_prompt: "Be brief." } }],
    ["tool_output.externalize_min_chars", { tool_output: { externalize_min_chars: 5000 } }],
    ["read_before_write.enabled", { read_before_write: { enabled: false } }],
    ["tool_progress.enabled", { tool_progress: { enabled: true } }],
    ["verification.receipts_enabled", { verification: { receipts_enabled: false } }],
  ];

  it.each(behaviour)("moves when %s changes", async (_key, raw) => {
    const base = await assemble({});
    const changed = await assemble(raw);
    expect(changed.fingerprint).not.toBe(base.fingerprint);
  });

  it("stays when only where things are stored or how a model is labelled changes", async () => {
    const base = await assemble({ models: [{ name: "d", use: "demo" }], default_model: "d" });
    const relabelled = await assemble({
      models: [{ name: "d", use: "demo", display_name: "Demo!", description: "for docs" }],
      default_model: "d",
      storage: { driver: "memory", base: "elsewhere" },
    });
    expect(relabelled.fingerprint).toBe(base.fingerprint);
  });

  it("fails loudly on a misspelt key inside a middleware section, naming its path", () => {
    expect(() => validateLeadConfig({ loop_detection: { warn_treshold: 3 } }, "config.yaml")).toThrow(/config\.yaml: loop_detection\.warn_treshold/);
    expect(() => validateLeadConfig({ title: { max_chars: "long" } }, "config.yaml")).toThrow(/config\.yaml: title\.max_chars/);
  });
});

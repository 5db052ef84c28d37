import * as v from "valibot";
import { AIMessage, HumanMessage, SystemMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../src/agents/app-config.ts";
import { buildLeadMiddlewares } from "../../src/agents/lead-agent.ts";
import { buildSubagentRuntimeMiddlewares, type SubagentChainConfig, type SubagentChainDeps } from "../../src/agents/subagent-chain.ts";
import { SubagentsConfigSchema, parseSubagentsConfig, subagentTokenBudget } from "../../src/agents/subagents-config.ts";
import { resolveAuthorizationProvider, resolveGuardrailProvider } from "../../src/authz/index.ts";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentMiddleware } from "../../src/engine/types.ts";
import { orderingViolations } from "../../src/extensions/ordering.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { bindDelegatedSandbox } from "../../src/sandbox/acquire.ts";
import { createSkillRegistry } from "../../src/skills/registry.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import type { DeferredToolSetup } from "../../src/tools/tool-search.ts";

// The section as its schema fills it in when nothing is configured.
const SUBAGENTS_DEFAULTS = v.parse(SubagentsConfigSchema, {});

const CODE_DEFAULT_ORDER = [
  "InputSanitization",
  "ToolOutputBudget",
  "ToolResultSanitization",
  "ThreadData",
  "Sandbox",
  "DanglingToolCall",
  "LLMErrorHandling",
  "ToolReceipt",
  "SandboxAudit",
  "ReadBeforeWrite",
  "ToolErrorHandling",
  "SkillActivation",
  "SkillToolPolicy",
  "LoopDetection",
  "TokenBudget",
  "SafetyFinishReason",
  "DurableContext",
  "SubagentDateContext",
  "SystemMessageCoalescing",
];

const LEAD_ONLY = ["Uploads", "DynamicContext", "Todo", "TokenUsage", "Title", "Memory", "SubagentLimit", "TerminalResponse", "ModelLengthFinishReason", "Clarification"];

function config(raw: Record<string, unknown> = {}, subagents?: unknown): SubagentChainConfig {
  return { ...validateLeadConfig(raw, "config.yaml"), ...(subagents === undefined ? {} : { subagents }) } as SubagentChainConfig;
}

function deps(extra: Partial<SubagentChainDeps> = {}): SubagentChainDeps {
  return { model: fakeModel().respond(new AIMessage("done")), skillRegistry: createSkillRegistry(createMemoryKeyValue()), ...extra };
}

function build(raw: Record<string, unknown> = {}, extra: Partial<SubagentChainDeps> = {}, subagents?: unknown): AgentMiddleware[] {
  return buildSubagentRuntimeMiddlewares(config(raw, subagents), deps(extra));
}

function names(raw: Record<string, unknown> = {}, extra: Partial<SubagentChainDeps> = {}, subagents?: unknown): string[] {
  return build(raw, extra, subagents).map((m) => m.name);
}

function after(list: string[], name: string): string | undefined {
  return list[list.indexOf(name) + 1];
}

function deferredSetup(routing: boolean): DeferredToolSetup {
  return {
    tools: [],
    deferredNames: ["slack_send"],
    catalogHash: "c".repeat(64),
    toolSearch: undefined,
    routingIndex: routing ? { slack_send: { priority: 1, keywords: ["slack"] } } : {},
  };
}

describe("subagent chain: order", () => {
  it("with code defaults is the lead base without Uploads, then the subagent tail, in the order of docs/chain.md, Subagent chain", () => {
    expect(names()).toEqual(CODE_DEFAULT_ORDER);
  });

  it("never holds a lead-only member, whatever is switched on", () => {
    const list = names(
      { summarization: { enabled: true, trigger: { tokens: 4000 } }, tool_progress: { enabled: true }, token_usage: { enabled: true } },
      { supportsVision: true, deferred: deferredSetup(true) },
    );
    for (const name of LEAD_ONLY) expect(list).not.toContain(name);
  });

  it("shares the lead chain's base prefix, minus Uploads", () => {
    const lead = buildLeadMiddlewares(validateLeadConfig({}, "config.yaml"), deps()).map((m) => m.name);
    const base = lead.slice(0, lead.indexOf("ToolErrorHandling") + 1).filter((n) => n !== "Uploads");
    expect(names().slice(0, base.length)).toEqual(base);
  });

  it("keeps every host ordering invariant, with Clarification absent", () => {
    const everything = build(
      {
        summarization: { enabled: true, trigger: { tokens: 4000 } },
        tool_progress: { enabled: true },
        authorization: { enabled: true, default_role: "user", roles: { user: { tools: { allow: "*" }, models: { allow: "*" } } } },
        guardrails: { enabled: true, provider: "allowlist", allowed_tools: ["bash"] },
      },
      { supportsVision: true, deferred: deferredSetup(true), customMiddlewares: [{ name: "acme.custom" }], configuredMiddlewares: [{ name: "acme.configured" }] },
    ).map((m) => m.name);
    expect(everything).not.toContain("Clarification");
    expect(orderingViolations(everything)).toEqual([]);
    expect(orderingViolations(names())).toEqual([]);
    expect(everything.at(-1)).toBe("SystemMessageCoalescing");
  });

  it("fails with ordering_violation when a custom middleware takes a host name in the wrong place", () => {
    expect(() => build({}, { customMiddlewares: [{ name: "Summarization" }] })).toThrow(/DurableContext must wrap Summarization/);
  });
});

describe("subagent chain: each optional member under its condition", () => {
  // Spec (middleware-chain.md #6): "delegated subagents ... are non-owners, so their narrower discovery allowlists
  // never rebuild the shared thread view or force eager sandbox acquisition".
  it('"never ... force eager sandbox acquisition": Sandbox is lazy whatever the lead\'s lazy_init', () => {
    for (const lazy_init of [true, false, undefined]) {
      const sandbox = build(lazy_init === undefined ? {} : { sandbox: { lazy_init } }).find((m) => m.name === "Sandbox")!;
      expect(sandbox.releasePolicyParameters!()).toMatchObject({ lazy_init: true });
    }
  });

  it("ToolReceipt unless receipts are off, rendering its ledger on every call", () => {
    expect(names({ verification: { receipts_enabled: false } })).not.toContain("ToolReceipt");
    const receipt = build().find((m) => m.name === "ToolReceipt")!;
    expect(JSON.stringify(receipt.releasePolicyParameters!())).toContain("always");
  });

  it("Authorization and Guardrail only with their providers, between ToolReceipt and SandboxAudit", () => {
    const raw = {
      authorization: { enabled: true, default_role: "user", roles: { user: { tools: { allow: "*" }, models: { allow: "*" } } } },
      guardrails: { enabled: true, provider: "allowlist", allowed_tools: ["bash"] },
    };
    const lead = validateLeadConfig(raw, "config.yaml");
    const list = names(raw, {
      authorizationProvider: resolveAuthorizationProvider(lead.authorization!),
      guardrailProvider: resolveGuardrailProvider(lead.guardrails!),
    });
    const at = list.indexOf("ToolReceipt");
    expect(list.slice(at, at + 4)).toEqual(["ToolReceipt", "Authorization", "Guardrail", "SandboxAudit"]);
    expect(names(raw)).not.toContain("Authorization");
  });

  it("ReadBeforeWrite unless disabled; ToolProgress only when enabled, before ToolErrorHandling", () => {
    expect(names({ read_before_write: { enabled: false } })).not.toContain("ReadBeforeWrite");
    expect(names()).not.toContain("ToolProgress");
    expect(after(names({ tool_progress: { enabled: true } }), "ToolProgress")).toBe("ToolErrorHandling");
  });

  it("ViewImage only for a vision model, right after the skill pair", () => {
    expect(names()).not.toContain("ViewImage");
    expect(after(names({}, { supportsVision: true }), "SkillToolPolicy")).toBe("ViewImage");
  });

  it("McpRouting then DeferredToolFilter only with deferred tools, routing only with a routing index", () => {
    expect(names()).not.toContain("DeferredToolFilter");
    const filterOnly = names({}, { deferred: deferredSetup(false) });
    expect(filterOnly).not.toContain("McpRouting");
    expect(after(filterOnly, "SkillToolPolicy")).toBe("DeferredToolFilter");
    const both = names({}, { deferred: deferredSetup(true) });
    expect(both.slice(both.indexOf("McpRouting"), both.indexOf("McpRouting") + 3)).toEqual(["McpRouting", "DeferredToolFilter", "LoopDetection"]);
  });

  it("LoopDetection unless disabled", () => {
    expect(names({ loop_detection: { enabled: false } })).not.toContain("LoopDetection");
  });

  it("TokenBudget on by default at 2M, 1M with summarization, warn 0.7; a user's settings win; off when disabled", () => {
    const budget = (list: AgentMiddleware[]) => list.find((m) => m.name === "TokenBudget")!.releasePolicyParameters!();
    expect(JSON.stringify(budget(build()))).toMatch(/"max_tokens":2000000/);
    expect(JSON.stringify(budget(build()))).toMatch(/"warn_threshold":0.7/);
    expect(JSON.stringify(budget(build({ summarization: { enabled: true, trigger: { tokens: 4000 } } })))).toMatch(/"max_tokens":1000000/);
    expect(JSON.stringify(budget(build({ summarization: { enabled: true, trigger: { tokens: 4000 } } }, {}, { token_budget: { max_tokens: 300_000 } })))).toMatch(
      /"max_tokens":300000/,
    );
    expect(names({}, {}, { token_budget: { enabled: false } })).not.toContain("TokenBudget");
    // The lead's token_budget section does not reach subagents.
    expect(JSON.stringify(budget(build({ token_budget: { enabled: true, max_tokens: 5000 } })))).toMatch(/"max_tokens":2000000/);
    expect(subagentTokenBudget(undefined, false)).toEqual({ enabled: true, max_tokens: 2_000_000, warn_threshold: 0.7 });
  });

  it("SafetyFinishReason unless disabled, before DurableContext", () => {
    expect(names({ safety_finish_reason: { enabled: false } })).not.toContain("SafetyFinishReason");
    expect(after(names(), "SafetyFinishReason")).toBe("DurableContext");
  });

  it("Summarization only when enabled, between DurableContext and SubagentDateContext", () => {
    expect(names()).not.toContain("Summarization");
    const list = names({ summarization: { enabled: true, trigger: { tokens: 4000 } } });
    expect(list.slice(list.indexOf("DurableContext"), list.indexOf("DurableContext") + 4)).toEqual([
      "DurableContext",
      "Summarization",
      "SubagentDateContext",
      "SystemMessageCoalescing",
    ]);
  });

  it("SubagentDateContext reads the lead's date zone", () => {
    const date = build({ dynamic_context: { current_date_timezone: "Asia/Shanghai" } }).find((m) => m.name === "SubagentDateContext")!;
    expect(date.releasePolicyParameters!()).toEqual({ current_date_timezone: "Asia/Shanghai" });
  });

  it("places custom then configured extension middlewares after the guards and before the safety tail", () => {
    const list = names({}, { customMiddlewares: [{ name: "acme.custom" }], configuredMiddlewares: [{ name: "acme.configured" }] });
    const at = list.indexOf("TokenBudget");
    expect(list.slice(at, at + 4)).toEqual(["TokenBudget", "acme.custom", "acme.configured", "SafetyFinishReason"]);
    const noSafety = names({ safety_finish_reason: { enabled: false } }, { configuredMiddlewares: [{ name: "acme.configured" }] });
    expect(after(noSafety, "acme.configured")).toBe("DurableContext");
  });

  it("builds fresh instances on every call, so no per-instance state crosses task runs", () => {
    const first = build();
    const second = build();
    first.forEach((m, i) => expect(m).not.toBe(second[i]));
  });
});

describe("subagents config section", () => {
  it("defaults and validation with full paths", () => {
    expect(parseSubagentsConfig(undefined)).toEqual(SUBAGENTS_DEFAULTS);
    expect(SUBAGENTS_DEFAULTS).toMatchObject({ max_total_per_run: 6, max_concurrent: 3 });
    expect(() => parseSubagentsConfig({ max_total_per_run: 51 })).toThrow(/subagents\.max_total_per_run: expected at most 50/);
    expect(() => parseSubagentsConfig({ token_budget: { max_tokens: 10 } })).toThrow(/subagents\.token_budget\.max_tokens/);
    expect(() => parseSubagentsConfig({ extra: 1 })).toThrow(/subagents/);
    expect(() => parseSubagentsConfig({ types: { researcher: { description: "d" } } })).toThrow(/subagents\.types\.researcher\.system_prompt/);
    try {
      parseSubagentsConfig({ max_concurrent: 0 });
      expect.unreachable();
    } catch (error) {
      expect((error as { code?: string }).code).toBe("invalid_subagents_config");
    }
  });

  it("custom subagent types get their defaults", () => {
    const parsed = parseSubagentsConfig({ types: { researcher: { description: "Deep research", system_prompt: "You research.", tools: ["web_search"] } } });
    expect(parsed.types["researcher"]).toEqual({
      description: "Deep research",
      system_prompt: "You research.",
      tools: ["web_search"],
      model: "inherit",
      max_turns: 50,
      timeout_seconds: 900,
    });
  });

  it("a broken subagents section fails the chain build", () => {
    expect(() => build({}, {}, { max_concurrent: "3" })).toThrow(/subagents\.max_concurrent/);
  });
});

describe("subagent chain in the engine", () => {
  // Spec (middleware-chain.md #6): delegated subagents "never ... force eager sandbox acquisition".
  it("runs a subagent: one leading system block with the prompt and the date; lazy_init false acquires nothing", async () => {
    const storage = createMemoryKeyValue();
    const sandbox = createVirtualSandboxProvider({ storage });
    let released = 0;
    let acquired = 0;
    const provider = { ...sandbox, acquire: async (...args: Parameters<typeof sandbox.acquire>) => {
      acquired += 1;
      return sandbox.acquire(...args);
    }, release: async (...args: Parameters<typeof sandbox.release>) => {
      released += 1;
      return sandbox.release(...args);
    } } as typeof sandbox;
    const model = fakeModel().respond(new AIMessage("subagent result"));
    const middlewares = buildSubagentRuntimeMiddlewares(config({ sandbox: { lazy_init: false } }), { model, skillRegistry: createSkillRegistry(storage) });
    const agent = createAgent({
      name: "subagent-general-purpose",
      model,
      tools: [],
      systemPrompt: "You are a general-purpose subagent.",
      middlewares,
      services: { clock: systemClock, storage, sandbox: provider },
    });
    const leadScope = { userId: "u1", threadId: "thread-lead" };
    const state = await agent.invoke(
      { messages: [new HumanMessage("summarize the repo")] },
      { threadId: "thread-sub", context: { user_id: "u1", is_subagent: true, ...bindDelegatedSandbox(leadScope) } },
    );
    expect(model.callCount).toBe(1);
    const sent = model.calls[0]!.messages;
    expect(sent.filter((m) => SystemMessage.isInstance(m))).toHaveLength(1);
    expect(SystemMessage.isInstance(sent[0]!)).toBe(true);
    expect(String(sent[0]!.content)).toContain("You are a general-purpose subagent.");
    expect(String(sent[0]!.content)).toContain("<current_date>");
    expect(state.messages.at(-1)!.content).toBe("subagent result");
    expect(acquired).toBe(0);
    expect(released).toBe(0);
  });
});

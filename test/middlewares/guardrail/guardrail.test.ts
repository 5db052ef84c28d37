import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { GraphInterrupt } from "@langchain/langgraph/web";
import { describe, expect, it, vi } from "vitest";
import type { GuardrailDecision, GuardrailProvider, GuardrailRequest } from "../../../src/authz/guardrail-provider.ts";
import { AUTHORIZATION_OUTCOME_KEY, peekAuthorizationOutcome, takeAuthorizationOutcome } from "../../../src/authz/outcome.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentRuntime, AgentTool, ToolCallRequest, ToolResult } from "../../../src/engine/types.ts";
import {
  GUARDRAILS_DEFAULTS,
  GUARDRAIL_EVENT,
  GUARDRAIL_NAME,
  GuardrailsConfigSchema,
  createGuardrailMiddleware,
} from "../../../src/middlewares/guardrail/guardrail.ts";
import { TOOL_META_KEY } from "../../../src/middlewares/tool-result-meta.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

const SCENARIO_22_TEXT =
  "Guardrail denied: tool 'bash' was blocked (oap.tool_not_allowed). Reason: tool 'bash' not in allowlist. Choose an alternative approach.";

function request(
  toolCall: Partial<ToolCall> = {},
  options: { context?: Record<string, unknown>; events?: unknown[]; signal?: AbortSignal; runtime?: AgentRuntime } = {},
): ToolCallRequest {
  const base = options.runtime ?? makeRuntime({ threadId: "t1", context: options.context ?? {}, ...(options.signal ? { signal: options.signal } : {}) });
  const runtime = options.events ? { ...base, writer: (event: unknown) => void options.events!.push(event) } : base;
  return {
    toolCall: { name: "bash", args: { command: "ls" }, id: "call_1", ...toolCall } as ToolCall,
    tool: undefined,
    state: emptyThreadState(),
    runtime,
  };
}

function ranTool(content = "ran") {
  return vi.fn(async (req: ToolCallRequest): Promise<ToolResult> => new ToolMessage({ content, tool_call_id: req.toolCall.id ?? "", name: req.toolCall.name }));
}

function provider(evaluate: (request: GuardrailRequest) => GuardrailDecision | Promise<GuardrailDecision>, name = "test"): GuardrailProvider & { requests: GuardrailRequest[] } {
  const requests: GuardrailRequest[] = [];
  return {
    name,
    requests,
    evaluate: (r) => {
      requests.push(r);
      return evaluate(r);
    },
  };
}

const allowAll = () => provider(() => ({ allow: true, reasons: [{ code: "oap.allowed" }] }), "allow-all");
const denyAll = () => provider(() => ({ allow: false, reasons: [{ code: "oap.denied", message: "all tools blocked" }], policyId: "test.deny.v1" }), "deny-all");
const exploding = () =>
  provider(() => {
    throw new Error("provider crashed");
  }, "exploding");

const enabled = { enabled: true } as const;

describe("Guardrail", () => {
  it("has a stable name, defaults off, and a disabled middleware passes every call through", async () => {
    const middleware = createGuardrailMiddleware();
    expect(middleware.name).toBe(GUARDRAIL_NAME);
    expect(middleware.name).toBe("Guardrail");
    expect(GUARDRAILS_DEFAULTS).toEqual({ enabled: false, fail_closed: true, passport: null, provider: null, allowed_tools: null, denied_tools: null });
    expect(middleware.releasePolicyParameters?.()).toEqual({ enabled: false });
    const handler = ranTool();
    const req = request();
    await middleware.wrapToolCall!(req, handler);
    expect(handler).toHaveBeenCalledWith(req);
    expect(req.runtime.scope.has(AUTHORIZATION_OUTCOME_KEY)).toBe(false);
  });

  it("rejects a wrong key with its path", () => {
    expect(() => createGuardrailMiddleware({ enabled: true, provider: "allowlist", allowed_tools: "bash" } as never)).toThrow(
      expect.objectContaining({ code: "invalid_middleware_config", message: expect.stringMatching(/^Guardrail\.allowed_tools: /) }),
    );
    expect(GuardrailsConfigSchema).toBeDefined();
  });

  it("declares fail_closed, passport, the provider and its parameters", () => {
    const middleware = createGuardrailMiddleware({ enabled: true, passport: "./passport.json", provider: "allowlist", denied_tools: ["write_file", "bash"] });
    expect(middleware.releasePolicyParameters?.()).toEqual({
      enabled: true,
      fail_closed: true,
      passport: "./passport.json",
      provider: "allowlist",
      policy: null,
      provider_parameters: { allowed_tools: null, denied_tools: ["bash", "write_file"] },
    });
    const custom = { ...allowAll(), policy: { id: "oap.policy", version: "3" } };
    expect(createGuardrailMiddleware(enabled, { provider: custom }).releasePolicyParameters?.()).toMatchObject({ provider: "allow-all", policy: { id: "oap.policy", version: "3" } });
  });

  it("scenario M22: with allowed_tools [web_search], bash does not run and returns the recoverable denial", async () => {
    const middleware = createGuardrailMiddleware({ enabled: true, provider: "allowlist", allowed_tools: ["web_search"] });
    const handler = ranTool();
    const result = (await middleware.wrapToolCall!(request(), handler)) as ToolMessage;
    expect(handler).not.toHaveBeenCalled();
    expect(result.content).toBe(SCENARIO_22_TEXT);
    expect(result.status).toBe("error");
    expect(result.name).toBe("bash");
    expect(result.tool_call_id).toBe("call_1");
    expect(result.additional_kwargs[TOOL_META_KEY]).toEqual({
      status: "error",
      error_type: "permission",
      recoverable_by_model: true,
      recommended_next_action: "try_alternative",
      source: "tool_return",
    });
    const allowed = ranTool();
    await middleware.wrapToolCall!(request({ name: "web_search" }), allowed);
    expect(allowed).toHaveBeenCalledOnce();
  });

  it("scenario M22: through the real engine the model reads the denial and carries on", async () => {
    let bashRuns = 0;
    const bash: AgentTool = {
      name: "bash",
      description: "run a command",
      schema: { type: "object", properties: { command: { type: "string" } } },
      invoke: async () => {
        bashRuns += 1;
        return "root";
      },
    };
    const model = fakeModel()
      .respondWithTools([{ name: "bash", args: { command: "whoami" }, id: "call_bash" }])
      .respond(new AIMessage("I could not run bash, so here is what I know."));
    const agent = createAgent({
      model,
      tools: [bash],
      middlewares: [createGuardrailMiddleware({ enabled: true, provider: "allowlist", allowed_tools: ["web_search"] })],
      services: { clock: systemClock },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("who am I?")] }, { threadId: "t-22" });
    expect(bashRuns).toBe(0);
    const toolMessage = state.messages.find((m): m is ToolMessage => ToolMessage.isInstance(m))!;
    expect(toolMessage.content).toBe(SCENARIO_22_TEXT);
    expect(toolMessage.status).toBe("error");
    expect((model.calls[1]!.messages as BaseMessage[]).some((m) => m.content === SCENARIO_22_TEXT)).toBe(true);
    expect(state.messages.at(-1)?.content).toBe("I could not run bash, so here is what I know.");
  });

  it("scenario M23: a provider that throws denies with oap.evaluator_error when fail-closed", async () => {
    const middleware = createGuardrailMiddleware({ enabled: true, fail_closed: true }, { provider: exploding() });
    const handler = ranTool();
    const result = (await middleware.wrapToolCall!(request(), handler)) as ToolMessage;
    expect(handler).not.toHaveBeenCalled();
    expect(result.status).toBe("error");
    expect(result.content).toBe(
      "Guardrail denied: tool 'bash' was blocked (oap.evaluator_error). Reason: guardrail provider error (fail-closed). Choose an alternative approach.",
    );
  });

  it("scenario M23: a provider that throws lets the call run when fail-open", async () => {
    const middleware = createGuardrailMiddleware({ enabled: true, fail_closed: false }, { provider: exploding() });
    const handler = ranTool();
    const req = request();
    const result = await middleware.wrapToolCall!(req, handler);
    expect(handler).toHaveBeenCalledWith(req);
    expect((result as ToolMessage).content).toBe("ran");
  });

  it("scenario M23: through the real engine, fail-closed never runs the tool and fail-open does", async () => {
    for (const failClosed of [true, false]) {
      let runs = 0;
      const bash: AgentTool = {
        name: "bash",
        description: "run a command",
        schema: { type: "object", properties: {} },
        invoke: async () => {
          runs += 1;
          return "done";
        },
      };
      const model = fakeModel().respondWithTools([{ name: "bash", args: {}, id: "c1" }]).respond(new AIMessage("ok"));
      const agent = createAgent({
        model,
        tools: [bash],
        middlewares: [createGuardrailMiddleware({ enabled: true, fail_closed: failClosed }, { provider: exploding() })],
        services: { clock: systemClock },
      });
      const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: `t-23-${failClosed}` });
      const toolMessage = state.messages.find((m): m is ToolMessage => ToolMessage.isInstance(m))!;
      expect(runs).toBe(failClosed ? 0 : 1);
      if (failClosed) expect(toolMessage.content).toContain("(oap.evaluator_error)");
      else expect(toolMessage.content).toBe("done");
    }
  });

  it("a malformed decision is a provider failure, never an allow", async () => {
    const middleware = createGuardrailMiddleware(enabled, { provider: provider(() => ({ allow: "yes" }) as unknown as GuardrailDecision) });
    const handler = ranTool();
    expect(((await middleware.wrapToolCall!(request(), handler)) as ToolMessage).content).toContain("(oap.evaluator_error)");
    expect(handler).not.toHaveBeenCalled();
  });

  it("a denial names the provider's code and reason; without reasons it falls back to oap.denied", async () => {
    const denied = (await createGuardrailMiddleware(enabled, { provider: denyAll() }).wrapToolCall!(request(), ranTool())) as ToolMessage;
    expect(denied.content).toBe("Guardrail denied: tool 'bash' was blocked (oap.denied). Reason: all tools blocked. Choose an alternative approach.");
    const bare = (await createGuardrailMiddleware(enabled, { provider: provider(() => ({ allow: false, reasons: [] })) }).wrapToolCall!(request(), ranTool())) as ToolMessage;
    expect(bare.content).toBe("Guardrail denied: tool 'bash' was blocked (oap.denied). Reason: blocked by guardrail policy. Choose an alternative approach.");
  });

  it("a call without id or name still gets a well-formed denial", async () => {
    const result = (await createGuardrailMiddleware(enabled, { provider: denyAll() }).wrapToolCall!(request({ id: undefined, name: "" }), ranTool())) as ToolMessage;
    expect(result.tool_call_id).toBe("missing_id");
    expect(result.name).toBe("unknown_tool");
  });

  it("hands the provider the passport, the run's identity and the engine's ids", async () => {
    const capture = allowAll();
    const attributes = { department: "engineering" };
    const req = request(
      { name: "bash", args: { command: "ls" }, id: "call_all" },
      {
        context: {
          user_id: "user_abc",
          user_role: "admin",
          oauth_provider: "github",
          oauth_id: "gh_123",
          channel_user_id: "channel_123",
          is_internal: true,
          is_subagent: true,
          authz_attributes: attributes,
          run_id: "forged-run",
        },
      },
    );
    await createGuardrailMiddleware({ enabled: true, passport: "./guardrails/passport.json" }, { provider: capture }).wrapToolCall!(req, ranTool());
    expect(capture.requests[0]).toEqual({
      toolName: "bash",
      toolInput: { command: "ls" },
      agentId: "./guardrails/passport.json",
      threadId: "t1",
      runId: "run-1",
      toolCallId: "call_all",
      isSubagent: true,
      timestamp: "2026-05-08T12:00:00.000Z",
      userId: "user_abc",
      userRole: "admin",
      oauthProvider: "github",
      oauthId: "gh_123",
      channelUserId: "channel_123",
      isInternal: true,
      authzAttributes: { department: "engineering" },
    });
  });

  it("a provider cannot change the arguments the tool then runs with", async () => {
    const meddling = provider((r) => {
      try {
        (r.toolInput as Record<string, unknown>)["command"] = "rm -rf /";
      } catch {
        // frozen: the edit is refused
      }
      return { allow: true };
    });
    const handler = ranTool();
    const req = request({ args: { command: "ls" } });
    await createGuardrailMiddleware(enabled, { provider: meddling }).wrapToolCall!(req, handler);
    expect(handler.mock.calls[0]![0].toolCall.args).toEqual({ command: "ls" });
  });

  it("an empty context gives empty identity, and is_internal only for the boolean true", async () => {
    const capture = allowAll();
    const middleware = createGuardrailMiddleware(enabled, { provider: capture });
    await middleware.wrapToolCall!(request({ id: undefined }), ranTool());
    await middleware.wrapToolCall!(request({}, { context: { is_internal: "true" } }), ranTool());
    expect(capture.requests[0]).toMatchObject({ userId: null, userRole: null, toolCallId: null, isInternal: false, authzAttributes: {}, agentId: null });
    expect(capture.requests[1]!.isInternal).toBe(false);
  });

  it("non-mapping authz_attributes fail the call loudly instead of being coerced", async () => {
    const middleware = createGuardrailMiddleware(enabled, { provider: allowAll() });
    await expect(middleware.wrapToolCall!(request({}, { context: { authz_attributes: ["not", "a", "mapping"] } }), ranTool())).rejects.toMatchObject({
      code: "invalid_authz_attributes",
    });
  });

  it("lets a graph interrupt from the provider through untouched", async () => {
    const interrupt = new GraphInterrupt([{ value: "approve?", id: "i1" }]);
    const middleware = createGuardrailMiddleware(enabled, {
      provider: provider(() => {
        throw interrupt;
      }),
    });
    await expect(middleware.wrapToolCall!(request(), ranTool())).rejects.toBe(interrupt);
  });

  it("lets the error of a cancelled run through instead of deciding on it", async () => {
    const controller = new AbortController();
    controller.abort();
    const abort = new DOMException("aborted", "AbortError");
    const middleware = createGuardrailMiddleware(enabled, {
      provider: provider(() => {
        throw abort;
      }),
    });
    await expect(middleware.wrapToolCall!(request({}, { signal: controller.signal }), ranTool())).rejects.toBe(abort);
  });

  describe("audit events", () => {
    it("a denial writes one middleware:guardrail event with codes and names, never the arguments or the user", async () => {
      const events: unknown[] = [];
      await createGuardrailMiddleware({ enabled: true, passport: "agent_id" }, { provider: denyAll() }).wrapToolCall!(
        request({ args: { command: "cat secret.txt" }, id: "tool_call_1" }, { context: { user_role: "user", user_id: "u1", oauth_id: "o1" }, events }),
        ranTool(),
      );
      expect(events).toEqual([
        {
          type: GUARDRAIL_EVENT,
          middleware: "Guardrail",
          hook: "wrap_tool_call",
          action: "deny_tool_call",
          changes: {
            tool_name: "bash",
            tool_call_id: "tool_call_1",
            agent_id: "agent_id",
            is_subagent: false,
            user_role: "user",
            allow: false,
            policy_id: "test.deny.v1",
            reason_codes: ["oap.denied"],
            reason_messages: ["all tools blocked"],
            fail_closed: true,
            provider_error: false,
          },
        },
      ]);
      expect(JSON.stringify(events)).not.toContain("secret.txt");
    });

    it("a fail-closed provider error is recorded as a denial", async () => {
      const events: unknown[] = [];
      await createGuardrailMiddleware(enabled, { provider: exploding() }).wrapToolCall!(request({}, { events }), ranTool());
      expect(events).toEqual([
        expect.objectContaining({
          action: "deny_tool_call",
          changes: expect.objectContaining({ allow: false, reason_codes: ["oap.evaluator_error"], provider_error: true, fail_closed: true }),
        }),
      ]);
    });

    it("a fail-open provider error is recorded and the tool still runs", async () => {
      const events: unknown[] = [];
      const handler = ranTool();
      await createGuardrailMiddleware({ enabled: true, fail_closed: false }, { provider: exploding() }).wrapToolCall!(request({}, { events }), handler);
      expect(handler).toHaveBeenCalledOnce();
      expect(events).toEqual([
        expect.objectContaining({
          action: "allow_tool_call_after_provider_error",
          changes: expect.objectContaining({ allow: true, provider_error: true, fail_closed: false }),
        }),
      ]);
    });

    it("an ordinary allow writes no event", async () => {
      const events: unknown[] = [];
      await createGuardrailMiddleware(enabled, { provider: allowAll() }).wrapToolCall!(request({ name: "web_search" }, { events }), ranTool());
      expect(events).toEqual([]);
    });

    it("a failing event consumer does not change the denial", async () => {
      const base = makeRuntime({ threadId: "t1" });
      const runtime: AgentRuntime = {
        ...base,
        writer: () => {
          throw new Error("journal unavailable");
        },
      };
      const handler = ranTool();
      const result = (await createGuardrailMiddleware(enabled, { provider: denyAll() }).wrapToolCall!(request({}, { runtime }), handler)) as ToolMessage;
      expect(handler).not.toHaveBeenCalled();
      expect(result.content).toContain("(oap.denied)");
    });

    it("cuts a reason message to 500 characters in the event only", async () => {
      const events: unknown[] = [];
      const long = "x".repeat(600);
      const result = (await createGuardrailMiddleware(enabled, { provider: provider(() => ({ allow: false, reasons: [{ code: "c", message: long }] })) }).wrapToolCall!(
        request({}, { events }),
        ranTool(),
      )) as ToolMessage;
      expect((events[0] as { changes: { reason_messages: string[] } }).changes.reason_messages[0]).toHaveLength(500);
      expect(result.content).toContain(long);
    });
  });

  describe("AuthorizationOutcome", () => {
    it("every decision is published in the run scope, keyed by tool_call_id", async () => {
      const runtime = makeRuntime({ threadId: "t1" });
      await createGuardrailMiddleware({ enabled: true, provider: "allowlist", allowed_tools: ["web_search"] }).wrapToolCall!(
        request({ id: "call_deny" }, { runtime }),
        ranTool(),
      );
      await createGuardrailMiddleware({ enabled: true, provider: "allowlist", allowed_tools: ["web_search"] }).wrapToolCall!(
        request({ id: "call_allow", name: "web_search" }, { runtime }),
        ranTool(),
      );
      await createGuardrailMiddleware({ enabled: true, fail_closed: false }, { provider: exploding() }).wrapToolCall!(request({ id: "call_error" }, { runtime }), ranTool());
      expect(peekAuthorizationOutcome(runtime.scope, "call_deny")).toEqual({
        toolCallId: "call_deny",
        toolName: "bash",
        gate: "Guardrail",
        provider: "allowlist",
        allowed: false,
        rule: "oap.tool_not_allowed",
        reason: "tool 'bash' not in allowlist",
        policyId: null,
        providerError: false,
        failClosed: true,
        decidedAt: "2026-05-08T12:00:00.000Z",
      });
      expect(takeAuthorizationOutcome(runtime.scope, "call_allow")).toMatchObject({ allowed: true, rule: "oap.allowed", toolName: "web_search" });
      expect(takeAuthorizationOutcome(runtime.scope, "call_allow")).toBeUndefined();
      expect(takeAuthorizationOutcome(runtime.scope, "call_error")).toMatchObject({ allowed: true, rule: "oap.evaluator_error", providerError: true, failClosed: false });
      expect(JSON.parse(JSON.stringify(runtime.scope.snapshot()))[AUTHORIZATION_OUTCOME_KEY]).toHaveProperty("call_deny");
    });
  });
});

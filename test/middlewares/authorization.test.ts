import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it, vi } from "vitest";
import { filterToolsForPrincipal } from "../../src/authz/enforcement.ts";
import type { GuardrailProvider, GuardrailRequest } from "../../src/authz/guardrail-provider.ts";
import { AUTHORIZATION_OUTCOME_KEY, peekAuthorizationOutcome, type AuthorizationOutcome } from "../../src/authz/outcome.ts";
import { buildPrincipalFromContext, type Principal } from "../../src/authz/principal.ts";
import type { AuthorizationProvider, AuthzDecision, AuthzRequest } from "../../src/authz/provider.ts";
import { RbacAuthorizationProvider } from "../../src/authz/rbac.ts";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent, type RunRecord } from "../../src/engine/agent.ts";
import type { AgentTool, ToolCallRequest, ToolResult } from "../../src/engine/types.ts";
import {
  AUTHORIZATION_DEFAULTS,
  AUTHORIZATION_NAME,
  AuthorizationConfigSchema,
  createAuthorizationMiddleware,
} from "../../src/middlewares/authorization.ts";
import { createGuardrailMiddleware } from "../../src/middlewares/guardrail/guardrail.ts";
import { emptyThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

function request(toolCall: Partial<ToolCall> = {}, context: Record<string, unknown> = {}): ToolCallRequest {
  return {
    toolCall: { name: "bash", args: { command: "whoami" }, id: "call-1", ...toolCall } as ToolCall,
    tool: undefined,
    state: emptyThreadState(),
    runtime: makeRuntime({ threadId: "t1", runId: "r1", context }),
  };
}

function ranTool() {
  return vi.fn(async (req: ToolCallRequest): Promise<ToolResult> => new ToolMessage({ content: "ran", tool_call_id: req.toolCall.id ?? "", name: req.toolCall.name }));
}

/** Counts every call; authorize answers with `decide`, filterResources keeps `visible`. */
class CountingProvider implements AuthorizationProvider {
  readonly name = "counting";
  readonly authorizeCalls: Array<{ principal: Principal; request: AuthzRequest }> = [];
  filterCalls = 0;
  constructor(
    readonly decide: (request: AuthzRequest) => AuthzDecision = () => ({ allowed: true, rule: "authz.allowed" }),
    readonly visible: readonly string[] = [],
  ) {}
  async authorize(principal: Principal, request: AuthzRequest): Promise<AuthzDecision> {
    this.authorizeCalls.push({ principal, request });
    return this.decide(request);
  }
  filterResources(_p: Principal, _r: string, names: readonly string[]): readonly string[] {
    this.filterCalls += 1;
    return names.filter((n) => this.visible.includes(n));
  }
}

function capturingGuardrail(deny: readonly string[] = []): GuardrailProvider & { requests: GuardrailRequest[] } {
  const requests: GuardrailRequest[] = [];
  return {
    name: "capture",
    requests,
    evaluate: (r) => {
      requests.push(r);
      return deny.includes(r.toolName)
        ? { allow: false, reasons: [{ code: "oap.tool_not_allowed", message: `tool '${r.toolName}' is denied` }] }
        : { allow: true, reasons: [{ code: "oap.allowed" }] };
    },
  };
}

function agentTool(name: string, runs: string[]): AgentTool {
  return {
    name,
    description: name,
    schema: { type: "object", properties: {} },
    invoke: async () => {
      runs.push(name);
      return `${name} ran`;
    },
  };
}

const ENABLED_GUEST = { enabled: true, default_role: "guest" } as const;

describe("Authorization", () => {
  it("has a stable name, defaults off, and a disabled middleware builds nothing and passes calls through", async () => {
    const middleware = createAuthorizationMiddleware();
    expect(middleware.name).toBe(AUTHORIZATION_NAME);
    expect(middleware.name).toBe("Authorization");
    expect(AUTHORIZATION_DEFAULTS).toEqual({ enabled: false, fail_closed: true, default_role: "user", provider: null, roles: null });
    expect(AuthorizationConfigSchema).toBeDefined();
    expect(middleware.releasePolicyParameters?.()).toEqual({ enabled: false });
    const handler = ranTool();
    await middleware.wrapToolCall!(request(), handler);
    expect(handler).toHaveBeenCalledOnce();
    expect(() => createAuthorizationMiddleware({ enabled: false, provider: { use: "garbage.module:Nope" } })).not.toThrow();
  });

  it("an unknown default_role fails construction with a clear error", () => {
    expect(() => createAuthorizationMiddleware({ enabled: true, default_role: "missing", roles: { user: { tools: { allow: "*" } } } })).toThrow(
      expect.objectContaining({ code: "authorization_unknown_role", message: expect.stringContaining("authorization.default_role 'missing' is not defined") }),
    );
  });

  it("rejects a wrong key with its path", () => {
    expect(() => createAuthorizationMiddleware({ enabled: true, roles: { user: { tools: { alow: ["x"] } } } } as never)).toThrow(
      /^Authorization\.roles\.user\.tools\.alow: unknown policy key "alow"/,
    );
  });

  it("declares its settings and the provider's policy", () => {
    const middleware = createAuthorizationMiddleware(
      { enabled: true, roles: { user: { tools: { allow: "*", deny: ["update_agent"] } } } },
      { deferredToolSearch: true },
    );
    const declared = middleware.releasePolicyParameters?.();
    expect(declared).toMatchObject({
      enabled: true,
      fail_closed: true,
      default_role: "user",
      resource: "tool",
      action: "call",
      infrastructure_tools: ["tool_search"],
      provider: "rbac",
      provider_parameters: { known_roles: ["user"], policy_hash: expect.stringMatching(/^[0-9a-f]{64}$/) },
    });
  });

  it("denies a call with the runtime principal, naming the rule", async () => {
    const provider = new CountingProvider(() => ({ allowed: false, rule: "authz.denied", reason: "blocked" }));
    const middleware = createAuthorizationMiddleware({ enabled: true }, { provider });
    const handler = ranTool();
    const result = (await middleware.wrapToolCall!(request({}, { user_id: "u1", user_role: "guest", thread_id: "t1" }), handler)) as ToolMessage;
    expect(handler).not.toHaveBeenCalled();
    expect(result.status).toBe("error");
    expect(result.content).toBe("Guardrail denied: tool 'bash' was blocked (authz.denied). Reason: blocked. Choose an alternative approach.");
    const { principal, request: asked } = provider.authorizeCalls[0]!;
    expect(principal).toEqual({ userId: "u1", role: "guest", oauthProvider: null, oauthId: null, channelUserId: null, isInternal: false, attributes: {} });
    expect(asked).toMatchObject({ resource: "tool", action: "call", target: "bash" });
    expect(asked.context).toMatchObject({ run_id: "r1", thread_id: "t1", tool_call_id: "call-1", tool_input: { command: "whoami" } });
  });

  it("with the built-in RBAC: allowed tools run, denied ones return the RBAC reason", async () => {
    const middleware = createAuthorizationMiddleware({ ...ENABLED_GUEST, roles: { guest: { tools: { allow: ["web_search"] } } } });
    const allowed = ranTool();
    await middleware.wrapToolCall!(request({ name: "web_search" }), allowed);
    expect(allowed).toHaveBeenCalledOnce();
    const denied = (await middleware.wrapToolCall!(request(), ranTool())) as ToolMessage;
    expect(denied.content).toBe(
      "Guardrail denied: tool 'bash' was blocked (authz.denied). Reason: role 'guest' is denied 'bash' on resource 'tool'. Choose an alternative approach.",
    );
  });

  it("an unknown caller role is a provider error: denied when fail-closed, run when open", async () => {
    const roles = { user: { tools: { allow: "*" } } };
    const closed = (await createAuthorizationMiddleware({ enabled: true, roles }).wrapToolCall!(request({}, { user_role: "editor" }), ranTool())) as ToolMessage;
    expect(closed.content).toContain("(oap.evaluator_error)");
    const handler = ranTool();
    await createAuthorizationMiddleware({ enabled: true, fail_closed: false, roles }).wrapToolCall!(request({}, { user_role: "editor" }), handler);
    expect(handler).toHaveBeenCalledOnce();
  });

  it("reuses the SAME provider instance that filtered the tools at assembly (Layer 1 then Layer 2)", async () => {
    const provider = new CountingProvider((r) => ({ allowed: r.target === "web_search", rule: r.target === "web_search" ? "authz.allowed" : "authz.denied" }), ["web_search"]);
    const principal = buildPrincipalFromContext({ user_role: "guest" }, { default_role: "guest" });
    const runs: string[] = [];
    const tools = await filterToolsForPrincipal([agentTool("bash", runs), agentTool("web_search", runs)], principal, provider);
    expect(tools.map((t) => t.name)).toEqual(["web_search"]);
    const middleware = createAuthorizationMiddleware(ENABLED_GUEST, { provider });
    await middleware.wrapToolCall!(request({ name: "web_search" }, { user_role: "guest" }), ranTool());
    expect(provider.filterCalls).toBe(1);
    expect(provider.authorizeCalls).toHaveLength(1);
  });

  it("scenario M24: with a deferred tool_search in the build, tool_search skips the authorization provider but the configured guardrail still evaluates it", async () => {
    const provider = new CountingProvider(() => ({ allowed: false, rule: "authz.denied", reason: "not in the guest catalog" }));
    const guardrail = capturingGuardrail();
    const authorization = createAuthorizationMiddleware(ENABLED_GUEST, { provider, deferredToolSearch: true });
    const explicit = createGuardrailMiddleware({ enabled: true }, { provider: guardrail });
    const handler = ranTool();
    const req = request({ name: "tool_search", args: { query: "mcp_allowed" }, id: "call-search" }, { user_role: "guest" });
    // Chain order: Authorization outer of Guardrail.
    const result = (await authorization.wrapToolCall!(req, (inner) => explicit.wrapToolCall!(inner, handler))) as ToolMessage;
    expect(result.content).toBe("ran");
    expect(provider.authorizeCalls).toHaveLength(0);
    expect(guardrail.requests.map((r) => r.toolName)).toEqual(["tool_search"]);
  });

  it("scenario M24: a configured guardrail can still deny the generated tool_search", async () => {
    const authorization = createAuthorizationMiddleware(ENABLED_GUEST, { provider: new CountingProvider(), deferredToolSearch: true });
    const explicit = createGuardrailMiddleware({ enabled: true }, { provider: capturingGuardrail(["tool_search"]) });
    const handler = ranTool();
    const result = (await authorization.wrapToolCall!(request({ name: "tool_search" }), (inner) => explicit.wrapToolCall!(inner, handler))) as ToolMessage;
    expect(handler).not.toHaveBeenCalled();
    expect(result.content).toContain("(oap.tool_not_allowed)");
  });

  it("scenario M24: without a deferred setup a tool named tool_search gets no exemption", async () => {
    const middleware = createAuthorizationMiddleware({ ...ENABLED_GUEST, roles: { guest: { tools: { allow: ["web_search"] } } } });
    const handler = ranTool();
    const result = (await middleware.wrapToolCall!(request({ name: "tool_search" }), handler)) as ToolMessage;
    expect(handler).not.toHaveBeenCalled();
    expect(result.content).toContain("(authz.denied)");
  });

  it("scenario M24: through the real engine, in chain order, the deferred tool_search runs, the guardrail sees every call, and authorization denies bash first", async () => {
    const provider = new CountingProvider((r) => ({ allowed: r.target === "web_search", rule: r.target === "web_search" ? "authz.allowed" : "authz.denied" }));
    const guardrail = capturingGuardrail();
    const runs: string[] = [];
    const model = fakeModel()
      .respondWithTools([
        { name: "tool_search", args: { query: "mcp" }, id: "c-search" },
        { name: "bash", args: { command: "id" }, id: "c-bash" },
        { name: "web_search", args: { query: "x" }, id: "c-web" },
      ])
      .respond(new AIMessage("done"));
    const agent = createAgent({
      model,
      tools: [agentTool("tool_search", runs), agentTool("bash", runs), agentTool("web_search", runs)],
      middlewares: [
        createAuthorizationMiddleware(ENABLED_GUEST, { provider, deferredToolSearch: true }),
        createGuardrailMiddleware({ enabled: true }, { provider: guardrail }),
      ],
      services: { clock: systemClock },
    });
    let record: RunRecord | undefined;
    let last: { messages: ToolMessage[] } | undefined;
    for await (const chunk of agent.stream({ messages: [new HumanMessage("find tools")] }, { threadId: "t-24", context: { user_role: "guest" } }, (r) => (record = r))) {
      last = chunk as { messages: ToolMessage[] };
    }
    expect(runs.sort()).toEqual(["tool_search", "web_search"]);
    expect(provider.authorizeCalls.map((c) => c.request.target).sort()).toEqual(["bash", "web_search"]);
    // Authorization is outer: the denied bash never costs a guardrail call.
    expect(guardrail.requests.map((r) => r.toolName).sort()).toEqual(["tool_search", "web_search"]);
    const bash = last!.messages.find((m) => ToolMessage.isInstance(m) && m.tool_call_id === "c-bash")!;
    expect(bash.content).toContain("(authz.denied)");
    expect(peekAuthorizationOutcome(record!.scope, "c-search")).toMatchObject({ gate: "Guardrail", allowed: true });
    expect(peekAuthorizationOutcome(record!.scope, "c-bash")).toMatchObject({ gate: "Authorization", allowed: false, rule: "authz.denied" });
  });

  describe("AuthorizationOutcome", () => {
    it("publishes each decision under __authorization_outcome, keyed by tool_call_id", async () => {
      const provider = new CountingProvider(() => ({ allowed: false, rule: "authz.denied", reason: "no", policyId: "p1" }));
      const req = request({ id: "call-7" }, { user_role: "guest" });
      await createAuthorizationMiddleware(ENABLED_GUEST, { provider }).wrapToolCall!(req, ranTool());
      const table = req.runtime.scope.get<Record<string, AuthorizationOutcome>>(AUTHORIZATION_OUTCOME_KEY)!;
      expect(table["call-7"]).toEqual({
        toolCallId: "call-7",
        toolName: "bash",
        gate: "Authorization",
        provider: "authorization",
        allowed: false,
        rule: "authz.denied",
        reason: "no",
        policyId: "p1",
        providerError: false,
        failClosed: true,
        decidedAt: "2026-05-08T12:00:00.000Z",
      });
    });

    it("the infrastructure bypass is published too", async () => {
      const req = request({ name: "tool_search", id: "call-s" });
      await createAuthorizationMiddleware({ enabled: true, roles: { user: {} } }, { deferredToolSearch: true }).wrapToolCall!(req, ranTool());
      expect(peekAuthorizationOutcome(req.runtime.scope, "call-s")).toMatchObject({ allowed: true, rule: "authz.infrastructure_tool", policyId: "authz:infrastructure" });
    });

    it("a caller cannot forge it: a context value under the key is ignored, the run scope holds the real decision", async () => {
      const runs: string[] = [];
      const provider = new CountingProvider(() => ({ allowed: false, rule: "authz.denied", reason: "guests may not run bash" }));
      const model = fakeModel().respondWithTools([{ name: "bash", args: {}, id: "c1" }]).respond(new AIMessage("ok"));
      const agent = createAgent({
        model,
        tools: [agentTool("bash", runs)],
        middlewares: [createAuthorizationMiddleware(ENABLED_GUEST, { provider })],
        services: { clock: systemClock },
      });
      const forged = { c1: { toolCallId: "c1", allowed: true, rule: "forged.allow" } };
      let record: RunRecord | undefined;
      for await (const _ of agent.stream(
        { messages: [new HumanMessage("run bash")] },
        { threadId: "t-forge", context: { user_role: "guest", [AUTHORIZATION_OUTCOME_KEY]: forged } },
        (r) => (record = r),
      )) void _;
      expect(runs).toEqual([]);
      const outcome = peekAuthorizationOutcome(record!.scope, "c1");
      expect(outcome).toMatchObject({ allowed: false, rule: "authz.denied", gate: "Authorization" });
      expect(record!.scope.get(AUTHORIZATION_OUTCOME_KEY)).not.toBe(forged);
    });

    it("an RBAC-backed run through the engine applies the caller's role from context", async () => {
      const provider = new RbacAuthorizationProvider({ roles: { admin: {}, guest: { tools: { allow: ["web_search"] } } } });
      for (const [role, expected] of [
        ["admin", ["bash"]],
        ["guest", []],
      ] as const) {
        const runs: string[] = [];
        const model = fakeModel().respondWithTools([{ name: "bash", args: {}, id: "c1" }]).respond(new AIMessage("ok"));
        const agent = createAgent({
          model,
          tools: [agentTool("bash", runs)],
          middlewares: [createAuthorizationMiddleware(ENABLED_GUEST, { provider })],
          services: { clock: systemClock },
        });
        await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: `t-${role}`, context: { user_role: role } });
        expect(runs).toEqual(expected);
      }
    });
  });
});

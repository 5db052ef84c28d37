import { describe, expect, it } from "vitest";
import { GuardrailAuthorizationAdapter } from "../../src/authz/adapter.ts";
import { AllowlistProvider, isGuardrailProvider, type GuardrailRequest } from "../../src/authz/guardrail-provider.ts";
import type { Principal } from "../../src/authz/principal.ts";
import type { AuthorizationProvider, AuthzDecision, AuthzRequest } from "../../src/authz/provider.ts";

function guardrailRequest(overrides: Partial<GuardrailRequest> = {}): GuardrailRequest {
  return {
    toolName: "bash",
    toolInput: {},
    agentId: null,
    threadId: null,
    runId: null,
    toolCallId: null,
    isSubagent: false,
    timestamp: "2026-05-08T12:00:00.000Z",
    userId: null,
    userRole: null,
    oauthProvider: null,
    oauthId: null,
    channelUserId: null,
    isInternal: false,
    authzAttributes: {},
    ...overrides,
  };
}

class CapturingProvider implements AuthorizationProvider {
  readonly name = "capturing";
  readonly calls: Array<{ principal: Principal; request: AuthzRequest }> = [];
  constructor(readonly decision: AuthzDecision | (() => AuthzDecision) = { allowed: true, rule: "test.allowed" }) {}
  async authorize(principal: Principal, request: AuthzRequest): Promise<AuthzDecision> {
    this.calls.push({ principal, request });
    return typeof this.decision === "function" ? this.decision() : this.decision;
  }
  filterResources(_p: Principal, _r: string, names: readonly string[]): readonly string[] {
    return names;
  }
}

describe("GuardrailAuthorizationAdapter", () => {
  it("is a guardrail provider named authorization", () => {
    const adapter = new GuardrailAuthorizationAdapter(new CapturingProvider());
    expect(adapter.name).toBe("authorization");
    expect(isGuardrailProvider(adapter)).toBe(true);
  });

  it("maps allow and deny, keeping rule, reason, policy id and metadata", async () => {
    const allow = await new GuardrailAuthorizationAdapter(
      new CapturingProvider({ allowed: true, rule: "ok", reason: "allowed by policy X", policyId: "rbac.v1", metadata: { rule_id: "rule-42" } }),
    ).evaluate(guardrailRequest());
    expect(allow).toEqual({ allow: true, reasons: [{ code: "ok", message: "allowed by policy X" }], policyId: "rbac.v1", metadata: { rule_id: "rule-42" } });
    const deny = await new GuardrailAuthorizationAdapter(new CapturingProvider({ allowed: false, rule: "authz.denied", policyId: "test.deny.v1" })).evaluate(
      guardrailRequest(),
    );
    expect(deny).toMatchObject({ allow: false, policyId: "test.deny.v1", reasons: [{ code: "authz.denied" }] });
  });

  it("builds the complete principal through the shared builder and asks tool:call for the tool", async () => {
    const provider = new CapturingProvider();
    const attributes = { department: "engineering" };
    await new GuardrailAuthorizationAdapter(provider).evaluate(
      guardrailRequest({
        toolName: "write_file",
        userId: "user-42",
        userRole: "admin",
        oauthProvider: "github",
        oauthId: "gh-42",
        channelUserId: "channel-42",
        isInternal: true,
        authzAttributes: attributes,
      }),
    );
    const { principal, request } = provider.calls[0]!;
    expect(principal).toEqual({
      userId: "user-42",
      role: "admin",
      oauthProvider: "github",
      oauthId: "gh-42",
      channelUserId: "channel-42",
      isInternal: true,
      attributes: { department: "engineering" },
    });
    expect(principal.attributes).not.toBe(attributes);
    expect(request).toMatchObject({ resource: "tool", action: "call", target: "write_file" });
  });

  it("applies default_role when the role is missing, and keeps an unknown one", async () => {
    const provider = new CapturingProvider();
    await new GuardrailAuthorizationAdapter(provider, { defaultRole: "guest" }).evaluate(guardrailRequest({ userRole: null }));
    await new GuardrailAuthorizationAdapter(provider, { defaultRole: "user" }).evaluate(guardrailRequest({ userRole: "editor" }));
    expect(provider.calls.map((c) => c.principal.role)).toEqual(["guest", "editor"]);
  });

  it("passes the call's facts as request context", async () => {
    const provider = new CapturingProvider();
    await new GuardrailAuthorizationAdapter(provider).evaluate(
      guardrailRequest({
        toolName: "write_file",
        toolInput: { path: "/tmp/test.txt" },
        threadId: "thread-99",
        runId: "run-1",
        toolCallId: "call-1",
        isSubagent: true,
        agentId: "passport-42",
      }),
    );
    expect(provider.calls[0]!.request.context).toEqual({
      thread_id: "thread-99",
      run_id: "run-1",
      tool_call_id: "call-1",
      tool_input: { path: "/tmp/test.txt" },
      is_subagent: true,
      agent_id: "passport-42",
      timestamp: "2026-05-08T12:00:00.000Z",
    });
  });

  it("can be pointed at another resource and action", async () => {
    const provider = new CapturingProvider();
    await new GuardrailAuthorizationAdapter(provider, { resource: "model", action: "use" }).evaluate(guardrailRequest({ toolName: "claude-sonnet-4-6" }));
    expect(provider.calls[0]!.request).toMatchObject({ resource: "model", action: "use", target: "claude-sonnet-4-6" });
  });

  it("lets provider errors through: the gate owns fail_closed", async () => {
    const adapter = new GuardrailAuthorizationAdapter(
      new CapturingProvider(() => {
        throw new Error("provider crashed");
      }),
    );
    await expect(adapter.evaluate(guardrailRequest())).rejects.toThrow("provider crashed");
  });

  it("a malformed decision is an error, never an allow", async () => {
    const adapter = new GuardrailAuthorizationAdapter(new CapturingProvider({ allowed: "yes" } as unknown as AuthzDecision));
    await expect(adapter.evaluate(guardrailRequest())).rejects.toMatchObject({ code: "authorization_provider_error" });
  });

  it("allows infrastructure tools without asking the provider", async () => {
    const provider = new CapturingProvider({ allowed: false, rule: "authz.denied" });
    const adapter = new GuardrailAuthorizationAdapter(provider, { infrastructureToolNames: ["tool_search"] });
    expect(await adapter.evaluate(guardrailRequest({ toolName: "tool_search" }))).toEqual({
      allow: true,
      reasons: [{ code: "authz.infrastructure_tool" }],
      policyId: "authz:infrastructure",
    });
    expect(provider.calls).toHaveLength(0);
    expect((await adapter.evaluate(guardrailRequest({ toolName: "bash" }))).allow).toBe(false);
  });
});

describe("AllowlistProvider", () => {
  const evaluate = (provider: AllowlistProvider, toolName: string) => provider.evaluate(guardrailRequest({ toolName }));

  it("no lists allows everything", () => {
    expect(evaluate(new AllowlistProvider(), "bash")).toEqual({ allow: true, reasons: [{ code: "oap.allowed" }] });
  });

  it("denied_tools block, other tools pass", () => {
    const provider = new AllowlistProvider({ denied_tools: ["bash", "write_file"] });
    expect(evaluate(provider, "bash")).toEqual({ allow: false, reasons: [{ code: "oap.tool_not_allowed", message: "tool 'bash' is denied" }] });
    expect(evaluate(provider, "web_search").allow).toBe(true);
  });

  it("allowed_tools block every unlisted tool", () => {
    const provider = new AllowlistProvider({ allowed_tools: ["web_search", "read_file"] });
    expect(evaluate(provider, "bash")).toEqual({ allow: false, reasons: [{ code: "oap.tool_not_allowed", message: "tool 'bash' not in allowlist" }] });
    expect(evaluate(provider, "web_search").allow).toBe(true);
  });

  it("an empty allowlist allows nothing (it is not the same as no allowlist)", () => {
    const provider = new AllowlistProvider({ allowed_tools: [] });
    for (const tool of ["bash", "web_search", "read_file"]) expect(evaluate(provider, tool)).toMatchObject({ allow: false, reasons: [{ code: "oap.tool_not_allowed" }] });
  });

  it("a tool in both lists is denied", () => {
    expect(evaluate(new AllowlistProvider({ allowed_tools: ["bash", "web_search"], denied_tools: ["bash"] }), "bash").allow).toBe(false);
  });
});

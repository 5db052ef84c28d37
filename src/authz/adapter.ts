import { buildPrincipalFromContext } from "./principal.ts";
import { checkDecision, type AuthorizationProvider, type AuthzDecision, type AuthzRequest } from "./provider.ts";
import type { GuardrailDecision, GuardrailProvider, GuardrailRequest } from "./guardrail-provider.ts";

/** The framework tool generated from a build's deferred setup (its catalog is already Layer-1 filtered). */
export const TOOL_SEARCH_TOOL_NAME = "tool_search";

export interface GuardrailAuthorizationAdapterOptions {
  /** The role of a caller whose context carries none: authorization.default_role. */
  readonly defaultRole?: string;
  readonly resource?: string;
  readonly action?: string;
  /**
   * Framework tools generated from an already authorized capability set; they run without a
   * second provider decision. Derive them from the current build's concrete deferred setup,
   * never from static config, or an ordinary tool of the same name would slip through.
   */
  readonly infrastructureToolNames?: Iterable<string>;
}

/**
 * Presents an {@link AuthorizationProvider} as a {@link GuardrailProvider}, so Layer 2 reuses the
 * guardrail gate's fail-closed, audit and error-ToolMessage behaviour instead of a second
 * implementation. The principal is rebuilt from each request through the shared builder, so a
 * stale identity is never cached. Provider errors propagate: the gate owns fail_closed.
 */
export class GuardrailAuthorizationAdapter implements GuardrailProvider {
  readonly name = "authorization";
  readonly provider: AuthorizationProvider;
  readonly defaultRole: string;
  readonly resource: string;
  readonly action: string;
  readonly infrastructureToolNames: ReadonlySet<string>;

  constructor(provider: AuthorizationProvider, options: GuardrailAuthorizationAdapterOptions = {}) {
    this.provider = provider;
    this.defaultRole = options.defaultRole ?? "user";
    this.resource = options.resource ?? "tool";
    this.action = options.action ?? "call";
    this.infrastructureToolNames = new Set(options.infrastructureToolNames ?? []);
  }

  async evaluate(request: GuardrailRequest): Promise<GuardrailDecision> {
    if (this.infrastructureToolNames.has(request.toolName)) {
      return { allow: true, reasons: [{ code: "authz.infrastructure_tool" }], policyId: "authz:infrastructure" };
    }
    const principal = buildPrincipalFromContext(
      {
        user_id: request.userId,
        user_role: request.userRole,
        oauth_provider: request.oauthProvider,
        oauth_id: request.oauthId,
        channel_user_id: request.channelUserId,
        is_internal: request.isInternal,
        authz_attributes: request.authzAttributes,
      },
      { default_role: this.defaultRole },
    );
    const authzRequest: AuthzRequest = {
      resource: this.resource,
      action: this.action,
      target: request.toolName,
      context: {
        thread_id: request.threadId,
        run_id: request.runId,
        tool_call_id: request.toolCallId,
        tool_input: request.toolInput,
        is_subagent: request.isSubagent,
        agent_id: request.agentId,
        timestamp: request.timestamp,
      },
    };
    return toGuardrailDecision(checkDecision(this.provider.name, await this.provider.authorize(principal, authzRequest)));
  }

  releasePolicyParameters(): Record<string, unknown> {
    return this.provider.releasePolicyParameters?.() ?? {};
  }
}

function toGuardrailDecision(decision: AuthzDecision): GuardrailDecision {
  return {
    allow: decision.allowed,
    // A provider that names no rule gets the gate's fallback wording rather than "undefined".
    reasons: typeof decision.rule === "string" && decision.rule !== "" ? [{ code: decision.rule, message: decision.reason ?? "" }] : [],
    policyId: decision.policyId ?? null,
    metadata: decision.metadata ?? {},
  };
}

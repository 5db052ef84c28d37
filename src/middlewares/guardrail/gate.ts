import { ToolMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import { normalizeAuthzAttributes, readContextString } from "../../authz/principal.ts";
import type { GuardrailDecision, GuardrailProvider, GuardrailRequest } from "../../authz/guardrail-provider.ts";
import { publishAuthorizationOutcome } from "../../authz/outcome.ts";
import { DeerflowError } from "../../core/errors.ts";
import { deepFrozenCopy } from "../../core/freeze.ts";
import { runThreadId } from "../../engine/run-identity.ts";
import type { AgentRuntime, ToolCallRequest, ToolHandler, ToolResult } from "../../engine/types.ts";
import { emitEvent } from "../../engine/events.ts";
import { TOOL_META_KEY, type ToolResultMeta } from "../tool-result-meta.ts";

/*
 * The pre-tool-call gate both Authorization (Layer 2) and Guardrail are made of: ask the provider,
 * run the tool only on allow, answer a deny with an error ToolMessage the model can recover from.
 * A provider failure is a deny (`oap.evaluator_error`) when fail-closed and lets the call run when
 * open. Every decision is published as an AuthorizationOutcome; denials and provider failures are
 * also written to the run's event stream (names and codes only, never the tool's arguments).
 */

export const GUARDRAIL_EVENT = "middleware:guardrail";

const MISSING_TOOL_CALL_ID = "missing_id";
const UNKNOWN_TOOL_NAME = "unknown_tool";
const FALLBACK_CODE = "oap.denied";
const FALLBACK_REASON = "blocked by guardrail policy";
const EVALUATOR_ERROR_CODE = "oap.evaluator_error";
const REASON_MESSAGE_LIMIT = 500;

/**
 * A denial is the model's to work around (pick another tool), so it is stamped recoverable here:
 * the gate sits outside ToolErrorHandling, whose stamping never sees these messages.
 */
const DENIED_META: ToolResultMeta = Object.freeze({
  status: "error",
  error_type: "permission",
  recoverable_by_model: true,
  recommended_next_action: "try_alternative",
  source: "tool_return",
});

export interface GuardrailGateOptions {
  /** The middleware's name, recorded as the deciding gate. */
  readonly gate: string;
  readonly provider: GuardrailProvider;
  readonly failClosed: boolean;
  /** Handed to the provider as agentId. */
  readonly passport: string | null;
}

export function deniedText(toolName: string, code: string, reason: string): string {
  return `Guardrail denied: tool '${toolName}' was blocked (${code}). Reason: ${reason}. Choose an alternative approach.`;
}

// A frozen copy: a provider that edits the arguments it inspects must not change what then runs.
function toolInput(args: unknown): Readonly<Record<string, unknown>> {
  return typeof args === "object" && args !== null && !Array.isArray(args) ? deepFrozenCopy(args as Record<string, unknown>) : {};
}

/** The provider's view of one call. Identity comes from the run context, ids from the engine. */
export function buildGuardrailRequest(request: ToolCallRequest, passport: string | null): GuardrailRequest {
  const { runtime, toolCall } = request;
  const context = runtime.context;
  return {
    toolName: typeof toolCall.name === "string" ? toolCall.name : "",
    toolInput: toolInput(toolCall.args),
    agentId: passport,
    threadId: runThreadId(runtime) ?? readContextString(context, "thread_id"),
    runId: runtime.runId,
    toolCallId: typeof toolCall.id === "string" && toolCall.id !== "" ? toolCall.id : null,
    isSubagent: context["is_subagent"] === true,
    timestamp: new Date(runtime.services.clock.now()).toISOString(),
    userId: readContextString(context, "user_id"),
    userRole: readContextString(context, "user_role"),
    oauthProvider: readContextString(context, "oauth_provider"),
    oauthId: readContextString(context, "oauth_id"),
    channelUserId: readContextString(context, "channel_user_id"),
    isInternal: context["is_internal"] === true,
    authzAttributes: normalizeAuthzAttributes(context["authz_attributes"]),
  };
}

function checkGuardrailDecision(providerName: string, value: unknown): GuardrailDecision {
  if (typeof value !== "object" || value === null || typeof (value as { allow?: unknown }).allow !== "boolean") {
    throw new DeerflowError("guardrail_provider_error", `Guardrail provider "${providerName}" returned something other than a decision { allow, reasons }; fix the provider.`);
  }
  return value as GuardrailDecision;
}

function firstReason(decision: GuardrailDecision): { code: string; message: string } | undefined {
  const reason = Array.isArray(decision.reasons) ? decision.reasons[0] : undefined;
  if (!reason || typeof reason.code !== "string" || reason.code === "") return undefined;
  return { code: reason.code, message: typeof reason.message === "string" ? reason.message : "" };
}

function deniedMessage(request: ToolCallRequest, decision: GuardrailDecision): ToolMessage {
  const toolName = request.toolCall.name || UNKNOWN_TOOL_NAME;
  const reason = firstReason(decision);
  return new ToolMessage({
    content: deniedText(toolName, reason?.code ?? FALLBACK_CODE, reason?.message || FALLBACK_REASON),
    tool_call_id: request.toolCall.id || MISSING_TOOL_CALL_ID,
    name: toolName,
    status: "error",
    additional_kwargs: { [TOOL_META_KEY]: { ...DENIED_META } },
  });
}

export interface GuardrailGate {
  wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult>;
}

export function createGuardrailGate(options: GuardrailGateOptions): GuardrailGate {
  const { gate, provider, failClosed, passport } = options;

  function publish(runtime: AgentRuntime, request: ToolCallRequest, decision: GuardrailDecision, providerError: boolean, decidedAt: string): void {
    const reason = firstReason(decision);
    publishAuthorizationOutcome(runtime.scope, {
      toolCallId: request.toolCall.id || MISSING_TOOL_CALL_ID,
      toolName: request.toolCall.name || UNKNOWN_TOOL_NAME,
      gate,
      provider: provider.name,
      allowed: decision.allow,
      rule: reason?.code ?? (decision.allow ? "oap.allowed" : FALLBACK_CODE),
      reason: reason?.message || null,
      policyId: typeof decision.policyId === "string" ? decision.policyId : null,
      providerError,
      failClosed,
      decidedAt,
    });
  }

  function audit(runtime: AgentRuntime, guardrailRequest: GuardrailRequest, decision: GuardrailDecision, action: string, providerError: boolean): void {
    const reasons = Array.isArray(decision.reasons) ? decision.reasons : [];
    emitEvent(runtime, {
      type: GUARDRAIL_EVENT,
      middleware: gate,
      hook: "wrap_tool_call",
      action,
      changes: {
        tool_name: guardrailRequest.toolName,
        tool_call_id: guardrailRequest.toolCallId,
        agent_id: guardrailRequest.agentId,
        is_subagent: guardrailRequest.isSubagent,
        user_role: guardrailRequest.userRole,
        allow: decision.allow,
        policy_id: typeof decision.policyId === "string" ? decision.policyId : null,
        reason_codes: reasons.map((r) => r?.code).filter((code): code is string => typeof code === "string" && code !== ""),
        reason_messages: reasons
          .map((r) => r?.message)
          .filter((message): message is string => typeof message === "string" && message !== "")
          .map((message) => Array.from(message).slice(0, REASON_MESSAGE_LIMIT).join("")),
        fail_closed: failClosed,
        provider_error: providerError,
      },
    });
  }

  return {
    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      const { runtime } = request;
      // Built outside the try: malformed server-owned identity is a bug to surface, not a provider failure to absorb.
      const guardrailRequest = buildGuardrailRequest(request, passport);
      let decision: GuardrailDecision;
      try {
        decision = checkGuardrailDecision(provider.name, await provider.evaluate(guardrailRequest));
      } catch (error) {
        if (isGraphBubbleUp(error)) throw error;
        if (runtime.signal?.aborted) throw error;
        const fallback: GuardrailDecision = {
          allow: !failClosed,
          reasons: [{ code: EVALUATOR_ERROR_CODE, message: `guardrail provider error (${failClosed ? "fail-closed" : "fail-open"})` }],
        };
        publish(runtime, request, fallback, true, guardrailRequest.timestamp);
        audit(runtime, guardrailRequest, fallback, failClosed ? "deny_tool_call" : "allow_tool_call_after_provider_error", true);
        return failClosed ? deniedMessage(request, fallback) : handler(request);
      }
      publish(runtime, request, decision, false, guardrailRequest.timestamp);
      if (!decision.allow) {
        audit(runtime, guardrailRequest, decision, "deny_tool_call", false);
        return deniedMessage(request, decision);
      }
      return handler(request);
    },
  };
}

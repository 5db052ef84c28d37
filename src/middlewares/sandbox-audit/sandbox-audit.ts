import { replaceToolContent, ToolTransform } from "../tool-transform-meta.ts";
import { ToolMessage } from "@langchain/core/messages";
import type { MessageContent } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import { runThreadId } from "../../engine/run-identity.ts";
import type { AgentMiddleware, AgentRuntime, ToolCallRequest, ToolHandler, ToolResult } from "../../engine/types.ts";
import { canonicalHashSync } from "../../extension-api/sha256-sync.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { emitEvent } from "../../engine/events.ts";
import {
  MAX_COMMAND_LENGTH,
  SANDBOX_AUDIT_RULE_SOURCES,
  SECURITY_VIOLATION_REASON,
  classifyCommandRules,
  validateCommand,
} from "./classify.ts";
import type { CommandVerdict } from "./classify.ts";
import { codePointLength, codePointPrefix } from "./split.ts";
import { stampToolMeta } from "../tool-result-meta.ts";

export {
  MAX_COMMAND_LENGTH,
  MEDIUM_RISK_REASON,
  SECURITY_VIOLATION_REASON,
  classifyCommand,
  classifyCommandRules,
  validateCommand,
} from "./classify.ts";
export type { CommandClassification, CommandVerdict } from "./classify.ts";
export { splitCompoundCommand, shlexSplit } from "./split.ts";

/*
 * Audits every bash call before it runs: high-risk commands never reach the sandbox and come back
 * as a recoverable error, medium-risk ones run with a warning for the model, and each decision is
 * recorded. This is defence in depth and an audit trail; the sandbox is the isolation boundary.
 */

export const SANDBOX_AUDIT_NAME = "SandboxAudit";
export const SANDBOX_AUDIT_EVENT = "middleware:sandbox_audit";
export const AUDITED_TOOL_NAME = "bash";
/** Rejected input is recorded cut to this many code points, so a payload cannot flood the audit trail. */
export const AUDIT_COMMAND_LIMIT = 200;

const MISSING_TOOL_CALL_ID = "missing_id";
const BLOCK_MESSAGE_TEMPLATE = "Command blocked: {reason}. Please use a safer alternative approach.";
const WARNING_TEMPLATE = "\n\n⚠️ Warning: `{command}` is a medium-risk command that may modify the runtime environment.";

/** No options upstream either (no config gate): the schema only makes a stray key fail loudly. */
export const SandboxAuditConfigSchema = v.strictObject({});
export interface SandboxAuditConfig {}
type _SandboxAuditConfigMatches = Assert<SameType<SandboxAuditConfig, v.InferOutput<typeof SandboxAuditConfigSchema>>>;

/** One audit line, shaped as upstream logs it. */
export interface SandboxAuditRecord {
  readonly timestamp: string;
  readonly thread_id: string;
  /** The command as the model sent it; rejected input is cut to {@link AUDIT_COMMAND_LIMIT}. */
  readonly command: string;
  readonly verdict: CommandVerdict;
}

export interface SandboxAuditDeps {
  /** A host's audit sink (a server log); the same record also goes out as a custom stream event. */
  readonly onAudit?: (record: SandboxAuditRecord) => void;
}

/** Builds the ToolMessage a blocked command becomes, stamped as a recoverable error. */
export function buildBlockedMessage(toolCallId: string | undefined, reason: string): ToolMessage {
  const message = new ToolMessage({
    content: BLOCK_MESSAGE_TEMPLATE.replace("{reason}", reason),
    tool_call_id: toolCallId || MISSING_TOOL_CALL_ID,
    name: AUDITED_TOOL_NAME,
    status: "error",
  });
  return stampToolMeta(message);
}

/** Appends the medium-risk warning to a result; a Command passes unchanged. */
export function appendWarning(result: ToolResult, command: string): ToolResult {
  if (!ToolMessage.isInstance(result)) return result;
  const warning = WARNING_TEMPLATE.replace("{command}", () => command);
  const content: MessageContent = Array.isArray(result.content)
    ? ([...result.content, { type: "text", text: warning }] as MessageContent)
    : `${typeof result.content === "string" ? result.content : String(result.content)}${warning}`;
  // Everything else the inner layers stamped (tool meta, artifact, id) stays: only the text grew,
  // and the transform trail says so.
  return replaceToolContent(result, content, { middleware: SANDBOX_AUDIT_NAME, transform: ToolTransform.WARNING_APPENDED });
}

function threadIdOf(runtime: AgentRuntime): string {
  return runThreadId(runtime) ?? "unknown";
}

function auditedCommand(command: string, truncate: boolean): string {
  if (!truncate) return command;
  const length = codePointLength(command);
  return length > AUDIT_COMMAND_LIMIT ? `${codePointPrefix(command, AUDIT_COMMAND_LIMIT)}... (${length} chars)` : command;
}

/**
 * Gates the `bash` tool: every call is classified before it runs. High risk (or empty, over-long,
 * NUL-carrying input) returns `Command blocked: <reason>. Please use a safer alternative
 * approach.` without running; medium risk runs and gets a warning appended. Every call emits one
 * `middleware:sandbox_audit` event. Other tools pass untouched.
 */
export function createSandboxAuditMiddleware(config?: Partial<SandboxAuditConfig>, deps: SandboxAuditDeps = {}): AgentMiddleware {
  parseMiddlewareConfig(SandboxAuditConfigSchema, config, SANDBOX_AUDIT_NAME);
  const policy = Object.freeze({
    audited_tools: [AUDITED_TOOL_NAME],
    max_command_length: MAX_COMMAND_LENGTH,
    audit_command_limit: AUDIT_COMMAND_LIMIT,
    rules_hash: canonicalHashSync(SANDBOX_AUDIT_RULE_SOURCES),
    block_message_hash: canonicalHashSync(BLOCK_MESSAGE_TEMPLATE),
    warning_message_hash: canonicalHashSync(WARNING_TEMPLATE),
  });

  function audit(request: ToolCallRequest, record: SandboxAuditRecord, reason: string | undefined): void {
    const { runtime } = request;
    emitEvent(runtime, {
      type: SANDBOX_AUDIT_EVENT,
      middleware: SANDBOX_AUDIT_NAME,
      ...record,
      ...(reason !== undefined ? { reason } : {}),
      tool_call_id: request.toolCall.id ?? null,
      run_id: runtime.runId,
    });
    if (!deps.onAudit) return;
    try {
      deps.onAudit(record);
    } catch (error) {
      // An audit sink is an observer: its failure must not decide whether the command runs.
      if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
    }
  }

  return {
    name: SANDBOX_AUDIT_NAME,
    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      if (request.toolCall.name !== AUDITED_TOOL_NAME) return handler(request);

      const raw: unknown = request.toolCall.args?.["command"];
      const command = typeof raw === "string" ? raw : "";
      const timestamp = new Date(request.runtime.services.clock.now()).toISOString();
      const threadId = threadIdOf(request.runtime);

      const rejected = validateCommand(command);
      if (rejected !== null) {
        audit(request, { timestamp, thread_id: threadId, command: auditedCommand(command, true), verdict: "block" }, rejected);
        return buildBlockedMessage(request.toolCall.id, rejected);
      }

      const verdict = classifyCommandRules(command);
      const reason = verdict === "block" ? SECURITY_VIOLATION_REASON : undefined;
      audit(request, { timestamp, thread_id: threadId, command, verdict }, reason);
      if (verdict === "block") return buildBlockedMessage(request.toolCall.id, SECURITY_VIOLATION_REASON);

      const result = await handler(request);
      return verdict === "warn" ? appendWarning(result, command) : result;
    },
    releasePolicyParameters() {
      return { ...policy, audited_tools: [...policy.audited_tools] };
    },
  };
}

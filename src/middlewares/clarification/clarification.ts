import { AIMessage, ToolMessage } from "@langchain/core/messages";
import type { InvalidToolCall, ToolCall } from "@langchain/core/messages/tool";
import { Command, END } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type {
  AgentMiddleware,
  AgentRuntime,
  AgentState,
  HookResult,
  ToolCallRequest,
  ToolHandler,
  ToolResult,
} from "../../engine/types.ts";
import { ASK_CLARIFICATION_TOOL_NAME, createAskClarificationTool } from "../../tools/ask-clarification.ts";
import { canonicalHashSync } from "../../extension-api/sha256-sync.ts";
import {
  MAX_FIELD_OPTIONS,
  MAX_FIELD_TEXT_CHARS,
  MAX_FORM_FIELDS,
  MAX_FORM_SERIALIZED_BYTES,
  clarificationMessageId,
  normalizeClarification,
  parseJsonValue,
} from "./payload.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { isRecord } from "../../core/guards.ts";

export {
  FORM_FIELD_TYPES,
  FORM_REPLY_HINT,
  MAX_FIELD_OPTIONS,
  MAX_FIELD_TEXT_CHARS,
  MAX_FORM_FIELDS,
  MAX_FORM_SERIALIZED_BYTES,
  RESERVED_FIELD_NAMES,
  clarificationMessageId,
  normalizeClarification,
  normalizeClarificationFields,
  normalizeClarificationOptions,
  type HumanInputField,
  type HumanInputMode,
  type HumanInputOption,
  type HumanInputRequest,
  type NormalizedClarification,
} from "./payload.ts";
export { ASK_CLARIFICATION_TOOL_NAME } from "../../tools/ask-clarification.ts";

/*
 * ask_clarification ends the turn: the question goes to the user as a card plus readable text, and
 * the run stops until they answer. The tool body never runs; this middleware answers the call. It
 * must be the innermost tool wrapper (last in the chain) so every outer wrapper still sees, stamps
 * and records the answer, and, being last, its afterModel runs first, so no other after-model guard
 * counts tool calls that will never run.
 */

export const CLARIFICATION_NAME = "Clarification";
/** Caller-context flag of non-interactive channels (webhooks): nobody is there to answer. */
export const DISABLE_CLARIFICATION_KEY = "disable_clarification";

export const CLARIFICATION_DISABLED_TEXT =
  "Clarification is disabled in this context — the human is not present to answer synchronously. " +
  "Do not ask for confirmation. Proceed with your best judgment, carry out the requested action, " +
  "and state any assumptions you made in your final response.";
const DISABLED_ID_SEED = "proceed-without-clarification";

/** Shown when a malformed ask_clarification carried no readable question: the user still gets a card to answer. */
export const UNREADABLE_QUESTION_TEXT =
  "I need more information before I can continue, but my question could not be read. " +
  "Please add the details you think are missing, or tell me how to proceed.";

// Content blocks that restate a tool call (Anthropic tool_use, v1 tool_call); a dropped call's
// block must go too, or a provider would still see the call.
const TOOL_CALL_BLOCK_TYPES: ReadonlySet<string> = new Set(["tool_use", "tool_call", "function_call"]);

/** No options: upstream has no config section. The schema still rejects unknown keys so a typo fails loudly. */
export const ClarificationConfigSchema = v.strictObject({});
export interface ClarificationConfig {}
type _ClarificationConfigMatches = Assert<SameType<ClarificationConfig, v.InferOutput<typeof ClarificationConfigSchema>>>;

export interface ClarificationDeps {
  /**
   * Contribute the ask_clarification tool (default true). Non-interactive assemblies pass false to
   * hide it from the model; a call the model makes anyway is still intercepted.
   */
  readonly includeTool?: boolean;
}

type Dict = Record<string, unknown>;

/** Context values arrive as JSON from many channels; only an explicit yes disables clarification. */
export function isClarificationDisabled(runtime: Pick<AgentRuntime, "context"> | undefined): boolean {
  const value = runtime?.context?.[DISABLE_CLARIFICATION_KEY];
  if (typeof value === "boolean") return value;
  if (typeof value === "number") return value !== 0;
  if (typeof value === "string") return /^(true|1|yes|on)$/i.test(value.trim());
  return false;
}

/** The ToolMessage that tells the agent to go on without asking; the run continues. */
export function disabledClarificationMessage(toolCallId: string): ToolMessage {
  return new ToolMessage({
    id: clarificationMessageId(toolCallId, DISABLED_ID_SEED),
    content: CLARIFICATION_DISABLED_TEXT,
    tool_call_id: toolCallId,
    name: ASK_CLARIFICATION_TOOL_NAME,
  });
}

/** The card for one ask_clarification call: a ToolMessage and a Command that ends the run. */
export function clarificationCommand(toolCall: Pick<ToolCall, "id" | "args">): Command {
  const toolCallId = toolCall.id ?? "";
  const { payload, text } = normalizeClarification(toolCall.args, { toolCallId });
  const message = new ToolMessage({
    id: payload.request_id,
    content: text,
    tool_call_id: toolCallId,
    name: ASK_CLARIFICATION_TOOL_NAME,
    artifact: { human_input: payload },
  });
  return new Command({ update: { messages: [message] }, goto: END });
}

/**
 * Arguments for a malformed call: the object if the text still parses, else the question picked out
 * of the broken JSON, else a generic question, so the user always gets something to answer.
 */
function salvageArgs(raw: unknown): Dict {
  let args: Dict = {};
  if (isRecord(raw)) args = raw;
  else if (typeof raw === "string") {
    const parsed = parseJsonValue(raw);
    if (parsed.ok && isRecord(parsed.value)) args = parsed.value;
    else {
      const match = /"question"\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(raw);
      const question = match ? parseJsonValue(`"${match[1]}"`) : { ok: false as const };
      if (question.ok && typeof question.value === "string") args = { question: question.value };
    }
  }
  const question = args["question"];
  if (typeof question !== "string" || question.trim() === "") args = { ...args, question: UNREADABLE_QUESTION_TEXT };
  return Object.hasOwn(args, "clarification_type") ? args : { ...args, clarification_type: "missing_info" };
}

function callId(call: unknown): string | undefined {
  return isRecord(call) && typeof call["id"] === "string" && call["id"] !== "" ? call["id"] : undefined;
}

/**
 * The newest AIMessage reduced to its one clarification call, or null when it has none or nothing
 * to change. A valid call wins; otherwise a malformed one parked on invalid_tool_calls is promoted
 * with salvaged arguments, so it ends the turn with a card just the same. Every other call — valid
 * or invalid, including a second ask_clarification — is dropped, from the structured calls, the raw
 * provider payload and the content blocks alike, so nothing runs before the user answers.
 */
export function pruneForClarification(message: AIMessage): AIMessage | null {
  const calls: ToolCall[] = message.tool_calls ?? [];
  const invalid: InvalidToolCall[] = message.invalid_tool_calls ?? [];
  const valid = calls.find((call) => call.name === ASK_CLARIFICATION_TOOL_NAME);
  const malformed = valid ? undefined : invalid.find((call) => call.name === ASK_CLARIFICATION_TOOL_NAME);
  if (!valid && !malformed) return null;

  let kept: ToolCall;
  if (valid) kept = valid;
  else {
    const id = malformed!.id || `${message.id ?? "ai"}:${ASK_CLARIFICATION_TOOL_NAME}`;
    kept = { type: "tool_call", id, name: ASK_CLARIFICATION_TOOL_NAME, args: salvageArgs(malformed!.args) };
  }

  const raw = message.additional_kwargs?.["tool_calls"];
  const rawCalls: unknown[] = Array.isArray(raw) ? raw : [];
  const droppedIds = new Set<string>();
  for (const call of [...calls, ...invalid, ...rawCalls]) {
    const id = callId(call);
    if (id !== undefined && id !== kept.id) droppedIds.add(id);
  }
  const extraRaw = rawCalls.some((call) => callId(call) !== kept.id);
  if (valid && calls.length === 1 && invalid.length === 0 && !extraRaw) return null;

  const additionalKwargs: Dict = { ...message.additional_kwargs };
  if (Array.isArray(raw)) {
    const keptRaw = rawCalls
      .filter((call) => callId(call) === kept.id)
      .map((call) => {
        // A promoted call's raw arguments are the unparseable text; the wire must carry valid JSON.
        if (valid || !isRecord(call) || !isRecord(call["function"])) return call;
        return { ...call, function: { ...call["function"], arguments: JSON.stringify(kept.args) } };
      });
    if (keptRaw.length > 0) additionalKwargs["tool_calls"] = keptRaw;
    else delete additionalKwargs["tool_calls"];
  }

  const content = Array.isArray(message.content)
    ? message.content.filter(
        (block) => !(isRecord(block) && TOOL_CALL_BLOCK_TYPES.has(String(block["type"])) && droppedIds.has(String(block["id"]))),
      )
    : message.content;

  return new AIMessage({
    content: content as AIMessage["content"],
    ...(message.id !== undefined ? { id: message.id } : {}),
    ...(message.name !== undefined ? { name: message.name } : {}),
    additional_kwargs: additionalKwargs,
    response_metadata: message.response_metadata,
    tool_calls: [kept],
    invalid_tool_calls: [],
    ...(message.usage_metadata !== undefined ? { usage_metadata: message.usage_metadata } : {}),
  });
}

/**
 * Intercepts ask_clarification: the user gets a card (artifact.human_input) with a readable text
 * fallback and the run ends until they answer. With `disable_clarification` in the caller's
 * context the agent is told to proceed instead and the run goes on, sibling calls included.
 */
export function createClarificationMiddleware(config?: Partial<ClarificationConfig>, deps: ClarificationDeps = {}): AgentMiddleware {
  parseMiddlewareConfig(ClarificationConfigSchema, config, CLARIFICATION_NAME);
  const includeTool = deps.includeTool ?? true;
  return {
    name: CLARIFICATION_NAME,
    ...(includeTool ? { tools: [createAskClarificationTool()] } : {}),
    afterModel(state: AgentState, runtime: AgentRuntime): HookResult {
      if (isClarificationDisabled(runtime)) return undefined;
      const last = state.messages.at(-1);
      if (!last || !AIMessage.isInstance(last)) return undefined;
      const pruned = pruneForClarification(last);
      // Same id: the reducer replaces the model's message in place.
      return pruned ? { messages: [pruned] } : undefined;
    },
    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      if (request.toolCall.name !== ASK_CLARIFICATION_TOOL_NAME) return handler(request);
      if (isClarificationDisabled(request.runtime)) return disabledClarificationMessage(request.toolCall.id ?? "");
      return clarificationCommand(request.toolCall);
    },
    releasePolicyParameters() {
      return {
        tool: ASK_CLARIFICATION_TOOL_NAME,
        tool_contributed: includeTool,
        ends_run: true,
        sibling_tool_calls: "drop",
        malformed_call: "promote_with_salvaged_args",
        disable_context_key: DISABLE_CLARIFICATION_KEY,
        disabled_message_hash: canonicalHashSync(CLARIFICATION_DISABLED_TEXT),
        unreadable_question_hash: canonicalHashSync(UNREADABLE_QUESTION_TEXT),
        payload_versions: { free_text: 1, choice_with_other: 1, form: 2 },
        form_limits: {
          max_fields: MAX_FORM_FIELDS,
          max_field_options: MAX_FIELD_OPTIONS,
          max_field_text_chars: MAX_FIELD_TEXT_CHARS,
          max_serialized_bytes: MAX_FORM_SERIALIZED_BYTES,
        },
      };
    },
  };
}

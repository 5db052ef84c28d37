import { AIMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { isCommand, isGraphBubbleUp, type Command } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type {
  AgentMiddleware,
  ModelHandler,
  ModelRequest,
  ToolCallRequest,
  ToolHandler,
  ToolResult,
} from "../../engine/types.ts";
import { canonicalHashSync } from "../../extension-api/sha256-sync.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { emitEvent } from "../../engine/events.ts";
import { hiddenHumanMessage, latestRealUserIndex } from "../messages.ts";
import {
  LEDGER_EVIDENCE_BOUNDARY,
  LEDGER_HEADING,
  MAX_RECEIPT_ID_DIGITS,
  OLDER_RECEIPTS_OMITTED,
  RECEIPT_LEDGER_CHAR_BUDGET,
  TOOL_RECEIPT_CONTEXT_KEY,
  TOOL_RECEIPT_KEY,
  TOOL_RECEIPT_LEDGER_KEY,
  extractToolReceipts,
  ledgerInstruction,
  renderReceiptLedger,
  type ToolReceipt,
} from "./ledger.ts";
import { RECEIPT_HASH_HEX_CHARS, makeToolReceipt } from "./stamp.ts";

export * from "./ledger.ts";
export * from "./verify.ts";
export { makeToolReceipt, pythonJsonDumps, RECEIPT_HASH_HEX_CHARS } from "./stamp.ts";

/*
 * The zero-LLM verification layer (RFC #4651, layer 1). Every tool result leaves with a receipt:
 * the tool, its status, hashes of arguments and output, the byte count and the time. Before a model
 * call the receipts are listed as a hidden ledger with display ids r1..rN, so a report can cite
 * what it did and a parent can check the citations against what really ran.
 *
 * It must be the outermost tool wrapper: Guardrail, SandboxAudit, ReadBeforeWrite and ToolProgress
 * answer some calls themselves (and SandboxAudit rebuilds results), and a receipt layer inside
 * them would silently leave gaps in the ledger. Normal results still carry the meta status that
 * ToolErrorHandling stamps on the inner return path; a short-circuit answer falls back to its own
 * status.
 *
 * Receipts record the raw result before any outer layer could rewrite it, so output_sha256 is a
 * freshness stamp, not a fingerprint to recheck against the persisted (possibly sanitized) text.
 */

export const TOOL_RECEIPT_NAME = "ToolReceipt";
export const TOOL_RECEIPT_EVENT = "middleware:tool_receipt";
export const RECEIPT_LEDGER_MESSAGE_NAME = "tool_receipt_ledger";

export type ReceiptRenderMode = "always" | "delegation_only";

export const ToolReceiptConfigSchema = v.strictObject({
  /** Stamp a receipt on every tool result and show the ledger to the model. */
  receipts_enabled: v.optional(v.boolean(), true),
  /**
   * When the lead shows the ledger: `delegation_only` only while the current turn processes a
   * subagent result (the one place it needs citation context), `always` on every call.
   * Subagent chains always render: their reports are where citations are written.
   */
  receipts_render_mode: v.optional(v.picklist(["always", "delegation_only"], 'expected "always" or "delegation_only"'), "delegation_only"),
  /** Reserved for the selective judge, which does not exist yet; true is refused so no one believes it ran. */
  judge_enabled: v.optional(
    v.pipe(
      v.boolean(),
      v.check((enabled) => !enabled, "the selective judge is not available yet, so it cannot be enabled; set judge_enabled to false"),
    ),
    false,
  ),
  /** Reserved for the selective judge. */
  judge_model_name: v.optional(v.nullable(v.string()), null),
});
export interface ToolReceiptConfig {
  receipts_enabled: boolean;
  receipts_render_mode: "always" | "delegation_only";
  judge_enabled: boolean;
  judge_model_name: string | null;
}
type _ToolReceiptConfigMatches = Assert<SameType<ToolReceiptConfig, v.InferOutput<typeof ToolReceiptConfigSchema>>>;
export type ToolReceiptConfigInput = Partial<ToolReceiptConfig>;
type _ToolReceiptConfigInputMatches = Assert<SameType<ToolReceiptConfigInput, v.InferInput<typeof ToolReceiptConfigSchema>>>;

export interface ToolReceiptDeps {
  /** A subagent chain: the ledger is rendered on every call, whatever receipts_render_mode says. */
  readonly subagent?: boolean;
}

/**
 * Context goes after the system prompt and before the conversation: never ahead of a system
 * message (providers expect those first), never at the tail, where it would displace the latest
 * turn and read like tool output.
 */
function afterLeadingSystemMessages(messages: readonly BaseMessage[], injected: BaseMessage): BaseMessage[] {
  let index = 0;
  while (index < messages.length && SystemMessage.isInstance(messages[index]!)) index += 1;
  return [...messages.slice(0, index), injected, ...messages.slice(index)];
}

/**
 * True when the current turn (everything after the newest real user message, or the whole list
 * when there is none, as in scheduled runs) holds a subagent result. A delegation from an earlier
 * turn must not keep the ledger on for every later ordinary turn.
 */
export function processesSubagentResult(messages: readonly BaseMessage[]): boolean {
  const start = latestRealUserIndex(messages) + 1;
  for (let index = start; index < messages.length; index += 1) {
    const message = messages[index]!;
    if (ToolMessage.isInstance(message) && Boolean(message.additional_kwargs?.["subagent_status"])) return true;
  }
  return false;
}

function commandToolMessages(command: Command, toolCallId: string): ToolMessage[] {
  const update: unknown = command.update;
  const found: ToolMessage[] = [];
  const collect = (messages: unknown): void => {
    for (const item of Array.isArray(messages) ? messages : [messages]) {
      if (ToolMessage.isInstance(item) && String(item.tool_call_id) === toolCallId) found.push(item);
    }
  };
  if (Array.isArray(update)) {
    for (const entry of update) if (Array.isArray(entry) && entry[0] === "messages") collect(entry[1]);
  } else if (typeof update === "object" && update !== null && "messages" in update) {
    collect((update as { messages: unknown }).messages);
  }
  return found;
}

/**
 * Stamps a receipt on every tool result (direct, inside a Command, or a short-circuit answer of an
 * inner gate) and shows the model a hidden ledger of them before each call it renders for. The
 * response of such a call keeps the exact receipts it was shown, for citation checks later.
 */
export function createToolReceiptMiddleware(config?: ToolReceiptConfigInput, deps: ToolReceiptDeps = {}): AgentMiddleware {
  const settings = parseMiddlewareConfig(
    ToolReceiptConfigSchema,
    config,
    TOOL_RECEIPT_NAME,
    'Fix this key under verification (receipts_render_mode is "always" or "delegation_only").',
  );
  const renderMode: ReceiptRenderMode = deps.subagent === true ? "always" : settings.receipts_render_mode;

  async function stamp(message: ToolMessage, request: ToolCallRequest): Promise<void> {
    const { runtime } = request;
    try {
      const receipt = await makeToolReceipt(request.toolCall, message, runtime.services.clock.now());
      // Always overwritten: a tool that shipped its own "receipt" must not pass it off as evidence.
      message.additional_kwargs = { ...message.additional_kwargs, [TOOL_RECEIPT_KEY]: receipt };
    } catch (error) {
      if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
      // Never fail the tool call over bookkeeping, but a gap in the ledger must be visible.
      emitEvent(runtime, {
        type: TOOL_RECEIPT_EVENT,
        middleware: TOOL_RECEIPT_NAME,
        action: "stamp_failed",
        tool_name: request.toolCall.name ?? "",
        error: error instanceof Error ? error.name : typeof error,
        run_id: runtime.runId,
      });
    }
  }

  function shouldRender(messages: readonly BaseMessage[]): boolean {
    return renderMode === "always" || processesSubagentResult(messages);
  }

  return {
    name: TOOL_RECEIPT_NAME,

    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      const result = await handler(request);
      if (!settings.receipts_enabled) return result;
      if (ToolMessage.isInstance(result)) {
        await stamp(result, request);
      } else if (isCommand(result)) {
        for (const message of commandToolMessages(result, request.toolCall.id ? String(request.toolCall.id) : "")) {
          await stamp(message, request);
        }
      }
      return result;
    },

    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      if (!settings.receipts_enabled || !shouldRender(request.messages)) return handler(request);
      const ledger = renderReceiptLedger(extractToolReceipts(request.messages));
      if (ledger.text === "") return handler(request);
      const message = hiddenHumanMessage(RECEIPT_LEDGER_MESSAGE_NAME, ledger.text, { [TOOL_RECEIPT_CONTEXT_KEY]: true });
      const response = await handler({ ...request, messages: afterLeadingSystemMessages(request.messages, message) });
      return withSnapshot(response, ledger.receipts);
    },

    releasePolicyParameters() {
      return {
        receipts_enabled: settings.receipts_enabled,
        receipts_render_mode: renderMode,
        ledger_char_budget: RECEIPT_LEDGER_CHAR_BUDGET,
        hash_hex_chars: RECEIPT_HASH_HEX_CHARS,
        max_citation_id_digits: MAX_RECEIPT_ID_DIGITS,
        ledger_placement: "after_leading_system_messages",
        ledger_text_hash: canonicalHashSync([LEDGER_HEADING, ledgerInstruction(), LEDGER_EVIDENCE_BOUNDARY, OLDER_RECEIPTS_OMITTED]),
        receipt_key: TOOL_RECEIPT_KEY,
        snapshot_key: TOOL_RECEIPT_LEDGER_KEY,
      };
    },
  };
}

/**
 * Records on the response the receipts it was shown. Always overwritten, so a provider cannot
 * forge the ledger its own citations will be checked against.
 */
function withSnapshot(response: AIMessage, receipts: readonly ToolReceipt[]): AIMessage {
  if (!AIMessage.isInstance(response)) return response;
  response.additional_kwargs = { ...response.additional_kwargs, [TOOL_RECEIPT_LEDGER_KEY]: receipts.map((receipt) => ({ ...receipt })) };
  return response;
}


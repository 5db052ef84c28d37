import { SystemMessage } from "@langchain/core/messages";
import type { BaseMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { contentText } from "../core/content.ts";
import type { AgentMiddleware, ModelHandler, ModelRequest } from "../engine/types.ts";
import { ContentKind, ProducerKind, provenanceKwargs } from "../extension-api/provenance.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { isDynamicContextReminder } from "./dynamic-context.ts";

/*
 * Strict backends (vLLM, SGLang, Qwen, Anthropic) reject a system message that is not the first
 * one. DynamicContext and DurableContext keep their hidden SystemMessages in the history (and so in
 * `request.messages`), while the static prompt travels apart in `request.systemMessage`; this merges
 * them into the one leading block on the request only, so history scanners keep their markers.
 */

export const SYSTEM_MESSAGE_COALESCING_NAME = "SystemMessageCoalescing";

const PART_SEPARATOR = "\n\n";

export const SystemMessageCoalescingConfigSchema = v.strictObject({});
export interface SystemMessageCoalescingConfig {}
type _SystemMessageCoalescingConfigMatches = Assert<SameType<SystemMessageCoalescingConfig, v.InferOutput<typeof SystemMessageCoalescingConfigSchema>>>;

function isSystem(message: BaseMessage): boolean {
  return (message as { type?: unknown }).type === "system";
}

/** Message content as plain text, one item per line; an item without text is kept as its JSON, so merging loses nothing. */
export function flattenContent(content: unknown): string {
  return contentText(content, { nonText: "json" });
}

/**
 * The request with `systemMessage` and every in-list SystemMessage merged into one leading
 * `systemMessage`, or `null` when no SystemMessage sits in `messages` (then the request is already
 * well-formed and goes out untouched, which keeps provider prefix caches warm).
 */
export function coalesceSystemMessages(request: ModelRequest): ModelRequest | null {
  const inList = request.messages.filter(isSystem);
  if (inList.length === 0) return null;

  let parts: BaseMessage[] = request.systemMessage ? [request.systemMessage, ...inList] : [...inList];

  // After merging, the turns that separated two dated reminders are gone, so two contradictory
  // <current_date> blocks would sit side by side: only the newest may survive.
  const reminderIndices = parts.flatMap((part, index) => (isDynamicContextReminder(part) ? [index] : []));
  if (reminderIndices.length > 1) {
    const dropped = new Set(reminderIndices.slice(0, -1));
    parts = parts.filter((_, index) => !dropped.has(index));
  }

  const mergedKwargs: Record<string, unknown> = {};
  for (const part of parts) Object.assign(mergedKwargs, part.additional_kwargs ?? {});
  Object.assign(
    mergedKwargs,
    provenanceKwargs({ contentKind: ContentKind.MIDDLEWARE_INJECTION, producerKind: ProducerKind.SYSTEM_COALESCING }),
  );

  const first = parts[0]!;
  const merged = new SystemMessage({
    content: parts.map((part) => flattenContent(part.content)).join(PART_SEPARATOR),
    // The leading block keeps the prompt's id so consumers keyed on it are unaffected.
    ...(first.id !== undefined ? { id: first.id } : {}),
    additional_kwargs: mergedKwargs,
  });

  return { ...request, systemMessage: merged, messages: request.messages.filter((message) => !isSystem(message)) };
}

/** Merges every SystemMessage of a model request into one leading system message. State is never touched. */
export function createSystemMessageCoalescingMiddleware(config?: Partial<SystemMessageCoalescingConfig>): AgentMiddleware {
  parseMiddlewareConfig(SystemMessageCoalescingConfigSchema, config, SYSTEM_MESSAGE_COALESCING_NAME);
  return {
    name: SYSTEM_MESSAGE_COALESCING_NAME,
    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      return handler(coalesceSystemMessages(request) ?? request);
    },
    releasePolicyParameters() {
      return { strategy: "merge_leading_system_message", dynamic_context_reminder_dedup: "keep_last" };
    },
  };
}

import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { contentText, type ContentTextOptions } from "../core/content.ts";
import type { AgentMiddleware, ModelHandler, ModelRequest } from "../engine/types.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { isRealUserMessage } from "./messages.ts";

/*
 * Prompt-injection guardrail for the one message a user types (issue #3630 upstream). Tags the
 * framework uses for trusted context (<system-reminder>, <memory>, <current_uploads>, ...) and the
 * classic injection tags are HTML-escaped rather than rejected, so "how do I use the <think> tag?"
 * still gets answered while a forged block loses its structure; the text is then framed by
 * plain-text boundary markers. Only the model request changes: the checkpoint keeps what the user
 * sent, so the history a user sees and what later turns replay are the user's own words.
 */

export const INPUT_SANITIZATION_NAME = "InputSanitization";

export const USER_INPUT_BEGIN = "--- BEGIN USER INPUT ---";
export const USER_INPUT_END = "--- END USER INPUT ---";
// Look-alikes that no longer match the real delimiters, so user text can neither open nor close a frame.
export const NEUTRALIZED_BEGIN = "[BEGIN USER INPUT]";
export const NEUTRALIZED_END = "[END USER INPUT]";

/** Server-owned: the user's text before the server prefixed trusted blocks (uploads, IM transport). */
export const ORIGINAL_USER_CONTENT_KEY = "original_user_content";

/** How a user's content reads as plain text, as upstream's message_content_to_text: non-empty parts, newline-joined. */
export const USER_CONTENT_TEXT: ContentTextOptions = Object.freeze({ skipEmpty: true });

/**
 * Tag names escaped wherever untrusted text enters the model context. Framework blocks are listed
 * as a class (every block the lead and subagent prompts or a hidden-context middleware emit), since
 * the lead prompt declares all of them trusted; a new framework block must be added here.
 */
export const BLOCKED_TAG_NAMES: readonly string[] = Object.freeze([
  // Framework blocks, both spellings of the reminder tag.
  "system-reminder",
  "system_reminder",
  "memory",
  "current_date",
  "think",
  "analysis",
  "role",
  "soul",
  "self_update",
  "thinking_style",
  "clarification_system",
  "critical_reminders",
  "response_style",
  "citations",
  "uploaded_files",
  "current_uploads",
  "subagent_system",
  "skill_system",
  "skill_index",
  "available_skills",
  "disabled_skills",
  "memory_tool_system",
  "todo_list_system",
  "durable_context_data",
  "slash_skill_activation",
  "mcp_routing_hints",
  "available-deferred-tools",
  "goal_continuation",
  "background_task_event",
  // Subagent prompt blocks: subagents run this same guard.
  "file_editing_workflow",
  "guidelines",
  "output_format",
  "working_directory",
  "tool_restrictions",
  // Common injection tags.
  "system",
  "instruction",
  "important",
  "override",
  "ignore",
  "prompt",
]);

/**
 * canonicalHash of the sorted denylist, pinned so the declaration stays synchronous; the test
 * recomputes it, so editing the list without updating this fails loudly.
 */
export const BLOCKED_TAGS_HASH = "8035915d1f226f648f814ca00f9505b5dc3fee4154a05fd13607d7fcf685d5f5";

// Outside a character class; "-" is left alone because the "u" flag rejects "\-" there.
function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

// Python's IGNORECASE also equates "i" with the dotted and dotless Turkish forms, which Unicode
// simple case folding (the "u" flag's) does not; without this "<ımportant>" would slip through.
function tagNamePattern(name: string): string {
  return escapeRegExp(name).replaceAll("i", "[iİı]");
}

// Open, close, with attributes, self-closing and a bare "<tag" with no ">". The negative lookahead
// is Python's Unicode \b after a word character: JavaScript's \b only knows ASCII word characters,
// which would let "<systemé" through here but not upstream. The "u" flag makes "i" use Unicode
// case folding (so "<ſystem>" is caught, as upstream catches it).
const BLOCKED_TAG_PATTERN = new RegExp(
  String.raw`<\s*\/?\s*(?:${[...BLOCKED_TAG_NAMES].sort().map(tagNamePattern).join("|")})(?![\p{L}\p{N}_])[^>]*>?`,
  "giu",
);
const BOUNDARY_TOKEN_PATTERN = new RegExp(`${escapeRegExp(USER_INPUT_BEGIN)}|${escapeRegExp(USER_INPUT_END)}`, "g");

function escapeBlockedTags(text: string): string {
  return text.replace(BLOCKED_TAG_PATTERN, (match) => match.replaceAll("<", "&lt;").replaceAll(">", "&gt;"));
}

function neutralizeBoundaryTokens(text: string): string {
  return text.replace(BOUNDARY_TOKEN_PATTERN, (match) => (match === USER_INPUT_BEGIN ? NEUTRALIZED_BEGIN : NEUTRALIZED_END));
}

function isBlank(text: string): boolean {
  return text.trim() === "";
}

/**
 * Untrusted text made inert as data: blocked tags HTML-escaped and forged boundary markers
 * neutralised, without framing. Shared with the tool-result sanitizer for remote content.
 * Blank text is returned unchanged.
 */
export function neutralizeUntrustedTags(text: string): string {
  if (isBlank(text)) return text;
  return neutralizeBoundaryTokens(escapeBlockedTags(text));
}

/**
 * Exactly the text the model receives for a user's text: tags escaped, markers neutralised, then
 * framed by the boundary markers. Blank text is unchanged (no marker noise); text that is already
 * exactly one frame is kept, but markers inside it are still neutralised, since a user can type a
 * whole frame to smuggle a closing marker past the idempotency check.
 */
export function wrapUserInput(text: string): string {
  if (isBlank(text)) return text;
  const escaped = escapeBlockedTags(text);
  if (escaped.startsWith(USER_INPUT_BEGIN) && escaped.endsWith(USER_INPUT_END)) {
    const inner = escaped.slice(USER_INPUT_BEGIN.length, escaped.length - USER_INPUT_END.length);
    return `${USER_INPUT_BEGIN}${neutralizeBoundaryTokens(inner)}${USER_INPUT_END}`;
  }
  return `${USER_INPUT_BEGIN}\n${neutralizeBoundaryTokens(escaped)}\n${USER_INPUT_END}`;
}

type Block = string | Record<string, unknown>;

function isTextBlock(block: unknown): block is string | { type: "text"; text: string } {
  if (typeof block === "string") return block !== "";
  return (
    typeof block === "object" &&
    block !== null &&
    (block as { type?: unknown }).type === "text" &&
    typeof (block as { text?: unknown }).text === "string" &&
    (block as { text: string }).text !== ""
  );
}

function blockText(block: string | { text: string }): string {
  return typeof block === "string" ? block : block.text;
}

/**
 * Text blocks (bare strings count: some IM/SDK clients send them, and skipping them would skip
 * sanitising the whole message) collapse into one merged text block at the first one's place;
 * non-text blocks between them follow it, everything after stays where it was.
 */
function rebuildContent(content: readonly Block[], merged: string): Block[] {
  const first = content.findIndex(isTextBlock);
  if (first < 0) return [...content];
  let last = first;
  for (let i = content.length - 1; i > first; i--) {
    if (isTextBlock(content[i])) {
      last = i;
      break;
    }
  }
  const between = content.slice(first + 1, last + 1).filter((block) => !isTextBlock(block));
  return [...content.slice(0, first), { type: "text", text: merged }, ...between, ...content.slice(last + 1)];
}

function replaceMessage(message: BaseMessage, content: unknown, additionalKwargs: Record<string, unknown>): HumanMessage {
  const hasMetadata = message.response_metadata && Object.keys(message.response_metadata).length > 0;
  return new HumanMessage({
    content: content as HumanMessage["content"],
    ...(message.id !== undefined ? { id: message.id } : {}),
    ...(message.name !== undefined ? { name: message.name } : {}),
    additional_kwargs: additionalKwargs,
    ...(hasMetadata ? { response_metadata: message.response_metadata } : {}),
  });
}

function validOriginal(value: unknown): value is string {
  return typeof value === "string" && value !== "";
}

/**
 * The messages with the latest real user message sanitised and framed, or null when nothing
 * changes (no user message, image-only, already framed). The input is never mutated.
 */
export function sanitizeLatestUserInput(messages: readonly BaseMessage[]): BaseMessage[] | null {
  let index = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (isRealUserMessage(messages[i]!)) {
      index = i;
      break;
    }
  }
  if (index < 0) return null;
  const message = messages[index]!;
  const content = message.content as unknown;
  const blocks = Array.isArray(content) ? (content as Block[]) : null;
  const text = typeof content === "string" ? content : blocks ? blocks.filter(isTextBlock).map(blockText).join("\n") : "";
  if (text === "" && typeof content !== "string") return null;

  const kwargs: Record<string, unknown> = { ...message.additional_kwargs };
  const original = kwargs[ORIGINAL_USER_CONTENT_KEY];
  const replaceWith = (newContent: unknown): BaseMessage[] => {
    const copy = [...messages];
    copy[index] = replaceMessage(message, newContent, kwargs);
    return copy;
  };

  let processed: string;
  if (validOriginal(original)) {
    // Server-prefixed blocks (<current_uploads>) are trusted: only the user's own suffix is scanned.
    const framed = wrapUserInput(original);
    // Already this middleware's output (the kwarg survives framing): framing again would nest.
    if (text.endsWith(framed)) return null;
    const at = text.lastIndexOf(original);
    if (at >= 0) {
      processed = text.slice(0, at) + framed;
    } else if (blocks && blocks.length >= 2) {
      // The texts disagree (a list whose blocks join differently from how the server captured
      // them); the server prepends its block as the first element, so everything after it is
      // neutralised block by block instead.
      const [head, ...rest] = blocks;
      return replaceWith([
        head,
        ...rest.map((block) => {
          if (typeof block === "string") return neutralizeUntrustedTags(block);
          if (isTextBlock(block)) {
            const sanitized = neutralizeUntrustedTags(block.text);
            return sanitized === block.text ? block : { ...block, text: sanitized };
          }
          return block;
        }),
      ]);
    } else {
      // Nothing tells the server block from the user's text: escaping both is the safe direction.
      processed = wrapUserInput(text);
    }
  } else {
    processed = wrapUserInput(text);
    // Keep the genuine input recoverable (slash skills, regenerate) once the request is framed;
    // a non-string or empty value is not the server's, so it is replaced rather than trusted.
    kwargs[ORIGINAL_USER_CONTENT_KEY] = contentText(content, USER_CONTENT_TEXT);
  }
  if (processed === text) return null;
  return replaceWith(blocks ? rebuildContent(blocks, processed) : processed);
}

export const InputSanitizationConfigSchema = v.strictObject({});
export interface InputSanitizationConfig {}
type _InputSanitizationConfigMatches = Assert<SameType<InputSanitizationConfig, v.InferOutput<typeof InputSanitizationConfigSchema>>>;

/**
 * Frames and sanitises the latest real user message in every model request. Place it first in the
 * chain, so it is the outermost model wrapper and every inner one (retries included) sees the
 * sanitised request. An internal failure passes the request through unchanged rather than failing
 * the user's turn; interrupts and aborts propagate.
 */
export function createInputSanitizationMiddleware(config?: Partial<InputSanitizationConfig>): AgentMiddleware {
  parseMiddlewareConfig(InputSanitizationConfigSchema, config, INPUT_SANITIZATION_NAME, "InputSanitization takes no settings.");
  return {
    name: INPUT_SANITIZATION_NAME,
    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      let next = request;
      try {
        const messages = sanitizeLatestUserInput(request.messages);
        if (messages) next = { ...request, messages };
      } catch (error) {
        if (isGraphBubbleUp(error) || request.runtime.signal?.aborted) throw error;
      }
      return handler(next);
    },
    releasePolicyParameters() {
      return {
        blocked_tags_hash: BLOCKED_TAGS_HASH,
        blocked_tag_count: BLOCKED_TAG_NAMES.length,
        boundary_markers: [USER_INPUT_BEGIN, USER_INPUT_END],
        scope: "latest_real_user_message",
      };
    },
  };
}

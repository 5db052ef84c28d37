import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import { contentText, type ContentTextOptions } from "../core/content.ts";
import { stripThinkBlocks } from "../core/model-text.ts";
import type { Assert, SameType } from "../core/types.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../engine/types.ts";
import { canonicalJson } from "../extension-api/index.ts";
import { sha256HexSync } from "../extension-api/sha256-sync.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { isDynamicContextReminder } from "./dynamic-context.ts";
import { ORIGINAL_USER_CONTENT_KEY } from "./input-sanitization.ts";
import { isRealUserMessage } from "./messages.ts";
import { runSystemModelCall, type SystemModelCallHook } from "./system-model-call.ts";

/*
 * Names a thread after its first complete exchange. Without a title model the user's own words
 * are the title (cut to fit), which costs nothing and never delays the end of the stream; with one,
 * its answer is cleaned of the decoration models like to add. A title, once set, is never changed.
 */

export const TITLE_NAME = "Title";

export const DEFAULT_TITLE = "New Conversation";
export const DEFAULT_TITLE_PROMPT_TEMPLATE = `Write a title of at most {max_words} words for the conversation that starts below.
User: {user_msg}
Assistant: {assistant_msg}

Answer with the title alone: no quotes, no explanation.`;

const TEMPLATE_FIELDS = ["max_words", "user_msg", "assistant_msg"] as const;
type TemplateValues = Record<(typeof TEMPLATE_FIELDS)[number], string>;

// The local fallback never shows more than this much of the user's text, whatever max_chars allows.
const FALLBACK_MAX_CHARS = 50;
const ELLIPSIS = "...";
const PROMPT_EXCERPT_CHARS = 500;

const NOSTREAM_TAG = "langsmith:nostream";
const RUN_TAG = "middleware:title";

/** Fills `{name}` fields, with `{{` and `}}` standing for literal braces (Python's str.format rules). */
export function formatTitleTemplate(template: string, values: TemplateValues): string {
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (match, field: string | undefined) => {
    if (match === "{{") return "{";
    if (match === "}}") return "}";
    if (field !== undefined && Object.hasOwn(values, field)) return values[field as keyof TemplateValues];
    throw new Error(`unknown field {${field ?? ""}}`);
  });
}

const PromptTemplateSchema = v.pipe(
  v.string(),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    try {
      formatTitleTemplate(dataset.value, { max_words: "", user_msg: "", assistant_msg: "" });
    } catch (error) {
      addIssue({ message: `prompt_template has an ${(error as Error).message}; use {max_words}, {user_msg} and {assistant_msg}, and {{ }} for literal braces` });
    }
  }),
);

export const TitleConfigSchema = v.strictObject({
  enabled: v.optional(v.boolean(), true),
  /** Asked of the title model; the local fallback ignores it. */
  max_words: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(20)), 6),
  max_chars: v.optional(v.pipe(v.number(), v.integer(), v.minValue(10), v.maxValue(200)), 60),
  /** The title model's name; null keeps the local fallback. Resolved by the assembly into deps.model. */
  model_name: v.optional(v.nullable(v.string()), null),
  prompt_template: v.optional(PromptTemplateSchema, DEFAULT_TITLE_PROMPT_TEMPLATE),
});
export interface TitleConfig {
  enabled: boolean;
  /** Asked of the title model; the local fallback ignores it. */
  max_words: number;
  max_chars: number;
  /** The title model's name; null keeps the local fallback. Resolved by the assembly into deps.model. */
  model_name: string | null;
  prompt_template: string;
}
export type TitleConfigInput = Partial<TitleConfig>;
type _TitleConfigMatches = Assert<SameType<TitleConfig, v.InferOutput<typeof TitleConfigSchema>>>;
type _TitleConfigInputMatches = Assert<SameType<TitleConfigInput, v.InferInput<typeof TitleConfigSchema>>>;
/** The section as the schema fills it in when nothing is configured. */
export const TITLE_DEFAULTS: TitleConfig = Object.freeze(v.parse(TitleConfigSchema, {}));

export interface TitleDeps {
  /** Writes titles; without it the title is the user's own text. */
  readonly model?: BaseChatModel;
  /**
   * Every title-model call goes through it (kind "title", the prompt string as its messages), so
   * system-model-call observers see it. Defaults to the bare call.
   */
  readonly observeSystemCall?: SystemModelCallHook;
}

/** Any content shape a provider returns: a string, content blocks, or nested `{ content }` objects. */
const ANY_SHAPE: ContentTextOptions = Object.freeze({ skipEmpty: true, nonText: "nested" });

/** A message the user typed, not a framework reminder or a hidden hint. */
function isTitleUserMessage(message: BaseMessage): boolean {
  return isRealUserMessage(message) && !isDynamicContextReminder(message);
}

/**
 * The text the user typed. Uploads prefixes the message with a file listing and keeps the typed
 * text in the server-owned `original_user_content`; the title is about what the user asked.
 */
function typedText(message: BaseMessage): string {
  const original = message.additional_kwargs?.[ORIGINAL_USER_CONTENT_KEY];
  return (typeof original === "string" ? original : contentText(message.content, ANY_SHAPE)).trim();
}

/** Whether a title is due: none yet, exactly one user message, and an answer to it (unless partial). */
export function shouldGenerateTitle(state: Pick<AgentState, "messages" | "title">, options: { allowPartialExchange?: boolean } = {}): boolean {
  if (state.title) return false;
  const messages = state.messages ?? [];
  const users = messages.filter(isTitleUserMessage);
  if (users.length !== 1) return false;
  return options.allowPartialExchange === true || messages.some((message) => AIMessage.isInstance(message));
}

/** The first user message's text, as the title is built from it. */
export function titleUserText(messages: readonly BaseMessage[]): string {
  const first = messages.find(isTitleUserMessage);
  return first ? typedText(first) : "";
}

function codePoints(text: string): string[] {
  return Array.from(text);
}

/** The user's text when short enough, else its start and "..."; never longer than maxChars. */
export function fallbackTitle(userText: string, maxChars: number): string {
  const text = userText.trim();
  if (text === "") return DEFAULT_TITLE;
  const chars = codePoints(text);
  const limit = Math.min(maxChars, FALLBACK_MAX_CHARS);
  if (chars.length <= limit) return text;
  const body = Math.min(limit, maxChars - ELLIPSIS.length);
  return chars.slice(0, body).join("").trimEnd() + ELLIPSIS;
}

const QUOTE_PAIRS: ReadonlyArray<[string, string]> = [
  ['"', '"'],
  ["'", "'"],
  ["\u201c", "\u201d"],
  ["\u2018", "\u2019"],
  ["\u300c", "\u300d"],
  ["\u300a", "\u300b"],
  ["`", "`"],
];

/**
 * A model's title answer as a plain title: reasoning blocks dropped, the first line only, markdown
 * heading and emphasis markers, a "Title:" label and wrapping quotes removed, cut to maxChars.
 */
export function cleanModelTitle(content: unknown, maxChars: number): string {
  const text = stripThinkBlocks(contentText(content, ANY_SHAPE));
  let title = text.split(/\r?\n/).find((line) => line.trim() !== "")?.trim() ?? "";
  title = title.replace(/^#{1,6}\s+/, "").replace(/^title\s*[:：]\s*/i, "");
  for (let changed = true; changed; ) {
    changed = false;
    for (const marker of ["**", "__", "*", "_"]) {
      if (title.length > marker.length * 2 && title.startsWith(marker) && title.endsWith(marker)) {
        title = title.slice(marker.length, -marker.length).trim();
        changed = true;
      }
    }
    for (const [open, close] of QUOTE_PAIRS) {
      if (title.length >= open.length + close.length && title.startsWith(open) && title.endsWith(close)) {
        title = title.slice(open.length, title.length - close.length).trim();
        changed = true;
      }
    }
  }
  const chars = codePoints(title);
  return chars.length > maxChars ? chars.slice(0, maxChars).join("").trimEnd() : title;
}

function excerpt(text: string): string {
  return codePoints(text).slice(0, PROMPT_EXCERPT_CHARS).join("");
}

/** Titles a thread after its first complete exchange; later exchanges never change it. */
export function createTitleMiddleware(config?: TitleConfigInput, deps: TitleDeps = {}): AgentMiddleware {
  const parsed = parseMiddlewareConfig(TitleConfigSchema, config, TITLE_NAME);
  const { model } = deps;
  const observeSystemCall = deps.observeSystemCall ?? runSystemModelCall;
  const modelName = parsed.model_name ?? undefined;

  async function modelTitle(state: AgentState, userText: string, runtime: AgentRuntime): Promise<string> {
    const firstAnswer = state.messages.find((message) => AIMessage.isInstance(message));
    const prompt = formatTitleTemplate(parsed.prompt_template, {
      max_words: String(parsed.max_words),
      user_msg: excerpt(userText),
      assistant_msg: excerpt(firstAnswer ? stripThinkBlocks(contentText(firstAnswer.content, ANY_SHAPE)) : ""),
    });
    const response = await observeSystemCall(
      "title",
      { messages: prompt, ...(modelName === undefined ? {} : { modelName }) },
      () =>
        model!.invoke(prompt, {
          runName: "title_agent",
          tags: [RUN_TAG, NOSTREAM_TAG],
          ...(runtime.signal ? { signal: runtime.signal } : {}),
        }),
      runtime,
    );
    return cleanModelTitle(response.content, parsed.max_chars);
  }

  return {
    name: TITLE_NAME,
    async afterModel(state: AgentState, runtime: AgentRuntime): Promise<HookResult> {
      if (!parsed.enabled || !shouldGenerateTitle(state)) return undefined;
      const userText = titleUserText(state.messages);
      if (model) {
        try {
          const title = await modelTitle(state, userText, runtime);
          if (title) return { title };
        } catch (error) {
          if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
          // A failing title model must not cost the thread its title: fall back to the local one.
        }
      }
      return { title: fallbackTitle(userText, parsed.max_chars) };
    },
    releasePolicyParameters() {
      return {
        enabled: parsed.enabled,
        max_words: parsed.max_words,
        max_chars: parsed.max_chars,
        mode: model ? "model" : "local",
        title_model: parsed.model_name,
        // canonicalHash's digest, computed synchronously: crypto.subtle has no sync digest.
        prompt_template_hash: sha256HexSync(canonicalJson(parsed.prompt_template)),
      };
    },
  };
}

/** For callers that title a thread outside a run (an interrupted first turn): the local title, or null when none is due. */
export function localTitleFor(state: Pick<AgentState, "messages" | "title">, maxChars = TITLE_DEFAULTS.max_chars): string | null {
  if (!shouldGenerateTitle(state, { allowPartialExchange: true })) return null;
  return fallbackTitle(titleUserText(state.messages), maxChars);
}


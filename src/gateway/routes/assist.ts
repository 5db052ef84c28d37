import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import type { Context, Hono } from "hono";
import * as v from "valibot";
import type { LeadConfig } from "../../agents/app-config.ts";
import { INPUT_POLISH_DEFAULTS, MAX_SUGGESTIONS_LIMIT, SUGGESTIONS_DEFAULTS } from "../../config/assist.ts";
import { availableModelNames } from "../../config/load.ts";
import { contentText } from "../../core/content.ts";
import { errorMessage } from "../../core/errors.ts";
import { stripCodeFence, stripThinkBlocks } from "../../core/model-text.ts";
import type { SystemOperationKind } from "../../extension-api/system-model.ts";
import { createSystemCallHook } from "../../extensions/system-calls.ts";
import { createChatModel, resolveModelName } from "../../models/factory.ts";
import type { GatewayAuthorizer } from "../auth/authorizer.ts";
import { authenticatedUser } from "../auth/context.ts";
import type { GatewayDeps } from "../deps.ts";
import { httpError, parseJsonObjectBody } from "../errors.ts";
import type { GatewayEnv } from "../types.ts";

/*
 * The gateway's two one-shot model calls for DeerFlow's UI, made outside any run and reported to
 * system-model-call observers like the title and memory calls (kinds "suggestions" and
 * "input_polish"):
 * - `GET /api/suggestions/config`, `POST /api/threads/{id}/suggestions`: follow-up questions after
 *   an answer. The UI shows whatever list comes back, so a model answer that is not a JSON list of
 *   strings, or a failing model, is an empty list, never an error.
 * - `POST /api/input-polish`: the composer's draft rewritten as a clearer instruction; nothing is
 *   stored and no run starts. A failing model is a 503 (the UI keeps the draft and says so).
 * Prompts and parsing follow upstream's routers (backend/app/gateway/routers/suggestions.py and
 * input_polish.py).
 */

export interface AssistRouteDeps extends Pick<GatewayDeps, "env" | "guard" | "extensions" | "clock" | "reportDiagnostic" | "detachedObservations"> {
  readonly config: LeadConfig;
  readonly authorizer: GatewayAuthorizer;
}

const NOSTREAM_TAG = "langsmith:nostream";

const SuggestionsBodySchema = v.strictObject({
  messages: v.array(
    v.strictObject({
      role: v.pipe(v.string(), v.maxLength(32, "expected a role such as user or assistant")),
      content: v.string(),
    }),
  ),
  n: v.optional(
    v.pipe(
      v.number(),
      v.integer("expected a whole number"),
      v.minValue(1, `expected 1 to ${MAX_SUGGESTIONS_LIMIT}`),
      v.maxValue(MAX_SUGGESTIONS_LIMIT, `expected 1 to ${MAX_SUGGESTIONS_LIMIT}`),
    ),
  ),
  model_name: v.nullish(v.string()),
});

const InputPolishBodySchema = v.strictObject({
  text: v.string(),
  locale: v.nullish(v.pipe(v.string(), v.maxLength(64, "expected a locale such as en-US"))),
  thread_id: v.nullish(v.string()),
});

type SuggestionMessage = v.InferOutput<typeof SuggestionsBodySchema>["messages"][number];

/** The conversation as the suggestion prompt quotes it: `User: ...` / `Assistant: ...` lines. */
export function formatSuggestionConversation(messages: readonly SuggestionMessage[]): string {
  return messages
    .map((message) => {
      const role = message.role.trim().toLowerCase();
      const label = role === "user" || role === "human" ? "User" : role === "assistant" || role === "ai" ? "Assistant" : message.role;
      return `${label}: ${message.content.trim()}`;
    })
    .join("\n")
    .trim();
}

/**
 * The questions in a model's answer: the JSON array of strings it holds (reasoning blocks and a
 * wrapping code fence ignored, text around the array too), blanks and non-strings dropped, each on
 * one line, at most `limit`. Anything else is an empty list.
 */
export function parseSuggestions(answer: string, limit: number): string[] {
  const candidate = stripCodeFence(stripThinkBlocks(answer, { truncateUnclosed: true }));
  const start = candidate.indexOf("[");
  const end = candidate.lastIndexOf("]");
  if (start === -1 || end <= start) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(candidate.slice(start, end + 1));
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  return parsed
    .filter((item): item is string => typeof item === "string")
    .map((item) => item.replace(/\r?\n/g, " ").trim())
    .filter((item) => item !== "")
    .slice(0, limit);
}

function suggestionsPrompt(n: number, conversation: string): { system: string; user: string } {
  return {
    system:
      "You are generating follow-up questions to help the user continue the conversation.\n" +
      `Based on the conversation below, produce EXACTLY ${n} short questions the user might ask next.\n` +
      "Requirements:\n" +
      "- Questions must be relevant to the preceding conversation.\n" +
      "- Questions must be written in the same language as the user.\n" +
      "- Keep each question concise (ideally <= 20 words / <= 40 Chinese characters).\n" +
      "- Do NOT include numbering, markdown, or any extra text.\n" +
      "- Output MUST be a JSON array of strings only.\n",
    user: `Conversation Context:\n${conversation}\n\nGenerate ${n} follow-up questions`,
  };
}

const POLISH_SYSTEM_PROMPT =
  "You are DeerFlow's pre-send prompt optimizer.\n" +
  "Rewrite the user's rough draft into a clearer instruction for an AI agent before it is sent.\n" +
  "Do not answer the task.\n" +
  "Preserve the user's language, intent, entities, file paths, URLs, code blocks, and any leading slash command prefix exactly.\n" +
  "Improve the draft by making the goal, scope, constraints, and desired output explicit when they are implied by the draft.\n" +
  "For vague quality words such as 'better', 'good-looking', or 'polished', translate them into concrete but generic quality criteria.\n" +
  "Do not invent facts, business context, tools, file names, dates, metrics, or user preferences that are not implied.\n" +
  "Prefer one concise paragraph or a short bullet list. Keep it under 180 words unless the original draft is longer.\n" +
  "Output only the rewritten draft, with no markdown wrapper, explanation, or alternatives.";

function polishUserContent(text: string, locale: string | null | undefined): string {
  const hint = locale?.trim() || "same language as the draft";
  return `Locale hint: ${hint}\n\nRewrite this draft while preserving its intent:\n<draft>\n${text}\n</draft>`;
}

/** A polished draft as the composer takes it: complete reasoning blocks and a wrapping fence removed. */
export function cleanPolishedDraft(answer: string): string {
  // A draft may mention a literal "<think>": an unclosed tag is kept, not cut at.
  return stripCodeFence(stripThinkBlocks(answer)).trim();
}

export function registerAssistRoutes(api: Hono<GatewayEnv>, deps: AssistRouteDeps): void {
  const { config, env, guard, authorizer } = deps;
  const suggestions = config.suggestions ?? SUGGESTIONS_DEFAULTS;
  const polish = config.input_polish ?? INPUT_POLISH_DEFAULTS;
  const observe = createSystemCallHook(deps.extensions, {
    onDiagnostic: deps.reportDiagnostic,
    clock: deps.clock,
    ...(deps.detachedObservations ? { detached: deps.detachedObservations } : {}),
  });

  /**
   * The model of one call: the section's model_name when the operator set one (a system model,
   * like the title model), else the caller's choice or the deployment's default, which the
   * caller's role must be allowed to use.
   */
  const modelFor = async (c: Context<GatewayEnv>, configured: string | null, requested: string | null | undefined): Promise<{ name: string; model: BaseChatModel }> => {
    const name = configured ?? resolveModelName(config, requested ?? undefined);
    if (configured === null) {
      const known = availableModelNames(config);
      if (requested && !known.includes(requested)) {
        throw httpError(422, `Invalid request body: model_name: unknown model ${JSON.stringify(requested)}; use one of ${known.map((n) => JSON.stringify(n)).join(", ")}.`);
      }
      if (!(await authorizer.mayUseModel(authenticatedUser(c), name))) {
        throw httpError(403, `Model '${name}' is not available for your role; ask an administrator to grant it.`);
      }
    }
    return { name, model: createChatModel(config, name, env) };
  };

  const ask = async (c: Context<GatewayEnv>, kind: SystemOperationKind, target: { name: string; model: BaseChatModel }, system: string, user: string): Promise<string> => {
    const messages = [new SystemMessage(system), new HumanMessage(user)];
    const response = await observe(kind, { messages, modelName: target.name }, () =>
      target.model.invoke(messages, { runName: kind === "suggestions" ? "suggest_agent" : "input_polish", tags: [NOSTREAM_TAG], signal: c.req.raw.signal }),
    );
    return contentText(response.content, { skipEmpty: true, nonText: "nested" });
  };

  api.get("/suggestions/config", (c) => c.json({ enabled: suggestions.enabled, max_suggestions: suggestions.max_suggestions }));

  api.post("/threads/:thread_id/suggestions", async (c) => {
    const threadId = c.req.param("thread_id");
    await guard.thread(c, "threads:read", threadId, { requireExisting: true });
    const body = await parseJsonObjectBody(c, SuggestionsBodySchema);
    const empty = () => c.json({ suggestions: [] as string[] });
    if (!suggestions.enabled || body.messages.length === 0) return empty();
    const conversation = formatSuggestionConversation(body.messages);
    if (conversation === "") return empty();
    const n = Math.min(body.n ?? suggestions.max_suggestions, suggestions.max_suggestions);
    const target = await modelFor(c, suggestions.model_name, body.model_name);
    const prompt = suggestionsPrompt(n, conversation);
    try {
      return c.json({ suggestions: parseSuggestions(await ask(c, "suggestions", target, prompt.system, prompt.user), n) });
    } catch (error) {
      deps.reportDiagnostic({ level: "warning", source: "suggestions", message: `thread ${threadId}: the suggestions model failed: ${errorMessage(error)}` });
      return empty();
    }
  });

  api.post("/input-polish", async (c) => {
    guard.permission(c, "runs:create");
    if (!polish.enabled) throw httpError(404, "Input polishing is disabled: set input_polish.enabled: true in config.yaml to use it.");
    const body = await parseJsonObjectBody(c, InputPolishBodySchema);
    // The thread id only labels the call; naming someone else's thread is still a 404.
    if (body.thread_id) await guard.thread(c, "threads:read", body.thread_id);
    const text = body.text.trim();
    if (text === "") throw httpError(422, "Invalid request body: text: expected the draft to polish, got an empty text.");
    if (text.length > polish.max_chars) {
      throw httpError(422, `Invalid request body: text: the draft has ${text.length} characters; at most ${polish.max_chars} are accepted (input_polish.max_chars).`);
    }
    const target = await modelFor(c, polish.model_name, undefined);
    let rewritten: string;
    try {
      rewritten = cleanPolishedDraft(await ask(c, "input_polish", target, POLISH_SYSTEM_PROMPT, polishUserContent(text, body.locale)));
    } catch (error) {
      deps.reportDiagnostic({ level: "warning", source: "input_polish", message: `the input polish model failed: ${errorMessage(error)}` });
      throw httpError(503, "Failed to polish input: the model did not answer. Try again, or send the draft as it is.");
    }
    if (rewritten === "") throw httpError(503, "Failed to polish input: the model answered with nothing. Try again, or send the draft as it is.");
    return c.json({ rewritten_text: rewritten, changed: rewritten !== text });
  });
}

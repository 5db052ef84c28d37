import { HumanMessage, RemoveMessage, type BaseMessage } from "@langchain/core/messages";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { REMOVE_ALL_MESSAGES, isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import { DeerflowError } from "../../core/errors.ts";
import { runThreadId } from "../../engine/run-identity.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../../engine/types.ts";
import {
  SUMMARIZATION_TRANSFORM_VERSION,
  canonicalHash,
  canonicalJson,
  type CompactionEvent,
  type ContextCompactionObserver,
} from "../../extension-api/index.ts";
import { sha256HexSync } from "../../extension-api/sha256-sync.ts";
import { detachedTaskStore } from "../../extension-api/task-store.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { SUMMARY_MESSAGE_NAME, messageText } from "../messages.ts";
import {
  DEFAULT_MESSAGES_TO_KEEP,
  countTokensApproximately,
  determineCutoffIndex,
  partitionForCompaction,
  shouldSummarize,
  type KeepPolicy,
  type TokenCounter,
  type TriggerThresholds,
} from "./context.ts";
import { DEFAULT_SUMMARY_PROMPT, SUMMARY_PROMPT_PLACEHOLDER, buildSummaryPrompt } from "./prompt.ts";
import { runSystemModelCall, type SystemModelCallHook } from "../system-model-call.ts";

/*
 * When history grows past the trigger, the older part is replaced by a summary so the run can go
 * on. The summary is written to `summary_text`, never as a message: it reaches the model only
 * through DurableContext's data block, which marks it as data rather than instructions. A failed or
 * blank summary on the automatic path changes nothing; compaction simply waits for a later turn.
 */

export const SUMMARIZATION_NAME = "Summarization";

// LangGraph's messages stream skips model runs carrying this tag; without it the summary would be
// streamed to the client as if the agent had said it.
const NOSTREAM_TAG = "langsmith:nostream";
const RUN_TAG = "middleware:summarize";

const DEFAULT_TRIM_TOKENS_TO_SUMMARIZE = 4000;
export const DEFAULT_SKILL_FILE_READ_TOOL_NAMES: readonly string[] = Object.freeze(["read_file", "read", "view", "cat"]);

const CONTEXT_SIZE_KINDS = ["tokens", "messages", "fraction"] as const;
type ContextSizeKind = (typeof CONTEXT_SIZE_KINDS)[number];

const FORMS_HINT = "write {type: tokens|messages|fraction, value: N} or thresholds such as {tokens: 32000, messages: 50}";

/** Both spellings a config may use: upstream's `{type, value}` and LangChain's `{tokens, messages, fraction}`. */
const ContextSizeInputSchema = v.strictObject({
  type: v.optional(v.picklist(CONTEXT_SIZE_KINDS)),
  value: v.optional(v.number()),
  tokens: v.optional(v.number()),
  messages: v.optional(v.number()),
  fraction: v.optional(v.number()),
});
type ContextSizeInput = v.InferOutput<typeof ContextSizeInputSchema>;

function sizeProblem(kind: ContextSizeKind, value: number, role: "trigger" | "keep"): string | null {
  const floor = role === "trigger" ? "above 0" : "0 or more";
  const belowFloor = role === "trigger" ? value <= 0 : value < 0;
  if (kind === "fraction") {
    if (belowFloor || value > 1) return `${role} fraction must be ${role === "trigger" ? "above 0" : "from 0"} and at most 1, got ${value}`;
    return null;
  }
  if (kind === "messages" && !Number.isInteger(value)) return `${role} messages must be a whole number, got ${value}`;
  if (!Number.isFinite(value) || belowFloor) return `${role} ${kind} must be ${floor}, got ${value}`;
  return null;
}

/** The thresholds an input names, or a problem describing why it is unusable. */
function readContextSize(input: ContextSizeInput, role: "trigger" | "keep"): { sizes: Partial<Record<ContextSizeKind, number>> } | { problem: string } {
  const named = CONTEXT_SIZE_KINDS.filter((kind) => input[kind] !== undefined);
  const typed = input.type !== undefined || input.value !== undefined;
  if (typed && named.length > 0) return { problem: `mixes {type, value} with ${named.join("/")}; ${FORMS_HINT}` };
  const sizes: Partial<Record<ContextSizeKind, number>> = {};
  if (typed) {
    if (input.type === undefined || input.value === undefined) return { problem: `needs both type and value; ${FORMS_HINT}` };
    sizes[input.type] = input.value;
  } else {
    if (named.length === 0) return { problem: `names no threshold; ${FORMS_HINT}` };
    for (const kind of named) sizes[kind] = input[kind]!;
  }
  for (const [kind, value] of Object.entries(sizes) as [ContextSizeKind, number][]) {
    const problem = sizeProblem(kind, value, role);
    if (problem) return { problem };
  }
  return { sizes };
}

const TriggerConditionSchema = v.pipe(
  ContextSizeInputSchema,
  v.rawTransform(({ dataset, addIssue, NEVER }): TriggerThresholds => {
    const read = readContextSize(dataset.value, "trigger");
    if ("problem" in read) {
      addIssue({ message: read.problem });
      return NEVER;
    }
    return read.sizes;
  }),
);

/**
 * One condition or a list of them, checked item by item: a union would only say "expected Object
 * or Array" and hide which threshold was wrong.
 */
const TriggerSchema = v.pipe(
  v.unknown(),
  v.rawTransform(({ dataset, addIssue, NEVER }): TriggerThresholds | TriggerThresholds[] => {
    const input = dataset.value;
    if (typeof input !== "object" || input === null) {
      addIssue({ message: `expected a trigger condition or a list of them; ${FORMS_HINT}` });
      return NEVER;
    }
    const items: unknown[] = Array.isArray(input) ? input : [input];
    const conditions: TriggerThresholds[] = [];
    for (const [index, item] of items.entries()) {
      const result = v.safeParse(TriggerConditionSchema, item);
      if (!result.success) {
        const issue = result.issues[0];
        const itemPath: v.IssuePathItem[] = Array.isArray(input)
          ? [{ type: "array", origin: "value", input, key: index, value: item }]
          : [];
        const path = [...itemPath, ...(issue.path ?? [])];
        addIssue({ message: issue.message, ...(path.length > 0 ? { path: path as [v.IssuePathItem, ...v.IssuePathItem[]] } : {}) });
        return NEVER;
      }
      conditions.push(result.output);
    }
    return Array.isArray(input) ? conditions : conditions[0]!;
  }),
);

const KeepSchema = v.pipe(
  ContextSizeInputSchema,
  v.rawTransform(({ dataset, addIssue, NEVER }): KeepPolicy => {
    const read = readContextSize(dataset.value, "keep");
    if ("problem" in read) {
      addIssue({ message: read.problem });
      return NEVER;
    }
    const kinds = Object.keys(read.sizes) as ContextSizeKind[];
    if (kinds.length !== 1) {
      addIssue({ message: `keep takes exactly one of tokens, messages or fraction, got ${kinds.join(" and ")}` });
      return NEVER;
    }
    return { [kinds[0]!]: read.sizes[kinds[0]!] } as KeepPolicy;
  }),
);

const SummaryPromptSchema = v.pipe(
  v.string(),
  v.check(
    (prompt) => prompt.includes(SUMMARY_PROMPT_PLACEHOLDER),
    `summary_prompt must contain ${SUMMARY_PROMPT_PLACEHOLDER}, where the messages to summarize go`,
  ),
);

export const SummarizationConfigSchema = v.strictObject({
  /** Off in code; config.example.yaml turns it on. */
  enabled: v.optional(v.boolean(), false),
  /** The summary model's name; null summarizes with the run's own model. Resolved by the assembly into deps.model. */
  model_name: v.optional(v.nullable(v.string()), null),
  /** One condition (its thresholds AND-ed) or a list of conditions (OR-ed); null never triggers. */
  trigger: v.optional(v.nullable(TriggerSchema), null),
  keep: v.optional(KeepSchema, { messages: DEFAULT_MESSAGES_TO_KEEP }),
  /** Token budget of the summary model's input; null sends the whole compacted range. */
  trim_tokens_to_summarize: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1))), DEFAULT_TRIM_TOKENS_TO_SUMMARIZE),
  summary_prompt: v.optional(v.nullable(SummaryPromptSchema), null),
  /**
   * Read by DurableContext (which skill reads to remember across compaction), not by this
   * middleware; accepted here because upstream's config.yaml keeps it in this section.
   */
  skill_file_read_tool_names: v.optional(v.array(v.string()), [...DEFAULT_SKILL_FILE_READ_TOOL_NAMES]),
});
export interface SummarizationConfig {
  enabled: boolean;
  model_name: string | null;
  trigger: TriggerThresholds[] | TriggerThresholds | null;
  keep: KeepPolicy;
  trim_tokens_to_summarize: number | null;
  summary_prompt: string | null;
  skill_file_read_tool_names: string[];
}
type _SummarizationConfigMatches = Assert<SameType<SummarizationConfig, v.InferOutput<typeof SummarizationConfigSchema>>>;
export interface SummarizationConfigInput {
  enabled?: boolean;
  model_name?: string | null;
  trigger?: unknown;
  keep?: { type?: "fraction" | "messages" | "tokens"; value?: number; tokens?: number; messages?: number; fraction?: number };
  trim_tokens_to_summarize?: number | null;
  summary_prompt?: string | null;
  skill_file_read_tool_names?: string[];
}
type _SummarizationConfigInputMatches = Assert<SameType<SummarizationConfigInput, v.InferInput<typeof SummarizationConfigSchema>>>;

/** What runs before compacted messages leave state, once a summary exists (the lead's memory flush). */
export interface SummarizationEvent {
  readonly messagesToSummarize: readonly BaseMessage[];
  readonly preservedMessages: readonly BaseMessage[];
  readonly threadId: string | undefined;
  readonly agentName: string | undefined;
  readonly runtime: AgentRuntime;
}
export type BeforeSummarizationHook = (event: SummarizationEvent) => void | Promise<void>;

export interface SummarizationDeps {
  /** Writes the summaries: the model named by model_name, else the run's own model. Required when enabled. */
  readonly model?: BaseChatModel;
  /** Tried when `model` fails or answers blank: the run's own model, when model_name names a different one. */
  readonly fallbackModel?: BaseChatModel;
  /** Defaults to about four characters per token. */
  readonly tokenCounter?: TokenCounter;
  /** The run model's context window in tokens, for fraction triggers and keeps; else read from the model's profile. */
  readonly contextWindow?: number;
  /** Told after each compaction, fire-and-forget. */
  readonly observers?: readonly ContextCompactionObserver[];
  /** Awaited in order before the compacted messages leave state; a failing hook never blocks compaction. */
  readonly beforeSummarization?: readonly BeforeSummarizationHook[];
  /** Receives failures that were contained (a hook or an observer that threw); they are dropped otherwise. */
  readonly onError?: (error: unknown, source: string) => void;
  /**
   * Every summary-model call goes through it (kind "summarization", the prompt string as its
   * messages; a fallback attempt is a call of its own), so system-model-call observers see it.
   * Defaults to the bare call.
   */
  readonly observeSystemCall?: SystemModelCallHook;
}

export interface CompactionResult {
  readonly summaryText: string;
  readonly messagesToSummarize: readonly BaseMessage[];
  readonly preservedMessages: readonly BaseMessage[];
  readonly totalTokens: number;
}

export interface CompactOptions {
  /** Compact even when no trigger is met (a manual /compact). */
  readonly force?: boolean;
  /** Throw SummaryGenerationError when no summary could be made, instead of leaving state as it is. */
  readonly raiseOnFailure?: boolean;
}

export interface SummarizationMiddleware extends AgentMiddleware {
  /** The compaction a beforeModel would do, without writing state; null when there is nothing to compact. */
  compact(state: AgentState, runtime: AgentRuntime, options?: CompactOptions): Promise<CompactionResult | null>;
}

export type SummarizationErrorCode = "summary_generation_failed" | "summarization_model_missing" | "summarization_context_window_unknown";

export class SummarizationError extends DeerflowError {
  declare readonly code: SummarizationErrorCode;

  constructor(code: SummarizationErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = "SummarizationError";
  }
}

function profileWindow(model: BaseChatModel | undefined): number | undefined {
  try {
    const window = (model as { profile?: { maxInputTokens?: unknown } } | undefined)?.profile?.maxInputTokens;
    return typeof window === "number" && window > 0 ? window : undefined;
  } catch {
    return undefined;
  }
}

function usesFraction(conditions: readonly TriggerThresholds[], keep: KeepPolicy): boolean {
  return keep.fraction !== undefined || conditions.some((condition) => condition.fraction !== undefined);
}

function mustRethrow(error: unknown, runtime: AgentRuntime): boolean {
  return isGraphBubbleUp(error) || runtime.signal?.aborted === true;
}

/**
 * Compacts history into `summary_text` before a model call once the trigger is exceeded, keeping
 * the recent tail, the tagged dynamic-context reminders and the latest real user message.
 */
export function createSummarizationMiddleware(
  config?: SummarizationConfigInput,
  deps: SummarizationDeps = {},
): SummarizationMiddleware {
  const parsed = parseMiddlewareConfig(SummarizationConfigSchema, config, SUMMARIZATION_NAME);
  const conditions: readonly TriggerThresholds[] = parsed.trigger === null ? [] : Array.isArray(parsed.trigger) ? parsed.trigger : [parsed.trigger];
  const keep = parsed.keep;
  const template = parsed.summary_prompt ?? DEFAULT_SUMMARY_PROMPT;
  const counter = deps.tokenCounter ?? countTokensApproximately;
  const observers = deps.observers ?? [];
  const hooks = deps.beforeSummarization ?? [];
  const observeSystemCall = deps.observeSystemCall ?? runSystemModelCall;
  const report = (error: unknown, source: string) => {
    try {
      deps.onError?.(error, source);
    } catch {
      // A broken reporter must not turn a contained failure into an uncontained one.
    }
  };

  if (parsed.enabled && !deps.model) {
    throw new SummarizationError(
      "summarization_model_missing",
      "summarization.enabled is true but no summary model was given: pass deps.model (the model named by summarization.model_name, or the run's own model), or set summarization.enabled to false.",
    );
  }
  const contextWindow = deps.contextWindow ?? profileWindow(deps.fallbackModel ?? deps.model);
  if (parsed.enabled && contextWindow === undefined && usesFraction(conditions, keep)) {
    throw new SummarizationError(
      "summarization_context_window_unknown",
      "summarization uses a fraction of the model's context window, but the window is unknown: set context_window on the model in config.yaml, or use tokens or messages instead of fraction.",
    );
  }

  const candidates = [deps.model, deps.fallbackModel].filter(
    (model, index, all): model is BaseChatModel => model !== undefined && all.indexOf(model) === index,
  );

  async function generateSummary(prompt: string, runtime: AgentRuntime): Promise<string | null> {
    for (const model of candidates) {
      // model_name names deps.model only; the fallback (the run's own model) goes unnamed.
      const modelName = model === deps.model && parsed.model_name !== null ? parsed.model_name : undefined;
      try {
        const response = await observeSystemCall(
          "summarization",
          { messages: prompt, ...(modelName === undefined ? {} : { modelName }) },
          () =>
            model.invoke(prompt, {
              tags: [RUN_TAG, NOSTREAM_TAG],
              metadata: { lc_source: "summarization" },
              ...(runtime.signal ? { signal: runtime.signal } : {}),
            }),
          runtime,
        );
        // Committing a blank summary would drop history for nothing: treat it as a failure.
        const text = messageText(response).trim();
        if (text) return text;
      } catch (error) {
        if (mustRethrow(error, runtime)) throw error;
      }
    }
    return null;
  }

  async function contentHashes(messages: readonly BaseMessage[]): Promise<string[] | null> {
    try {
      // Content blocks may carry `undefined` fields, which a checkpoint (and the Python host) never
      // sees; dropping them hashes the content as stored, key order still left to canonicalHash.
      const stored = (content: unknown) => (typeof content === "string" ? content : JSON.parse(JSON.stringify(content)));
      return await Promise.all(messages.map((message) => canonicalHash(stored(message.content))));
    } catch (error) {
      // Content canonical JSON cannot encode: observers get no event rather than a wrong one.
      report(error, "compaction_event");
      return null;
    }
  }

  function notifyObservers(event: CompactionEvent): void {
    // No live task is attached at this call site: every observer of this compaction gets one detached store.
    const taskStore = detachedTaskStore();
    for (const observer of observers) {
      void Promise.resolve()
        .then(() => observer.onContextCompacted(event, taskStore))
        .catch((error: unknown) => report(error, "context_compaction_observer"));
    }
  }

  async function runHooks(event: SummarizationEvent, runtime: AgentRuntime): Promise<void> {
    for (const hook of hooks) {
      try {
        await hook(event);
      } catch (error) {
        if (mustRethrow(error, runtime)) throw error;
        report(error, "before_summarization_hook");
      }
    }
  }

  async function compact(state: AgentState, runtime: AgentRuntime, options: CompactOptions = {}): Promise<CompactionResult | null> {
    const messages = state.messages ?? [];
    const previousSummary = typeof state.summary_text === "string" && state.summary_text !== "" ? state.summary_text : null;
    // The summary stands in for history the model still depends on, so it counts toward the trigger.
    const counted = previousSummary ? [...messages, new HumanMessage({ content: previousSummary, name: SUMMARY_MESSAGE_NAME })] : messages;
    const totalTokens = await counter(counted);
    if (!options.force && !shouldSummarize(counted.length, totalTokens, conditions, contextWindow)) return null;

    const cutoff = await determineCutoffIndex(messages, keep, counter, contextWindow);
    if (cutoff <= 0) return null;
    const { toSummarize, preserved } = partitionForCompaction(messages, cutoff);
    if (toSummarize.length === 0) return null;

    // Hashed now: once the summary call returns, these messages are about to leave state for good.
    const sourceHashes = observers.length > 0 ? await contentHashes(toSummarize) : null;
    const prompt = await buildSummaryPrompt(toSummarize, previousSummary, {
      template,
      trimTokens: parsed.trim_tokens_to_summarize,
      counter,
    });
    const summaryText = await generateSummary(prompt, runtime);
    if (summaryText === null) {
      if (options.raiseOnFailure) {
        throw new SummarizationError(
          "summary_generation_failed",
          "No summary could be generated: the summary model failed or answered blank. Check the summary model's provider and try compacting again.",
        );
      }
      return null;
    }

    const threadId = runThreadId(runtime);
    const agentName = typeof runtime.context["agent_name"] === "string" ? runtime.context["agent_name"] : undefined;
    await runHooks({ messagesToSummarize: toSummarize, preservedMessages: preserved, threadId, agentName, runtime }, runtime);

    if (sourceHashes !== null) {
      const summaryHash = await canonicalHash(summaryText);
      notifyObservers({
        transform_kind: "summarization",
        transform_version: SUMMARIZATION_TRANSFORM_VERSION,
        source_content_hashes: sourceHashes,
        summary_content_hash: summaryHash,
        compacted_message_count: toSummarize.length,
        kept_message_count: preserved.length,
      });
    }
    return { summaryText, messagesToSummarize: toSummarize, preservedMessages: preserved, totalTokens };
  }

  return {
    name: SUMMARIZATION_NAME,
    compact,
    async beforeModel(state: AgentState, runtime: AgentRuntime): Promise<HookResult> {
      if (!parsed.enabled) return undefined;
      const result = await compact(state, runtime);
      if (result === null) return undefined;
      return {
        messages: [new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), ...result.preservedMessages],
        summary_text: result.summaryText,
      };
    },
    releasePolicyParameters() {
      return {
        enabled: parsed.enabled,
        trigger: conditions.length === 0 ? null : conditions.map((condition) => ({ ...condition })),
        keep: { ...keep },
        trim_tokens_to_summarize: parsed.trim_tokens_to_summarize,
        // canonicalHash's digest, computed synchronously: crypto.subtle has no sync digest.
        summary_prompt_hash: sha256HexSync(canonicalJson(template)),
        summary_model: parsed.model_name,
      };
    },
  };
}

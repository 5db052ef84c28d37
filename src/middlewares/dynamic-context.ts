import { HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { newId } from "../core/ids.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../engine/types.ts";
import { sha256Hex } from "../extension-api/canonical.ts";
import { ContentKind, ProducerKind, provenanceKwargs } from "../extension-api/provenance.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { MEMORY_MAX_INJECTION_TOKENS } from "./memory/config.ts";
import { formatMemoryForInjection, recallMemoryFacts, type MemoryStore, type StoredMemoryFact } from "./memory/store.ts";
import { HIDE_FROM_UI, SUMMARY_MESSAGE_NAME, hiddenHumanMessage } from "./messages.ts";
import { resolveUserId } from "./thread-data.ts";

/*
 * The current date and the user's recalled memory reach the model as hidden context messages in
 * the history instead of in the system prompt, so the prompt stays byte-identical across users and
 * days and provider prefix caches keep hitting. The context is injected once, on the first turn,
 * and then frozen in the checkpoint; a conversation that crosses midnight gets one date update.
 *
 * The injection is an ID swap: the reminder SystemMessage takes the user message's id, so the
 * messages reducer replaces that message in place, and the user's text comes back as a new message
 * `<id>__user` after it (with `<id>__memory` in between when there is memory). The reminder thus
 * sits right before the turn it belongs to. Memory stays a (hidden) user-role message: it is
 * user-influenced, so it must not gain system authority.
 */

export const DYNAMIC_CONTEXT_NAME = "DynamicContext";
export const DYNAMIC_CONTEXT_REMINDER_KEY = "dynamic_context_reminder";
/** The authoritative injected date, read instead of the content so memory text cannot spoof it. */
export const REMINDER_DATE_KEY = "reminder_date";
export const INJECTED_USER_MESSAGE_ID_SUFFIX = "__user";
export const MEMORY_MESSAGE_ID_SUFFIX = "__memory";
export const MEMORY_MESSAGE_NAME = "dynamic_context_memory";
/** Run-scope key: sha256 of the memory block injected in this run (for the run journal). */
export const MEMORY_CONTEXT_SHA256_KEY = "memory_context_sha256";
/** A slow memory read is skipped after this long: memory is context, not a precondition. */
export const MEMORY_RECALL_TIMEOUT_MS = 5000;

const LEGACY_DATE = /<current_date>([^<]+)<\/current_date>/;

function isTimeZone(value: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: value });
    return true;
  } catch {
    return false;
  }
}

export const DynamicContextConfigSchema = v.strictObject({
  /** memory.enabled: without memory, only the date is injected. */
  enabled: v.optional(v.boolean(), true),
  /** memory.injection_enabled. */
  injection_enabled: v.optional(v.boolean(), true),
  /** memory.max_injection_tokens. */
  max_injection_tokens: MEMORY_MAX_INJECTION_TOKENS,
  /** IANA zone the current date is read in; upstream uses the server's local zone. */
  current_date_timezone: v.optional(
    v.pipe(v.string(), v.check(isTimeZone, 'expected an IANA time zone such as "UTC" or "Asia/Shanghai"')),
    "UTC",
  ),
});
export interface DynamicContextConfig {
  enabled: boolean;
  injection_enabled: boolean;
  max_injection_tokens: number;
  current_date_timezone: string;
}
type _DynamicContextConfigMatches = Assert<SameType<DynamicContextConfig, v.InferOutput<typeof DynamicContextConfigSchema>>>;

export interface DynamicContextDeps {
  /** Where recalled memory comes from; default: the facts in runtime.services.storage. */
  readonly memory?: Pick<MemoryStore, "recall">;
}

/** A date formatter for one zone: `2026-05-08, Friday`. */
export function currentDateFormatter(timeZone = "UTC"): (epochMs: number) => string {
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    weekday: "long",
  });
  return (epochMs) => {
    const parts = Object.fromEntries(format.formatToParts(new Date(epochMs)).map((part) => [part.type, part.value]));
    return `${parts["year"]}-${parts["month"]}-${parts["day"]}, ${parts["weekday"]}`;
  };
}

export function formatDateReminder(currentDate: string): string {
  return `<system-reminder>\n<current_date>${currentDate}</current_date>\n</system-reminder>`;
}

/** The hidden date reminder, as persisted in state. */
export function dateReminderMessage(currentDate: string, id?: string): SystemMessage {
  return new SystemMessage({
    content: formatDateReminder(currentDate),
    ...(id === undefined ? {} : { id }),
    additional_kwargs: {
      [HIDE_FROM_UI]: true,
      [DYNAMIC_CONTEXT_REMINDER_KEY]: true,
      [REMINDER_DATE_KEY]: currentDate,
      ...provenanceKwargs({ contentKind: ContentKind.MIDDLEWARE_INJECTION, producerKind: ProducerKind.DYNAMIC_CONTEXT }),
    },
  });
}

export function isDynamicContextReminder(message: BaseMessage): boolean {
  // Human reminders only exist in checkpoints written before reminders became SystemMessages.
  return (message.type === "system" || message.type === "human") && Boolean(message.additional_kwargs?.[DYNAMIC_CONTEXT_REMINDER_KEY]);
}

/** The id a swapped user message had before the swap (replaying a turn must send that id). */
export function stripInjectedUserMessageIdSuffix(id: string | undefined): string | undefined {
  if (id === undefined || !id.endsWith(INJECTED_USER_MESSAGE_ID_SUFFIX)) return id;
  return id.slice(0, -INJECTED_USER_MESSAGE_ID_SUFFIX.length) || id;
}

/**
 * The most recently injected date and where its reminder sits. A dateless reminder (the memory
 * message) is skipped rather than ending the search, or a second turn would look like a first one.
 * The content is read only on legacy SystemMessages without `reminder_date`, never on the memory
 * message, whose text the user can influence.
 */
export function lastInjectedDate(messages: readonly BaseMessage[]): { date: string; index: number } | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!;
    if (!isDynamicContextReminder(message)) continue;
    const structured = message.additional_kwargs?.[REMINDER_DATE_KEY];
    if (typeof structured === "string" && structured !== "") return { date: structured, index: i };
    if (message.type === "system") {
      const legacy = LEGACY_DATE.exec(typeof message.content === "string" ? message.content : JSON.stringify(message.content));
      if (legacy) return { date: legacy[1]!, index: i };
    }
  }
  return null;
}

/**
 * A user message that can take a reminder: not a reminder itself, not the legacy summary, and
 * not the `__user` half of an earlier swap (swapping it again would grow `__user__user...`
 * and replay the old turn).
 */
export function isUserInjectionTarget(message: BaseMessage): boolean {
  if (message.type !== "human") return false;
  if (isDynamicContextReminder(message)) return false;
  if (message.name === SUMMARY_MESSAGE_NAME) return false;
  return !(message.id ?? "").endsWith(INJECTED_USER_MESSAGE_ID_SUFFIX);
}

/** The ID-swap messages for one target: reminder (target's id), optional memory, the user's text. */
export function reminderAndUserMessages(target: BaseMessage, currentDate: string, memory: string): BaseMessage[] {
  const id = target.id ?? newId();
  const messages: BaseMessage[] = [dateReminderMessage(currentDate, id)];
  if (memory !== "") {
    messages.push(
      hiddenHumanMessage(
        MEMORY_MESSAGE_NAME,
        memory,
        {
          // Flagged as a reminder (title eligibility and summarisation rely on it) but dateless.
          [DYNAMIC_CONTEXT_REMINDER_KEY]: true,
          ...provenanceKwargs({ contentKind: ContentKind.MEMORY, producerKind: ProducerKind.DYNAMIC_CONTEXT_MEMORY }),
        },
        `${id}${MEMORY_MESSAGE_ID_SUFFIX}`,
      ),
    );
  }
  const hasMetadata = target.response_metadata && Object.keys(target.response_metadata).length > 0;
  messages.push(
    new HumanMessage({
      content: target.content as HumanMessage["content"],
      id: `${id}${INJECTED_USER_MESSAGE_ID_SUFFIX}`,
      ...(target.name !== undefined ? { name: target.name } : {}),
      additional_kwargs: { ...target.additional_kwargs },
      ...(hasMetadata ? { response_metadata: target.response_metadata } : {}),
    }),
  );
  return messages;
}

const TIMED_OUT: unique symbol = Symbol("timed out");
/** Why the timer is cancelled: a reason given up front spares abort() building a DOMException per recall. */
const RACE_SETTLED: unique symbol = Symbol("memory recall settled");

async function withinTimeout<T>(work: Promise<T>, runtime: AgentRuntime): Promise<T | typeof TIMED_OUT> {
  const timer = new AbortController();
  try {
    return await Promise.race([
      work,
      // Cancelled once the race is settled; a cancelled timer must never win it.
      runtime.services.clock.sleep(MEMORY_RECALL_TIMEOUT_MS, timer.signal).then(
        (): typeof TIMED_OUT => TIMED_OUT,
        () => new Promise<never>(() => {}),
      ),
    ]);
  } finally {
    timer.abort(RACE_SETTLED);
  }
}

/**
 * Injects the current date, and on a conversation's first turn the user's recalled memory, as
 * hidden messages before the current user turn (lead agent only).
 */
export function createDynamicContextMiddleware(config?: Partial<DynamicContextConfig>, deps: DynamicContextDeps = {}): AgentMiddleware {
  const settings = parseMiddlewareConfig(DynamicContextConfigSchema, config, DYNAMIC_CONTEXT_NAME);
  const formatDate = currentDateFormatter(settings.current_date_timezone);
  const injectMemory = settings.enabled && settings.injection_enabled;

  async function recallBlock(runtime: AgentRuntime): Promise<string> {
    if (!injectMemory) return "";
    const storage = runtime.services.storage;
    const recall: ((userId: string) => Promise<StoredMemoryFact[]>) | undefined = deps.memory
      ? (userId) => deps.memory!.recall(userId)
      : storage
        ? (userId) => recallMemoryFacts(storage, userId)
        : undefined;
    if (!recall) return "";
    const userId = resolveUserId(runtime);
    try {
      const facts = await withinTimeout(recall(userId), runtime);
      return facts === TIMED_OUT ? "" : formatMemoryForInjection(facts, settings.max_injection_tokens);
    } catch (error) {
      if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
      // An unreadable memory costs this conversation its memory, not the user's turn.
      return "";
    }
  }

  return {
    name: DYNAMIC_CONTEXT_NAME,
    async beforeAgent(state: AgentState, runtime: AgentRuntime): Promise<HookResult> {
      const messages = state.messages;
      if (messages.length === 0) return;
      const today = formatDate(runtime.services.clock.now());
      const last = lastInjectedDate(messages);
      if (last?.date === today) return;

      // A date update only ever goes before a turn after the last reminder: swapping an older
      // message would move its `__user` copy to the end, and the model would answer a stale turn.
      // The first injection likewise takes the latest target, never the first.
      let targetIndex = -1;
      for (let i = messages.length - 1; i > (last?.index ?? -1); i--) {
        if (isUserInjectionTarget(messages[i]!)) {
          targetIndex = i;
          break;
        }
      }
      if (targetIndex < 0) return;

      const memory = last === null ? await recallBlock(runtime) : "";
      if (memory !== "") runtime.scope.set(MEMORY_CONTEXT_SHA256_KEY, await sha256Hex(memory));
      return { messages: reminderAndUserMessages(messages[targetIndex]!, today, memory) };
    },
    releasePolicyParameters() {
      return {
        current_date_timezone: settings.current_date_timezone,
        memory_injection: injectMemory,
        max_injection_tokens: settings.max_injection_tokens,
        memory_recall_timeout_ms: MEMORY_RECALL_TIMEOUT_MS,
        placement: "id_swap_before_current_turn",
      };
    },
  };
}

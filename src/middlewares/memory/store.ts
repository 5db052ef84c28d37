import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import * as v from "valibot";
import { DeerflowError } from "../../core/errors.ts";
import { newId } from "../../core/ids.ts";
import { estimateTokens as approximateTokens } from "../../core/tokens.ts";
import { isOneOf } from "../../extension-api/one-of.ts";
import type { KeyValue } from "../../ports/key-value.ts";
import type { VersionedKeyValue } from "../../ports/versioned-key-value.ts";
import { parseStoredJson, updateVersioned, versionedOver } from "../../storage/versioned.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { MemoryConfigSchema, type MemoryConfig, type MemoryConfigInput } from "./config.ts";
import { createModelMemoryExtractor, rememberStatementExtractor } from "./extractors.ts";
import type { SystemModelCallHook } from "../system-model-call.ts";
import {
  MEMORY_FACT_CATEGORIES,
  type MemoryExtractor,
  type MemoryFact,
  type MemoryFactCategory,
  type MemoryMessage,
  type MemorySummaries,
  type StoredMemoryFact,
} from "./types.ts";

/*
 * Per-user long-term memory: facts in KeyValue under `memory:<user_id>`, written by a debounced
 * updater that runs off the request path. A run only hands its conversation over (enqueue is
 * synchronous); the extraction, which may call a model, happens after the thread has been quiet
 * for `debounce_seconds`, so a burst of turns costs one extraction and no turn waits for one.
 */

// The facts and the extractor contract, declared beside the extractors that produce them.
export * from "./types.ts";

export interface MemoryUpdate {
  readonly userId: string;
  readonly threadId: string;
  /** The thread's whole filtered conversation; what was processed before is skipped by watermark. */
  readonly messages: readonly MemoryMessage[];
}

export type MemoryStoreErrorCode =
  | "memory_record_malformed"
  | "memory_model_missing"
  | "memory_extraction_unparseable";

export class MemoryStoreError extends DeerflowError {
  declare readonly code: MemoryStoreErrorCode;

  constructor(code: MemoryStoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = "MemoryStoreError";
  }
}

export const MEMORY_KEY_PREFIX = "memory:";
/** A single fact longer than this is skipped: one pasted document must not flood memory. */
export const MAX_FACT_CHARS = 500;
/** A fact's category: an extractor's own, or a user's label of at most this many characters. */
export const MAX_CATEGORY_CHARS = 64;
/** Threads whose watermark a user record keeps; the oldest is forgotten first. */
export const MAX_THREAD_WATERMARKS = 200;

export function memoryKey(userId: string): string {
  return `${MEMORY_KEY_PREFIX}${userId}`;
}

interface MemoryRecord {
  version: 1;
  facts: StoredMemoryFact[];
  /** threadId → id of the last message already processed. */
  watermarks: Record<string, string>;
  /** Summary sections a memory document was imported with; every writer keeps them. */
  summaries?: MemorySummaries;
  updatedAt?: string;
}

const StoredFactSchema = v.object({
  id: v.pipe(v.string(), v.minLength(1)),
  content: v.pipe(v.string(), v.minLength(1)),
  category: v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_CATEGORY_CHARS)),
  confidence: v.pipe(v.number(), v.minValue(0), v.maxValue(1)),
  createdAt: v.string(),
  lastConfirmedAt: v.string(),
  sourceThreadId: v.optional(v.string()),
});

const RecordSchema = v.object({
  version: v.literal(1),
  facts: v.array(v.unknown()),
  // A fresh object per parse (valibot's record output is one too), so a caller may change it.
  watermarks: v.optional(v.record(v.string(), v.string()), () => ({})),
  summaries: v.optional(v.record(v.string(), v.record(v.string(), v.object({ summary: v.string(), updatedAt: v.string() })))),
  updatedAt: v.optional(v.string()),
});

async function readRecord(storage: KeyValue, userId: string): Promise<{ record: MemoryRecord; malformed: boolean }> {
  return parseRecord(await storage.getItem(memoryKey(userId)));
}

function parseRecord(raw: unknown): { record: MemoryRecord; malformed: boolean } {
  if (raw === null || raw === undefined) return { record: { version: 1, facts: [], watermarks: {} }, malformed: false };
  const parsed = v.safeParse(RecordSchema, raw);
  if (!parsed.success) return { record: { version: 1, facts: [], watermarks: {} }, malformed: true };
  // One bad fact (an edited record) costs that fact, not the user's whole memory.
  const facts = parsed.output.facts.flatMap((fact) => {
    const result = v.safeParse(StoredFactSchema, fact);
    return result.success ? [result.output as StoredMemoryFact] : [];
  });
  const { summaries, ...rest } = parsed.output;
  return { record: { ...rest, facts, ...(summaries === undefined ? {} : { summaries }) }, malformed: false };
}

function malformedRecordError(userId: string): MemoryStoreError {
  return new MemoryStoreError(
    "memory_record_malformed",
    `The memory record at "${memoryKey(userId)}" is not a deerflow-edge memory record, so it was left untouched; ` +
      "fix or delete it, and new memories are saved again.",
  );
}

/** A user's memory as the memory API shows and edits it; the thread watermarks stay the updater's own. */
export interface MemoryDocument {
  readonly facts: readonly StoredMemoryFact[];
  readonly summaries: MemorySummaries;
  readonly updatedAt?: string;
}

function documentOf(record: MemoryRecord): MemoryDocument {
  return { facts: record.facts, summaries: record.summaries ?? {}, ...(record.updatedAt === undefined ? {} : { updatedAt: record.updatedAt }) };
}

/** A user's memory read through compare-and-set storage; a malformed record throws `memory_record_malformed`. */
export async function readMemoryDocument(versioned: VersionedKeyValue, userId: string): Promise<MemoryDocument> {
  const { record, malformed } = parseRecord(parseStoredJson((await versioned.read(memoryKey(userId))).value));
  if (malformed) throw malformedRecordError(userId);
  return documentOf(record);
}

/** What a memory API write leaves in the record: its facts and summary sections. */
export interface MemoryDocumentChange {
  readonly facts: readonly StoredMemoryFact[];
  readonly summaries: MemorySummaries;
}

/**
 * Changes a user's memory by compare-and-set and returns it as written: `change` is re-run on a
 * fresh read whenever the updater or another request wrote in between, so neither loses the
 * other's facts. The thread watermarks are kept, so cleared or replaced memory is not refilled
 * from turns already processed. With `replaceMalformed` (clear, import) a malformed record reads
 * as empty and is overwritten; otherwise it throws `memory_record_malformed`.
 */
export async function changeMemoryDocument(
  versioned: VersionedKeyValue,
  userId: string,
  now: string,
  change: (current: MemoryDocument) => MemoryDocumentChange,
  options: { readonly replaceMalformed?: boolean } = {},
): Promise<MemoryDocument> {
  const written = await updateVersioned(versioned, memoryKey(userId), (text) => {
    const { record, malformed } = parseRecord(parseStoredJson(text));
    if (malformed && !options.replaceMalformed) throw malformedRecordError(userId);
    const next = change(documentOf(record));
    const result: MemoryRecord = {
      version: 1,
      facts: [...next.facts],
      watermarks: record.watermarks,
      ...(Object.keys(next.summaries).length === 0 ? {} : { summaries: next.summaries }),
      updatedAt: now,
    };
    return { value: JSON.stringify(result), result };
  });
  return documentOf(written!);
}

/** A user's remembered facts, straight from storage (a malformed record reads as none). */
export async function recallMemoryFacts(storage: KeyValue, userId: string): Promise<StoredMemoryFact[]> {
  return (await readRecord(storage, userId)).record.facts;
}

/** The text facts are compared by (case, spacing, final punctuation aside): two facts with one key are one fact. */
export function memoryFactKey(content: string): string {
  return content
    .normalize("NFKC")
    .toLowerCase()
    .replace(/\s+/g, " ")
    .replace(/[\s.!?。！？]+$/u, "")
    .trim();
}

function clampConfidence(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? Math.min(1, Math.max(0, value)) : 0;
}

function isCategory(value: unknown): value is MemoryFactCategory {
  return isOneOf(MEMORY_FACT_CATEGORIES, value);
}

export interface MergeOptions {
  readonly maxFacts: number;
  readonly confidenceThreshold: number;
  readonly now: string;
  readonly threadId?: string;
}

/**
 * Existing facts plus candidates: a candidate restating a fact (same text up to case, spacing and
 * final punctuation) re-confirms it instead of duplicating it; candidates below the threshold,
 * blank or longer than MAX_FACT_CHARS are dropped; beyond maxFacts the least confident, then least
 * recently confirmed, go. Order is otherwise kept, so a stored record changes only where it must.
 */
export function mergeFacts(
  existing: readonly StoredMemoryFact[],
  candidates: readonly MemoryFact[],
  options: MergeOptions,
): StoredMemoryFact[] {
  const byKey = new Map<string, StoredMemoryFact>();
  for (const fact of existing) byKey.set(memoryFactKey(fact.content), fact);
  for (const candidate of candidates) {
    const content = typeof candidate?.content === "string" ? candidate.content.trim() : "";
    if (content === "" || content.length > MAX_FACT_CHARS) continue;
    const confidence = clampConfidence(candidate.confidence);
    if (confidence < options.confidenceThreshold) continue;
    const category = isCategory(candidate.category) ? candidate.category : "context";
    const key = memoryFactKey(content);
    const previous = byKey.get(key);
    byKey.set(
      key,
      previous
        ? { ...previous, category, confidence: Math.max(previous.confidence, confidence), lastConfirmedAt: options.now }
        : {
            id: newId("fact"),
            content,
            category,
            confidence,
            createdAt: options.now,
            lastConfirmedAt: options.now,
            ...(options.threadId === undefined ? {} : { sourceThreadId: options.threadId }),
          },
    );
  }
  return capFacts([...byKey.values()], options.maxFacts);
}

/**
 * At most `maxFacts` of `facts`: beyond it the least confident, then least recently confirmed, go;
 * the rest keep their order. The one capacity rule of extraction and of facts added by hand.
 */
export function capFacts(facts: readonly StoredMemoryFact[], maxFacts: number): StoredMemoryFact[] {
  if (facts.length <= maxFacts) return [...facts];
  const kept = new Set(
    [...facts]
      .sort((a, b) => b.confidence - a.confidence || b.lastConfirmedAt.localeCompare(a.lastConfirmedAt))
      .slice(0, maxFacts),
  );
  return facts.filter((fact) => kept.has(fact));
}



/** Whole tokens of `text` by the library's heuristic (core/tokens.ts), rounded down: a budget is never overfilled. */
export function estimateTokens(text: string): number {
  return Math.floor(approximateTokens(text));
}

// Facts are user-influenced and land inside <memory>: escaping keeps "</memory>" in a fact from
// closing the block. Quotes stay, since the text is element content, never an attribute.
function escapeText(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

/** What a fact line shows: an extracted candidate or a stored fact (whose category may be a user's label). */
export type FormattableFact = Pick<StoredMemoryFact, "content" | "category" | "confidence">;

export function formatFactLine(fact: FormattableFact): string {
  return `- [${escapeText(fact.category)} | ${clampConfidence(fact.confidence).toFixed(2)}] ${escapeText(fact.content.trim())}`;
}

/**
 * The `<memory>` block injected into a conversation, or "" when no fact fits. Facts go most
 * confident first and stop at the first one over budget, so a shorter, less confident fact never
 * slips ahead of a skipped one.
 */
export function formatMemoryForInjection(facts: readonly FormattableFact[], maxTokens: number): string {
  const header = "Facts:";
  let used = estimateTokens(header);
  const lines: string[] = [];
  const ranked = facts
    .map((fact, index) => ({ fact, index }))
    .filter(({ fact }) => typeof fact.content === "string" && fact.content.trim() !== "")
    .sort((a, b) => clampConfidence(b.fact.confidence) - clampConfidence(a.fact.confidence) || a.index - b.index);
  for (const { fact } of ranked) {
    const line = formatFactLine(fact);
    const cost = estimateTokens(`\n${line}`);
    if (used + cost > maxTokens) break;
    lines.push(line);
    used += cost;
  }
  if (lines.length === 0) return "";
  return `<memory>\n${header}\n${lines.join("\n")}\n</memory>`;
}

export interface MemoryStoreOptions {
  /** config.yaml's `memory` section (validated here). */
  readonly config?: MemoryConfigInput | MemoryConfig;
  /** Overrides the extractor chosen from `model` / the default. */
  readonly extractor?: MemoryExtractor;
  /** The model named by `memory.model_name`, resolved by the assembler. */
  readonly model?: BaseChatModel;
  /**
   * The model-backed extractor's calls go through it (kind "memory"), so system-model-call
   * observers see them. Not applied to a given `extractor`, which makes its own calls.
   */
  readonly observeSystemCall?: SystemModelCallHook;
  /**
   * Compare-and-set over the same keys as `storage`: an update merges onto the record as it is
   * when written, retried on conflict, so two workers extracting for one user both keep their
   * facts. Default: the in-process one over `storage` (one process).
   */
  readonly versioned?: VersionedKeyValue;
  /** Called for every failed update; the update is retried with the thread's next turn. */
  readonly onError?: (error: unknown, update: { userId: string; threadId: string }) => void;
}

export interface MemoryStore {
  readonly settings: MemoryConfig;
  readonly extractor: MemoryExtractor;
  /** Updates waiting for their debounce or being processed. */
  readonly pendingCount: number;
  recall(userId: string): Promise<StoredMemoryFact[]>;
  /** Hands a conversation over for a later update; returns at once. False after close(). */
  enqueue(update: MemoryUpdate): boolean;
  /** Processes every waiting update now and resolves when all updates have finished. */
  flush(): Promise<void>;
  /**
   * Refuses new updates and drains the waiting ones within `shutdown_flush_timeout_seconds`;
   * resolves false when the budget ran out first (the unfinished tail is then dropped).
   */
  close(): Promise<boolean>;
  /** What changes which facts are kept: the middleware's release declaration. */
  policy(): Record<string, unknown>;
}

/** A configured memory.model_name is a promise of model extraction: without the model, fail at assembly. */
export function requireNamedModel(settings: MemoryConfig, options: Pick<MemoryStoreOptions, "extractor" | "model">): void {
  if (settings.model_name === null || options.model || options.extractor) return;
  throw new MemoryStoreError(
    "memory_model_missing",
    `memory.model_name is "${settings.model_name}", but no model was passed in for it; pass the resolved model, ` +
      'or remove memory.model_name to keep only explicit "remember ..." statements.',
  );
}

/** The extractor a store uses: the one given, else the model-backed one, else explicit statements only. */
export function selectMemoryExtractor(
  options: Pick<MemoryStoreOptions, "extractor" | "model" | "observeSystemCall">,
  settings?: Pick<MemoryConfig, "model_name">,
): MemoryExtractor {
  if (options.extractor) return options.extractor;
  if (!options.model) return rememberStatementExtractor;
  const modelName = settings?.model_name ?? undefined;
  return createModelMemoryExtractor(options.model, {
    ...(options.observeSystemCall ? { observeSystemCall: options.observeSystemCall } : {}),
    ...(modelName === undefined ? {} : { modelName }),
  });
}

/** The settings that decide which facts are kept, as a release declaration. */
export function memoryStorePolicy(settings: MemoryConfig, extractor: MemoryExtractor): Record<string, unknown> {
  return {
    debounce_seconds: settings.debounce_seconds,
    max_facts: settings.max_facts,
    fact_confidence_threshold: settings.fact_confidence_threshold,
    model_name: settings.model_name,
    extractor: { ...(extractor.policy ?? { kind: "custom" }) },
  };
}

interface Pending {
  update: MemoryUpdate;
  /** When its debounce ends (clock time). */
  due: number;
}

/**
 * A memory store over KeyValue. Timers run on `clock`, so a ManualClock drives the debounce in
 * tests. Updates for one thread coalesce (the latest conversation wins, since it contains the
 * earlier one); updates for one user run one at a time here, and the record is written by
 * compare-and-set, so an update of another worker in between is merged onto, never overwritten.
 */
export function createMemoryStore(storage: KeyValue, clock: Clock, options: MemoryStoreOptions = {}): MemoryStore {
  const settings = parseMiddlewareConfig(MemoryConfigSchema, options.config, "memory");
  requireNamedModel(settings, options);
  const extractor = selectMemoryExtractor(options, settings);
  const versioned = options.versioned ?? versionedOver(storage);
  const debounceMs = settings.debounce_seconds * 1000;
  const pending = new Map<string, Pending>();
  const running = new Set<Promise<void>>();
  const userTails = new Map<string, Promise<void>>();
  let closed = false;

  // One scheduler for every debounce, started here rather than by enqueue: a timer created inside
  // a run would hold that run's whole async context (its graph loop, its state) until it fires.
  let wake: (() => void) | undefined;
  let sleeping: AbortController | undefined;
  const scheduler = async (): Promise<void> => {
    while (!closed) {
      let next: number | undefined;
      for (const entry of pending.values()) if (next === undefined || entry.due < next) next = entry.due;
      if (next === undefined) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      const wait = next - clock.now();
      if (wait > 0) {
        sleeping = new AbortController();
        await clock.sleep(wait, sleeping.signal).catch(() => undefined);
        sleeping = undefined;
        continue;
      }
      const now = clock.now();
      for (const [key, entry] of [...pending]) if (entry.due <= now) start(key);
    }
  };

  const keyOf = (update: { userId: string; threadId: string }) => JSON.stringify([update.userId, update.threadId]);

  const malformedError = malformedRecordError;

  async function apply(update: MemoryUpdate): Promise<void> {
    const key = memoryKey(update.userId);
    const read = async () => {
      const { value } = await versioned.read(key);
      return parseRecord(parseStoredJson(value));
    };
    const { record, malformed } = await read();
    if (malformed) throw malformedError(update.userId);
    const mark = record.watermarks[update.threadId];
    const start = mark === undefined ? 0 : update.messages.findIndex((message) => message.id === mark) + 1;
    const fresh = update.messages.slice(start);
    if (fresh.length === 0) return;
    const now = new Date(clock.now()).toISOString();
    // Extracted once, against the facts read here; merged below onto the record as it is when written.
    let candidates: readonly MemoryFact[] = [];
    const fromUser = fresh.some((message) => message.role === "user");
    if (fromUser) {
      const extracted = await extractor({ userId: update.userId, threadId: update.threadId, messages: fresh, existing: record.facts });
      candidates = Array.isArray(extracted) ? extracted : [];
    }
    const lastId = fresh.at(-1)?.id;
    await updateVersioned(versioned, key, (text) => {
      const current = parseRecord(parseStoredJson(text));
      if (current.malformed) throw malformedError(update.userId);
      const facts =
        !fromUser
          ? current.record.facts
          : mergeFacts(current.record.facts, candidates, {
              maxFacts: settings.max_facts,
              confidenceThreshold: settings.fact_confidence_threshold,
              now,
              threadId: update.threadId,
            });
      const watermarks = { ...current.record.watermarks };
      if (lastId !== undefined) {
        // Re-inserting moves the thread to the newest end, so the oldest thread is forgotten first.
        delete watermarks[update.threadId];
        watermarks[update.threadId] = lastId;
        const threads = Object.keys(watermarks);
        for (const thread of threads.slice(0, Math.max(0, threads.length - MAX_THREAD_WATERMARKS))) delete watermarks[thread];
      }
      const summaries = current.record.summaries;
      return { value: JSON.stringify({ version: 1, facts, watermarks, ...(summaries ? { summaries } : {}), updatedAt: now }), result: undefined };
    });
  }

  function start(key: string): void {
    const entry = pending.get(key);
    if (!entry) return;
    pending.delete(key);
    const { update } = entry;
    const previous = userTails.get(update.userId) ?? Promise.resolve();
    const task = previous
      .then(() => apply(update))
      .catch((error: unknown) => {
        try {
          options.onError?.(error, { userId: update.userId, threadId: update.threadId });
        } catch {
          // A failing error hook must not turn into an unhandled rejection of the updater.
        }
      });
    userTails.set(update.userId, task);
    running.add(task);
    void task.finally(() => {
      running.delete(task);
      if (userTails.get(update.userId) === task) userTails.delete(update.userId);
    });
  }

  async function flush(): Promise<void> {
    for (const key of [...pending.keys()]) start(key);
    while (running.size > 0) await Promise.all([...running]);
  }

  void scheduler();

  return {
    settings,
    extractor,
    get pendingCount() {
      return pending.size + running.size;
    },
    recall: (userId) => recallMemoryFacts(storage, userId),
    enqueue(update) {
      if (closed) return false;
      // A newer conversation of the thread replaces the waiting one and restarts its debounce.
      const key = keyOf(update);
      pending.delete(key);
      pending.set(key, { update: { ...update, messages: [...update.messages] }, due: clock.now() + debounceMs });
      wake?.();
      return true;
    },
    flush,
    async close() {
      closed = true;
      wake?.();
      sleeping?.abort();
      const budget = new AbortController();
      const drained = flush().then(() => true);
      const timedOut = clock.sleep(settings.shutdown_flush_timeout_seconds * 1000, budget.signal).then(
        () => false,
        () => true,
      );
      try {
        return await Promise.race([drained, timedOut]);
      } finally {
        budget.abort();
      }
    },
    policy: () => memoryStorePolicy(settings, extractor),
  };
}

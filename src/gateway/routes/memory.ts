import type { Hono } from "hono";
import * as v from "valibot";
import type { LeadConfig } from "../../agents/app-config.ts";
import { newId } from "../../core/ids.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import type { VersionedKeyValue } from "../../ports/versioned-key-value.ts";
import {
  capFacts,
  changeMemoryDocument,
  MAX_CATEGORY_CHARS,
  MAX_FACT_CHARS,
  memoryFactKey,
  MemoryConfigSchema,
  MemoryStoreError,
  readMemoryDocument,
  type MemoryDocument,
  type MemoryDocumentChange,
  type MemorySummaries,
  type StoredMemoryFact,
} from "../../middlewares/memory/index.ts";
import { authenticatedUser } from "../auth/context.ts";
import { httpError, parseJsonObjectBody } from "../errors.ts";
import type { GatewayEnv } from "../types.ts";

/*
 * /api/memory: the signed-in user's own long-term memory, as DeerFlow's UI (Settings → Memory)
 * reads and edits it: the very record the Memory middleware writes and DynamicContext injects, so
 * a fact added here is in the next conversation's <memory> block. Every write is a compare-and-set
 * on that record, so an edit and a concurrent extraction never lose each other's facts. The
 * document is upstream's shape (version, lastUpdated, user/history summary sections, facts);
 * deerflow-edge's memory is facts, so summary sections are kept as imported and shown, never
 * injected.
 */

export interface MemoryRouteDeps {
  readonly versioned: VersionedKeyValue;
  readonly clock: Clock;
  readonly config: Pick<LeadConfig, "memory">;
}

const USER_SECTIONS = ["workContext", "personalContext", "topOfMind"] as const;
const HISTORY_SECTIONS = ["recentMonths", "earlierContext", "longTermBackground"] as const;
/** A summary section's text; upstream keeps a paragraph or two. */
const MAX_SUMMARY_CHARS = 4000;
const DOCUMENT_VERSION = "1.0";
const DEFAULT_CATEGORY = "context";
/** Upstream's default confidence for a fact given without one. */
const DEFAULT_CONFIDENCE = 0.5;
/** What a fact's `source` says for one added by hand (upstream's word); otherwise the thread it came from. */
const MANUAL_SOURCE = "manual";

const ContentSchema = v.pipe(
  v.string(),
  v.trim(),
  v.nonEmpty("must not be empty"),
  v.maxLength(MAX_FACT_CHARS, `must be at most ${MAX_FACT_CHARS} characters`),
);
// Free text, as upstream and the UI's form: blank means "context".
const CategorySchema = v.pipe(
  v.string(),
  v.trim(),
  v.maxLength(MAX_CATEGORY_CHARS, `must be at most ${MAX_CATEGORY_CHARS} characters`),
  v.transform((category) => (category === "" ? DEFAULT_CATEGORY : category)),
);
const ConfidenceSchema = v.pipe(v.number(), v.minValue(0, "must be between 0 and 1"), v.maxValue(1, "must be between 0 and 1"));
const FACT_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
const FactIdSchema = v.pipe(v.string(), v.regex(FACT_ID, "must be 1 to 128 letters, digits, '_', '.', ':' or '-'"));

const FactCreateSchema = v.strictObject({
  content: ContentSchema,
  category: v.optional(CategorySchema, DEFAULT_CATEGORY),
  confidence: v.optional(ConfidenceSchema, DEFAULT_CONFIDENCE),
});
const FactPatchSchema = v.strictObject({
  content: v.nullish(ContentSchema),
  category: v.nullish(CategorySchema),
  confidence: v.nullish(ConfidenceSchema),
});

const SectionSchema = v.object({
  summary: v.optional(v.pipe(v.string(), v.maxLength(MAX_SUMMARY_CHARS, `must be at most ${MAX_SUMMARY_CHARS} characters`)), ""),
  updatedAt: v.optional(v.string(), ""),
});
const sectionsSchema = (names: readonly string[]) => v.optional(v.object(Object.fromEntries(names.map((name) => [name, v.optional(SectionSchema)]))));

// Not strict: an export of upstream's own gateway carries more (revision, topics, scope ...), which
// an import leaves out. Everything it does read is checked before anything is written.
const ImportFactSchema = v.object({
  id: v.optional(FactIdSchema),
  content: ContentSchema,
  category: v.optional(CategorySchema, DEFAULT_CATEGORY),
  confidence: v.optional(ConfidenceSchema, DEFAULT_CONFIDENCE),
  createdAt: v.optional(v.string()),
  updatedAt: v.nullish(v.string()),
  source: v.nullish(v.string()),
});

function importSchema(maxFacts: number) {
  return v.object({
    version: v.optional(v.string()),
    lastUpdated: v.optional(v.string()),
    user: sectionsSchema(USER_SECTIONS),
    history: sectionsSchema(HISTORY_SECTIONS),
    facts: v.optional(
      v.pipe(
        v.array(ImportFactSchema),
        v.maxLength(maxFacts, `at most ${maxFacts} facts (memory.max_facts); remove some or raise memory.max_facts`),
      ),
      [],
    ),
  });
}

/** Ids and contents are unique in a memory record; a document repeating one is refused whole. */
function checkUnique(facts: readonly { readonly id?: string | undefined; readonly content: string }[]): void {
  const ids = new Map<string, number>();
  const contents = new Map<string, number>();
  const problems: string[] = [];
  facts.forEach((fact, index) => {
    if (fact.id !== undefined) {
      const first = ids.get(fact.id);
      if (first === undefined) ids.set(fact.id, index);
      else problems.push(`facts.${index}.id: repeats the id of facts.${first}`);
    }
    const key = memoryFactKey(fact.content);
    const same = contents.get(key);
    if (same === undefined) contents.set(key, index);
    else problems.push(`facts.${index}.content: repeats facts.${same}`);
  });
  if (problems.length > 0) throw httpError(422, `Invalid memory document: ${problems.slice(0, 10).join("; ")}`);
}

/** The fact JSON the UI reads (frontend/src/core/memory/types.ts), plus when it was last confirmed. */
function factJson(fact: StoredMemoryFact): Record<string, unknown> {
  return {
    id: fact.id,
    content: fact.content,
    category: fact.category,
    confidence: fact.confidence,
    createdAt: fact.createdAt,
    updatedAt: fact.lastConfirmedAt,
    source: fact.sourceThreadId ?? MANUAL_SOURCE,
  };
}

function sectionsJson(summaries: MemorySummaries, group: string, names: readonly string[]): Record<string, { summary: string; updatedAt: string }> {
  const kept = summaries[group] ?? {};
  return Object.fromEntries(names.map((name) => [name, { summary: kept[name]?.summary ?? "", updatedAt: kept[name]?.updatedAt ?? "" }]));
}

/** The UserMemory document the UI reads; what export returns and import accepts. */
function documentJson(document: MemoryDocument): Record<string, unknown> {
  return {
    version: DOCUMENT_VERSION,
    lastUpdated: document.updatedAt ?? "",
    user: sectionsJson(document.summaries, "user", USER_SECTIONS),
    history: sectionsJson(document.summaries, "history", HISTORY_SECTIONS),
    facts: document.facts.map(factJson),
  };
}

/** Only sections with some text or a date are stored; an all-empty document stores none. */
function summariesOf(groups: Record<string, Record<string, { summary: string; updatedAt: string } | undefined> | undefined>): MemorySummaries {
  const out: Record<string, Record<string, { summary: string; updatedAt: string }>> = {};
  for (const [group, sections] of Object.entries(groups)) {
    for (const [name, section] of Object.entries(sections ?? {})) {
      if (!section || (section.summary === "" && section.updatedAt === "")) continue;
      (out[group] ??= {})[name] = { summary: section.summary, updatedAt: section.updatedAt };
    }
  }
  return out;
}

const factNotFound = (factId: string) => httpError(404, `Memory fact '${factId}' not found.`);
const duplicateFact = () => httpError(409, "A fact with the same content already exists; edit that fact instead.");

export function registerMemoryRoutes(api: Hono<GatewayEnv>, deps: MemoryRouteDeps): void {
  const { versioned, clock } = deps;
  const maxFacts = v.parse(MemoryConfigSchema, deps.config.memory ?? {}).max_facts;
  const ImportSchema = importSchema(maxFacts);
  const now = () => new Date(clock.now()).toISOString();

  // A record this API cannot read is refused, not silently shown as empty: clearing or importing replaces it.
  const guarded = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (error instanceof MemoryStoreError && error.code === "memory_record_malformed") {
        throw httpError(409, `${error.message} Or replace it here: DELETE /api/memory clears it, POST /api/memory/import replaces it.`);
      }
      throw error;
    }
  };
  const change = (userId: string, fn: (current: MemoryDocument) => MemoryDocumentChange, options?: { replaceMalformed?: boolean }) =>
    guarded(() => changeMemoryDocument(versioned, userId, now(), fn, options));
  const read = (userId: string) => guarded(() => readMemoryDocument(versioned, userId));

  api.get("/memory", async (c) => c.json(documentJson(await read(authenticatedUser(c).id))));
  api.get("/memory/export", async (c) => c.json(documentJson(await read(authenticatedUser(c).id))));

  api.delete("/memory", async (c) => {
    const document = await change(authenticatedUser(c).id, () => ({ facts: [], summaries: {} }), { replaceMalformed: true });
    return c.json(documentJson(document));
  });

  api.post("/memory/import", async (c) => {
    const userId = authenticatedUser(c).id;
    // Validated whole before the record is touched: a bad document is a 422 and the old memory stays.
    const body = await parseJsonObjectBody(c, ImportSchema, "memory document");
    checkUnique(body.facts);
    const stamp = now();
    const facts: StoredMemoryFact[] = body.facts.map((fact) => {
      const createdAt = fact.createdAt || stamp;
      const source = fact.source ?? MANUAL_SOURCE;
      return {
        id: fact.id ?? newId("fact"),
        content: fact.content,
        category: fact.category,
        confidence: fact.confidence,
        createdAt,
        lastConfirmedAt: fact.updatedAt || createdAt,
        ...(source === MANUAL_SOURCE || source === "" ? {} : { sourceThreadId: source }),
      };
    });
    const summaries = summariesOf({ user: body.user, history: body.history });
    const document = await change(userId, () => ({ facts, summaries }), { replaceMalformed: true });
    return c.json(documentJson(document));
  });

  api.post("/memory/facts", async (c) => {
    const userId = authenticatedUser(c).id;
    const body = await parseJsonObjectBody(c, FactCreateSchema);
    const stamp = now();
    const fact: StoredMemoryFact = {
      id: newId("fact"),
      content: body.content,
      category: body.category,
      confidence: body.confidence,
      createdAt: stamp,
      lastConfirmedAt: stamp,
    };
    const key = memoryFactKey(fact.content);
    const document = await change(userId, (current) => {
      if (current.facts.some((existing) => memoryFactKey(existing.content) === key)) throw duplicateFact();
      const facts = capFacts([...current.facts, fact], maxFacts);
      if (!facts.includes(fact)) {
        throw httpError(409, `The fact was not stored: memory already holds ${maxFacts} facts (memory.max_facts), all more confident than this one; delete one or raise its confidence.`);
      }
      return { facts, summaries: current.summaries };
    });
    return c.json(documentJson(document));
  });

  api.patch("/memory/facts/:factId", async (c) => {
    const userId = authenticatedUser(c).id;
    const factId = c.req.param("factId");
    const body = await parseJsonObjectBody(c, FactPatchSchema);
    const document = await change(userId, (current) => {
      const target = current.facts.find((fact) => fact.id === factId);
      if (!target) throw factNotFound(factId);
      if (body.content !== null && body.content !== undefined) {
        const key = memoryFactKey(body.content);
        if (current.facts.some((other) => other.id !== factId && memoryFactKey(other.content) === key)) throw duplicateFact();
      }
      const updated: StoredMemoryFact = {
        ...target,
        ...(typeof body.content === "string" ? { content: body.content } : {}),
        ...(typeof body.category === "string" ? { category: body.category } : {}),
        ...(typeof body.confidence === "number" ? { confidence: body.confidence } : {}),
      };
      return { facts: current.facts.map((fact) => (fact.id === factId ? updated : fact)), summaries: current.summaries };
    });
    return c.json(documentJson(document));
  });

  api.delete("/memory/facts/:factId", async (c) => {
    const userId = authenticatedUser(c).id;
    const factId = c.req.param("factId");
    const document = await change(userId, (current) => {
      if (!current.facts.some((fact) => fact.id === factId)) throw factNotFound(factId);
      return { facts: current.facts.filter((fact) => fact.id !== factId), summaries: current.summaries };
    });
    return c.json(documentJson(document));
  });
}

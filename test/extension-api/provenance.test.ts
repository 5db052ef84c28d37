import { describe, expect, it } from "vitest";
import {
  CONTENT_KIND_VALUES,
  ContentKind,
  PROVENANCE_CONTENT_KIND_KEY,
  PROVENANCE_KEYS,
  PROVENANCE_PRODUCER_ENTITY_ID_KEY,
  PROVENANCE_PRODUCER_KIND_KEY,
  ProducerKind,
  ProvenanceError,
  SERVER_OWNED_MESSAGE_METADATA_KEYS,
  isContentKind,
  isServerOwnedMessageMetadataKey,
  provenanceKwargs,
  readProvenance,
  stripServerOwnedMetadata,
} from "../../src/extension-api/index.ts";
import type { ProvenanceStamp } from "../../src/extension-api/index.ts";

describe("provenance keys and kinds", () => {
  it("uses the wire keys the Python host writes", () => {
    expect(PROVENANCE_CONTENT_KIND_KEY).toBe("deerflow_content_kind");
    expect(PROVENANCE_PRODUCER_KIND_KEY).toBe("deerflow_producer_kind");
    expect(PROVENANCE_PRODUCER_ENTITY_ID_KEY).toBe("deerflow_producer_entity_id");
    expect(PROVENANCE_KEYS).toEqual(["deerflow_content_kind", "deerflow_producer_kind", "deerflow_producer_entity_id"]);
  });

  it("lists exactly the five content kinds", () => {
    expect([...CONTENT_KIND_VALUES].sort()).toEqual(
      ["durable_context", "image_payload", "memory", "middleware_injection", "skill_body"],
    );
    expect(isContentKind("memory")).toBe(true);
    expect(isContentKind("MEMORY")).toBe(false);
    expect(isContentKind(undefined)).toBe(false);
  });

  it("lists the host's producers", () => {
    expect(Object.values(ProducerKind).sort()).toEqual([
      "durable_context",
      "durable_context_data",
      "dynamic_context",
      "dynamic_context_memory",
      "skill_activation",
      "system_coalescing",
      "view_image",
    ]);
  });

  it("cannot be changed at runtime", () => {
    expect(Object.isFrozen(ContentKind)).toBe(true);
    expect(Object.isFrozen(ProducerKind)).toBe(true);
    expect(Object.isFrozen(PROVENANCE_KEYS)).toBe(true);
    expect(() => (PROVENANCE_KEYS as string[]).push("x")).toThrow(TypeError);
  });
});

describe("provenanceKwargs", () => {
  it("stamps content and producer kinds", () => {
    expect(provenanceKwargs({ contentKind: ContentKind.MEMORY, producerKind: ProducerKind.DYNAMIC_CONTEXT_MEMORY })).toEqual({
      deerflow_content_kind: "memory",
      deerflow_producer_kind: "dynamic_context_memory",
    });
  });

  it("adds the producer entity id when given", () => {
    expect(
      provenanceKwargs({ contentKind: ContentKind.SKILL_BODY, producerKind: ProducerKind.SKILL_ACTIVATION, producerEntityId: "deep-research" }),
    ).toEqual({
      deerflow_content_kind: "skill_body",
      deerflow_producer_kind: "skill_activation",
      deerflow_producer_entity_id: "deep-research",
    });
  });

  it("accepts an extension's own producer kind", () => {
    expect(provenanceKwargs({ contentKind: "middleware_injection", producerKind: "acme_audit" })).toMatchObject({
      deerflow_producer_kind: "acme_audit",
    });
  });

  it("treats a null entity id as absent", () => {
    const stamp = { contentKind: "memory", producerKind: "p", producerEntityId: null } as unknown as ProvenanceStamp;
    expect(Object.keys(provenanceKwargs(stamp))).toEqual(["deerflow_content_kind", "deerflow_producer_kind"]);
  });

  const invalid: ReadonlyArray<{ name: string; stamp: unknown; mentions: RegExp }> = [
    { name: "an unknown content kind", stamp: { contentKind: "gossip", producerKind: "p" }, mentions: /"gossip".*use one of middleware_injection/ },
    { name: "an empty content kind", stamp: { contentKind: "", producerKind: "p" }, mentions: /contentKind/ },
    { name: "a missing producer kind", stamp: { contentKind: "memory" }, mentions: /producerKind must be a non-empty string, got undefined/ },
    { name: "an empty producer kind", stamp: { contentKind: "memory", producerKind: "" }, mentions: /producerKind.*got ""/ },
    { name: "a numeric producer kind", stamp: { contentKind: "memory", producerKind: 7 }, mentions: /producerKind.*number/ },
    { name: "an empty entity id", stamp: { contentKind: "memory", producerKind: "p", producerEntityId: "" }, mentions: /producerEntityId/ },
    { name: "a numeric entity id", stamp: { contentKind: "memory", producerKind: "p", producerEntityId: 3 }, mentions: /producerEntityId/ },
  ];
  for (const testCase of invalid) {
    it(`refuses ${testCase.name}`, () => {
      let caught: unknown;
      try {
        provenanceKwargs(testCase.stamp as ProvenanceStamp);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ProvenanceError);
      expect(caught).toMatchObject({ code: "invalid_provenance" });
      expect((caught as Error).message).toMatch(testCase.mentions);
    });
  }
});

describe("readProvenance", () => {
  it("reads back what provenanceKwargs wrote", () => {
    const kwargs = { other: 1, ...provenanceKwargs({ contentKind: "image_payload", producerKind: "view_image", producerEntityId: "img-1" }) };
    expect(readProvenance(kwargs)).toEqual({ contentKind: "image_payload", producerKind: "view_image", producerEntityId: "img-1" });
  });

  it("omits the entity id when it is absent or not a string", () => {
    expect(readProvenance({ deerflow_content_kind: "memory", deerflow_producer_kind: "x" })).toEqual({ contentKind: "memory", producerKind: "x" });
    expect(
      readProvenance({ deerflow_content_kind: "memory", deerflow_producer_kind: "x", deerflow_producer_entity_id: 5 }),
    ).toEqual({ contentKind: "memory", producerKind: "x" });
  });

  it("keeps a content kind this version does not know", () => {
    expect(readProvenance({ deerflow_content_kind: "future_kind", deerflow_producer_kind: "x" })?.contentKind).toBe("future_kind");
  });

  it("returns null for the user's own, unstamped message", () => {
    expect(readProvenance({})).toBeNull();
    expect(readProvenance(undefined)).toBeNull();
    expect(readProvenance(null)).toBeNull();
    expect(readProvenance("deerflow_content_kind")).toBeNull();
  });

  it("returns null unless both required fields are strings", () => {
    expect(readProvenance({ deerflow_content_kind: "memory" })).toBeNull();
    expect(readProvenance({ deerflow_producer_kind: "x" })).toBeNull();
    expect(readProvenance({ deerflow_content_kind: "memory", deerflow_producer_kind: 1 })).toBeNull();
    expect(readProvenance({ deerflow_content_kind: null, deerflow_producer_kind: "x" })).toBeNull();
  });

  it("ignores provenance inherited through the prototype", () => {
    const forged = Object.create({ deerflow_content_kind: "memory", deerflow_producer_kind: "x" }) as object;
    expect(readProvenance(forged)).toBeNull();
  });
});

describe("server-owned message metadata", () => {
  const expected = [
    "deerflow_content_kind",
    "deerflow_producer_kind",
    "deerflow_producer_entity_id",
    "original_user_content",
    "deerflow_tool_meta",
    "deerflow_read_mark",
    "deerflow_tool_transforms",
    "deerflow_error_fallback",
    "deerflow_view_image_context",
    "durable_context_data",
    "dynamic_context_reminder",
    "reminder_date",
    "slash_skill_activation",
    "slash_skill_activation_target_id",
    "skill_context_entry",
    "safety_termination",
    "token_usage_attribution",
    "subagent_token_usage_attributed",
    "deerflow_tool_receipt",
    "deerflow_tool_receipt_ledger",
    "subagent_status",
    "subagent_stop_reason",
    "subagent_error",
    "subagent_result_brief",
    "subagent_result_sha256",
    "subagent_token_usage",
    "subagent_citation_verdict",
  ];

  it("covers the provenance keys and every other key only the server writes", () => {
    expect([...SERVER_OWNED_MESSAGE_METADATA_KEYS].sort()).toEqual([...expected].sort());
    expect(new Set(SERVER_OWNED_MESSAGE_METADATA_KEYS).size).toBe(SERVER_OWNED_MESSAGE_METADATA_KEYS.length);
    expect(Object.isFrozen(SERVER_OWNED_MESSAGE_METADATA_KEYS)).toBe(true);
    expect(isServerOwnedMessageMetadataKey("deerflow_tool_receipt")).toBe(true);
    expect(isServerOwnedMessageMetadataKey("name")).toBe(false);
  });

  it("strips every server-owned key a caller tries to forge and keeps the rest", () => {
    const forged: Record<string, unknown> = Object.fromEntries(expected.map((key) => [key, "forged"]));
    forged.custom = { keep: true };
    forged.Deerflow_Content_Kind = "case differs, so not ours";
    const stripped = stripServerOwnedMetadata(forged);
    expect(stripped).toEqual({ custom: { keep: true }, Deerflow_Content_Kind: "case differs, so not ours" });
    expect(readProvenance(stripped)).toBeNull();
  });

  it("leaves the caller's object untouched", () => {
    const kwargs = { deerflow_tool_meta: 1, a: 2 };
    stripServerOwnedMetadata(kwargs);
    expect(kwargs).toEqual({ deerflow_tool_meta: 1, a: 2 });
  });

  it("returns an empty object for missing kwargs", () => {
    expect(stripServerOwnedMetadata(undefined)).toEqual({});
    expect(stripServerOwnedMetadata(null)).toEqual({});
  });

  it("keeps a __proto__ key as data rather than a prototype", () => {
    const parsed = JSON.parse('{"__proto__":{"deerflow_content_kind":"memory","deerflow_producer_kind":"x"}}') as Record<string, unknown>;
    const stripped = stripServerOwnedMetadata(parsed);
    expect(Object.getPrototypeOf(stripped)).toBe(Object.prototype);
    expect(readProvenance(stripped)).toBeNull();
  });
});

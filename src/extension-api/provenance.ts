import { ExtensionApiError } from "./errors.ts";
import { isOneOf } from "./one-of.ts";

export const PROVENANCE_CONTENT_KIND_KEY = "deerflow_content_kind";
export const PROVENANCE_PRODUCER_KIND_KEY = "deerflow_producer_kind";
export const PROVENANCE_PRODUCER_ENTITY_ID_KEY = "deerflow_producer_entity_id";

export const PROVENANCE_KEYS: readonly string[] = Object.freeze([
  PROVENANCE_CONTENT_KIND_KEY,
  PROVENANCE_PRODUCER_KIND_KEY,
  PROVENANCE_PRODUCER_ENTITY_ID_KEY,
]);

/** What a host-injected message carries, so consumers can tell it from the user's own words. */
export const ContentKind = Object.freeze({
  MIDDLEWARE_INJECTION: "middleware_injection",
  MEMORY: "memory",
  DURABLE_CONTEXT: "durable_context",
  SKILL_BODY: "skill_body",
  IMAGE_PAYLOAD: "image_payload",
} as const);

export type ContentKind = (typeof ContentKind)[keyof typeof ContentKind];

export const CONTENT_KIND_VALUES: readonly ContentKind[] = Object.freeze(Object.values(ContentKind));

export function isContentKind(value: unknown): value is ContentKind {
  return isOneOf(CONTENT_KIND_VALUES, value);
}

/**
 * The host's own producers. The set is open: an extension stamps messages it injects with a
 * producer kind of its own.
 */
export const ProducerKind = Object.freeze({
  DYNAMIC_CONTEXT: "dynamic_context",
  DYNAMIC_CONTEXT_MEMORY: "dynamic_context_memory",
  DURABLE_CONTEXT: "durable_context",
  DURABLE_CONTEXT_DATA: "durable_context_data",
  SYSTEM_COALESCING: "system_coalescing",
  VIEW_IMAGE: "view_image",
  SKILL_ACTIVATION: "skill_activation",
} as const);

export type ProducerKind = (typeof ProducerKind)[keyof typeof ProducerKind];

export interface ProvenanceStamp {
  readonly contentKind: ContentKind;
  /** A {@link ProducerKind} value, or an extension's own producer name. */
  readonly producerKind: string;
  readonly producerEntityId?: string;
}

/** Provenance as found on a message: kinds stay strings, since a newer host may write new ones. */
export interface MessageProvenance {
  readonly contentKind: string;
  readonly producerKind: string;
  readonly producerEntityId?: string;
}

export class ProvenanceError extends ExtensionApiError {
  declare readonly code: "invalid_provenance";

  constructor(message: string) {
    super("invalid_provenance", message);
  }
}

/** The additional_kwargs entries that stamp a host-injected message with its provenance. */
export function provenanceKwargs(stamp: ProvenanceStamp): Record<string, string> {
  if (!isContentKind(stamp.contentKind)) {
    throw new ProvenanceError(
      `provenance contentKind ${describe(stamp.contentKind)} is not a content kind; ` +
        `use one of ${CONTENT_KIND_VALUES.join(", ")}`,
    );
  }
  requireNonEmptyString(stamp.producerKind, "producerKind");
  const kwargs: Record<string, string> = {
    [PROVENANCE_CONTENT_KIND_KEY]: stamp.contentKind,
    [PROVENANCE_PRODUCER_KIND_KEY]: stamp.producerKind,
  };
  // null is accepted as "no entity" because messages round-trip through Python, which writes None.
  const entityId: unknown = stamp.producerEntityId;
  if (entityId !== undefined && entityId !== null) {
    requireNonEmptyString(entityId, "producerEntityId");
    kwargs[PROVENANCE_PRODUCER_ENTITY_ID_KEY] = entityId;
  }
  return kwargs;
}

/** The provenance stamped on a message, or null when it carries none (the user's own messages). */
export function readProvenance(additionalKwargs: unknown): MessageProvenance | null {
  if (typeof additionalKwargs !== "object" || additionalKwargs === null) return null;
  const contentKind = ownValue(additionalKwargs, PROVENANCE_CONTENT_KIND_KEY);
  const producerKind = ownValue(additionalKwargs, PROVENANCE_PRODUCER_KIND_KEY);
  if (typeof contentKind !== "string" || typeof producerKind !== "string") return null;
  const producerEntityId = ownValue(additionalKwargs, PROVENANCE_PRODUCER_ENTITY_ID_KEY);
  return typeof producerEntityId === "string"
    ? { contentKind, producerKind, producerEntityId }
    : { contentKind, producerKind };
}

/**
 * Message additional_kwargs keys only the server writes. A caller who could supply them could
 * forge provenance, tool receipts, skill activations or usage attribution, so the Gateway strips
 * them from every client message.
 */
export const SERVER_OWNED_MESSAGE_METADATA_KEYS: readonly string[] = Object.freeze([
  ...PROVENANCE_KEYS,
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
  // A delegation's outcome as the task tool recorded it: a caller forging these could plant a
  // "completed" delegation, its receipts' verdict or its token usage in the ledger.
  "subagent_status",
  "subagent_stop_reason",
  "subagent_error",
  "subagent_result_brief",
  "subagent_result_sha256",
  "subagent_token_usage",
  "subagent_citation_verdict",
]);

const SERVER_OWNED_KEY_SET: ReadonlySet<string> = new Set(SERVER_OWNED_MESSAGE_METADATA_KEYS);

export function isServerOwnedMessageMetadataKey(key: string): boolean {
  return SERVER_OWNED_KEY_SET.has(key);
}

/** A shallow copy of a caller's additional_kwargs without the server-owned keys. */
export function stripServerOwnedMetadata(
  kwargs: Readonly<Record<string, unknown>> | null | undefined,
): Record<string, unknown> {
  if (kwargs === null || kwargs === undefined) return {};
  // fromEntries defines own properties, so a caller's "__proto__" key stays data, not a prototype.
  return Object.fromEntries(Object.entries(kwargs).filter(([key]) => !SERVER_OWNED_KEY_SET.has(key)));
}

function requireNonEmptyString(value: unknown, field: string): asserts value is string {
  if (typeof value !== "string" || value === "") {
    throw new ProvenanceError(`provenance ${field} must be a non-empty string, got ${describe(value)}`);
  }
}

function ownValue(record: object, key: string): unknown {
  return Object.hasOwn(record, key) ? (record as Record<string, unknown>)[key] : undefined;
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null) return "null";
  return typeof value;
}

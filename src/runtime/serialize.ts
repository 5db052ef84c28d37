import { BaseMessageChunk, isBaseMessage, type BaseMessage } from "@langchain/core/messages";
import { threadDataPaths } from "../state/thread-data.ts";
import { isRecord } from "../core/guards.ts";

/*
 * The LangGraph Platform wire format for state: plain JSON where every LangChain message is the
 * dict a Python server's `model_dump()` would send (`{type, content, id, name, tool_calls, ...}`),
 * which is what the SDK's `useStream` and DeerFlow's web UI parse. One serializer for thread
 * state responses and for `values` frames, so the two can never disagree.
 */

/** Channels the engine keeps for itself (src/engine/agent.ts); a client never sees them. */
const ENGINE_CHANNELS: ReadonlySet<string> = new Set(["jump_to"]);

export function isEngineChannel(name: string): boolean {
  return ENGINE_CHANNELS.has(name);
}

const CHUNK_TYPE_NAMES: Readonly<Record<string, string>> = {
  ai: "AIMessageChunk",
  human: "HumanMessageChunk",
  system: "SystemMessageChunk",
  tool: "ToolMessageChunk",
  function: "FunctionMessageChunk",
  generic: "ChatMessageChunk",
};

export type SerializedMessage = Record<string, unknown> & { type: string };

/**
 * One message as a plain dict. Chunks keep their chunk type name (`AIMessageChunk`), as the
 * Python server sends them in `messages` frames; the SDK folds both spellings.
 */
export function serializeMessage(message: BaseMessage): SerializedMessage {
  return serializeMessageWith(message, new WeakSet());
}

// One `seen` set for the whole value being serialized (a message's fields included), not one per field.
function serializeMessageWith(message: BaseMessage, seen: WeakSet<object>): SerializedMessage {
  const kind = message.getType();
  const m = message as unknown as Record<string, unknown>;
  const out: SerializedMessage = {
    type: BaseMessageChunk.isInstance(message) ? (CHUNK_TYPE_NAMES[kind] ?? kind) : kind,
    content: serializeInner(message.content, seen),
    additional_kwargs: serializeInner(message.additional_kwargs ?? {}, seen),
    response_metadata: serializeInner(message.response_metadata ?? {}, seen),
    name: message.name ?? null,
    id: message.id ?? null,
  };
  if (kind === "ai") {
    out.tool_calls = serializeInner(m.tool_calls ?? [], seen);
    out.invalid_tool_calls = serializeInner(m.invalid_tool_calls ?? [], seen);
    out.usage_metadata = serializeInner(m.usage_metadata ?? null, seen);
    if (Array.isArray(m.tool_call_chunks)) out.tool_call_chunks = serializeInner(m.tool_call_chunks, seen);
  } else if (kind === "tool") {
    out.tool_call_id = m.tool_call_id ?? null;
    out.status = m.status ?? "success";
    if (m.artifact !== undefined) out.artifact = serializeInner(m.artifact, seen);
  } else if (kind === "generic" && typeof m.role === "string") {
    out.role = m.role;
  } else if (kind === "remove") {
    out.type = "remove";
  }
  return out;
}

/**
 * Any state value as JSON-safe data: messages as dicts, Dates as ISO strings, Maps as objects,
 * Sets as arrays, bigints as strings; functions, symbols and `undefined` fields are dropped.
 */
export function serializeValue(value: unknown): unknown {
  return serializeInner(value, new WeakSet());
}

function serializeInner(value: unknown, seen: WeakSet<object>): unknown {
  if (value === undefined || value === null) return value;
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "bigint":
      return value.toString();
    case "function":
    case "symbol":
      return undefined;
  }
  const object = value as object;
  if (isBaseMessage(object)) {
    // A message that holds itself (or its holder) is a cycle like any other.
    if (seen.has(object)) return null;
    seen.add(object);
    try {
      return serializeMessageWith(object, seen);
    } finally {
      seen.delete(object);
    }
  }
  if (object instanceof Date) return Number.isNaN(object.getTime()) ? null : object.toISOString();
  // A value that refers to itself cannot be JSON; cut the cycle instead of overflowing the stack.
  if (seen.has(object)) return null;
  seen.add(object);
  try {
    if (Array.isArray(object)) return object.map((item) => serializeInner(item, seen) ?? null);
    if (object instanceof Map) return serializeEntries(object.entries(), seen);
    if (object instanceof Set) return [...object].map((item) => serializeInner(item, seen) ?? null);
    if (ArrayBuffer.isView(object)) return Array.from(object as unknown as ArrayLike<number>);
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function" && Object.getPrototypeOf(object) !== Object.prototype) {
      return serializeInner(toJSON.call(object), seen);
    }
    return serializeEntries(Object.entries(object), seen);
  } finally {
    seen.delete(object);
  }
}

function serializeEntries(entries: Iterable<[unknown, unknown]>, seen: WeakSet<object>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, item] of entries) {
    const serialized = serializeInner(item, seen);
    if (serialized === undefined) continue;
    setOwn(out, String(key), serialized);
  }
  return out;
}

/** out[key] = value, except that a "__proto__" key stays data instead of replacing the prototype. */
function setOwn(out: Record<string, unknown>, key: string, value: unknown): void {
  // Plain assignment costs less than defineProperty (this runs for every key of every frame); only "__proto__" needs the latter.
  if (key === "__proto__") Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  else out[key] = value;
}

/** An inline image (a `data:` URL or base64 payload) rather than a link to one. */
function isInlineImageBlock(block: unknown): boolean {
  if (!isRecord(block)) return false;
  if (block.type === "image_url") {
    const imageUrl = block.image_url;
    const url = isRecord(imageUrl) ? imageUrl.url : imageUrl;
    return typeof url === "string" && url.startsWith("data:");
  }
  if (block.type === "image") {
    return typeof block.data === "string" || (typeof block.url === "string" && block.url.startsWith("data:"));
  }
  return false;
}

/*
 * A hidden message (the images a model was shown, for instance) never appears in the UI, and
 * its inline image bytes can be megabytes per frame; they are dropped from what clients get,
 * never from the checkpoint.
 */
function withoutHiddenInlineImages(message: SerializedMessage): SerializedMessage {
  const kwargs = message.additional_kwargs;
  if (!isRecord(kwargs) || kwargs.hide_from_ui !== true || !Array.isArray(message.content)) return message;
  return { ...message, content: message.content.filter((block) => !isInlineImageBlock(block)) };
}

/**
 * A graph state as clients receive it: every channel serialized, the engine's own channels
 * left out, `__interrupt__` kept (a `values` frame carries pending interrupts there), and
 * inline images dropped from hidden messages.
 */
export function serializeValues(values: unknown): Record<string, unknown> {
  if (!isRecord(values)) return {};
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values)) {
    if (ENGINE_CHANNELS.has(key)) continue;
    let serialized = serializeValue(value);
    if (serialized === undefined) continue;
    // Checkpoints written before thread_data held virtual paths carry host folders there; a client
    // is only ever shown the virtual ones.
    if (key === "thread_data" && isRecord(serialized)) serialized = { ...threadDataPaths() };
    if (key === "messages" && Array.isArray(serialized)) {
      serialized = serialized.map((item) =>
        isRecord(item) && typeof item.type === "string" ? withoutHiddenInlineImages(item as SerializedMessage) : item,
      );
    }
    setOwn(out, key, serialized);
  }
  return out;
}

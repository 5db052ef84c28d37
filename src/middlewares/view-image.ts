import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { bytesToBase64 } from "../core/base64.ts";
import { contentText } from "../core/content.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, ModelHandler, ModelRequest } from "../engine/types.ts";
import { ContentKind, ProducerKind, provenanceKwargs } from "../extension-api/provenance.ts";
import type { ViewedImage } from "../state/types.ts";
import {
  IMAGE_MIME_BY_EXTENSION,
  MAX_IMAGE_BYTES,
  VIEW_IMAGE_TOOL_NAME,
  acquireThreadSandbox,
  createViewImageTool,
  rethrowIfControlFlow,
  statThroughParent,
} from "../tools/view-image.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { HIDE_FROM_UI } from "./messages.ts";

/*
 * After a view_image call, the model's next request carries the images themselves: one hidden
 * HumanMessage of base64 content blocks, appended to that request only. It is never a state
 * update, so no checkpoint carries the payload and an interrupted run cannot strand it in history.
 * The middleware owns that message and rebuilds it per call: any earlier one in the request (a
 * thread checkpointed by the Python host's old before/after-model design can hold one that reached
 * state and was never removed) is swept out first, or its base64 would be resent on every later
 * request for the life of the thread.
 */

export const VIEW_IMAGE_NAME = "ViewImage";
/** Reserved id prefix of the image context message. */
export const VIEW_IMAGE_CONTEXT_ID_PREFIX = "deerflow_view_image__";
/** The id prefix the Python host used; its marked leftovers are swept the same way. */
export const LEGACY_VIEW_IMAGE_CONTEXT_ID_PREFIX = "view-image-context:";
/** Server-owned marker (the Gateway strips it from client messages), so a client cannot get its own message swept. */
export const VIEW_IMAGE_CONTEXT_MARKER = "deerflow_view_image_context";
export const VIEW_IMAGE_CONTEXT_NAME = "view_image_context";

export const VIEW_IMAGE_HEADER = "Here are the images you've viewed:";
// Headers an unmarked leftover may start with; seeing one means the images were already sent.
const ALREADY_SENT_HEADERS = [VIEW_IMAGE_HEADER, "Here are the details of the images you've viewed"];

export const ViewImageConfigSchema = v.strictObject({});
export interface ViewImageConfig {}
type _ViewImageConfigMatches = Assert<SameType<ViewImageConfig, v.InferOutput<typeof ViewImageConfigSchema>>>;

export interface ViewImageDeps {
  /** Byte cap of one image, checked again when it is sent; default {@link MAX_IMAGE_BYTES}. */
  readonly maxImageBytes?: number;
  /** Contribute the view_image tool (default true); false when the caller registers it itself. */
  readonly includeTool?: boolean;
}

type ContentBlock = Record<string, unknown>;

function hasMarker(message: BaseMessage): boolean {
  return message.additional_kwargs?.[VIEW_IMAGE_CONTEXT_MARKER] === true;
}

/** The middleware's own message: a reserved id prefix AND the server-owned marker, never one alone. */
export function isViewImageContextMessage(message: BaseMessage): boolean {
  const id = message.id;
  if (typeof id !== "string") return false;
  return (id.startsWith(VIEW_IMAGE_CONTEXT_ID_PREFIX) || id.startsWith(LEGACY_VIEW_IMAGE_CONTEXT_ID_PREFIX)) && hasMarker(message);
}

/**
 * True when the newest assistant turn called view_image, every one of its calls has a result, and
 * no (unmarked, legacy) image message already follows it. Judged on state, not the request: a
 * request can carry placeholder results for interrupted calls, which did not produce an image.
 */
export function imagesWarranted(messages: readonly BaseMessage[]): boolean {
  let index = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (AIMessage.isInstance(messages[i])) {
      index = i;
      break;
    }
  }
  if (index === -1) return false;
  const assistant = messages[index] as AIMessage;
  const calls = assistant.tool_calls ?? [];
  if (!calls.some((call) => call.name === VIEW_IMAGE_TOOL_NAME)) return false;
  const answered = new Set<string>();
  for (const later of messages.slice(index + 1)) {
    if (ToolMessage.isInstance(later) && later.tool_call_id) answered.add(later.tool_call_id);
    if (HumanMessage.isInstance(later)) {
      if (hasMarker(later)) return false;
      const text = contentText(later.content, { separator: "" });
      if (ALREADY_SENT_HEADERS.some((header) => text.includes(header))) return false;
    }
  }
  return calls.every((call) => !call.id || answered.has(call.id));
}

/** The image as a data URL, or undefined when it is gone, changed since it was viewed, or too large. */
async function readDataUrl(runtime: AgentRuntime, image: ViewedImage, maxBytes: number): Promise<string | undefined> {
  try {
    const sandbox = await acquireThreadSandbox(runtime);
    const listed = await statThroughParent(sandbox, image.actual_path, runtime);
    if (!listed || listed.type !== "file" || listed.size !== image.size || image.size > maxBytes) return undefined;
    const bytes = await sandbox.readFileBytes(image.actual_path);
    if (bytes.length !== image.size) return undefined;
    return `data:${image.mime_type};base64,${bytesToBase64(bytes)}`;
  } catch (error) {
    rethrowIfControlFlow(error, runtime);
    return undefined;
  }
}

/** The content blocks of the image message: a header, then per image a caption and its data URL (or a note). */
export async function buildImageBlocks(
  viewed: Readonly<Record<string, ViewedImage>>,
  runtime: AgentRuntime,
  maxBytes: number = MAX_IMAGE_BYTES,
): Promise<ContentBlock[]> {
  const entries = Object.entries(viewed ?? {});
  if (entries.length === 0) return [{ type: "text", text: "No images have been viewed." }];
  const blocks: ContentBlock[] = [{ type: "text", text: VIEW_IMAGE_HEADER }];
  for (const [path, image] of entries) {
    blocks.push({ type: "text", text: `\n- **${path}** (${image?.mime_type ?? "unknown"})` });
    if (!image?.actual_path) continue;
    const url = await readDataUrl(runtime, image, maxBytes);
    blocks.push(
      url === undefined
        ? { type: "text", text: `  (file unavailable or changed on disk: ${image.actual_path})` }
        : { type: "image_url", image_url: { url } },
    );
  }
  return blocks;
}

/** The hidden, marked, provenance-stamped message that carries the images to one request. */
export function imageContextMessage(blocks: ContentBlock[]): HumanMessage {
  return new HumanMessage({
    id: `${VIEW_IMAGE_CONTEXT_ID_PREFIX}${crypto.randomUUID().replaceAll("-", "")}`,
    name: VIEW_IMAGE_CONTEXT_NAME,
    content: blocks as HumanMessage["content"],
    additional_kwargs: {
      [HIDE_FROM_UI]: true,
      [VIEW_IMAGE_CONTEXT_MARKER]: true,
      ...provenanceKwargs({ contentKind: ContentKind.IMAGE_PAYLOAD, producerKind: ProducerKind.VIEW_IMAGE }),
    },
  });
}

/**
 * For vision models: contributes the view_image tool and shows the model the images it viewed,
 * request-only. State keeps only `viewed_images` metadata.
 */
export function createViewImageMiddleware(config?: Partial<ViewImageConfig>, deps: ViewImageDeps = {}): AgentMiddleware {
  parseMiddlewareConfig(ViewImageConfigSchema, config, VIEW_IMAGE_NAME, "ViewImage takes no configuration; remove this key.");
  const maxBytes = deps.maxImageBytes ?? MAX_IMAGE_BYTES;
  const tools: AgentTool[] = deps.includeTool === false ? [] : [createViewImageTool({ maxImageBytes: maxBytes })];
  return {
    name: VIEW_IMAGE_NAME,
    tools,
    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      const kept = request.messages.filter((message) => !isViewImageContextMessage(message));
      const stateMessages = request.state.messages.filter((message) => !isViewImageContextMessage(message));
      if (!imagesWarranted(stateMessages)) {
        return handler(kept.length === request.messages.length ? request : { ...request, messages: kept });
      }
      const blocks = await buildImageBlocks(request.state.viewed_images ?? {}, request.runtime, maxBytes);
      return handler({ ...request, messages: [...kept, imageContextMessage(blocks)] });
    },
    releasePolicyParameters() {
      return {
        max_image_bytes: maxBytes,
        supported_extensions: Object.keys(IMAGE_MIME_BY_EXTENSION),
        payload_scope: "request_only",
        context_message_id_prefix: VIEW_IMAGE_CONTEXT_ID_PREFIX,
        tool: tools.length > 0 ? VIEW_IMAGE_TOOL_NAME : null,
      };
    },
  };
}

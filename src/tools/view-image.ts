import { ToolMessage } from "@langchain/core/messages";
import { Command, isGraphBubbleUp } from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import { isInsideVirtualRoots } from "../core/path.ts";
import { resolveVirtualPath } from "../sandbox/virtual-path.ts";
import type { AgentRuntime, AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";
import { SandboxError, VIRTUAL_DIRS } from "../ports/sandbox.ts";
import type { Sandbox } from "../ports/sandbox.ts";
import type { ViewedImage } from "../state/types.ts";
import { runThreadId, runUserId } from "../engine/run-identity.ts";

/*
 * view_image: checks that a sandbox file really is an image the model can look at and records its
 * metadata in `viewed_images`. The bytes never enter state; ViewImage reads them again through the
 * sandbox when it builds the next model request, so no checkpoint carries a base64 payload.
 */

export const VIEW_IMAGE_TOOL_NAME = "view_image";
/** Larger images are refused: providers reject them and they would swamp the request. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;
export const VIEW_IMAGE_SUCCESS_TEXT = "Successfully read image";

export const IMAGE_MIME_BY_EXTENSION: Readonly<Record<string, string>> = Object.freeze({
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".webp": "image/webp",
  ".gif": "image/gif",
});

const ROOTS_TEXT = Object.values(VIRTUAL_DIRS).join(", ");

export interface ViewImageToolOptions {
  /** Byte cap of one image; default {@link MAX_IMAGE_BYTES}. */
  readonly maxImageBytes?: number;
}

function startsWith(bytes: Uint8Array, prefix: readonly number[], offset = 0): boolean {
  if (bytes.length < offset + prefix.length) return false;
  return prefix.every((byte, i) => bytes[offset + i] === byte);
}

const ascii = (text: string) => [...text].map((c) => c.charCodeAt(0));

/** The image type the bytes' magic number announces, or undefined for anything else. */
export function detectImageMime(bytes: Uint8Array): string | undefined {
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return "image/jpeg";
  if (startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (startsWith(bytes, ascii("RIFF")) && startsWith(bytes, ascii("WEBP"), 8)) return "image/webp";
  if (startsWith(bytes, ascii("GIF87a")) || startsWith(bytes, ascii("GIF89a"))) return "image/gif";
  return undefined;
}

function extensionOf(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot).toLowerCase() : "";
}

/** Rethrows what must pass every catch untouched: graph interrupts and the run's own abort. */
export function rethrowIfControlFlow(error: unknown, runtime: AgentRuntime): void {
  if (isGraphBubbleUp(error)) throw error;
  if (runtime.signal?.aborted) throw error;
}

/** The sandbox of the run's user and thread, the same one the sandbox tools use. */
export async function acquireThreadSandbox(runtime: AgentRuntime): Promise<Sandbox> {
  const provider = runtime.services.sandbox;
  if (!provider) {
    throw new SandboxError("sandbox_unavailable", "This agent has no sandbox, so no image files are available. Configure a sandbox provider.");
  }
  const threadId = runThreadId(runtime);
  if (!threadId) {
    throw new SandboxError("sandbox_unavailable", "Images live in a thread's sandbox; run the agent on a thread to view them.");
  }
  return provider.acquire({ userId: runUserId(runtime), threadId });
}

/**
 * A file's listed type and size without reading it, so an oversized file is refused before its
 * bytes are loaded. Undefined when the parent cannot be listed or does not show the file; the read
 * that follows then reports why.
 */
export async function statThroughParent(
  sandbox: Sandbox,
  path: string,
  runtime: AgentRuntime,
): Promise<{ type: "file" | "directory"; size: number | undefined } | undefined> {
  const parent = path.slice(0, path.lastIndexOf("/"));
  try {
    const entry = (await sandbox.list(parent, { depth: 1 })).find((e) => e.path === path);
    return entry ? { type: entry.type, size: entry.size } : undefined;
  } catch (error) {
    rethrowIfControlFlow(error, runtime);
    return undefined;
  }
}

class ImageRefusal extends DeerflowError {
  constructor(message: string) {
    super("view_image_refused", message);
    this.name = "ImageRefusal";
  }
}

function refuse(text: string): never {
  throw new ImageRefusal(text);
}

function sandboxErrorText(error: SandboxError, path: string): string {
  switch (error.code) {
    case "not_found":
      return `Error: Image file not found: ${path}`;
    case "is_directory":
      return `Error: Path is not a file: ${path}`;
    // Worded so the tool-result classifier files it as a permission problem.
    case "path_outside_sandbox":
      return `Error: Permission denied: ${error.message}`;
    case "sandbox_unavailable":
      return `Error: Sandbox unavailable: ${error.message}`;
  }
}

async function inspectImage(
  sandbox: Sandbox,
  path: string,
  maxBytes: number,
  runtime: AgentRuntime,
): Promise<ViewedImage> {
  const listed = await statThroughParent(sandbox, path, runtime);
  if (listed?.type === "directory") refuse(`Error: Path is not a file: ${path}`);
  if (!listed && !(await sandbox.exists(path))) refuse(`Error: Image file not found: ${path}`);

  const extension = extensionOf(path);
  const expected = IMAGE_MIME_BY_EXTENSION[extension];
  if (expected === undefined) {
    refuse(`Error: Unsupported image format: ${extension || "(no extension)"}. Supported formats: ${Object.keys(IMAGE_MIME_BY_EXTENSION).join(", ")}`);
  }
  const tooLarge = (size: number) => `Error: Image file is too large: ${size} bytes. Maximum supported size is ${maxBytes} bytes`;
  if (listed?.size !== undefined && listed.size > maxBytes) refuse(tooLarge(listed.size));

  let bytes: Uint8Array;
  try {
    bytes = await sandbox.readFileBytes(path);
  } catch (error) {
    rethrowIfControlFlow(error, runtime);
    if (error instanceof SandboxError) refuse(sandboxErrorText(error, path));
    // A host error message can name host folders; the model only ever sees virtual paths.
    const code = (error as { code?: unknown })?.code;
    refuse(`Error: Could not read image file ${path}${typeof code === "string" ? ` (${code})` : ""}. Check that it is a readable file, or ask the user to upload it again.`);
  }
  if (listed?.size !== undefined && bytes.length !== listed.size) refuse("Error: Image file changed during read");
  if (bytes.length > maxBytes) refuse(tooLarge(bytes.length));

  const detected = detectImageMime(bytes);
  if (detected === undefined) refuse("Error: File contents do not match a supported image format");
  if (detected !== expected) refuse(`Error: Image contents are ${detected}, but file extension indicates ${expected}`);
  return { mime_type: detected, size: bytes.length, actual_path: path };
}

function toolMessage(context: ToolContext, text: string): ToolMessage {
  return new ToolMessage({
    content: text,
    tool_call_id: context.toolCall.id ?? "",
    name: VIEW_IMAGE_TOOL_NAME,
    status: text.startsWith("Error:") ? "error" : "success",
  });
}

/** The `view_image` tool (only for models that can see images; ViewImage contributes it). */
export function createViewImageTool(options: ViewImageToolOptions = {}): AgentTool {
  const maxBytes = options.maxImageBytes ?? MAX_IMAGE_BYTES;
  return {
    name: VIEW_IMAGE_TOOL_NAME,
    description:
      "Read an image file so you can see it. Use it when you need to look at an image " +
      `(jpg, jpeg, png, webp, gif) under ${ROOTS_TEXT}; the image is shown to you with your next step. ` +
      "Do not use it for other files or for several files at once.",
    schema: {
      type: "object",
      properties: {
        image_path: {
          type: "string",
          description: "Absolute /mnt/user-data path of the image file. Supported formats: jpg, jpeg, png, webp, gif.",
        },
      },
      required: ["image_path"],
      additionalProperties: false,
    },
    async invoke(args, context): Promise<ToolOutput> {
      const raw = args["image_path"];
      if (typeof raw !== "string" || raw === "") {
        return toolMessage(context, "Error: view_image needs `image_path` as a non-empty string.");
      }
      if (!raw.startsWith("/") || !isInsideVirtualRoots(raw)) {
        return toolMessage(context, `Error: Only image paths under ${ROOTS_TEXT} are allowed`);
      }
      const path = resolveVirtualPath(raw);

      let sandbox: Sandbox;
      try {
        sandbox = await acquireThreadSandbox(context.runtime);
      } catch (error) {
        rethrowIfControlFlow(error, context.runtime);
        if (error instanceof SandboxError) return toolMessage(context, sandboxErrorText(error, path));
        return toolMessage(context, `Error: Sandbox unavailable: ${error instanceof Error ? error.message : String(error)}`);
      }
      // The call that first touches the sandbox binds the thread to it, as the sandbox tools do.
      const binding = context.state.sandbox ? {} : { sandbox: { sandbox_id: sandbox.id } };

      let image: ViewedImage;
      try {
        image = await inspectImage(sandbox, path, maxBytes, context.runtime);
      } catch (error) {
        rethrowIfControlFlow(error, context.runtime);
        const text =
          error instanceof ImageRefusal
            ? error.message
            : error instanceof SandboxError
              ? sandboxErrorText(error, path)
              : `Error: Could not read image file ${path}. Check that it is a readable file, or ask the user to upload it again.`;
        const message = toolMessage(context, text);
        return context.state.sandbox ? message : new Command({ update: { ...binding, messages: [message] } });
      }
      return new Command({
        update: { ...binding, viewed_images: { [path]: image }, messages: [toolMessage(context, VIEW_IMAGE_SUCCESS_TEXT)] },
      });
    },
  };
}

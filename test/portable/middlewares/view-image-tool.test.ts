import { ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { isCommand, type Command } from "@langchain/langgraph/web";
import type { InMemoryFs } from "just-bash";
import { afterEach, describe, expect, it } from "vitest";
import { base64ToBytes } from "../../../src/core/base64.ts";
import type { AgentRuntime, ToolContext, ToolOutput } from "../../../src/engine/types.ts";
import type { Sandbox, SandboxProvider } from "../../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { emptyThreadState, type ThreadState } from "../../../src/state/thread-state.ts";
import { MAX_IMAGE_BYTES, VIEW_IMAGE_SUCCESS_TEXT, createViewImageTool, detectImageMime } from "../../../src/tools/view-image.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";

const PNG = base64ToBytes("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==");
const GIF = base64ToBytes("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7");
const JPEG = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46]);
const WEBP = new Uint8Array([...new TextEncoder().encode("RIFF"), 0x1a, 0, 0, 0, ...new TextEncoder().encode("WEBPVP8 ")]);

const providers: SandboxProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

async function plant(sandbox: Sandbox, path: string, bytes: Uint8Array): Promise<void> {
  const fs = (sandbox as unknown as { fs: InMemoryFs }).fs;
  await fs.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
  await fs.writeFile(path, bytes.slice());
}

interface Harness {
  sandbox: Sandbox;
  reads: string[];
  call(args: Record<string, unknown>): Promise<ToolOutput>;
}

/** The tool as the engine invokes it, on thread t1 of the default user; readFileBytes calls are logged. */
async function harness(options: { state?: Partial<ThreadState>; maxImageBytes?: number; failRead?: Error } = {}): Promise<Harness> {
  const inner = createVirtualSandboxProvider();
  providers.push(inner);
  const sandbox = await inner.acquire({ userId: "default", threadId: "t1" });
  const reads: string[] = [];
  const readFileBytes = sandbox.readFileBytes.bind(sandbox);
  sandbox.readFileBytes = async (path: string) => {
    reads.push(path);
    if (options.failRead) throw options.failRead;
    return readFileBytes(path);
  };
  const runtime = makeRuntime({ threadId: "t1", services: { sandbox: inner } });
  const tool = createViewImageTool(options.maxImageBytes === undefined ? {} : { maxImageBytes: options.maxImageBytes });
  const state: ThreadState = { ...emptyThreadState(), ...options.state };
  return {
    sandbox,
    reads,
    call: (args) => {
      const toolCall: ToolCall = { name: "view_image", args, id: "tc-1", type: "tool_call" };
      return tool.invoke(args, { toolCall, state, runtime } satisfies ToolContext);
    },
  };
}

function update(out: ToolOutput): Record<string, unknown> {
  expect(isCommand(out)).toBe(true);
  return (out as Command).update as Record<string, unknown>;
}

/** The tool message of a result, whether returned bare or inside a Command. */
function message(out: ToolOutput): ToolMessage {
  const found = ToolMessage.isInstance(out) ? out : ((update(out)["messages"] as ToolMessage[])[0] as ToolMessage);
  expect(ToolMessage.isInstance(found)).toBe(true);
  return found;
}

function refusal(out: ToolOutput): string {
  const msg = message(out);
  expect(msg.status).toBe("error");
  if (isCommand(out)) expect(update(out)["viewed_images"]).toBeUndefined();
  return String(msg.content);
}

describe("view_image tool", () => {
  it("detects jpeg, png, webp and gif by their magic bytes only", () => {
    expect(detectImageMime(PNG)).toBe("image/png");
    expect(detectImageMime(GIF)).toBe("image/gif");
    expect(detectImageMime(JPEG)).toBe("image/jpeg");
    expect(detectImageMime(WEBP)).toBe("image/webp");
    expect(detectImageMime(new TextEncoder().encode("not an image"))).toBeUndefined();
    expect(detectImageMime(new TextEncoder().encode("RIFF1234WAVE"))).toBeUndefined();
    expect(MAX_IMAGE_BYTES).toBe(20 * 1024 * 1024);
  });

  it("records an uploaded image's metadata, never its bytes, and binds the thread's sandbox", async () => {
    const h = await harness();
    await plant(h.sandbox, "/mnt/user-data/uploads/sample.png", PNG);
    const out = await h.call({ image_path: "/mnt/user-data/uploads/sample.png" });
    const u = update(out);
    expect(u["viewed_images"]).toEqual({
      "/mnt/user-data/uploads/sample.png": { mime_type: "image/png", size: PNG.length, actual_path: "/mnt/user-data/uploads/sample.png" },
    });
    expect(u["sandbox"]).toEqual({ sandbox_id: h.sandbox.id });
    const msg = message(out);
    expect(msg.content).toBe(VIEW_IMAGE_SUCCESS_TEXT);
    expect(msg.status).toBe("success");
    expect(msg.tool_call_id).toBe("tc-1");
    expect(msg.name).toBe("view_image");
    expect(JSON.stringify(u)).not.toContain("iVBORw0KGgo");
  });

  it("reads gif, jpeg and webp from any root and keys them by the normalized path; a bound thread is not rebound", async () => {
    const h = await harness({ state: { sandbox: { sandbox_id: "already" } } });
    await plant(h.sandbox, "/mnt/user-data/workspace/a.gif", GIF);
    await plant(h.sandbox, "/mnt/user-data/outputs/b.JPEG", JPEG);
    await plant(h.sandbox, "/mnt/user-data/workspace/c.webp", WEBP);
    expect(update(await h.call({ image_path: "/mnt/user-data/workspace/a.gif" }))).not.toHaveProperty("sandbox");
    expect(update(await h.call({ image_path: "/mnt/user-data/workspace/a.gif" }))["viewed_images"]).toMatchObject({
      "/mnt/user-data/workspace/a.gif": { mime_type: "image/gif", size: GIF.length },
    });
    expect(update(await h.call({ image_path: "/mnt/user-data/outputs/./x/../b.JPEG" }))["viewed_images"]).toEqual({
      "/mnt/user-data/outputs/b.JPEG": { mime_type: "image/jpeg", size: JPEG.length, actual_path: "/mnt/user-data/outputs/b.JPEG" },
    });
    expect(update(await h.call({ image_path: "/mnt/user-data/workspace/c.webp" }))["viewed_images"]).toMatchObject({
      "/mnt/user-data/workspace/c.webp": { mime_type: "image/webp" },
    });
  });

  it.each([
    ["/etc/passwd.png"],
    ["/mnt/user-data/uploads/../../../etc/x.png"],
    ["uploads/sample.png"],
    ["/mnt/user-data/sample.png"],
  ])("refuses %s outside the virtual roots", async (path) => {
    const h = await harness();
    expect(refusal(await h.call({ image_path: path }))).toContain(
      "Only image paths under /mnt/user-data/workspace, /mnt/user-data/uploads, /mnt/user-data/outputs are allowed",
    );
    expect(h.reads).toEqual([]);
  });

  it("refuses a missing file, a directory, an unsupported extension and a missing argument", async () => {
    const h = await harness();
    await plant(h.sandbox, "/mnt/user-data/uploads/dir.png/inner.txt", new Uint8Array([1]));
    await plant(h.sandbox, "/mnt/user-data/uploads/pic.bmp", PNG);
    expect(refusal(await h.call({ image_path: "/mnt/user-data/uploads/nope.png" }))).toBe("Error: Image file not found: /mnt/user-data/uploads/nope.png");
    expect(refusal(await h.call({ image_path: "/mnt/user-data/uploads/dir.png" }))).toBe("Error: Path is not a file: /mnt/user-data/uploads/dir.png");
    expect(refusal(await h.call({ image_path: "/mnt/user-data/uploads/pic.bmp" }))).toBe(
      "Error: Unsupported image format: .bmp. Supported formats: .jpg, .jpeg, .png, .webp, .gif",
    );
    expect(refusal(await h.call({}))).toContain("needs `image_path`");
  });

  it("refuses contents that are no image or another image type than the extension says", async () => {
    const h = await harness();
    await plant(h.sandbox, "/mnt/user-data/uploads/not-really.png", new TextEncoder().encode("not an image"));
    await plant(h.sandbox, "/mnt/user-data/uploads/jpeg-named.png", JPEG);
    expect(refusal(await h.call({ image_path: "/mnt/user-data/uploads/not-really.png" }))).toBe("Error: File contents do not match a supported image format");
    expect(refusal(await h.call({ image_path: "/mnt/user-data/uploads/jpeg-named.png" }))).toBe(
      "Error: Image contents are image/jpeg, but file extension indicates image/png",
    );
  });

  it("refuses an oversized image before loading its bytes", async () => {
    const h = await harness({ maxImageBytes: PNG.length - 1 });
    await plant(h.sandbox, "/mnt/user-data/uploads/sample.png", PNG);
    expect(refusal(await h.call({ image_path: "/mnt/user-data/uploads/sample.png" }))).toBe(
      `Error: Image file is too large: ${PNG.length} bytes. Maximum supported size is ${PNG.length - 1} bytes`,
    );
    expect(h.reads).toEqual([]);
  });

  it("refuses a symlink that leads outside the sandbox", async () => {
    const h = await harness();
    const fs = (h.sandbox as unknown as { fs: InMemoryFs }).fs;
    await fs.mkdir("/tmp", { recursive: true });
    await fs.writeFile("/tmp/outside.png", PNG.slice());
    await fs.symlink("/tmp/outside.png", "/mnt/user-data/uploads/escape.png");
    const text = refusal(await h.call({ image_path: "/mnt/user-data/uploads/escape.png" }));
    expect(text).toMatch(/^Error: Permission denied: .*symbolic link/);
  });

  it("reports a failed read with the virtual path, never a host path", async () => {
    const hostError = Object.assign(new Error("EACCES: permission denied, open '/srv/deerflow/users/default/threads/t1/user-data/uploads/sample.png'"), {
      code: "EACCES",
    });
    const h = await harness({ failRead: hostError });
    await plant(h.sandbox, "/mnt/user-data/uploads/sample.png", PNG);
    const text = refusal(await h.call({ image_path: "/mnt/user-data/uploads/sample.png" }));
    expect(text).toContain("/mnt/user-data/uploads/sample.png");
    expect(text).toContain("EACCES");
    expect(text).not.toContain("/srv/deerflow");
  });

  it("says what is missing when there is no sandbox or no thread", async () => {
    const tool = createViewImageTool();
    const call = (runtime: AgentRuntime) => {
      const toolCall: ToolCall = { name: "view_image", args: {}, id: "x", type: "tool_call" };
      return tool.invoke({ image_path: "/mnt/user-data/uploads/a.png" }, { toolCall, state: emptyThreadState(), runtime });
    };
    expect(refusal(await call(makeRuntime({ threadId: "t1" })))).toMatch(/^Error: Sandbox unavailable: .*Configure a sandbox provider/);
    const provider = createVirtualSandboxProvider();
    providers.push(provider);
    expect(refusal(await call(makeRuntime({ services: { sandbox: provider } })))).toMatch(/run the agent on a thread/);
  });
});

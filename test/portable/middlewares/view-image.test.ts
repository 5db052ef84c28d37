import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { MemorySaver } from "@langchain/langgraph/web";
import type { InMemoryFs } from "just-bash";
import { afterEach, describe, expect, it } from "vitest";
import { base64ToBytes, bytesToBase64 } from "../../../src/core/base64.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentRuntime, ModelRequest } from "../../../src/engine/types.ts";
import { readProvenance } from "../../../src/extension-api/provenance.ts";
import { HIDE_FROM_UI } from "../../../src/middlewares/messages.ts";
import {
  LEGACY_VIEW_IMAGE_CONTEXT_ID_PREFIX,
  VIEW_IMAGE_CONTEXT_ID_PREFIX,
  VIEW_IMAGE_CONTEXT_MARKER,
  VIEW_IMAGE_HEADER,
  VIEW_IMAGE_NAME,
  buildImageBlocks,
  createViewImageMiddleware,
  imagesWarranted,
  isViewImageContextMessage,
} from "../../../src/middlewares/view-image.ts";
import type { Sandbox, SandboxProvider } from "../../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { emptyThreadState, type ThreadState, type ViewedImage } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";

const PNG = base64ToBytes("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==");
const PNG_BASE64 = bytesToBase64(PNG);
const JPEG = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46]);
const IMG = "/mnt/user-data/uploads/img.png";

const providers: SandboxProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

async function plant(sandbox: Sandbox, path: string, bytes: Uint8Array): Promise<void> {
  const fs = (sandbox as unknown as { fs: InMemoryFs }).fs;
  await fs.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
  await fs.writeFile(path, bytes.slice());
}

/** A virtual sandbox for user "default" / thread t1 and a runtime that reaches it. */
async function setup(): Promise<{ sandbox: Sandbox; provider: SandboxProvider; runtime: AgentRuntime }> {
  const provider = createVirtualSandboxProvider();
  providers.push(provider);
  const sandbox = await provider.acquire({ userId: "default", threadId: "t1" });
  return { sandbox, provider, runtime: makeRuntime({ threadId: "t1", services: { sandbox: provider } }) };
}

function meta(path: string, bytes: Uint8Array, mime = "image/png"): ViewedImage {
  return { mime_type: mime, size: bytes.length, actual_path: path };
}

function viewCall(id = "c1", path = IMG) {
  return { name: "view_image", id, args: { image_path: path }, type: "tool_call" as const };
}

function completedTurn(...ids: string[]): BaseMessage[] {
  const calls = (ids.length ? ids : ["c1"]).map((id) => viewCall(id));
  return [
    new HumanMessage({ content: "look", id: "u1" }),
    new AIMessage({ content: "", id: "a1", tool_calls: calls }),
    ...calls.map((c) => new ToolMessage({ content: "Successfully read image", tool_call_id: c.id, name: "view_image" })),
  ];
}

/** Runs wrapModelCall once and returns what the model was sent (and the request it came from). */
async function send(
  messages: BaseMessage[],
  state: Partial<ThreadState>,
  runtime: AgentRuntime,
  requestMessages: BaseMessage[] = messages,
): Promise<{ sent: ModelRequest; request: ModelRequest }> {
  const mw = createViewImageMiddleware();
  const request = {
    messages: requestMessages,
    systemMessage: undefined,
    tools: [],
    state: { ...emptyThreadState(), ...state, messages },
    runtime,
  } as unknown as ModelRequest;
  let sent: ModelRequest | undefined;
  const response = await mw.wrapModelCall!(request, async (r) => {
    sent = r;
    return new AIMessage("I can see it");
  });
  expect(response.content).toBe("I can see it");
  return { sent: sent!, request };
}

function imageMessages(messages: readonly BaseMessage[]): HumanMessage[] {
  return messages.filter((m): m is HumanMessage => HumanMessage.isInstance(m) && isViewImageContextMessage(m));
}

type Block = { type: string; text?: string; image_url?: { url: string } };

describe("ViewImage", () => {
  it("has a stable name, no config keys, and contributes the view_image tool", () => {
    const mw = createViewImageMiddleware();
    expect(mw.name).toBe(VIEW_IMAGE_NAME);
    expect(mw.name).toBe("ViewImage");
    expect(mw.tools?.map((t) => t.name)).toEqual(["view_image"]);
    expect(createViewImageMiddleware({}, { includeTool: false }).tools).toEqual([]);
    expect(mw.releasePolicyParameters?.()).toEqual({
      max_image_bytes: 20 * 1024 * 1024,
      supported_extensions: [".jpg", ".jpeg", ".png", ".webp", ".gif"],
      payload_scope: "request_only",
      context_message_id_prefix: VIEW_IMAGE_CONTEXT_ID_PREFIX,
      tool: "view_image",
    });
    expect(() => createViewImageMiddleware({ max_bytes: 1 } as never)).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
    expect(() => createViewImageMiddleware({ max_bytes: 1 } as never)).toThrow("ViewImage.max_bytes");
  });

  describe("when images are due", () => {
    it("only after the newest assistant turn called view_image and every call has its result", () => {
      expect(imagesWarranted([])).toBe(false);
      expect(imagesWarranted([new SystemMessage("s"), new HumanMessage("hi")])).toBe(false);
      expect(imagesWarranted(completedTurn("c1", "c2"))).toBe(true);
      const other = new AIMessage({ content: "", tool_calls: [{ name: "bash", id: "b", args: {}, type: "tool_call" }] });
      expect(imagesWarranted([other, new ToolMessage({ content: "ok", tool_call_id: "b" })])).toBe(false);
      const mixed = new AIMessage({ content: "", tool_calls: [viewCall("c1"), { name: "bash", id: "b", args: {}, type: "tool_call" }] });
      expect(imagesWarranted([mixed, new ToolMessage({ content: "ok", tool_call_id: "c1" })])).toBe(false);
      expect(imagesWarranted([mixed, new ToolMessage({ content: "ok", tool_call_id: "c1" }), new ToolMessage({ content: "ok", tool_call_id: "b" })])).toBe(true);
      // A result that predates the assistant turn answers nothing.
      expect(imagesWarranted([new ToolMessage({ content: "stale", tool_call_id: "c1" }), new AIMessage({ content: "", tool_calls: [viewCall("c1")] })])).toBe(false);
      // A later answer from the model closes the matter.
      expect(imagesWarranted([...completedTurn(), new AIMessage("it is a cat")])).toBe(false);
    });

    it("not again when an unmarked legacy image message already follows the turn (string or block content)", () => {
      expect(imagesWarranted([...completedTurn(), new HumanMessage(`${VIEW_IMAGE_HEADER} /x.png`)])).toBe(false);
      expect(imagesWarranted([...completedTurn(), new HumanMessage("Here are the details of the images you've viewed: ...")])).toBe(false);
      expect(imagesWarranted([...completedTurn(), new HumanMessage({ content: [{ type: "text", text: VIEW_IMAGE_HEADER }] })])).toBe(false);
      expect(imagesWarranted([...completedTurn(), new HumanMessage("thanks, now describe it")])).toBe(true);
    });
  });

  describe("the image blocks", () => {
    it("carry a header, a caption per image and its bytes as a data URL", async () => {
      const { sandbox, runtime } = await setup();
      await plant(sandbox, IMG, PNG);
      await plant(sandbox, "/mnt/user-data/workspace/b.jpg", JPEG);
      const blocks = (await buildImageBlocks(
        { [IMG]: meta(IMG, PNG), "/mnt/user-data/workspace/b.jpg": meta("/mnt/user-data/workspace/b.jpg", JPEG, "image/jpeg") },
        runtime,
      )) as Block[];
      expect(blocks).toEqual([
        { type: "text", text: VIEW_IMAGE_HEADER },
        { type: "text", text: `\n- **${IMG}** (image/png)` },
        { type: "image_url", image_url: { url: `data:image/png;base64,${PNG_BASE64}` } },
        { type: "text", text: "\n- **/mnt/user-data/workspace/b.jpg** (image/jpeg)" },
        { type: "image_url", image_url: { url: `data:image/jpeg;base64,${bytesToBase64(JPEG)}` } },
      ]);
      expect(await buildImageBlocks({}, runtime)).toEqual([{ type: "text", text: "No images have been viewed." }]);
    });

    it("say an image is unavailable when it is gone, changed size since viewed, grew past the cap, or cannot be reached", async () => {
      const { sandbox, runtime } = await setup();
      await plant(sandbox, "/mnt/user-data/uploads/changed.png", PNG);
      await plant(sandbox, "/mnt/user-data/uploads/big.png", PNG);
      const cases: Record<string, ViewedImage> = {
        "/mnt/user-data/uploads/gone.png": meta("/mnt/user-data/uploads/gone.png", PNG),
        "/mnt/user-data/uploads/changed.png": { ...meta("/mnt/user-data/uploads/changed.png", PNG), size: PNG.length - 3 },
        "/etc/x.png": meta("/etc/x.png", PNG),
      };
      for (const [path, image] of Object.entries(cases)) {
        const blocks = (await buildImageBlocks({ [path]: image }, runtime)) as Block[];
        expect(blocks.some((b) => b.type === "image_url"), path).toBe(false);
        expect(blocks.at(-1), path).toEqual({ type: "text", text: `  (file unavailable or changed on disk: ${image.actual_path})` });
      }
      const capped = (await buildImageBlocks({ big: meta("/mnt/user-data/uploads/big.png", PNG) }, runtime, PNG.length - 1)) as Block[];
      expect(capped.some((b) => b.type === "image_url")).toBe(false);
      const noSandbox = (await buildImageBlocks({ [IMG]: meta(IMG, PNG) }, makeRuntime({ threadId: "t1" }))) as Block[];
      expect(noSandbox.at(-1)!.text).toContain("file unavailable");
    });

    it("do not load a file that grew since it was viewed", async () => {
      const { sandbox, runtime } = await setup();
      await plant(sandbox, IMG, new Uint8Array(PNG.length * 1000));
      const reads: string[] = [];
      const readFileBytes = sandbox.readFileBytes.bind(sandbox);
      sandbox.readFileBytes = (path: string) => {
        reads.push(path);
        return readFileBytes(path);
      };
      const blocks = (await buildImageBlocks({ [IMG]: meta(IMG, PNG) }, runtime)) as Block[];
      expect(blocks.at(-1)!.text).toContain("file unavailable or changed on disk");
      expect(reads).toEqual([]);
    });

    it("never swallow an abort of the run", async () => {
      const { provider } = await setup();
      const controller = new AbortController();
      controller.abort(new Error("user stopped"));
      const broken: SandboxProvider = { ...provider, acquire: () => Promise.reject(new Error("acquire interrupted")) };
      const runtime = makeRuntime({ threadId: "t1", signal: controller.signal, services: { sandbox: broken } });
      await expect(buildImageBlocks({ [IMG]: meta(IMG, PNG) }, runtime)).rejects.toThrow("acquire interrupted");
    });
  });

  describe("wrapModelCall", () => {
    it("scenario M45: after a completed view_image call the next request ends with one hidden, marked, stamped base64 image message", async () => {
      const { sandbox, runtime } = await setup();
      await plant(sandbox, IMG, PNG);
      const messages = completedTurn();
      const state = { viewed_images: { [IMG]: meta(IMG, PNG) } };
      const { sent, request } = await send(messages, state, runtime);

      expect(sent.messages.slice(0, -1)).toEqual(messages);
      const injected = sent.messages.at(-1) as HumanMessage;
      expect(imageMessages(sent.messages)).toEqual([injected]);
      expect(injected.id).toMatch(new RegExp(`^${VIEW_IMAGE_CONTEXT_ID_PREFIX}[0-9a-f]{32}$`));
      expect(injected.additional_kwargs[HIDE_FROM_UI]).toBe(true);
      expect(injected.additional_kwargs[VIEW_IMAGE_CONTEXT_MARKER]).toBe(true);
      expect(readProvenance(injected.additional_kwargs)).toEqual({ contentKind: "image_payload", producerKind: "view_image" });
      expect((injected.content as Block[]).find((b) => b.type === "image_url")!.image_url!.url).toBe(`data:image/png;base64,${PNG_BASE64}`);

      // Request-only: the state the request was built from is untouched.
      expect(request.state.messages).toEqual(messages);
      expect(imageMessages(request.state.messages)).toEqual([]);
      expect(request.state.viewed_images).toEqual(state.viewed_images);
    });

    it("a fresh id per request, so two requests never share one message", async () => {
      const { sandbox, runtime } = await setup();
      await plant(sandbox, IMG, PNG);
      const state = { viewed_images: { [IMG]: meta(IMG, PNG) } };
      const first = await send(completedTurn(), state, runtime);
      const second = await send(completedTurn(), state, runtime);
      expect(first.sent.messages.at(-1)!.id).not.toBe(second.sent.messages.at(-1)!.id);
    });

    it("passes the request through untouched when no image is due", async () => {
      const { runtime } = await setup();
      const messages = [new HumanMessage("hi")];
      const { sent, request } = await send(messages, {}, runtime);
      expect(sent).toBe(request);
    });

    it("sweeps its own earlier message (new or legacy prefix, with the marker) from every request, and replaces it when due", async () => {
      const { sandbox, runtime } = await setup();
      await plant(sandbox, IMG, PNG);
      const stale = (id: string) =>
        new HumanMessage({ id, content: [{ type: "image_url", image_url: { url: "data:image/png;base64,OLD" } }], additional_kwargs: { [VIEW_IMAGE_CONTEXT_MARKER]: true, [HIDE_FROM_UI]: true } });
      const leftovers = [stale(`${VIEW_IMAGE_CONTEXT_ID_PREFIX}old`), stale(`${LEGACY_VIEW_IMAGE_CONTEXT_ID_PREFIX}old`)];

      const later = [...completedTurn(), leftovers[0]!, new AIMessage("a cat"), leftovers[1]!, new HumanMessage("and now?")];
      const quiet = await send(later, { viewed_images: { [IMG]: meta(IMG, PNG) } }, runtime);
      expect(imageMessages(quiet.sent.messages)).toEqual([]);
      expect(JSON.stringify(quiet.sent.messages)).not.toContain("base64,OLD");
      expect(quiet.sent.messages).toHaveLength(later.length - 2);

      const due = [...completedTurn(), leftovers[0]!];
      const fresh = await send(due, { viewed_images: { [IMG]: meta(IMG, PNG) } }, runtime);
      expect(imageMessages(fresh.sent.messages)).toHaveLength(1);
      expect(fresh.sent.messages.at(-1)!.id).not.toBe(`${VIEW_IMAGE_CONTEXT_ID_PREFIX}old`);
      expect(JSON.stringify(fresh.sent.messages)).not.toContain("base64,OLD");
    });

    it("leaves a client's look-alike alone: the reserved prefix without the server-owned marker is not its message", async () => {
      const { sandbox, runtime } = await setup();
      await plant(sandbox, IMG, PNG);
      const client = new HumanMessage({ id: `${VIEW_IMAGE_CONTEXT_ID_PREFIX}client`, content: "client-authored", additional_kwargs: { [HIDE_FROM_UI]: true, custom: "keep-me" } });
      const messages = [client, ...completedTurn()];
      const { sent } = await send(messages, { viewed_images: { [IMG]: meta(IMG, PNG) } }, runtime);
      expect(sent.messages[0]).toBe(client);
      expect(imageMessages(sent.messages)).toHaveLength(1);
      expect(sent.messages.at(-1)!.id).not.toBe(client.id);
    });

    it("judges by state, so a placeholder result for an interrupted view_image call shows nothing", async () => {
      const { sandbox, runtime } = await setup();
      await plant(sandbox, IMG, PNG);
      const interrupted = [new HumanMessage("look"), new AIMessage({ content: "", tool_calls: [viewCall("c1")] })];
      const patched = [...interrupted, new ToolMessage({ content: "[Tool call was interrupted and did not return a result.]", tool_call_id: "c1", status: "error" })];
      const { sent } = await send(interrupted, { viewed_images: { [IMG]: meta(IMG, PNG) } }, runtime, patched);
      expect(imageMessages(sent.messages)).toEqual([]);
    });
  });

  it("scenario M45 in the real engine: the request after view_image carries the image; no state or checkpoint ever holds the payload", async () => {
    const { sandbox, provider } = await setup();
    await plant(sandbox, IMG, PNG);
    const model = fakeModel()
      .respondWithTools([{ name: "view_image", args: { image_path: IMG }, id: "call-view" }])
      .respond(new AIMessage("A single transparent pixel."));
    const checkpointer = new MemorySaver();
    const agent = createAgent({
      model,
      middlewares: [createViewImageMiddleware()],
      checkpointer,
      services: { clock: systemClock, sandbox: provider },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("What is in the upload?")] }, { threadId: "t1" });

    expect(model.callCount).toBe(2);
    expect(imageMessages(model.calls[0]!.messages)).toEqual([]);
    const second = model.calls[1]!.messages;
    const injected = imageMessages(second);
    expect(injected).toHaveLength(1);
    expect(second.at(-1)).toBe(injected[0]);
    expect(ToolMessage.isInstance(second.at(-2))).toBe(true);
    expect(JSON.stringify(injected[0]!.content)).toContain(`data:image/png;base64,${PNG_BASE64}`);

    expect(state.viewed_images).toEqual({ [IMG]: { mime_type: "image/png", size: PNG.length, actual_path: IMG } });
    expect(state.sandbox).toEqual({ sandbox_id: sandbox.id });
    expect(state.messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai"]);
    expect(imageMessages(state.messages)).toEqual([]);
    expect(JSON.stringify(state.messages)).not.toContain(PNG_BASE64);

    let checkpoints = 0;
    for await (const tuple of checkpointer.list({ configurable: { thread_id: "t1" } })) {
      checkpoints += 1;
      const serialized = JSON.stringify([tuple.checkpoint, tuple.pendingWrites ?? []]);
      expect(serialized).not.toContain(PNG_BASE64);
      expect(serialized).not.toContain(VIEW_IMAGE_CONTEXT_ID_PREFIX);
    }
    expect(checkpoints).toBeGreaterThan(2);
  });
});

import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command, GraphInterrupt } from "@langchain/langgraph/web";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import { sha256HexSync } from "../../../src/extension-api/sha256-sync.ts";
import type { AgentRuntime, ToolCallRequest, ToolHandler, ToolResult } from "../../../src/engine/types.ts";
import {
  READ_BEFORE_WRITE_DEFAULTS,
  READ_BEFORE_WRITE_NAME,
  READ_MARK_KEY,
  ReadBeforeWriteConfigSchema,
  createReadBeforeWriteMiddleware,
  latestReadMarkHash,
  readBeforeWriteBlockMessage,
  type FileContentReader,
  type ReadBeforeWriteDeps,
} from "../../../src/middlewares/read-before-write.ts";
import { KeyedMutex } from "../../../src/core/keyed-mutex.ts";
import { createSandboxMiddleware } from "../../../src/middlewares/sandbox.ts";
import { createToolErrorHandlingMiddleware } from "../../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import { TOOL_META_KEY, type ToolResultMeta } from "../../../src/middlewares/tool-result-meta.ts";
import { SandboxError, type SandboxProvider } from "../../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { createSandboxTools } from "../../../src/tools/sandbox-tools.ts";
import { type SandboxAuthorizer } from "../../../src/sandbox/acquire.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";

const PATH = "/mnt/user-data/outputs/report.md";

function sha(text: string): string {
  return sha256HexSync(text);
}

type Files = Map<string, string | Error>;

/** A reader over an in-memory file table, raising the port's not_found for a missing file. */
function filesReader(files: Files, calls: string[] = []): FileContentReader {
  return async (_runtime, path) => {
    calls.push(path);
    const value = files.get(path);
    if (value === undefined) throw new SandboxError("not_found", `File ${path} does not exist.`);
    if (value instanceof Error) throw value;
    return value;
  };
}

function middlewareOver(files: Files | Record<string, string | Error>, deps: Partial<ReadBeforeWriteDeps> = {}) {
  const table = files instanceof Map ? files : new Map(Object.entries(files));
  return createReadBeforeWriteMiddleware({}, { contentReader: filesReader(table), locks: new KeyedMutex(), ...deps });
}

function request(name: string, args: Record<string, unknown>, messages: BaseMessage[] = [], runtime?: AgentRuntime): ToolCallRequest {
  return {
    toolCall: { name, args, id: "call-1", type: "tool_call" } as ToolCall,
    tool: undefined,
    state: { ...emptyThreadState(), messages },
    runtime: runtime ?? makeRuntime({ context: { thread_id: "t-test" } }),
  };
}

function markedRead(path: string, content: string, id = "r1"): ToolMessage {
  return new ToolMessage({ content: content.slice(0, 20), tool_call_id: id, name: "read_file", additional_kwargs: { [READ_MARK_KEY]: { path, sha256: sha(content) } } });
}

function answering(content: string, name = "write_file", status: "success" | "error" = "success"): ToolHandler {
  return async () => new ToolMessage({ content, tool_call_id: "call-1", name, status });
}

const mustNotRun: ToolHandler = async () => {
  throw new Error("the tool must not run when the gate blocks");
};

function asMessage(result: ToolResult): ToolMessage {
  expect(ToolMessage.isInstance(result)).toBe(true);
  return result as ToolMessage;
}

describe("ReadBeforeWrite", () => {
  it("has a stable name, a strict config (enabled, default true) and declares its policy", () => {
    const middleware = createReadBeforeWriteMiddleware();
    expect(middleware.name).toBe(READ_BEFORE_WRITE_NAME);
    expect(middleware.name).toBe("ReadBeforeWrite");
    expect(READ_BEFORE_WRITE_DEFAULTS).toEqual({ enabled: true });
    expect(ReadBeforeWriteConfigSchema.entries).toHaveProperty("enabled");
    const policy = middleware.releasePolicyParameters?.();
    expect(policy).toEqual({
      enabled: true,
      read_tools: ["read_file"],
      gated_tools: ["write_file", "str_replace"],
      mark_key: "deerflow_read_mark",
      mark_digest: "sha256",
      block_message_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      serialization: "thread_path",
      authorization_gate: false,
    });
    expect(JSON.stringify(policy)).not.toContain("already exists");
    expect(() => createReadBeforeWriteMiddleware({ enabled: "yes" } as never)).toThrow(/^ReadBeforeWrite\.enabled: /);
    expect(() => createReadBeforeWriteMiddleware({ gate: true } as never)).toThrow(expect.objectContaining({ code: "invalid_middleware_config" }));
  });
});

describe("ReadBeforeWrite read marks", () => {
  it("a successful read_file stamps {path, sha256} of the file", async () => {
    const result = asMessage(await middlewareOver({ [PATH]: "v1" }).wrapToolCall!(request("read_file", { path: PATH }), answering("v1", "read_file")));
    expect(result.additional_kwargs[READ_MARK_KEY]).toEqual({ path: PATH, sha256: sha("v1") });
  });

  it("a ranged read stamps the hash of the whole file", async () => {
    const mw = middlewareOver({ [PATH]: "line1\nline2\nline3" });
    const result = asMessage(await mw.wrapToolCall!(request("read_file", { path: PATH, start_line: 3, end_line: 3 }), answering("line3", "read_file")));
    expect((result.additional_kwargs[READ_MARK_KEY] as { sha256: string }).sha256).toBe(sha("line1\nline2\nline3"));
  });

  it("an error result, an unreadable file or an error-string read gets no mark", async () => {
    const failed = asMessage(await middlewareOver({ [PATH]: "v1" }).wrapToolCall!(request("read_file", { path: PATH }), answering("boom", "read_file", "error")));
    expect(failed.additional_kwargs[READ_MARK_KEY]).toBeUndefined();
    const down = asMessage(await middlewareOver({ [PATH]: new Error("sandbox down") }).wrapToolCall!(request("read_file", { path: PATH }), answering("v1", "read_file")));
    expect(down.additional_kwargs[READ_MARK_KEY]).toBeUndefined();
    const inBand = asMessage(await middlewareOver({ [PATH]: "Error: can't read file" }).wrapToolCall!(request("read_file", { path: PATH }), answering("v1", "read_file")));
    expect(inBand.additional_kwargs[READ_MARK_KEY]).toBeUndefined();
  });

  it("stamps the read answering this call inside a Command (a first read that also binds the sandbox)", async () => {
    const message = new ToolMessage({ content: "v1", tool_call_id: "call-1", name: "read_file" });
    const command = new Command({ update: { sandbox: { sandbox_id: "sb" }, messages: [message] } });
    const result = await middlewareOver({ [PATH]: "v1" }).wrapToolCall!(request("read_file", { path: PATH }), async () => command);
    expect(result).toBe(command);
    expect(message.additional_kwargs[READ_MARK_KEY]).toEqual({ path: PATH, sha256: sha("v1") });
  });

  it("leaves other tools, and calls without a usable path, untouched", async () => {
    const mw = middlewareOver({});
    const sentinel = new ToolMessage({ content: "ok", tool_call_id: "call-1", name: "bash" });
    expect(await mw.wrapToolCall!(request("bash", { command: "ls" }), async () => sentinel)).toBe(sentinel);
    const outside = new ToolMessage({ content: "Error: Permission denied", tool_call_id: "call-1", name: "write_file", status: "error" });
    expect(await mw.wrapToolCall!(request("write_file", { path: "/etc/passwd", content: "x" }), async () => outside)).toBe(outside);
    expect(await mw.wrapToolCall!(request("write_file", { content: "x" }), async () => outside)).toBe(outside);
  });
});

describe("ReadBeforeWrite write gate", () => {
  it("creating a new file passes", async () => {
    const result = asMessage(await middlewareOver({}).wrapToolCall!(request("write_file", { path: PATH, content: "v1" }), answering("OK")));
    expect(result.status).toBe("success");
  });

  it("overwriting an existing file without a read is blocked with a recoverable, meta-stamped error", async () => {
    const result = asMessage(await middlewareOver({ [PATH]: "v1" }).wrapToolCall!(request("write_file", { path: PATH, content: "v2" }), mustNotRun));
    expect(result).toMatchObject({ status: "error", tool_call_id: "call-1", name: "write_file" });
    expect(result.content).toBe(
      `Error: write_file blocked — ${PATH} already exists and you have not read its current version. ` +
        "Any write invalidates earlier reads, so re-read before every modification. " +
        "Call read_file on it (a ranged read of the relevant section is enough, e.g. the last ~30 lines before an append), " +
        "check what is already there, then retry.",
    );
    expect(result.additional_kwargs[TOOL_META_KEY]).toEqual({
      status: "error",
      error_type: "unknown",
      recoverable_by_model: true,
      recommended_next_action: "try_alternative",
      source: "tool_return",
    } satisfies ToolResultMeta);
  });

  it("an append and a str_replace without a read are blocked too", async () => {
    const mw = middlewareOver({ [PATH]: "v1" });
    expect(asMessage(await mw.wrapToolCall!(request("write_file", { path: PATH, content: "more", append: true }), mustNotRun)).status).toBe("error");
    const replaced = asMessage(await mw.wrapToolCall!(request("str_replace", { path: PATH, old_str: "v1", new_str: "v2" }), mustNotRun));
    expect(replaced.content).toBe(readBeforeWriteBlockMessage("str_replace", PATH));
  });

  it("str_replace on a missing file reaches the tool, which answers itself", async () => {
    const native = new ToolMessage({ content: "Error: File not found", tool_call_id: "call-1", name: "str_replace", status: "error" });
    expect(await middlewareOver({}).wrapToolCall!(request("str_replace", { path: PATH, old_str: "a", new_str: "b" }), async () => native)).toBe(native);
  });

  it("a fresh mark lets the write through; a stale one does not; the newest mark wins", async () => {
    const fresh = await middlewareOver({ [PATH]: "v1" }).wrapToolCall!(
      request("write_file", { path: PATH, content: "v2" }, [new HumanMessage("hi"), new AIMessage(""), markedRead(PATH, "v1")]),
      answering("OK"),
    );
    expect(asMessage(fresh).status).toBe("success");
    const stale = await middlewareOver({ [PATH]: "v2" }).wrapToolCall!(request("write_file", { path: PATH, content: "v3", append: true }, [markedRead(PATH, "v1")]), mustNotRun);
    expect(asMessage(stale).status).toBe("error");
    const newest = await middlewareOver({ [PATH]: "v2" }).wrapToolCall!(
      request("write_file", { path: PATH, content: "v3" }, [markedRead(PATH, "v1", "r1"), markedRead(PATH, "v2", "r2")]),
      answering("OK"),
    );
    expect(asMessage(newest).status).toBe("success");
    const olderWins = await middlewareOver({ [PATH]: "v1" }).wrapToolCall!(
      request("write_file", { path: PATH, content: "v3" }, [markedRead(PATH, "v1", "r1"), markedRead(PATH, "v2", "r2")]),
      mustNotRun,
    );
    expect(asMessage(olderWins).status).toBe("error");
  });

  it("a mark dropped by summarization closes the gate again", async () => {
    const messages = [new HumanMessage({ content: "Here is a summary of the conversation to date: ...", name: "summary" })];
    expect(asMessage(await middlewareOver({ [PATH]: "v1" }).wrapToolCall!(request("write_file", { path: PATH, content: "v2" }, messages), mustNotRun)).status).toBe("error");
  });

  it("fails open when the gate cannot inspect the file", async () => {
    const result = await middlewareOver({ [PATH]: new Error("sandbox hiccup") }).wrapToolCall!(request("write_file", { path: PATH, content: "v2" }), answering("OK"));
    expect(asMessage(result).status).toBe("success");
  });

  it("matches marks by the normalized path the sandbox resolves", async () => {
    const mw = middlewareOver({ [PATH]: "v1", "/mnt/user-data/workspace/notes.md": "n1" });
    const dotted = await mw.wrapToolCall!(request("write_file", { path: "/mnt/user-data/outputs/../outputs/report.md", content: "v2" }, [markedRead(PATH, "v1")]), answering("OK"));
    expect(asMessage(dotted).status).toBe("success");
    const relative = await mw.wrapToolCall!(request("write_file", { path: "notes.md", content: "n2" }, [markedRead("/mnt/user-data/workspace/notes.md", "n1")]), answering("OK"));
    expect(asMessage(relative).status).toBe("success");
  });

  it("accepts DeerFlow's own mark spelling ({path, hash}) from older checkpoints", async () => {
    const legacy = new ToolMessage({ content: "v1", tool_call_id: "r1", name: "read_file", additional_kwargs: { [READ_MARK_KEY]: { path: PATH, hash: sha("v1") } } });
    expect(latestReadMarkHash({ messages: [legacy] }, PATH)).toBe(sha("v1"));
    expect(asMessage(await middlewareOver({ [PATH]: "v1" }).wrapToolCall!(request("write_file", { path: PATH, content: "v2" }, [legacy]), answering("OK"))).status).toBe("success");
  });

  it("disabled, it lets every write through", async () => {
    const mw = createReadBeforeWriteMiddleware({ enabled: false }, { contentReader: filesReader(new Map([[PATH, "v1"]])) });
    expect(asMessage(await mw.wrapToolCall!(request("write_file", { path: PATH, content: "v2" }), answering("OK"))).status).toBe("success");
    expect(mw.releasePolicyParameters?.()).toMatchObject({ enabled: false });
  });

  it("lets a graph interrupt from the inspection through untouched", async () => {
    const interrupt = new GraphInterrupt([{ value: "ask", id: "i1" }]);
    const mw = createReadBeforeWriteMiddleware({}, { contentReader: async () => Promise.reject(interrupt), locks: new KeyedMutex() });
    await expect(mw.wrapToolCall!(request("write_file", { path: PATH, content: "v2" }), mustNotRun)).rejects.toBe(interrupt);
  });
});

describe("ReadBeforeWrite on sandboxes that report read failures as 'Error:' strings", () => {
  const errorStringReader =
    (files: Record<string, string>): FileContentReader =>
    async (_runtime, path) =>
      files[path] ?? `Error: can't read file ${path}: file not found`;

  it("creation is not blocked, and a re-read returning an error string stamps no mark", async () => {
    const mw = createReadBeforeWriteMiddleware({}, { contentReader: errorStringReader({}), locks: new KeyedMutex() });
    expect(asMessage(await mw.wrapToolCall!(request("write_file", { path: PATH, content: "v1" }), answering("OK"))).status).toBe("success");
    const read = asMessage(await mw.wrapToolCall!(request("read_file", { path: PATH }), answering("v1", "read_file")));
    expect(read.additional_kwargs[READ_MARK_KEY]).toBeUndefined();
  });

  it("an existing file is still gated, and its read is marked so the write then passes", async () => {
    const mw = createReadBeforeWriteMiddleware({}, { contentReader: errorStringReader({ [PATH]: "v1" }), locks: new KeyedMutex() });
    expect(asMessage(await mw.wrapToolCall!(request("write_file", { path: PATH, content: "v2" }), mustNotRun)).status).toBe("error");
    const read = asMessage(await mw.wrapToolCall!(request("read_file", { path: PATH }), answering("v1", "read_file")));
    expect((read.additional_kwargs[READ_MARK_KEY] as { sha256: string }).sha256).toBe(sha("v1"));
    expect(asMessage(await mw.wrapToolCall!(request("write_file", { path: PATH, content: "v2" }, [read]), answering("OK"))).status).toBe("success");
  });
});

/** Lets every other pending task run a few steps, so racing calls interleave as they would without a lock. */
async function yieldTurns(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await Promise.resolve();
}

describe("ReadBeforeWrite same-path serialization", () => {
  it("two parallel appends after one read: exactly one lands", async () => {
    const files: Files = new Map([[PATH, "v1"]]);
    const locks = new KeyedMutex();
    const mw = middlewareOver(files, { locks });
    const messages = [markedRead(PATH, "v1")];
    const appending =
      (suffix: string): ToolHandler =>
      async () => {
        await yieldTurns();
        files.set(PATH, `${files.get(PATH) as string}${suffix}`);
        return new ToolMessage({ content: "OK", tool_call_id: "call-1", name: "write_file", status: "success" });
      };
    const results = await Promise.all([
      mw.wrapToolCall!(request("write_file", { path: PATH, content: "A", append: true }, messages), appending("A")),
      mw.wrapToolCall!(request("write_file", { path: PATH, content: "B", append: true }, messages), appending("B")),
    ]);
    expect(results.map((r) => asMessage(r).status).sort()).toEqual(["error", "success"]);
    expect(["v1A", "v1B"]).toContain(files.get(PATH));
    expect(locks.size).toBe(0);
  });

  it("a read's mark hashes the version the model was shown, even with a write racing it", async () => {
    const files: Files = new Map([[PATH, "v1"]]);
    const mw = middlewareOver(files);
    const readHandler: ToolHandler = async () => {
      const snapshot = files.get(PATH) as string;
      // A real pause (not a timing assertion): without the lock the racing write's gate, which hashes
      // through crypto.subtle, completes and rewrites the file before this read returns.
      await new Promise((resolve) => setTimeout(resolve, 20));
      return new ToolMessage({ content: snapshot, tool_call_id: "r-call", name: "read_file" });
    };
    const writeHandler: ToolHandler = async () => {
      files.set(PATH, "v2");
      return new ToolMessage({ content: "OK", tool_call_id: "w-call", name: "write_file" });
    };
    const [read] = await Promise.all([
      mw.wrapToolCall!(request("read_file", { path: PATH }), readHandler),
      mw.wrapToolCall!(request("write_file", { path: PATH, content: "v2" }, [markedRead(PATH, "v1")]), writeHandler),
    ]);
    const message = asMessage(read!);
    expect((message.additional_kwargs[READ_MARK_KEY] as { sha256: string }).sha256).toBe(sha(String(message.content)));
  });

  it("different paths do not wait for each other", async () => {
    const mw = middlewareOver({});
    let bStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      bStarted = resolve;
    });
    const a = mw.wrapToolCall!(request("write_file", { path: "/mnt/user-data/workspace/a.txt", content: "a" }), async () => {
      await started;
      return new ToolMessage({ content: "OK", tool_call_id: "call-1", name: "write_file", status: "success" });
    });
    const b = mw.wrapToolCall!(request("write_file", { path: "/mnt/user-data/workspace/b.txt", content: "b" }), async () => {
      bStarted();
      return new ToolMessage({ content: "OK", tool_call_id: "call-1", name: "write_file", status: "success" });
    });
    expect((await Promise.all([a, b])).map((r) => asMessage(r).status)).toEqual(["success", "success"]);
  });
});

describe("ReadBeforeWrite sandbox authorization", () => {
  const providers: SandboxProvider[] = [];
  afterEach(async () => {
    await Promise.all(providers.splice(0).map((p) => p.close()));
  });

  it("a denial is never taken for an uninspectable file: the write gets the permission error, not a fail-open", async () => {
    const sandboxes = createVirtualSandboxProvider();
    providers.push(sandboxes);
    const deny: SandboxAuthorizer = async () => false;
    const mw = createReadBeforeWriteMiddleware({}, { authorizer: deny, locks: new KeyedMutex() });
    const runtime = makeRuntime({ threadId: "t1", context: { user_id: "u1" }, services: { sandbox: sandboxes } });
    const result = asMessage(await mw.wrapToolCall!(request("write_file", { path: PATH, content: "v1" }, [], runtime), mustNotRun));
    expect(result.status).toBe("error");
    expect(result.content).toMatch(/^Error: Permission denied: user "u1" may not use the sandbox of thread "t1" \(sandbox:execute was denied\)/);
    expect((result.additional_kwargs[TOOL_META_KEY] as ToolResultMeta).error_type).toBe("permission");
    expect(mw.releasePolicyParameters?.()).toMatchObject({ authorization_gate: true });
  });

  it("inspection, tool body and mark share one decision per tool call", async () => {
    const sandboxes = createVirtualSandboxProvider();
    providers.push(sandboxes);
    let asked = 0;
    const authorizer: SandboxAuthorizer = async () => {
      asked++;
      return true;
    };
    const sandbox = await sandboxes.acquire({ userId: "u1", threadId: "t1" });
    await sandbox.writeFile(PATH, "v1");
    const model = fakeModel()
      .respondWithTools([{ name: "read_file", args: { path: PATH }, id: "r1" }])
      .respondWithTools([{ name: "write_file", args: { path: PATH, content: "v2" }, id: "w1" }])
      .respond(new AIMessage("done"));
    const agent = createAgent({
      model,
      tools: createSandboxTools({ authorizer }),
      middlewares: [createSandboxMiddleware({}, { authorizer }), createReadBeforeWriteMiddleware({}, { authorizer }), createToolErrorHandlingMiddleware()],
      services: { clock: systemClock, sandbox: sandboxes },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("edit")] }, { threadId: "t1", context: { user_id: "u1" } });
    expect(state.messages.filter((m) => ToolMessage.isInstance(m)).map((m) => m.content)).toEqual(["v1", "OK"]);
    expect(asked).toBe(2);
  });
});

describe("ReadBeforeWrite through the real engine", () => {
  const providers: SandboxProvider[] = [];
  afterEach(async () => {
    await Promise.all(providers.splice(0).map((p) => p.close()));
  });

  const A_MD = "/mnt/user-data/workspace/a.md";

  async function agentWith(model: ReturnType<typeof fakeModel>, seed: Record<string, string>) {
    const sandboxes = createVirtualSandboxProvider();
    providers.push(sandboxes);
    const sandbox = await sandboxes.acquire({ userId: "u1", threadId: "t1" });
    for (const [path, content] of Object.entries(seed)) await sandbox.writeFile(path, content);
    const agent = createAgent({
      model,
      tools: createSandboxTools(),
      middlewares: [createSandboxMiddleware(), createReadBeforeWriteMiddleware(), createToolErrorHandlingMiddleware()],
      services: { clock: systemClock, sandbox: sandboxes },
    });
    const run = async () => {
      const state = await agent.invoke({ messages: [new HumanMessage("edit a.md")] }, { threadId: "t1", context: { user_id: "u1" } });
      const again = await sandboxes.acquire({ userId: "u1", threadId: "t1" });
      return { state, results: state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m)), file: (path: string) => again.readFile(path) };
    };
    return run;
  }

  it("scenario M27: an unread existing file blocks the write; after read_file it succeeds; a further write without re-reading is blocked", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "write_file", args: { path: A_MD, content: "draft 1" }, id: "w1" }])
      .respondWithTools([{ name: "read_file", args: { path: A_MD }, id: "r1" }])
      .respondWithTools([{ name: "write_file", args: { path: A_MD, content: "draft 2" }, id: "w2" }])
      .respondWithTools([{ name: "write_file", args: { path: A_MD, content: "draft 3" }, id: "w3" }])
      .respond(new AIMessage("done"));
    const { results, file } = await (await agentWith(model, { [A_MD]: "original" }))();
    expect(results.map((m) => m.tool_call_id)).toEqual(["w1", "r1", "w2", "w3"]);
    expect(String(results[0]!.content)).toMatch(/^Error: write_file blocked — \/mnt\/user-data\/workspace\/a\.md already exists/);
    expect(results[0]!.status).toBe("error");
    expect((results[0]!.additional_kwargs[TOOL_META_KEY] as ToolResultMeta).recoverable_by_model).toBe(true);
    expect(results[1]!.content).toBe("original");
    expect(results[1]!.additional_kwargs[READ_MARK_KEY]).toEqual({ path: A_MD, sha256: sha("original") });
    expect(results[2]!.content).toBe("OK");
    expect(results[2]!.additional_kwargs[READ_MARK_KEY]).toBeUndefined();
    expect(String(results[3]!.content)).toBe(readBeforeWriteBlockMessage("write_file", A_MD));
    expect(await file(A_MD)).toBe("draft 2");
  });

  it("scenario M28: a write to a path that does not exist runs; after one read, two parallel appends land exactly one", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "write_file", args: { path: "/mnt/user-data/outputs/new.md", content: "fresh" }, id: "w0" }])
      .respondWithTools([{ name: "read_file", args: { path: A_MD }, id: "r1" }])
      .respondWithTools([
        { name: "write_file", args: { path: A_MD, content: "A", append: true }, id: "wa" },
        { name: "write_file", args: { path: A_MD, content: "B", append: true }, id: "wb" },
      ])
      .respond(new AIMessage("done"));
    const { results, file, state } = await (await agentWith(model, { [A_MD]: "v1" }))();
    expect(results[0]).toMatchObject({ tool_call_id: "w0", content: "OK" });
    expect(await file("/mnt/user-data/outputs/new.md")).toBe("fresh");
    const appends = results.filter((m) => m.tool_call_id === "wa" || m.tool_call_id === "wb");
    expect(appends.map((m) => m.status).sort()).toEqual(["error", "success"]);
    expect(String(appends.find((m) => m.status === "error")!.content)).toBe(readBeforeWriteBlockMessage("write_file", A_MD));
    expect(["v1A", "v1B"]).toContain(await file(A_MD));
    expect(state.sandbox?.sandbox_id).toBeTruthy();
  });
});

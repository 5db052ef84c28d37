import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { isCommand, type Command } from "@langchain/langgraph/web";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentRuntime, AgentTool, ToolContext, ToolOutput } from "../../../src/engine/types.ts";
import { createToolErrorHandlingMiddleware } from "../../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import { TOOL_META_KEY, type ToolResultMeta } from "../../../src/middlewares/tool-result-meta.ts";
import { SandboxError, type SandboxProvider } from "../../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { emptyThreadState, type ThreadState } from "../../../src/state/thread-state.ts";
import { compileGrepPattern, createSandboxTools, globPathMatches, isIgnoredSearchName } from "../../../src/tools/sandbox-tools.ts";
import { SANDBOX_ACQUIRED_SCOPE_KEY, SandboxAuthorizationError, acquireRunSandbox, acquiredSandboxId, type SandboxAuthorizer } from "../../../src/sandbox/acquire.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";

const providers: SandboxProvider[] = [];

function provider(): SandboxProvider {
  const created = createVirtualSandboxProvider();
  providers.push(created);
  return created;
}

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

function toolsByName(authorizer?: SandboxAuthorizer): Record<string, AgentTool> {
  return Object.fromEntries(createSandboxTools(authorizer ? { authorizer } : {}).map((tool) => [tool.name, tool]));
}

interface Harness {
  sandboxes: SandboxProvider;
  runtime: AgentRuntime;
  call(name: string, args: Record<string, unknown>): Promise<ToolOutput>;
  text(name: string, args: Record<string, unknown>): Promise<string>;
}

/** Tools invoked the way the engine invokes them, for thread t1 of user u1, sandbox already bound. */
function harness(
  options: { state?: Partial<ThreadState>; context?: Record<string, unknown>; threadId?: string | null; authorizer?: SandboxAuthorizer } = {},
): Harness {
  const sandboxes = provider();
  const tools = toolsByName(options.authorizer);
  let counter = 0;
  const state: ThreadState = { ...emptyThreadState(), sandbox: { sandbox_id: "bound" }, ...options.state };
  const runtime = makeRuntime({
    context: options.context ?? { user_id: "u1" },
    ...(options.threadId === null ? {} : { threadId: options.threadId ?? "t1" }),
    services: { sandbox: sandboxes },
  });
  const call = (name: string, args: Record<string, unknown>) => {
    const toolCall: ToolCall = { name, args, id: `call-${++counter}`, type: "tool_call" };
    const context: ToolContext = { toolCall, state, runtime };
    return tools[name]!.invoke(args, context);
  };
  return {
    sandboxes,
    runtime,
    call,
    async text(name, args) {
      const out = await call(name, args);
      if (typeof out === "string") return out;
      expect(ToolMessage.isInstance(out)).toBe(true);
      return String((out as ToolMessage).content);
    },
  };
}

describe("createSandboxTools", () => {
  it("offers bash, ls, glob, grep, read_file, write_file and str_replace with JSON Schemas", () => {
    const tools = createSandboxTools();
    expect(tools.map((t) => t.name)).toEqual(["bash", "ls", "glob", "grep", "read_file", "write_file", "str_replace"]);
    const byName = toolsByName();
    expect(byName["bash"]!.schema).toMatchObject({ type: "object", required: ["command"] });
    expect(Object.keys(byName["bash"]!.schema["properties"] as object)).toEqual(["description", "command"]);
    expect(byName["ls"]!.schema).toMatchObject({ required: ["path"], properties: { depth: { type: "integer" } } });
    expect(byName["read_file"]!.schema).toMatchObject({ required: ["path"], properties: { start_line: { type: "integer" }, end_line: { type: "integer" } } });
    expect(byName["write_file"]!.schema).toMatchObject({ required: ["path", "content"], properties: { append: { type: "boolean" } } });
    expect(byName["str_replace"]!.schema).toMatchObject({
      required: ["path", "old_str", "new_str"],
      properties: { replace_all: { type: "boolean" } },
    });
    expect(byName["glob"]!.schema).toMatchObject({
      required: ["pattern", "path"],
      properties: { include_dirs: { type: "boolean" }, max_results: { type: "integer", maximum: 1000 } },
    });
    expect(byName["grep"]!.schema).toMatchObject({
      required: ["pattern", "path"],
      properties: { glob: { type: "string" }, literal: { type: "boolean" }, case_sensitive: { type: "boolean" }, max_results: { maximum: 500 } },
    });
    for (const tool of tools) {
      expect(tool.description.length).toBeGreaterThan(40);
      expect(tool.schema["additionalProperties"]).toBe(false);
    }
  });
});

describe("sandbox tools against the virtual sandbox", () => {
  it("write_file then read_file round-trips, and append adds to the end", async () => {
    const h = harness();
    expect(await h.text("write_file", { path: "/mnt/user-data/workspace/notes/a.md", content: "line 1\n" })).toBe("OK");
    expect(await h.text("write_file", { path: "/mnt/user-data/workspace/notes/a.md", content: "line 2\n", append: true })).toBe("OK");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/notes/a.md" })).toBe("line 1\nline 2\n");
  });

  it("read_file reads line ranges (1-indexed, inclusive)", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/workspace/f.txt", content: "a\nb\r\nc\nd\n" });
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/f.txt", start_line: 2, end_line: 3 })).toBe("b\nc");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/f.txt", start_line: 3 })).toBe("c\nd");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/f.txt", end_line: 1 })).toBe("a");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/f.txt", start_line: 9 })).toBe("(start_line exceeds file length)");
  });

  it("read_file answers range mistakes in words", async () => {
    const h = harness();
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/x", start_line: 0 })).toBe("(start_line must be >= 1)");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/x", end_line: 0 })).toBe("(end_line must be >= 1)");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/x", start_line: 5, end_line: 2 })).toBe(
      "(start_line > end_line — no lines in range)",
    );
  });

  it("read_file of an empty file says (empty)", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/outputs/empty.txt", content: "" });
    expect(await h.text("read_file", { path: "/mnt/user-data/outputs/empty.txt" })).toBe("(empty)");
  });

  it("a missing file comes back as Error: text that classifies as not_found", async () => {
    const h = harness();
    const text = await h.text("read_file", { path: "/mnt/user-data/workspace/missing.txt" });
    expect(text.startsWith("Error: ")).toBe(true);
    expect(text).toContain("/mnt/user-data/workspace/missing.txt");
    const meta = await metaThroughErrorHandling(h, "read_file", { path: "/mnt/user-data/workspace/missing.txt" });
    expect(meta).toMatchObject({ status: "error", error_type: "not_found", source: "tool_return" });
  });

  it("a path outside the sandbox comes back as Error: text that classifies as permission", async () => {
    const h = harness();
    for (const [name, args] of [
      ["read_file", { path: "/etc/passwd" }],
      ["write_file", { path: "/mnt/user-data/../../tmp/x", content: "x" }],
      ["ls", { path: "/" }],
      ["str_replace", { path: "/etc/hosts", old_str: "a", new_str: "b" }],
    ] as const) {
      const text = await h.text(name, args);
      expect(text).toMatch(/^Error: Permission denied: /);
      expect(await metaThroughErrorHandling(h, name, args)).toMatchObject({ error_type: "permission", recoverable_by_model: true });
    }
  });

  it("reading a directory is an error, not an exception", async () => {
    const h = harness();
    const text = await h.text("read_file", { path: "/mnt/user-data/workspace" });
    expect(text).toMatch(/^Error: .*is a directory/);
  });

  it("ls lists sorted absolute paths, directories with a trailing slash, two levels by default", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/workspace/b.txt", content: "b" });
    await h.call("write_file", { path: "/mnt/user-data/workspace/a/x.txt", content: "x" });
    await h.call("write_file", { path: "/mnt/user-data/workspace/a/deep/y.txt", content: "y" });
    expect(await h.text("ls", { path: "/mnt/user-data/workspace" })).toBe(
      ["/mnt/user-data/workspace/a/", "/mnt/user-data/workspace/a/deep/", "/mnt/user-data/workspace/a/x.txt", "/mnt/user-data/workspace/b.txt"].join("\n"),
    );
    expect(await h.text("ls", { path: "/mnt/user-data/workspace", depth: 1 })).toBe(
      ["/mnt/user-data/workspace/a/", "/mnt/user-data/workspace/b.txt"].join("\n"),
    );
    expect(await h.text("ls", { path: "/mnt/user-data/workspace", depth: 3 })).toContain("/mnt/user-data/workspace/a/deep/y.txt");
    expect(await h.text("ls", { path: "/mnt/user-data/uploads" })).toBe("(empty)");
    expect(await h.text("ls", { path: "/mnt/user-data/workspace", depth: 0 })).toMatch(/^Error: ls takes `depth` from 1 to 5/);
  });

  it("ls of a missing directory is not_found", async () => {
    const h = harness();
    expect(await metaThroughErrorHandling(h, "ls", { path: "/mnt/user-data/workspace/nope" })).toMatchObject({ error_type: "not_found" });
  });

  it("bash runs in the workspace and reports stdout, stderr and the exit code", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/workspace/in.txt", content: "hello\n" });
    expect(await h.text("bash", { command: "pwd && cat in.txt", description: "check" })).toBe("/mnt/user-data/workspace\nhello\n");
    expect(await h.text("bash", { command: "echo out; echo err >&2; exit 3" })).toBe("out\n\nStd Error:\nerr\n\nExit Code: 3");
    expect(await h.text("bash", { command: "true" })).toBe("(no output)");
  });

  it("bash writes are visible to the file tools", async () => {
    const h = harness();
    await h.call("bash", { command: "mkdir -p /mnt/user-data/outputs/r && echo report > /mnt/user-data/outputs/r/out.md" });
    expect(await h.text("read_file", { path: "/mnt/user-data/outputs/r/out.md" })).toBe("report\n");
  });

  it("bash without a command is an Error: result", async () => {
    const h = harness();
    expect(await h.text("bash", { command: "" })).toBe("Error: bash needs `command` as a non-empty string.");
  });

  it("str_replace replaces a unique match", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/workspace/c.py", content: "x = 1\ny = 2\n" });
    expect(await h.text("str_replace", { path: "/mnt/user-data/workspace/c.py", old_str: "y = 2", new_str: "y = $& 3" })).toBe("OK");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/c.py" })).toBe("x = 1\ny = $& 3\n");
  });

  it("str_replace fails clearly when old_str is absent", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/workspace/c.py", content: "x = 1\n" });
    expect(await h.text("str_replace", { path: "/mnt/user-data/workspace/c.py", old_str: "zzz", new_str: "q" })).toBe(
      "Error: String to replace not found in file: /mnt/user-data/workspace/c.py",
    );
  });

  it("str_replace fails clearly when old_str is not unique, and replace_all replaces every match", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/workspace/c.txt", content: "a-a-a" });
    const text = await h.text("str_replace", { path: "/mnt/user-data/workspace/c.txt", old_str: "a", new_str: "b" });
    expect(text).toMatch(/^Error: String to replace appears 3 times in file: \/mnt\/user-data\/workspace\/c\.txt\./);
    expect(text).toContain("replace_all");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/c.txt" })).toBe("a-a-a");
    expect(await h.text("str_replace", { path: "/mnt/user-data/workspace/c.txt", old_str: "a", new_str: "b", replace_all: true })).toBe("OK");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/c.txt" })).toBe("b-b-b");
  });

  it("str_replace with an empty old_str is a no-op", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/workspace/c.txt", content: "abc" });
    expect(await h.text("str_replace", { path: "/mnt/user-data/workspace/c.txt", old_str: "", new_str: "X" })).toBe("OK");
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/c.txt" })).toBe("abc");
  });

  it("str_replace on a missing file is not_found", async () => {
    const h = harness();
    expect(await metaThroughErrorHandling(h, "str_replace", { path: "/mnt/user-data/workspace/no.txt", old_str: "a", new_str: "b" })).toMatchObject({
      error_type: "not_found",
    });
  });

  it("parallel str_replace calls on one file do not lose each other's edits", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/workspace/p.txt", content: "one two three" });
    const results = await Promise.all([
      h.text("str_replace", { path: "/mnt/user-data/workspace/p.txt", old_str: "one", new_str: "1" }),
      h.text("str_replace", { path: "p.txt", old_str: "two", new_str: "2" }),
      h.text("str_replace", { path: "/mnt/user-data/workspace/p.txt", old_str: "three", new_str: "3" }),
    ]);
    expect(results).toEqual(["OK", "OK", "OK"]);
    expect(await h.text("read_file", { path: "/mnt/user-data/workspace/p.txt" })).toBe("1 2 3");
  });

  it("write_file refuses an oversized single write but accepts it in appended chunks", async () => {
    const h = harness();
    const big = "x".repeat(80 * 1024 + 1);
    const text = await h.text("write_file", { path: "/mnt/user-data/outputs/big.md", content: big });
    expect(text).toMatch(/^Error: write_file content \(81921 bytes\) exceeds the 81920-byte single-call limit/);
    expect(await h.text("write_file", { path: "/mnt/user-data/outputs/big.md", content: big, append: true })).toBe("OK");
  });

  it("the write cap is configurable and 0 disables it", async () => {
    const tool = createSandboxTools({ writeFileMaxBytes: 0 }).find((t) => t.name === "write_file")!;
    expect(tool.description).not.toContain("at most");
    const small = createSandboxTools({ writeFileMaxBytes: 4 }).find((t) => t.name === "write_file")!;
    expect(small.description).toContain("at most 4 bytes");
  });

  it("users and threads get separate sandboxes", async () => {
    const sandboxes = provider();
    const tools = toolsByName();
    const run = (userId: string, threadId: string, name: string, args: Record<string, unknown>) =>
      tools[name]!.invoke(args, {
        toolCall: { name, args, id: "c", type: "tool_call" },
        state: { ...emptyThreadState(), sandbox: { sandbox_id: "x" } },
        runtime: makeRuntime({ threadId, context: { user_id: userId }, services: { sandbox: sandboxes } }),
      });
    await run("u1", "t1", "write_file", { path: "/mnt/user-data/workspace/s.txt", content: "u1t1" });
    const other = (await run("u2", "t1", "read_file", { path: "/mnt/user-data/workspace/s.txt" })) as ToolMessage;
    expect(String(other.content)).toMatch(/^Error: Not found: /);
    const same = (await run("u1", "t1", "read_file", { path: "/mnt/user-data/workspace/s.txt" })) as ToolMessage;
    expect(same.content).toBe("u1t1");
  });

  it("tool results carry the call id, tool name and an error status for Error: text", async () => {
    const h = harness();
    const ok = (await h.call("write_file", { path: "/mnt/user-data/workspace/z", content: "z" })) as ToolMessage;
    expect(ok).toMatchObject({ tool_call_id: "call-1", name: "write_file", status: "success" });
    const failed = (await h.call("read_file", { path: "/nope" })) as ToolMessage;
    expect(failed).toMatchObject({ tool_call_id: "call-2", name: "read_file", status: "error" });
  });
});

describe("lazy sandbox acquisition", () => {
  it("the first tool call of a thread returns a Command that records the sandbox id in state", async () => {
    const h = harness({ state: { sandbox: null } });
    const out = await h.call("write_file", { path: "/mnt/user-data/workspace/a.txt", content: "a" });
    expect(isCommand(out)).toBe(true);
    const update = (out as Command).update as { sandbox: { sandbox_id: string }; messages: ToolMessage[] };
    const sandbox = await h.sandboxes.acquire({ userId: "u1", threadId: "t1" });
    expect(update.sandbox).toEqual({ sandbox_id: sandbox.id });
    expect(update.messages).toHaveLength(1);
    expect(update.messages[0]).toMatchObject({ content: "OK", tool_call_id: "call-1", name: "write_file" });
  });

  it("records the sandbox id even when the first call fails inside the sandbox", async () => {
    const h = harness({ state: { sandbox: null } });
    const out = await h.call("read_file", { path: "/mnt/user-data/workspace/none" });
    expect(isCommand(out)).toBe(true);
    const update = (out as Command).update as { sandbox: { sandbox_id: string }; messages: ToolMessage[] };
    expect(update.sandbox.sandbox_id).toBeTruthy();
    expect(String(update.messages[0]!.content)).toMatch(/^Error: /);
  });

  it("with a sandbox already in state the result is a plain ToolMessage", async () => {
    const h = harness();
    expect(ToolMessage.isInstance(await h.call("ls", { path: "/mnt/user-data/workspace" }))).toBe(true);
  });

  it("without a thread the tools answer with an Error: instead of throwing", async () => {
    const h = harness({ threadId: null, context: {} });
    const text = await h.text("ls", { path: "/mnt/user-data/workspace" });
    expect(text).toMatch(/^Error: Sandbox unavailable: missing required thread id/);
  });

  it("falls back to context.thread_id and the default user", async () => {
    const h = harness({ threadId: null, context: { thread_id: "ctx-thread" } });
    await h.call("write_file", { path: "/mnt/user-data/workspace/k.txt", content: "k" });
    const sandbox = await h.sandboxes.acquire({ userId: "default", threadId: "ctx-thread" });
    expect(await sandbox.readFile("/mnt/user-data/workspace/k.txt")).toBe("k");
  });

  it("without a sandbox provider the tools say the sandbox is not configured", async () => {
    const tool = toolsByName()["bash"]!;
    const out = (await tool.invoke(
      { command: "ls" },
      { toolCall: { name: "bash", args: {}, id: "c1", type: "tool_call" }, state: emptyThreadState(), runtime: makeRuntime({ threadId: "t1" }) },
    )) as ToolMessage;
    expect(String(out.content)).toMatch(/^Error: Sandbox is not configured/);
    expect(await metaOfText(String(out.content), "bash")).toMatchObject({ error_type: "config", recommended_next_action: "stop" });
  });

  it("through the real engine the sandbox id lands in state and a second call reuses it", async () => {
    const sandboxes = provider();
    const model = fakeModel()
      .respondWithTools([{ name: "write_file", args: { path: "/mnt/user-data/outputs/r.md", content: "# R" }, id: "c1" }])
      .respondWithTools([{ name: "read_file", args: { path: "/mnt/user-data/outputs/r.md" }, id: "c2" }])
      .respond(new AIMessage("done"));
    const agent = createAgent({
      model,
      tools: createSandboxTools(),
      middlewares: [createToolErrorHandlingMiddleware()],
      services: { clock: systemClock, sandbox: sandboxes },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("write a report")] }, { threadId: "t9", context: { user_id: "u9" } });
    const sandbox = await sandboxes.acquire({ userId: "u9", threadId: "t9" });
    expect(state.sandbox).toEqual({ sandbox_id: sandbox.id });
    const results = state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
    expect(results.map((m) => m.content)).toEqual(["OK", "# R"]);
    expect((results[1]!.additional_kwargs[TOOL_META_KEY] as ToolResultMeta).status).toBe("success");
  });
});

async function metaThroughErrorHandling(h: Harness, name: string, args: Record<string, unknown>): Promise<ToolResultMeta> {
  const middleware = createToolErrorHandlingMiddleware();
  const out = await middleware.wrapToolCall!(
    { toolCall: { name, args, id: "m", type: "tool_call" }, tool: undefined, state: emptyThreadState(), runtime: makeRuntime({ threadId: "t1" }) },
    async () => {
      const result = await h.call(name, args);
      return typeof result === "string" ? new ToolMessage({ content: result, tool_call_id: "m", name }) : (result as ToolMessage | Command);
    },
  );
  const message = isCommand(out) ? ((out as Command).update as { messages: ToolMessage[] }).messages[0]! : (out as ToolMessage);
  return message.additional_kwargs[TOOL_META_KEY] as ToolResultMeta;
}

async function metaOfText(text: string, name: string): Promise<ToolResultMeta> {
  const middleware = createToolErrorHandlingMiddleware();
  const out = (await middleware.wrapToolCall!(
    { toolCall: { name, args: {}, id: "m", type: "tool_call" }, tool: undefined, state: emptyThreadState(), runtime: makeRuntime({ threadId: "t1" }) },
    async () => new ToolMessage({ content: text, tool_call_id: "m", name }),
  )) as ToolMessage;
  return out.additional_kwargs[TOOL_META_KEY] as ToolResultMeta;
}

const WS = "/mnt/user-data/workspace";

describe("glob", () => {
  it("returns virtual paths in walk order and skips dependency folders", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/app.py`, content: "print('hi')\n" });
    await h.call("write_file", { path: `${WS}/pkg/util.py`, content: "print('util')\n" });
    await h.call("write_file", { path: `${WS}/node_modules/skip.py`, content: "ignored\n" });
    await h.call("write_file", { path: `${WS}/notes.md`, content: "x" });
    expect(await h.text("glob", { description: "find python files", pattern: "**/*.py", path: WS })).toBe(
      [`Found 2 paths under ${WS}`, `1. ${WS}/app.py`, `2. ${WS}/pkg/util.py`].join("\n"),
    );
  });

  it("matches a relative pattern against the tail of the path, as DeerFlow's glob does", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/a.py`, content: "" });
    await h.call("write_file", { path: `${WS}/src/deep/b.py`, content: "" });
    await h.call("write_file", { path: `${WS}/src/c.ts`, content: "" });
    const any = await h.text("glob", { pattern: "*.py", path: WS });
    expect(any).toContain(`${WS}/a.py`);
    expect(any).toContain(`${WS}/src/deep/b.py`);
    expect(await h.text("glob", { pattern: "src/*.ts", path: WS })).toBe(`Found 1 paths under ${WS}\n1. ${WS}/src/c.ts`);
  });

  it("lists directories only with include_dirs, and prunes ignored directories with their contents", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/src/main.py`, content: "x\n" });
    await h.call("write_file", { path: `${WS}/node_modules/lib/index.js`, content: "x\n" });
    const withDirs = await h.text("glob", { pattern: "**", path: WS, include_dirs: true });
    expect(withDirs).toBe([`Found 2 paths under ${WS}`, `1. ${WS}/src`, `2. ${WS}/src/main.py`].join("\n"));
    expect(withDirs).not.toContain("node_modules");
    expect(await h.text("glob", { pattern: "**", path: WS })).toBe(`Found 1 paths under ${WS}\n1. ${WS}/src/main.py`);
  });

  it("reports truncation only when more matches exist than were shown", async () => {
    const h = harness();
    for (const name of ["a", "b", "c"]) await h.call("write_file", { path: `${WS}/${name}.txt`, content: "" });
    expect(await h.text("glob", { pattern: "*.txt", path: WS, max_results: 2 })).toBe(
      [
        `Found 2 paths under ${WS} (showing first 2)`,
        `1. ${WS}/a.txt`,
        `2. ${WS}/b.txt`,
        "Results truncated. Narrow the path or pattern to see fewer matches.",
      ].join("\n"),
    );
    expect(await h.text("glob", { pattern: "*.txt", path: WS, max_results: 3 })).not.toContain("truncated");
    // 0 or less means the default, as upstream clamps it.
    expect(await h.text("glob", { pattern: "*.txt", path: WS, max_results: 0 })).toContain("Found 3 paths");
  });

  it("answers a missing root, a file root, no match and an outside path in words", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/f.txt`, content: "" });
    expect(await h.text("glob", { pattern: "*", path: `${WS}/nope` })).toBe(`Error: Directory not found: ${WS}/nope`);
    expect(await h.text("glob", { pattern: "*", path: `${WS}/f.txt` })).toBe(`Error: Path is not a directory: ${WS}/f.txt`);
    expect(await h.text("glob", { pattern: "*.rs", path: WS })).toBe(`No files matched under ${WS}`);
    expect(await h.text("glob", { pattern: "*", path: "/etc" })).toMatch(/^Error: Permission denied: /);
    expect(await h.text("glob", { pattern: "", path: WS })).toBe("Error: glob needs `pattern` as a non-empty string.");
  });

  it("pattern helpers follow Python's fnmatch and PurePosixPath.match", () => {
    expect(globPathMatches("*.py", "a/b/c.py")).toBe(true);
    expect(globPathMatches("**/*.py", "c.py")).toBe(true);
    expect(globPathMatches("**/*.py", "x/c.py")).toBe(true);
    expect(globPathMatches("src/*.ts", "lib/src/a.ts")).toBe(true);
    expect(globPathMatches("src/*.ts", "src/a/b.ts")).toBe(false);
    expect(globPathMatches("/x/*.py", "y/x/a.py")).toBe(false);
    expect(globPathMatches("[!a]*.md", "b.md")).toBe(true);
    expect(globPathMatches("[!a]*.md", "a.md")).toBe(false);
    expect(globPathMatches("file?.txt", "file1.txt")).toBe(true);
    expect(globPathMatches("*.PY", "a.py")).toBe(false);
    expect(globPathMatches("a.b", "axb")).toBe(false);
    expect(isIgnoredSearchName("node_modules")).toBe(true);
    expect(isIgnoredSearchName("pkg.egg-info")).toBe(true);
    expect(isIgnoredSearchName("run.log")).toBe(true);
    expect(isIgnoredSearchName("main.py")).toBe(false);
  });
});

describe("grep", () => {
  it("filters by glob and skips binary files", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/main.py`, content: "TODO = 'ship it'\nprint(TODO)\n" });
    await h.call("write_file", { path: `${WS}/notes.txt`, content: "TODO in txt should be filtered\n" });
    await h.call("write_file", { path: `${WS}/image.py`, content: "\u0000binary TODO" });
    expect(await h.text("grep", { description: "find todos", pattern: "TODO", path: WS, glob: "**/*.py" })).toBe(
      [`Found 2 matches under ${WS}`, `${WS}/main.py:1: TODO = 'ship it'`, `${WS}/main.py:2: print(TODO)`].join("\n"),
    );
  });

  it("accepts a single file as the path", async () => {
    const h = harness();
    await h.call("write_file", { path: "/mnt/user-data/uploads/report.md", content: "intro\r\nRevenue grew 20%\n" });
    expect(await h.text("grep", { pattern: "Revenue", path: "/mnt/user-data/uploads/report.md" })).toBe(
      "Found 1 matches under /mnt/user-data/uploads/report.md\n/mnt/user-data/uploads/report.md:2: Revenue grew 20%",
    );
  });

  it("truncates at max_results", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/main.py`, content: "TODO one\nTODO two\nTODO three\n" });
    const text = await h.text("grep", { pattern: "TODO", path: WS, max_results: 2 });
    expect(text).toBe(
      [
        `Found 2 matches under ${WS} (showing first 2)`,
        `${WS}/main.py:1: TODO one`,
        `${WS}/main.py:2: TODO two`,
        "Results truncated. Narrow the path or add a glob filter.",
      ].join("\n"),
    );
  });

  it("literal, case-sensitive and Python-dialect patterns", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/file.py`, content: "price = (a+b)\nresult = a+b\nTODO: fix\ntodo: also fix\n" });
    const literal = await h.text("grep", { pattern: "(a+b)", path: WS, literal: true });
    expect(literal).toContain("price = (a+b)");
    expect(literal).not.toContain("result = a+b");
    const sensitive = await h.text("grep", { pattern: "TODO", path: WS, case_sensitive: true });
    expect(sensitive).toContain("TODO: fix");
    expect(sensitive).not.toContain("todo: also fix");
    expect(await h.text("grep", { pattern: "todo", path: WS })).toContain("Found 2 matches");
    expect(await h.text("grep", { pattern: "(?P<w>TO)DO: (?P=w)?fix", path: WS, case_sensitive: true })).toContain(":3: TODO: fix");
    expect(await h.text("grep", { pattern: "(?i)todo: also", path: WS, case_sensitive: true })).toContain(":4: todo: also fix");
  });

  it("answers an invalid pattern, a missing path and no match in words", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/a.txt`, content: "alpha\n" });
    expect(await h.text("grep", { pattern: "[invalid", path: WS })).toMatch(/^Error: Invalid regex pattern: /);
    expect(await h.text("grep", { pattern: "x", path: `${WS}/missing` })).toBe(`Error: Directory not found: ${WS}/missing`);
    expect(await h.text("grep", { pattern: "omega", path: WS })).toBe(`No matches found under ${WS}`);
    expect(() => compileGrepPattern("(?x) a b", { literal: false, caseSensitive: false })).toThrow(/verbose mode/);
  });

  it("skips over-long lines and files over 1 MB, and shortens long match lines", async () => {
    const h = harness();
    await h.call("write_file", { path: `${WS}/min.js`, content: `${"x".repeat(2001)} NEEDLE\nshort NEEDLE\n${"y".repeat(300)} NEEDLE\n` });
    await h.call("write_file", { path: `${WS}/big.txt`, content: `NEEDLE\n${"z".repeat(1_000_000)}`, append: true });
    const text = await h.text("grep", { pattern: "NEEDLE", path: WS });
    expect(text).toContain(`${WS}/min.js:2: short NEEDLE`);
    expect(text).toContain(`${WS}/min.js:3: ${"y".repeat(197)}...`);
    expect(text).not.toContain(":1:");
    expect(text).not.toContain("big.txt");
  });
});

describe("sandbox authorization (sandbox:execute)", () => {
  it("a denied run gets a permission error from every sandbox tool, and no sandbox is acquired", async () => {
    const seen: Array<[Readonly<Record<string, unknown>>, unknown]> = [];
    const deny: SandboxAuthorizer = async (context, scope) => {
      seen.push([context, scope]);
      return false;
    };
    const h = harness({ authorizer: deny, context: { user_id: "u1", authz_attributes: { tier: "free" } } });
    let acquired = 0;
    const acquire = h.sandboxes.acquire.bind(h.sandboxes);
    h.sandboxes.acquire = async (scope) => {
      acquired++;
      return acquire(scope);
    };
    for (const [name, args] of [
      ["bash", { command: "ls" }],
      ["ls", { path: WS }],
      ["glob", { pattern: "*", path: WS }],
      ["grep", { pattern: "x", path: WS }],
      ["read_file", { path: `${WS}/a` }],
      ["write_file", { path: `${WS}/a`, content: "x" }],
      ["str_replace", { path: `${WS}/a`, old_str: "x", new_str: "y" }],
    ] as const) {
      const text = await h.text(name, args);
      expect(text).toBe(
        'Error: Permission denied: user "u1" may not use the sandbox of thread "t1" (sandbox:execute was denied). ' +
          "Answer without files and commands, or ask an administrator to grant sandbox access.",
      );
    }
    expect(acquired).toBe(0);
    expect(seen[0]).toEqual([{ user_id: "u1", authz_attributes: { tier: "free" } }, { userId: "u1", threadId: "t1" }]);
    expect(h.runtime.scope.has(SANDBOX_ACQUIRED_SCOPE_KEY)).toBe(false);
    expect(await metaOfText(await h.text("ls", { path: WS }), "ls")).toMatchObject({ error_type: "permission", recoverable_by_model: true });
  });

  it("an authorizer that throws denies (fail closed)", async () => {
    const h = harness({
      authorizer: async () => {
        throw new Error("policy store down");
      },
    });
    expect(await h.text("ls", { path: WS })).toMatch(/^Error: Permission denied: .*sandbox:execute was denied/);
  });

  it("an allowing authorizer lets the tools run", async () => {
    const h = harness({ authorizer: async () => true });
    expect(await h.text("write_file", { path: `${WS}/ok.txt`, content: "ok" })).toBe("OK");
  });

  it("one decision per tool call id: every acquisition under that key shares it", async () => {
    let asked = 0;
    const authorizer: SandboxAuthorizer = async () => {
      asked++;
      return asked === 1;
    };
    const sandboxes = provider();
    const runtime = makeRuntime({ threadId: "t1", services: { sandbox: sandboxes } });
    await acquireRunSandbox(runtime, { authorizer, decisionKey: "call-1" });
    await acquireRunSandbox(runtime, { authorizer, decisionKey: "call-1" });
    expect(asked).toBe(1);
    await expect(acquireRunSandbox(runtime, { authorizer, decisionKey: "call-2" })).rejects.toBeInstanceOf(SandboxAuthorizationError);
    await expect(acquireRunSandbox(runtime, { authorizer, decisionKey: "call-2" })).rejects.toMatchObject({ code: "sandbox_not_authorized" });
    expect(asked).toBe(2);
  });

  it("acquisition records the run's sandbox id in the run scope (first id wins)", async () => {
    const sandboxes = provider();
    const runtime = makeRuntime({ threadId: "t1", context: { user_id: "u1" }, services: { sandbox: sandboxes } });
    expect(acquiredSandboxId(runtime)).toBeUndefined();
    const sandbox = await acquireRunSandbox(runtime);
    expect(acquiredSandboxId(runtime)).toBe(sandbox.id);
    expect(sandbox.scope).toEqual({ userId: "u1", threadId: "t1" });
  });

  it("without a provider or a thread acquisition fails with a SandboxError", async () => {
    await expect(acquireRunSandbox(makeRuntime({ threadId: "t1" }))).rejects.toBeInstanceOf(SandboxError);
    await expect(acquireRunSandbox(makeRuntime({ services: { sandbox: provider() } }))).rejects.toMatchObject({ code: "sandbox_unavailable" });
  });
});

import * as v from "valibot";
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command, GraphInterrupt } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentRuntime, AgentTool, ModelRequest, ToolCallRequest, ToolResult } from "../../../src/engine/types.ts";
import type { AgentServices } from "../../../src/engine/services.ts";
import { collectReleasePolicies } from "../../../src/extension-api/release.ts";
import type { Sandbox, SandboxProvider } from "../../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createToolResultSanitizationMiddleware } from "../../../src/middlewares/tool-result-sanitization.ts";
import {
  ToolOutputBudgetConfigSchema,
  TOOL_OUTPUT_BUDGET_NAME,
  TOOL_RESULTS_DIRNAME,
  buildFallback,
  createToolOutputBudgetMiddleware,
  effectiveTrigger,
  externalizedFileName,
  isToolResultArtifact,
  toolResultText,
  type ToolOutputBudgetConfig,
} from "../../../src/middlewares/tool-output/tool-output-budget.ts";
import { readToolTransforms } from "../../../src/middlewares/tool-transform-meta.ts";
import { createSandboxTools } from "../../../src/tools/sandbox-tools.ts";
import { SANDBOX_ACQUIRED_SCOPE_KEY } from "../../../src/sandbox/acquire.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

// The section as its schema fills it in when nothing is configured.
const TOOL_OUTPUT_BUDGET_DEFAULTS = v.parse(ToolOutputBudgetConfigSchema, {});

const SAVED_PATH = /^\/mnt\/user-data\/outputs\/\.tool-results\/([A-Za-z0-9_.-]+)-[0-9a-f]{12}\.(log|txt)$/;

function msg(content: ToolMessage["content"], name = "remote_executor", id = "tc-1"): ToolMessage {
  return new ToolMessage({ content, tool_call_id: id, name });
}

function request(name: string, options: { runtime?: AgentRuntime; services?: Partial<AgentServices> } = {}): ToolCallRequest {
  return {
    toolCall: { name, args: {}, id: "tc-1", type: "tool_call" } as ToolCall,
    tool: undefined,
    state: emptyThreadState(),
    runtime: options.runtime ?? makeRuntime({ threadId: "t1", services: options.services ?? {} }),
  };
}

function withSandbox(provider: SandboxProvider = createVirtualSandboxProvider()): { provider: SandboxProvider; services: Partial<AgentServices> } {
  return { provider, services: { sandbox: provider } };
}

async function budget(config: Partial<ToolOutputBudgetConfig>, req: ToolCallRequest, result: ToolResult): Promise<ToolResult> {
  return createToolOutputBudgetMiddleware(config).wrapToolCall!(req, async () => result);
}

function content(result: ToolResult): string {
  expect(ToolMessage.isInstance(result)).toBe(true);
  const value = (result as ToolMessage).content;
  expect(typeof value).toBe("string");
  return value as string;
}

function savedPath(text: string): string {
  const path = /saved to (\S+) \(/.exec(text)?.[1];
  expect(path).toMatch(SAVED_PATH);
  return path!;
}

async function sandboxOf(provider: SandboxProvider): Promise<Sandbox> {
  return provider.acquire({ userId: "default", threadId: "t1" });
}

/** A sandbox whose writes or listings can be made to fail, around a real virtual one. */
function faultySandbox(inner: Sandbox, faults: { write?: boolean; emptyListing?: boolean; zeroSize?: boolean }): SandboxProvider {
  const sandbox: Sandbox = {
    id: inner.id,
    scope: inner.scope,
    exec: (...args) => inner.exec(...args),
    readFile: (path) => inner.readFile(path),
    readFileBytes: (path) => inner.readFileBytes(path),
    exists: (path) => inner.exists(path),
    writeFileBytes: (path, bytes) => inner.writeFileBytes(path, bytes),
    remove: (path) => inner.remove(path),
    async writeFile(path, text, options) {
      if (faults.write) throw new Error("disk full");
      return inner.writeFile(path, text, options);
    },
    async list(path, options) {
      if (faults.emptyListing) return [];
      const entries = await inner.list(path, options);
      return faults.zeroSize ? entries.map((entry) => ({ ...entry, size: 0 })) : entries;
    },
  };
  return { kind: "virtual", acquire: async () => sandbox, get: () => sandbox, release: async () => {}, close: async () => {} };
}

describe("ToolOutputBudget: config and declaration", () => {
  it("has a stable name and upstream's tool_output defaults", () => {
    const middleware = createToolOutputBudgetMiddleware();
    expect(middleware.name).toBe(TOOL_OUTPUT_BUDGET_NAME);
    expect(middleware.name).toBe("ToolOutputBudget");
    expect(TOOL_OUTPUT_BUDGET_DEFAULTS).toEqual({
      enabled: true,
      externalize_min_chars: 12_000,
      preview_head_chars: 2_000,
      preview_tail_chars: 1_000,
      fallback_max_chars: 30_000,
      fallback_head_chars: 8_000,
      fallback_tail_chars: 3_000,
      storage_subdir: ".tool-results",
      exempt_tools: ["read_file", "read_file_tool"],
      tool_overrides: {},
    });
    expect(middleware.releasePolicyParameters!()).toEqual({
      config: TOOL_OUTPUT_BUDGET_DEFAULTS,
      storage_root: "/mnt/user-data/outputs",
    });
  });

  it("declares every behaviour-affecting setting, so a change moves the assembly fingerprint", () => {
    const middleware = createToolOutputBudgetMiddleware({
      externalize_min_chars: 5000,
      exempt_tools: ["z_tool", "a_tool"],
      tool_overrides: { bash: 0 },
      storage_subdir: "tool-output-cache",
    });
    const declared = collectReleasePolicies([middleware])["ToolOutputBudget"] as { config: Record<string, unknown> };
    expect(declared.config).toMatchObject({
      externalize_min_chars: 5000,
      exempt_tools: ["a_tool", "z_tool"],
      tool_overrides: { bash: 0 },
      storage_subdir: "tool-output-cache",
    });
  });

  it.each([
    [{ storage_subdir: "cache/tool-results" }, "ToolOutputBudget.storage_subdir"],
    [{ storage_subdir: "cache\\tool-results" }, "ToolOutputBudget.storage_subdir"],
    [{ storage_subdir: "/abs/path" }, "ToolOutputBudget.storage_subdir"],
    [{ storage_subdir: "." }, "ToolOutputBudget.storage_subdir"],
    [{ storage_subdir: ".." }, "ToolOutputBudget.storage_subdir"],
    [{ storage_subdir: "" }, "ToolOutputBudget.storage_subdir"],
    [{ externalize_min_chars: -1 }, "ToolOutputBudget.externalize_min_chars"],
    [{ fallback_max_chars: 1.5 }, "ToolOutputBudget.fallback_max_chars"],
    [{ tool_overrides: { bash: -5 } }, "ToolOutputBudget.tool_overrides.bash"],
    [{ max_chars: 10 }, "ToolOutputBudget.max_chars"],
  ])("rejects %j with the key's path", (config, path) => {
    expect(() => createToolOutputBudgetMiddleware(config as never)).toThrow(
      expect.objectContaining({ code: "invalid_middleware_config", message: expect.stringContaining(path) }),
    );
  });

  it("accepts a single-segment custom storage folder", () => {
    expect(() => createToolOutputBudgetMiddleware({ storage_subdir: "tool-output-cache" })).not.toThrow();
  });

  it("effectiveTrigger is the smaller active limit, honours per-tool overrides, and -1 when nothing can trigger", () => {
    const config = (patch: Partial<ToolOutputBudgetConfig>) => ({ ...TOOL_OUTPUT_BUDGET_DEFAULTS, ...patch });
    expect(effectiveTrigger("any", config({}))).toBe(12_000);
    expect(effectiveTrigger("sensitive", config({ externalize_min_chars: 50_000, fallback_max_chars: 0, tool_overrides: { sensitive: 100 } }))).toBe(100);
    expect(effectiveTrigger("other", config({ externalize_min_chars: 50_000, fallback_max_chars: 0, tool_overrides: { sensitive: 100 } }))).toBe(50_000);
    expect(effectiveTrigger("bash", config({ externalize_min_chars: 50, tool_overrides: { bash: 0 }, fallback_max_chars: 200 }))).toBe(200);
    expect(effectiveTrigger("any", config({ externalize_min_chars: 0, fallback_max_chars: 0 }))).toBe(-1);
  });
});

describe("ToolOutputBudget: artifacts and file names", () => {
  it("isToolResultArtifact recognises the storage folder anywhere in a path, default and custom", () => {
    expect(TOOL_RESULTS_DIRNAME).toBe(".tool-results");
    expect(isToolResultArtifact("/mnt/user-data/outputs/.tool-results/bash-0123456789ab.log")).toBe(true);
    expect(isToolResultArtifact(".tool-results/x.txt")).toBe(true);
    expect(isToolResultArtifact("/mnt/user-data/outputs/report.md")).toBe(false);
    expect(isToolResultArtifact("/mnt/user-data/outputs/.tool-results-old/x.txt")).toBe(false);
    expect(isToolResultArtifact("/mnt/user-data/outputs/cache/x.txt", "cache")).toBe(true);
    expect(isToolResultArtifact("/mnt/user-data/outputs/.tool-results/x.txt", "cache")).toBe(true);
  });

  it("isToolResultArtifact looks below the virtual root only: a storage folder named like a root segment does not swallow every file", () => {
    expect(isToolResultArtifact("/mnt/user-data/outputs/report.md", "outputs")).toBe(false);
    expect(isToolResultArtifact("/mnt/user-data/outputs/outputs/bash-0123456789ab.log", "outputs")).toBe(true);
    expect(isToolResultArtifact("/mnt/user-data/workspace/notes.md", "user-data")).toBe(false);
  });

  it("names files <tool>-<12hex>.<ext>: log for bash, bash_tool and web_fetch, txt otherwise; traversal stripped", () => {
    expect(externalizedFileName("bash")).toMatch(/^bash-[0-9a-f]{12}\.log$/);
    expect(externalizedFileName("bash_tool")).toMatch(/^bash_tool-[0-9a-f]{12}\.log$/);
    expect(externalizedFileName("web_fetch")).toMatch(/^web_fetch-[0-9a-f]{12}\.log$/);
    expect(externalizedFileName("web_search")).toMatch(/^web_search-[0-9a-f]{12}\.txt$/);
    expect(externalizedFileName("../../etc/passwd")).toMatch(/^passwd-[0-9a-f]{12}\.txt$/);
    expect(externalizedFileName("..\\..\\windows\\system32")).toMatch(/^__windows_system32-[0-9a-f]{12}\.txt$/);
    expect(externalizedFileName("..")).toMatch(/^unknown-[0-9a-f]{12}\.txt$/);
    expect(externalizedFileName("")).toMatch(/^unknown-/);
    expect(externalizedFileName("bash")).not.toBe(externalizedFileName("bash"));
  });

  it("reads text only from all-text content", () => {
    expect(toolResultText("hello")).toBe("hello");
    expect(toolResultText(["a", "b"])).toBe("a\nb");
    expect(toolResultText([{ text: "x" }, { type: "text", text: "y" }])).toBe("x\ny");
    expect(toolResultText([{ type: "image", data: "..." }])).toBeNull();
    expect(toolResultText([])).toBeNull();
    expect(toolResultText(42)).toBeNull();
    expect(toolResultText(null)).toBeNull();
  });
});

describe("ToolOutputBudget: externalising", () => {
  it("scenario M6: a 50,000-char bash output lands in .tool-results as bash-<12hex>.log and the message points to it", async () => {
    const { provider, services } = withSandbox();
    const output = Array.from({ length: 2500 }, (_, i) => `line ${String(i).padStart(5, "0")} ok.`).join("\n").padEnd(50_000, "z");
    expect(output).toHaveLength(50_000);
    const result = await budget({}, request("bash", { services }), msg(output, "bash"));
    const text = content(result);
    const path = savedPath(text);
    expect(path).toMatch(/^\/mnt\/user-data\/outputs\/\.tool-results\/bash-[0-9a-f]{12}\.log$/);
    expect(text.startsWith(`[Full bash output saved to ${path} (50000 chars, ~12500 tokens).]\n`)).toBe(true);
    expect(text.endsWith(`Access:\n- Use read_file on ${path} with start_line and end_line to inspect the raw output.`)).toBe(true);
    expect(text).toContain("[Preview kind: text.");
    expect(text).toContain("Raw sample (head + tail, clipped to head_chars / tail_chars):");
    expect(text.length).toBeLessThan(5_000);
    expect(await (await sandboxOf(provider)).readFile(path)).toBe(output);
    expect(readToolTransforms(result as ToolMessage)).toEqual([
      {
        middleware: "ToolOutputBudget",
        transform: "externalized",
        phase: "tool_result",
        original_chars: 50_000,
        visible_chars: [...text].length,
        path,
      },
    ]);
  });

  it("scenario M7: with default settings 12,000 chars pass unchanged and 12,001 are externalised", async () => {
    const { services } = withSandbox();
    const exact = msg("x".repeat(12_000));
    expect(await budget({}, request("remote_executor", { services }), exact)).toBe(exact);
    const over = await budget({}, request("remote_executor", { services }), msg("x".repeat(12_001)));
    expect(content(over)).toMatch(/^\[Full remote_executor output saved to \S+ \(12001 chars, ~3000 tokens\)\.\]/);
  });

  it("the externalise limit is strict even above the fallback limit: exactly at it the output is cut, one more is saved", async () => {
    const { services } = withSandbox();
    const config = { externalize_min_chars: 40_000 };
    const atLimit = content(await budget(config, request("t", { services }), msg("x".repeat(40_000), "t")));
    expect(atLimit).toContain("Persistent storage unavailable");
    expect(atLimit).not.toContain("saved to");
    const over = content(await budget(config, request("t", { services }), msg("x".repeat(40_001), "t")));
    expect(over).toContain("(40001 chars, ~10000 tokens)");
  });

  it.each(["read_file", "read_file_tool"])("scenario M7: %s output is never touched, however long", async (name) => {
    const { services } = withSandbox();
    for (const size of [12_001, 40_000, 200_000]) {
      const original = msg("x".repeat(size), name);
      expect(await budget({}, request(name, { services }), original)).toBe(original);
      expect(await budget({}, request(name), original)).toBe(original);
    }
  });

  it("counts characters as code points, like upstream (an emoji is one)", async () => {
    const { services } = withSandbox();
    const emoji = msg("😀".repeat(12_000));
    expect((emoji.content as string).length).toBe(24_000);
    expect(await budget({}, request("t", { services }), emoji)).toBe(emoji);
    const over = content(await budget({}, request("t", { services }), msg("😀".repeat(12_001))));
    expect(over).toContain("(12001 chars, ~3000 tokens)");
  });

  it("keeps the call id, name and metadata, and writes Chinese text byte-exact", async () => {
    const { provider, services } = withSandbox();
    const text = "你好世界".repeat(50);
    const original = new ToolMessage({
      content: text,
      tool_call_id: "tc-9",
      name: "tool",
      id: "m-9",
      status: "success",
      additional_kwargs: { deerflow_tool_meta: { status: "success" } },
    });
    const result = (await budget({ externalize_min_chars: 50, preview_head_chars: 20, preview_tail_chars: 10 }, request("tool", { services }), original)) as ToolMessage;
    expect(result).toMatchObject({ tool_call_id: "tc-9", name: "tool", id: "m-9", status: "success" });
    expect(result.additional_kwargs["deerflow_tool_meta"]).toEqual({ status: "success" });
    expect(await (await sandboxOf(provider)).readFile(savedPath(result.content as string))).toBe(text);
    expect(original.content).toBe(text);
  });

  it("budgets text-block content (MCP results) into a string, and skips images and mixed blocks", async () => {
    const { services } = withSandbox();
    const config = { externalize_min_chars: 50, preview_head_chars: 20, preview_tail_chars: 10 };
    const blocks = await budget(config, request("mcp_tool", { services }), msg([{ type: "text", text: "x".repeat(200) }], "mcp_tool"));
    expect(content(blocks)).toContain("Full mcp_tool output saved to");
    const image = msg([{ type: "image", data: "base64".repeat(100) }] as never, "mcp_tool");
    expect(await budget({ externalize_min_chars: 10, fallback_max_chars: 20 }, request("mcp_tool", { services }), image)).toBe(image);
    const mixed = msg([{ type: "text", text: "x".repeat(100) }, { type: "image", data: "b" }] as never, "mcp_tool");
    expect(await budget({ externalize_min_chars: 10 }, request("mcp_tool", { services }), mixed)).toBe(mixed);
  });

  it("honours per-tool overrides and custom exempt tools", async () => {
    const { services } = withSandbox();
    const sensitive = await budget(
      { externalize_min_chars: 50_000, tool_overrides: { sensitive_tool: 100 } },
      request("sensitive_tool", { services }),
      msg("x".repeat(500), "sensitive_tool"),
    );
    expect(content(sensitive)).toContain("Full sensitive_tool output saved to");

    const neverSaved = await budget(
      { externalize_min_chars: 50, tool_overrides: { bash: 0 }, fallback_max_chars: 200, fallback_head_chars: 80, fallback_tail_chars: 40 },
      request("bash", { services }),
      msg("x".repeat(500), "bash"),
    );
    expect(content(neverSaved)).toContain("Persistent storage unavailable");

    const exempt = msg("x".repeat(100), "my_tool");
    expect(await budget({ externalize_min_chars: 10, fallback_max_chars: 50, exempt_tools: ["my_tool"] }, request("my_tool", { services }), exempt)).toBe(exempt);
  });

  it("passes everything through when disabled", async () => {
    const { services } = withSandbox();
    const original = msg("x".repeat(50_000), "bash");
    expect(await budget({ enabled: false, externalize_min_chars: 10, fallback_max_chars: 20 }, request("bash", { services }), original)).toBe(original);
  });

  it("passes empty and small results through as the same object", async () => {
    const { services } = withSandbox();
    for (const original of [msg(""), msg("small output")]) {
      expect(await budget({ externalize_min_chars: 1000, fallback_max_chars: 1000 }, request("tool", { services }), original)).toBe(original);
    }
    const empty = msg("");
    expect(await budget({ externalize_min_chars: 10, fallback_max_chars: 20 }, request("tool", { services }), empty)).toBe(empty);
  });

  it("patches the ToolMessages inside a Command and keeps its other updates", async () => {
    const { services } = withSandbox();
    const command = new Command({ update: { messages: [msg("x".repeat(200), "present_files")], artifacts: ["/mnt/report.html"] } });
    const result = (await budget({ externalize_min_chars: 50 }, request("present_files", { services }), command)) as Command;
    expect(result).not.toBe(command);
    const update = result.update as { messages: ToolMessage[]; artifacts: string[] };
    expect(update.artifacts).toEqual(["/mnt/report.html"]);
    expect(update.messages[0]!.content).toContain("Full present_files output saved to");

    const noMessages = new Command({ update: { title: "x" } });
    expect(await budget({ externalize_min_chars: 10 }, request("x", { services }), noMessages)).toBe(noMessages);
  });

  it("acquires through the shared sandbox path, so the Sandbox middleware can bind and release it", async () => {
    const { services } = withSandbox();
    const runtime = makeRuntime({ threadId: "t1", services });
    await budget({}, request("bash", { runtime }), msg("x".repeat(12_001), "bash"));
    expect(runtime.scope.get(SANDBOX_ACQUIRED_SCOPE_KEY)).toEqual(expect.any(String));
  });

  it("never acquires a sandbox for a result within budget", async () => {
    const { services } = withSandbox();
    const runtime = makeRuntime({ threadId: "t1", services });
    await budget({}, request("bash", { runtime }), msg("x".repeat(12_000), "bash"));
    expect(runtime.scope.has(SANDBOX_ACQUIRED_SCOPE_KEY)).toBe(false);
  });

  it("writes to a custom storage folder", async () => {
    const { provider, services } = withSandbox();
    const text = content(await budget({ storage_subdir: "cache", externalize_min_chars: 50 }, request("t", { services }), msg("y".repeat(60), "t")));
    const path = /saved to (\S+) \(/.exec(text)![1]!;
    expect(path).toMatch(/^\/mnt\/user-data\/outputs\/cache\/t-[0-9a-f]{12}\.txt$/);
    expect(isToolResultArtifact(path, "cache")).toBe(true);
    expect(await (await sandboxOf(provider)).readFile(path)).toBe("y".repeat(60));
  });
});

describe("ToolOutputBudget: no writable storage", () => {
  it("scenario M8: with no sandbox a 40,000-char output is cut to at most 30,000 with the storage-unavailable marker", async () => {
    const output = `HEADSTART\n${"m".repeat(39_982)}\nTAILEND`;
    expect(output).toHaveLength(40_000);
    const result = await budget({}, request("bash"), msg(output, "bash"));
    const text = content(result);
    expect(text.length).toBeLessThanOrEqual(30_000);
    expect(text.startsWith("HEADSTART")).toBe(true);
    expect(text.endsWith("TAILEND")).toBe(true);
    expect(text).toMatch(/\[\.\.\. \d+ chars omitted from bash output\. Persistent storage unavailable\. Consider narrowing the query or using more specific parameters\.\]/);
    expect(readToolTransforms(result as ToolMessage)).toEqual([
      expect.objectContaining({ middleware: "ToolOutputBudget", transform: "fallback_truncated", original_chars: 40_000, visible_chars: text.length }),
    ]);
  });

  it("scenario M8: with no sandbox a 20,000-char output (and a 12,001-char one) is unchanged", async () => {
    for (const size of [20_000, 12_001, 30_000]) {
      const original = msg("x".repeat(size), "bash");
      expect(await budget({}, request("bash"), original)).toBe(original);
    }
  });

  it("falls back when the run has no thread to own the sandbox", async () => {
    const { services } = withSandbox();
    const runtime = makeRuntime({ services });
    expect(content(await budget({}, request("bash", { runtime }), msg("x".repeat(40_000), "bash")))).toContain("Persistent storage unavailable");
  });

  it("falls back when the write fails", async () => {
    const inner = await sandboxOf(createVirtualSandboxProvider());
    const services = { sandbox: faultySandbox(inner, { write: true }) };
    const text = content(await budget({ externalize_min_chars: 50, fallback_max_chars: 200, fallback_head_chars: 80, fallback_tail_chars: 40 }, request("tool", { services }), msg("x".repeat(500), "tool")));
    expect(text).toContain("omitted from tool output");
  });

  it.each([
    ["the file is not listed afterwards", { emptyListing: true }],
    ["the file is empty afterwards", { zeroSize: true }],
  ])("never hands out a path when %s", async (_label, faults) => {
    const inner = await sandboxOf(createVirtualSandboxProvider());
    const services = { sandbox: faultySandbox(inner, faults) };
    const text = content(await budget({ externalize_min_chars: 50, fallback_max_chars: 200, fallback_head_chars: 80, fallback_tail_chars: 40 }, request("tool", { services }), msg("x".repeat(500), "tool")));
    expect(text).not.toContain("saved to");
    expect(text).toContain("Persistent storage unavailable");
  });

  it("falls back without storing when the sandbox:execute gate denies the call", async () => {
    const { provider, services } = withSandbox();
    const runtime = makeRuntime({ threadId: "t1", services });
    const middleware = createToolOutputBudgetMiddleware({}, { authorizer: async () => false });
    const result = await middleware.wrapToolCall!(request("bash", { runtime }), async () => msg("x".repeat(40_000), "bash"));
    expect(content(result)).toContain("Persistent storage unavailable");
    expect(runtime.scope.has(SANDBOX_ACQUIRED_SCOPE_KEY)).toBe(false);
    expect(await (await sandboxOf(provider)).exists("/mnt/user-data/outputs/.tool-results")).toBe(false);
  });
});

describe("ToolOutputBudget: buildFallback", () => {
  it("leaves short content alone and is disabled by max 0", () => {
    expect(buildFallback("short", "t", 100, 50, 50)).toBe("short");
    expect(buildFallback("a".repeat(1000), "t", 0, 50, 50)).toBe("a".repeat(1000));
  });

  it("keeps head and tail and never exceeds max_chars", () => {
    const text = `HEADSTART${"x".repeat(50_000)}TAILEND`;
    const cut = buildFallback(text, "t", 20_000, 10_000, 5_000);
    expect(cut.startsWith("HEADSTART")).toBe(true);
    expect(cut.endsWith("TAILEND")).toBe(true);
    for (const max of [200, 500, 1000, 5000, 20_000]) {
      expect(buildFallback("x".repeat(50_000), "long_tool_name", max, Math.floor(max / 2), Math.floor(max / 4)).length).toBeLessThanOrEqual(max);
    }
    expect(buildFallback("x".repeat(1000), "t", 50, 20, 10).length).toBeLessThanOrEqual(50);
  });

  it("never exceeds max_chars on line-oriented content that ends in one long line", () => {
    for (const total of [50_000, 200_000, 1_000_000]) {
      const headLength = Math.floor(total * 0.6);
      let lines = Array.from({ length: Math.floor(headLength / 18) + 1 }, (_, i) => `[info] step ${i} ok\n`).join("").slice(0, headLength);
      if (!lines.endsWith("\n")) lines = `${lines.slice(0, -1)}\n`;
      const text = lines + "A".repeat(total - lines.length);
      expect(buildFallback(text, "bash", 30_000, 8_000, 3_000).length).toBeLessThanOrEqual(30_000);
    }
  });

  it("snaps the tail forward onto a line start, never backward into a line", () => {
    const text = `${"A".repeat(98_000)}\n${"B".repeat(100_000 - 98_000 - 1)}`;
    const cut = buildFallback(text, "bash", 30_000, 8_000, 3_000);
    expect(cut.length).toBeLessThanOrEqual(30_000);
    expect(cut.split("]\n\n").at(-1)!.startsWith("B")).toBe(true);
  });

  it("reports the omitted count exactly", () => {
    const text = "x".repeat(1000);
    const cut = buildFallback(text, "t", 500, 100, 50);
    const omitted = Number(/\[\.\.\. (\d+) chars omitted/.exec(cut)![1]);
    const [head, tail] = cut.split(/\n\n\[\.\.\.[^\]]*\]\n\n/);
    expect(head!.length + tail!.length + omitted).toBe(1000);
  });
});

describe("ToolOutputBudget: model requests", () => {
  function modelRequest(messages: BaseMessage[]): ModelRequest {
    return {
      model: fakeModel(),
      systemMessage: undefined,
      messages,
      tools: [],
      state: { ...emptyThreadState(), messages },
      runtime: makeRuntime({ threadId: "t1" }),
    };
  }

  async function forwarded(config: Partial<ToolOutputBudgetConfig>, req: ModelRequest): Promise<ModelRequest> {
    let seen: ModelRequest | undefined;
    await createToolOutputBudgetMiddleware(config).wrapModelCall!(req, async (r) => {
      seen = r;
      return new AIMessage("ok");
    });
    return seen!;
  }

  it("fallback-truncates an oversized historical ToolMessage in the request only", async () => {
    const oversized = msg("q".repeat(1000), "tool", "tc-q");
    const human = new HumanMessage("x".repeat(200));
    const ai = new AIMessage("y".repeat(200));
    const req = modelRequest([human, ai, oversized]);
    const seen = await forwarded({ fallback_max_chars: 500, fallback_head_chars: 100, fallback_tail_chars: 50 }, req);
    expect(seen).not.toBe(req);
    expect(seen.messages[0]).toBe(human);
    expect(seen.messages[1]).toBe(ai);
    const patched = seen.messages[2] as ToolMessage;
    expect(patched.content).toContain("omitted");
    expect((patched.content as string).length).toBeLessThanOrEqual(500);
    expect(readToolTransforms(patched)[0]).toMatchObject({ transform: "fallback_truncated", phase: "model_request" });
    expect(oversized.content).toBe("q".repeat(1000));
    expect(req.state.messages[2]).toBe(oversized);
  });

  it("forwards the same request when nothing is oversized, exempt, or the middleware is disabled", async () => {
    const small = modelRequest([msg("small", "tool"), new HumanMessage("hi"), msg("also small", "bash")]);
    expect(await forwarded({}, small)).toBe(small);
    const exempt = modelRequest([msg("x".repeat(200), "read_file")]);
    expect(await forwarded({ fallback_max_chars: 50 }, exempt)).toBe(exempt);
    const disabled = modelRequest([msg("x".repeat(200), "tool")]);
    expect(await forwarded({ enabled: false, fallback_max_chars: 50 }, disabled)).toBe(disabled);
  });

  it("never externalises from the request path: between the limits history stays whole", async () => {
    const req = modelRequest([msg("x".repeat(20_000), "bash")]);
    expect(await forwarded({}, req)).toBe(req);
  });
});

describe("ToolOutputBudget: control flow", () => {
  it("lets a graph interrupt from the tool pass through untouched", async () => {
    const interrupt = new GraphInterrupt();
    await expect(createToolOutputBudgetMiddleware().wrapToolCall!(request("bash"), async () => Promise.reject(interrupt))).rejects.toBe(interrupt);
  });

  it("rethrows an abort that hits while storing instead of falling back", async () => {
    const controller = new AbortController();
    const inner = await sandboxOf(createVirtualSandboxProvider());
    const provider = faultySandbox(inner, {});
    const abortingProvider: SandboxProvider = {
      ...provider,
      acquire: async () => {
        controller.abort();
        throw new DOMException("The operation was aborted.", "AbortError");
      },
    };
    const runtime = makeRuntime({ threadId: "t1", signal: controller.signal, services: { sandbox: abortingProvider } });
    await expect(
      createToolOutputBudgetMiddleware().wrapToolCall!(request("bash", { runtime }), async () => msg("x".repeat(40_000), "bash")),
    ).rejects.toThrow("aborted");
  });
});

describe("ToolOutputBudget: in the real engine", () => {
  it("scenario M6: the saved file is readable with read_file, whose own output is never budgeted", async () => {
    const provider = createVirtualSandboxProvider();
    const big = Array.from({ length: 5000 }, (_, i) => `row ${i}: ${"x".repeat(20)}`).join("\n");
    const bigTool: AgentTool = {
      name: "bash",
      description: "bash",
      schema: { type: "object", properties: {} },
      invoke: async () => big,
    };
    const readFile = createSandboxTools().find((tool) => tool.name === "read_file")!;
    const model = fakeModel()
      .respondWithTools([{ name: "bash", args: {}, id: "c1" }])
      .respond((messages) => {
        const saved = messages.find((m): m is ToolMessage => ToolMessage.isInstance(m))!;
        const path = /saved to (\S+) \(/.exec(saved.content as string)![1]!;
        return new AIMessage({ content: "", tool_calls: [{ name: "read_file", args: { path }, id: "c2", type: "tool_call" }] });
      })
      .respond(new AIMessage("done"));
    const agent = createAgent({
      model,
      tools: [bigTool, readFile],
      middlewares: [createToolOutputBudgetMiddleware(), createToolResultSanitizationMiddleware()],
      systemPrompt: new SystemMessage("sys"),
      services: { clock: systemClock, sandbox: provider },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t1" });
    const tools = state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
    expect(tools).toHaveLength(2);
    expect(tools[0]!.content).toMatch(/^\[Full bash output saved to \/mnt\/user-data\/outputs\/\.tool-results\/bash-[0-9a-f]{12}\.log \(\d+ chars/);
    // read_file returns the whole saved output: 100k+ chars, untouched by the budget.
    expect(tools[1]!.name).toBe("read_file");
    expect(tools[1]!.content).toBe(big);
    expect(state.messages.at(-1)?.content).toBe("done");
  });

  it("scenario M8: without a sandbox the checkpointed result is cut and the next model request sees the cut text", async () => {
    const output = "z".repeat(40_000);
    const bigTool: AgentTool = { name: "web_search", description: "s", schema: { type: "object", properties: {} }, invoke: async () => output };
    const model = fakeModel()
      .respondWithTools([{ name: "web_search", args: {}, id: "c1" }])
      .respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [bigTool], middlewares: [createToolOutputBudgetMiddleware()], services: { clock: systemClock } });
    const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t1" });
    const tool = state.messages.find((m): m is ToolMessage => ToolMessage.isInstance(m))!;
    expect((tool.content as string).length).toBeLessThanOrEqual(30_000);
    expect(tool.content).toContain("Persistent storage unavailable");
    const secondCall = model.calls[1]!.messages.find((m) => ToolMessage.isInstance(m))!;
    expect(secondCall.content).toBe(tool.content);
  });
});

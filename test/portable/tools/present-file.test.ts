import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { isCommand, type Command } from "@langchain/langgraph/web";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { ToolOutput } from "../../../src/engine/types.ts";
import { createToolErrorHandlingMiddleware } from "../../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import type { SandboxProvider } from "../../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { emptyThreadState, type ThreadState } from "../../../src/state/thread-state.ts";
import {
  PRESENT_FILES_SUCCESS_TEXT,
  PRESENT_FILES_TOOL_NAME,
  createPresentFileTool,
  type PresentFileToolOptions,
} from "../../../src/tools/present-file.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";

const OUT = "/mnt/user-data/outputs";
const providers: SandboxProvider[] = [];

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

async function setup(options: PresentFileToolOptions & { state?: Partial<ThreadState> } = {}) {
  const sandboxes = createVirtualSandboxProvider();
  providers.push(sandboxes);
  const sandbox = await sandboxes.acquire({ userId: "u1", threadId: "t1" });
  await sandbox.writeFile(`${OUT}/report.md`, "# Report");
  await sandbox.writeFile(`${OUT}/data/summary.json`, "{}");
  await sandbox.writeFile(`${OUT}/.tool-results/bash-0123456789ab.log`, "log");
  await sandbox.writeFile("/mnt/user-data/workspace/notes.txt", "leak");
  const tool = createPresentFileTool(options);
  const runtime = makeRuntime({ threadId: "t1", context: { user_id: "u1" }, services: { sandbox: sandboxes } });
  const state: ThreadState = { ...emptyThreadState(), sandbox: { sandbox_id: sandbox.id }, ...options.state };
  const call = (filepaths: unknown): Promise<ToolOutput> => {
    const toolCall: ToolCall = { name: PRESENT_FILES_TOOL_NAME, args: { filepaths }, id: "tc-1", type: "tool_call" };
    return tool.invoke({ filepaths }, { toolCall, state, runtime });
  };
  return { tool, call, sandbox };
}

function update(out: ToolOutput): { artifacts?: string[]; messages: ToolMessage[]; sandbox?: unknown } {
  expect(isCommand(out)).toBe(true);
  return (out as Command).update as { artifacts?: string[]; messages: ToolMessage[] };
}

function textOf(out: ToolOutput): string {
  if (isCommand(out)) return String(update(out).messages[0]!.content);
  return String((out as ToolMessage).content);
}

describe("present_files", () => {
  it("is DeerFlow's present_files tool with a filepaths list", async () => {
    const { tool } = await setup();
    expect(tool.name).toBe("present_files");
    expect(tool.schema).toMatchObject({ required: ["filepaths"], properties: { filepaths: { type: "array", items: { type: "string" } } } });
  });

  it("adds virtual outputs paths to artifacts and answers with the success text", async () => {
    const { call } = await setup();
    const out = await call([`${OUT}/report.md`, `${OUT}/./data/../data/summary.json`]);
    const { artifacts, messages } = update(out);
    expect(artifacts).toEqual([`${OUT}/report.md`, `${OUT}/data/summary.json`]);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({ content: PRESENT_FILES_SUCCESS_TEXT, tool_call_id: "tc-1", name: "present_files", status: "success" });
  });

  it("refuses a path outside the outputs folder, presenting nothing", async () => {
    const { call } = await setup();
    const out = await call([`${OUT}/report.md`, "/mnt/user-data/workspace/notes.txt"]);
    expect(textOf(out)).toBe(`Error: Only files in ${OUT} can be presented: /mnt/user-data/workspace/notes.txt`);
    expect(ToolMessage.isInstance(out)).toBe(true);
    for (const outside of ["/etc/passwd", "report.md", `${OUT}/../workspace/notes.txt`, OUT]) {
      expect(textOf(await call([outside]))).toBe(`Error: Only files in ${OUT} can be presented: ${outside}`);
    }
  });

  it("refuses saved tool output: a .tool-results (or the configured storage) folder anywhere below outputs", async () => {
    const { call } = await setup();
    const text = textOf(await call([`${OUT}/.tool-results/bash-0123456789ab.log`]));
    expect(text).toMatch(/^Error: \/mnt\/user-data\/outputs\/\.tool-results\/bash-0123456789ab\.log is saved tool output, not a deliverable/);
    expect(textOf(await call([`${OUT}/nested/.tool-results/x.log`]))).toMatch(/is saved tool output/);
    const custom = await setup({ toolResultsDirname: "spill" });
    expect(textOf(await custom.call([`${OUT}/spill/x.txt`]))).toMatch(/is saved tool output, not a deliverable; files under a spill folder/);
    expect(textOf(await custom.call([`${OUT}/.tool-results/bash-0123456789ab.log`]))).toMatch(/is saved tool output/);
    expect(textOf(await custom.call([`${OUT}/report.md`]))).toBe(PRESENT_FILES_SUCCESS_TEXT);
  });

  it("refuses a file that does not exist, a directory, and a malformed list", async () => {
    const { call } = await setup();
    expect(textOf(await call([`${OUT}/missing.md`]))).toBe(`Error: Not found: ${OUT}/missing.md does not exist. Write the file first, then present it.`);
    expect(textOf(await call([`${OUT}/data`]))).toBe(`Error: ${OUT}/data is a directory; present the files inside it instead.`);
    expect(textOf(await call([]))).toBe("Error: present_files needs `filepaths` as a non-empty list of absolute paths.");
    expect(textOf(await call([42]))).toBe("Error: present_files takes `filepaths` as a list of absolute paths (strings).");
  });

  it("binds the sandbox too when it is the thread's first sandbox call", async () => {
    const { call, sandbox } = await setup({ state: { sandbox: null } });
    const { artifacts, sandbox: binding } = update(await call([`${OUT}/report.md`]));
    expect(artifacts).toEqual([`${OUT}/report.md`]);
    expect(binding).toEqual({ sandbox_id: sandbox.id });
  });

  it("a denied sandbox authorization presents nothing", async () => {
    const { call } = await setup({ authorizer: async () => false });
    expect(textOf(await call([`${OUT}/report.md`]))).toMatch(/^Error: Permission denied: .*sandbox:execute was denied/);
  });

  it("through the real engine the artifacts channel collects presented files once each", async () => {
    const sandboxes = createVirtualSandboxProvider();
    providers.push(sandboxes);
    const sandbox = await sandboxes.acquire({ userId: "u1", threadId: "t1" });
    await sandbox.writeFile(`${OUT}/a.md`, "a");
    await sandbox.writeFile(`${OUT}/b.md`, "b");
    const model = fakeModel()
      .respondWithTools([
        { name: "present_files", args: { filepaths: [`${OUT}/a.md`] }, id: "p1" },
        { name: "present_files", args: { filepaths: [`${OUT}/b.md`, `${OUT}/a.md`] }, id: "p2" },
      ])
      .respond(new AIMessage("Here are your files."));
    const agent = createAgent({
      model,
      tools: [createPresentFileTool()],
      middlewares: [createToolErrorHandlingMiddleware()],
      services: { clock: systemClock, sandbox: sandboxes },
    });
    const state = await agent.invoke({ messages: [new HumanMessage("present them")] }, { threadId: "t1", context: { user_id: "u1" } });
    expect([...state.artifacts].sort()).toEqual([`${OUT}/a.md`, `${OUT}/b.md`]);
    expect(state.sandbox).toEqual({ sandbox_id: sandbox.id });
    const results = state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
    expect(results.map((m) => m.content)).toEqual([PRESENT_FILES_SUCCESS_TEXT, PRESENT_FILES_SUCCESS_TEXT]);
  });
});

import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command, isCommand } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, ModelRequest, ToolCallRequest, ToolResult } from "../../../src/engine/types.ts";
import { SkillChainBinding } from "../../../src/middlewares/skills/chain-binding.ts";
import { createSkillMiddlewares } from "../../../src/middlewares/skills/skill-middlewares.ts";
import {
  FRAMEWORK_SAFE_TOOL_NAMES,
  SKILL_TOOL_POLICY_NAME,
  createSkillToolPolicyMiddleware,
} from "../../../src/middlewares/skills/skill-tool-policy.ts";
import { emptyThreadState, type ThreadState } from "../../../src/state/thread-state.ts";
import { memoryRegistry, skillMarkdown } from "../../portable/skills/fixtures.ts";
import { makeRuntime } from "../runtime.ts";

const FRAMEWORK = ["describe_skill", "read_file", "review_skill_package", "tool_search"];

function skill(name: string, allowed: string[] | null): string {
  return skillMarkdown(name, `Skill ${name}.`, allowed === null ? "" : `allowed-tools: [${allowed.join(", ")}]\n`);
}

function pathOf(name: string): string {
  return `/mnt/skills/public/${name}/SKILL.md`;
}

function tool(name: string, output = `${name} ran`): AgentTool {
  return { name, description: name, schema: { type: "object", properties: {} }, invoke: async () => output };
}

async function setup(skills: Record<string, string[] | null>, options: { states?: Record<string, { enabled: boolean }>; available?: string[] } = {}) {
  const files = Object.fromEntries(Object.entries(skills).map(([name, allowed]) => [`skills:public:${name}:SKILL.md`, skill(name, allowed)]));
  const fixture = await memoryRegistry(files, options.states ? { states: options.states } : {});
  const binding = SkillChainBinding.create();
  const config = options.available ? { available_skills: options.available } : undefined;
  const middleware = createSkillToolPolicyMiddleware(config, { registry: fixture.registry, binding });
  return { ...fixture, binding, middleware };
}

function stateWith(paths: string[] = []): ThreadState {
  return { ...emptyThreadState(), skill_context: paths.map((path, i) => ({ name: path.split("/").at(-2)!, path, description: "", loaded_at: i })) };
}

function modelRequest(names: string[], state: ThreadState, runtime: AgentRuntime): ModelRequest {
  return { model: fakeModel(), systemMessage: undefined, messages: [], tools: names.map((n) => tool(n)), state, runtime };
}

async function boundNames(middleware: AgentMiddleware, req: ModelRequest): Promise<string[]> {
  let names: string[] = [];
  await middleware.wrapModelCall!(req, async (r) => {
    names = r.tools.map((t) => t.name);
    return new AIMessage("ok");
  });
  return names;
}

function toolRequest(name: string, state: ThreadState, runtime: AgentRuntime): ToolCallRequest {
  const toolCall: ToolCall = { name, args: {}, id: "call-1", type: "tool_call" };
  return { toolCall, tool: tool(name), state, runtime };
}

async function runTool(middleware: AgentMiddleware, req: ToolCallRequest, result?: ToolResult): Promise<ToolResult> {
  return middleware.wrapToolCall!(req, async () => result ?? new ToolMessage({ content: "executed", tool_call_id: "call-1", name: req.toolCall.name }));
}

describe("SkillToolPolicy", () => {
  it("scenario M37: a slash-activated skill with `allowed-tools: [bash]` binds only bash and the 4 framework tools, and blocks web_search", async () => {
    const { registry } = await memoryRegistry({ "skills:public:shell:SKILL.md": skill("shell", ["bash"]) });
    const tools = ["bash", "web_search", "task", ...FRAMEWORK].map((n) => tool(n));
    const model = fakeModel()
      .respondWithTools([
        { name: "web_search", args: {}, id: "c1" },
        { name: "bash", args: {}, id: "c2" },
      ])
      .respond(new AIMessage({ content: "done", id: "a2" }));
    const bound: string[][] = [];
    const bindTools = model.bindTools.bind(model);
    model.bindTools = ((definitions: Array<{ function: { name: string } }>) => {
      bound.push(definitions.map((d) => d.function.name));
      return bindTools(definitions as never);
    }) as unknown as typeof model.bindTools;
    const agent = createAgent({ model, tools, middlewares: [...createSkillMiddlewares({ registry })], services: { clock: systemClock } });

    const state = await agent.invoke({ messages: [new HumanMessage({ content: "/shell list files", id: "m1" })] }, { threadId: "t1" });

    expect(bound).toEqual([
      ["bash", ...FRAMEWORK],
      ["bash", ...FRAMEWORK],
    ]);
    const results = state.messages.filter((m): m is ToolMessage => m.type === "tool");
    expect(results.find((m) => m.tool_call_id === "c1")).toMatchObject({
      content: "Error: Tool 'web_search' is not allowed by the active skill policy.",
      status: "error",
      name: "web_search",
    });
    expect(results.find((m) => m.tool_call_id === "c2")?.content).toBe("bash ran");
  });

  it("scenario M37: passive enabled skills filter nothing and never touch storage", async () => {
    const { middleware, loads } = await setup({ shell: ["bash"] });
    const runtime = makeRuntime();
    expect(await boundNames(middleware, modelRequest(["task", "web_search", "bash"], stateWith(), runtime))).toEqual(["task", "web_search", "bash"]);
    expect(await runTool(middleware, toolRequest("web_search", stateWith(), runtime))).toMatchObject({ content: "executed" });
    expect(loads()).toBe(0);
  });

  it("applies the union of loaded skills' allowed-tools; skills without the field add nothing unless all lack it", async () => {
    const { middleware } = await setup({ restricted: ["web_search"], second: ["bash"], legacy: null });
    const runtime = makeRuntime();
    const names = ["task", "bash", "web_search", "read_file"];
    expect(await boundNames(middleware, modelRequest(names, stateWith([pathOf("restricted")]), runtime))).toEqual(["web_search", "read_file"]);
    expect(
      await boundNames(middleware, modelRequest(names, stateWith([pathOf("restricted"), pathOf("second"), pathOf("legacy")]), runtime)),
    ).toEqual(["bash", "web_search", "read_file"]);
    expect(await boundNames(middleware, modelRequest(names, stateWith([pathOf("legacy")]), runtime))).toEqual(names);
  });

  it("keeps only framework tools for an explicit empty list, and `task` is never exempt", async () => {
    const { middleware } = await setup({ none: [], delegating: ["task"] });
    const runtime = makeRuntime();
    const names = ["task", "list_background_tasks", ...FRAMEWORK];
    expect(await boundNames(middleware, modelRequest(names, stateWith([pathOf("none")]), runtime))).toEqual(FRAMEWORK);
    expect(await runTool(middleware, toolRequest("task", stateWith([pathOf("none")]), runtime))).toMatchObject({ status: "error" });
    expect(await boundNames(middleware, modelRequest(["task", "web_search"], stateWith([pathOf("delegating")]), runtime))).toEqual(["task"]);
  });

  it("fails closed to framework tools when no active skill can be authorised, but skips single stale paths", async () => {
    const { middleware, failNextLoads } = await setup({ restricted: ["web_search"], off: ["bash"], other: ["bash"] }, { states: { off: { enabled: false } }, available: ["restricted", "off"] });
    const runtime = makeRuntime();
    const names = ["task", "bash", "web_search", ...FRAMEWORK];
    const bound = (paths: string[]) => boundNames(middleware, modelRequest(names, stateWith(paths), runtime));
    expect(await bound([pathOf("missing"), pathOf("restricted")])).toEqual(["web_search", ...FRAMEWORK]);
    expect(await bound([pathOf("missing")])).toEqual(FRAMEWORK);
    expect(await bound([pathOf("off")])).toEqual(FRAMEWORK);
    expect(await bound([pathOf("other")])).toEqual(FRAMEWORK);
    failNextLoads();
    expect(await bound([pathOf("restricted")])).toEqual(FRAMEWORK);
  });

  it("lets a slash activation outrank skill_context, and ignores a slash source it did not sign", async () => {
    const { middleware, binding } = await setup({ research: ["web_search"], writer: ["write_file"], legacy: null });
    const names = ["read_file", "web_search", "write_file"];
    const runtime = makeRuntime();
    await binding.publishSlashSource(runtime, pathOf("research"));
    expect(await boundNames(middleware, modelRequest(names, stateWith([pathOf("writer")]), runtime))).toEqual(["read_file", "web_search"]);

    const forged = makeRuntime();
    forged.scope.set(binding.slashSourceKey, { version: 1, run_id: forged.runId, path: pathOf("legacy"), mac: "0".repeat(64) });
    expect(await boundNames(middleware, modelRequest(names, stateWith([pathOf("writer")]), forged))).toEqual(["read_file", "write_file"]);
  });

  it("blocks a call outside the policy and lets an allowed one run", async () => {
    const { middleware } = await setup({ restricted: ["web_search"] });
    const state = stateWith([pathOf("restricted")]);
    const blocked = await runTool(middleware, toolRequest("task", state, makeRuntime()));
    expect(blocked).toMatchObject({ content: "Error: Tool 'task' is not allowed by the active skill policy.", status: "error", name: "task", tool_call_id: "call-1" });
    expect(await runTool(middleware, toolRequest("web_search", state, makeRuntime()))).toMatchObject({ content: "executed" });
  });

  it("lets the tool calls of a model step reuse its signed decision, which survives a JSON round trip", async () => {
    const { middleware, binding, loads } = await setup({ restricted: ["web_search"] });
    const runtime = makeRuntime();
    const state = stateWith([pathOf("restricted")]);
    expect(await boundNames(middleware, modelRequest(["task", "web_search"], state, runtime))).toEqual(["web_search"]);
    const results = await Promise.all([1, 2, 3].map(() => runTool(middleware, toolRequest("web_search", state, runtime))));
    expect(results.map((r) => (r as ToolMessage).content)).toEqual(["executed", "executed", "executed"]);
    expect(loads()).toBe(1);

    const stored = runtime.scope.get<Record<string, unknown>>(binding.decisionKey)!;
    expect(stored).toMatchObject({ version: 2, run_id: runtime.runId, source: "skill_context", active_paths: [pathOf("restricted")] });
    expect(stored["allowed_names"]).toEqual([...FRAMEWORK, "web_search"].sort());
    runtime.scope.set(binding.decisionKey, JSON.parse(JSON.stringify(stored)));
    expect(await runTool(middleware, toolRequest("web_search", state, runtime))).toMatchObject({ content: "executed" });
    expect(loads()).toBe(1);
  });

  it("falls back to live resolution for forged, malformed, stale or foreign decisions", async () => {
    const { middleware, binding, loads } = await setup({ restricted: ["web_search"], first: ["web_search"], second: ["bash"] });
    const state = stateWith([pathOf("restricted")]);
    const allowAll = { version: 2, source: "skill_context", active_paths: [pathOf("restricted")], allowed_names: null };
    let expected = 0;
    for (const decision of [
      null,
      [],
      { ...allowAll, mac: "f".repeat(64) },
      { ...allowAll, mac: "not-hex" },
      { ...allowAll, version: true, mac: "0".repeat(64) },
      { ...allowAll, source: "unknown", mac: "0".repeat(64) },
      { ...allowAll, active_paths: "not-a-list", mac: "0".repeat(64) },
    ]) {
      const runtime = makeRuntime();
      runtime.scope.set(binding.decisionKey, decision === null ? null : { ...decision, run_id: runtime.runId });
      expect(await runTool(middleware, toolRequest("task", state, runtime))).toMatchObject({ status: "error" });
      expect(loads()).toBe(++expected);
    }

    // Signed by this pair but for other paths, another source or another run: not reused.
    const runtime = makeRuntime();
    await boundNames(middleware, modelRequest(["web_search"], stateWith([pathOf("first")]), runtime));
    expect(await runTool(middleware, toolRequest("web_search", stateWith([pathOf("second")]), runtime))).toMatchObject({ status: "error" });
    expected += 2;
    expect(loads()).toBe(expected);
    await binding.publishSlashSource(runtime, pathOf("first"));
    expect(await runTool(middleware, toolRequest("web_search", stateWith([pathOf("first")]), runtime))).toMatchObject({ content: "executed" });
    expect(loads()).toBe(++expected);
    const signed = runtime.scope.get(binding.decisionKey);
    const otherRun = makeRuntime({ runId: "run-2" });
    otherRun.scope.set(binding.decisionKey, signed);
    await runTool(middleware, toolRequest("web_search", stateWith([pathOf("first")]), otherRun));
    expect(loads()).toBe(++expected);
  });

  it("refreshes the decision on every model call", async () => {
    const { middleware, storage, loads } = await setup({ restricted: ["web_search"] });
    const runtime = makeRuntime();
    const state = stateWith([pathOf("restricted")]);
    expect(await boundNames(middleware, modelRequest(["bash", "web_search"], state, runtime))).toEqual(["web_search"]);
    await storage.setItem("skills:public:restricted:SKILL.md", skill("restricted", ["bash"]));
    expect(await boundNames(middleware, modelRequest(["bash", "web_search"], state, runtime))).toEqual(["bash"]);
    expect(await runTool(middleware, toolRequest("web_search", state, runtime))).toMatchObject({ status: "error" });
    expect(loads()).toBe(2);
  });

  it("keeps a forced tool choice valid when the policy removed that tool", async () => {
    const { middleware } = await setup({ restricted: ["web_search"] });
    let choice: string | undefined;
    await middleware.wrapModelCall!({ ...modelRequest(["bash", "web_search"], stateWith([pathOf("restricted")]), makeRuntime()), toolChoice: "bash" }, async (r) => {
      choice = r.toolChoice;
      return new AIMessage("ok");
    });
    expect(choice).toBe("auto");
  });

  it("cuts denied schemas and promotions out of tool_search results, and rejects results it cannot check", async () => {
    const { middleware } = await setup({ restricted: ["slack_send"] });
    const state = stateWith([pathOf("restricted")]);
    const schemas = [
      { name: "slack_send", description: "send" },
      { type: "function", function: { name: "gmail_send" } },
    ];
    const search = new ToolMessage({ content: JSON.stringify(schemas), tool_call_id: "call-1", name: "tool_search", id: "ts1" });
    const command = new Command({ update: { promoted: { catalog_hash: "h", names: ["slack_send", "gmail_send"] }, messages: [search] } });
    const result = await runTool(middleware, toolRequest("tool_search", state, makeRuntime()), command);
    expect(isCommand(result)).toBe(true);
    const update = (result as Command).update as { promoted: { catalog_hash: string; names: string[] }; messages: ToolMessage[] };
    expect(update.promoted).toEqual({ catalog_hash: "h", names: ["slack_send"] });
    expect(JSON.parse(update.messages[0]!.content as string)).toEqual([{ name: "slack_send", description: "send" }]);
    expect(update.messages[0]!.id).toBe("ts1");

    const onlyDenied = new Command({ update: [["promoted", { catalog_hash: "h", names: ["gmail_send"] }], ["messages", [search]]] });
    const denied = (await runTool(middleware, toolRequest("tool_search", state, makeRuntime()), onlyDenied)) as Command;
    expect((denied.update as { messages: ToolMessage[] }).messages[0]!.content).toBe("No tools found matching the active skill policy.");

    const error = "Error: tool_search returned a result that could not be validated against the active skill policy.";
    for (const bad of [
      new ToolMessage({ content: "[]", tool_call_id: "call-1", name: "tool_search" }),
      new Command({ update: { messages: [search] } }),
      new Command({ update: { promoted: { names: ["slack_send"] }, messages: [new ToolMessage({ content: "not json", tool_call_id: "call-1", name: "tool_search" })] } }),
    ]) {
      expect(await runTool(middleware, toolRequest("tool_search", state, makeRuntime()), bad)).toMatchObject({ content: error, status: "error" });
    }
  });

  it("pairs only with its own partner: each createSkillMiddlewares call draws a fresh binding", async () => {
    const { registry } = await memoryRegistry({ "skills:public:restricted:SKILL.md": skill("restricted", ["bash"]) });
    const [activationA] = createSkillMiddlewares({ registry });
    const [, policyB] = createSkillMiddlewares({ registry });
    const runtime = makeRuntime();
    const messages: BaseMessage[] = [new HumanMessage({ content: "/restricted go", id: "m1" })];
    await activationA!.wrapModelCall!(
      { model: fakeModel(), systemMessage: undefined, messages, tools: [], state: { ...emptyThreadState(), messages }, runtime },
      async () => new AIMessage("ok"),
    );
    expect(await boundNames(policyB!, modelRequest(["bash", "web_search"], stateWith(), runtime))).toEqual(["bash", "web_search"]);
    expect(() => createSkillToolPolicyMiddleware(undefined, { registry } as never)).toThrow(expect.objectContaining({ code: "skill_chain_binding_required" }));
  });

  it("declares its allowlist, framework tools and decision version", async () => {
    const { middleware } = await setup({}, { available: ["b", "a"] });
    expect(middleware.name).toBe(SKILL_TOOL_POLICY_NAME);
    expect(middleware.name).toBe("SkillToolPolicy");
    expect([...FRAMEWORK_SAFE_TOOL_NAMES]).toEqual(FRAMEWORK);
    expect(middleware.releasePolicyParameters!()).toEqual({
      available_skills: ["a", "b"],
      framework_tools: FRAMEWORK,
      source_priority: ["slash", "skill_context", "passive"],
      on_unresolvable_policy: "framework_tools_only",
      decision_version: 2,
      container_path: "/mnt/skills",
    });
  });
});

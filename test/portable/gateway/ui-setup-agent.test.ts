import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { loadReplayRecordings } from "../../../src/config/load.ts";
import type { ReplayRecordingInput } from "../../../src/config/replay-recording.ts";
import type { AgentAssemblyDescriptor } from "../../../src/extension-api/index.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { acceptanceGateways, call, human, type SendOptions } from "../../fixtures/plugins/gateway-harness.ts";
import { ENV, auth, admin, user, withBody, assemblyObservingLoader } from "./ui-callers.ts";

/*
 * The UI's agent-creation chat (frontend/src/app/workspace/agents/new/page.tsx) through a real
 * gateway, in the page's two turns: runs with `context.is_bootstrap` and the chosen agent_name;
 * the first message is the page's en-US bootstrap text (the model interviews, nothing is saved),
 * the second the hidden "Save agent" command. One replay model plays both, from
 * test/fixtures/replay/setup_agent.interview.json and setup_agent.save.json. The recorded
 * setup_agent call runs the real tool, which writes the agent through the store /api/agents
 * reads; a later run with that agent_name is built from its SOUL.
 */

const FIXTURE_DIR = new URL("../../fixtures/replay/", import.meta.url).href.replace(/\/$/, "");
const fixture = async (name: string) => JSON.parse(await readFile(new URL(`${FIXTURE_DIR}/${name}`), "utf8")) as ReplayRecordingInput;
const INTERVIEW = await fixture("setup_agent.interview.json");
const SAVE = await fixture("setup_agent.save.json");
// What the page sends: its en-US `nameStepBootstrapMessage` with the name filled in, then (More
// actions -> Save agent) its `saveCommandMessage`, which has no placeholders.
const UI_BOOTSTRAP_MESSAGE = "The new custom agent name is {name}. Help me design its purpose, behavior, and SOUL.md before saving it.";
const UI_SAVE_MESSAGE =
  "Please save this custom agent now based on everything we have discussed so far. Treat this as my explicit confirmation to save. " +
  "If some details are still missing, make reasonable assumptions, generate a concise first SOUL.md in English, and call setup_agent immediately without asking me for more confirmation.";
const PROMPT = UI_BOOTSTRAP_MESSAGE.replace("{name}", "ui-helper");
const RECORDED_CALL = SAVE.turns[0]!.output.data.tool_calls![0]!;
const RECORDED_SOUL = RECORDED_CALL.args.soul as string;
const RECORDED_DESCRIPTION = RECORDED_CALL.args.description as string;
const BOOTSTRAP = { mode: "flash", is_bootstrap: true, agent_name: "ui-helper" };


const gatewayWith = acceptanceGateways(() => ({ env: ENV }));

/** The gateway `serve` builds for a config whose default model replays `fixtures` (or inline `recordings`). */
async function setupGateway(options: { seen?: AgentAssemblyDescriptor[]; recordings?: ReplayRecordingInput[]; fixtures?: string[]; storage?: KeyValue } = {}) {
  const model = options.recordings
    ? { name: "setup-model", use: "replay", recordings: options.recordings }
    : { name: "setup-model", use: "replay", fixtures: options.fixtures ?? ["setup_agent.interview.json", "setup_agent.save.json"] };
  // The replay model titles the chat too, as the browser suite's config has it.
  const raw = { models: [model], title: { model_name: "setup-model" }, gateway: { auth }, plugins: [{ use: "./observer.ts:install" }] };
  const config = await loadReplayRecordings(
    validateLeadConfig(raw, `${FIXTURE_DIR}/config.yaml`),
    { readText: (path) => readFile(new URL(path), "utf8").catch(() => undefined), baseDir: FIXTURE_DIR },
    "config.yaml",
  );
  const { gateway } = await gatewayWith(config as unknown as Record<string, unknown>, {
    loader: assemblyObservingLoader(options.seen ?? []),
    ...(options.storage ? { storage: options.storage } : {}),
  });
  return gateway;
}

type Gateway = Awaited<ReturnType<typeof setupGateway>>;
interface Message {
  type: string;
  content: unknown;
  name?: string;
  status?: string;
  tool_calls?: Array<{ name: string }>;
}

/** One run on the thread (created first unless `following` an earlier run); the thread's messages after it. */
async function run(gateway: Gateway, who: SendOptions, threadId: string, text: string, context: Record<string, unknown>, following = false) {
  if (!following) expect((await call(gateway, "POST", "/api/threads", withBody(who, { thread_id: threadId }))).status).toBe(200);
  const res = await call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, withBody(who, { input: human(text), context }));
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const state = await call(gateway, "GET", `/api/threads/${threadId}/state`, who);
  expect(state.status).toBe(200);
  return (state.body.values.messages as Message[]).filter((m) => m.type !== "system");
}

const toolResult = (messages: readonly Message[]) => messages.find((m) => m.type === "tool" && m.name === "setup_agent");
const shape = (messages: readonly Message[]) =>
  messages.map((m) => [m.type, m.type === "tool" ? m.name : (m.tool_calls ?? []).map((c) => c.name).join(",")]);

/** The page's two turns: the bootstrap message (an interview, nothing saved), then the Save command. */
async function createAgent(gateway: Gateway, who: SendOptions, threadId: string, prompt = PROMPT, context: Record<string, unknown> = BOOTSTRAP) {
  const interview = await run(gateway, who, threadId, prompt, context);
  expect(shape(interview)).toEqual([
    ["human", ""],
    ["ai", ""],
  ]);
  expect(toolResult(interview)).toBeUndefined();
  return run(gateway, who, threadId, UI_SAVE_MESSAGE, context, true);
}

describe("setup_agent in the UI's agent-creation chat", () => {
  it("creates the agent the run names, with the recorded SOUL; a following run with that agent_name is built from it", async () => {
    const seen: AgentAssemblyDescriptor[] = [];
    const gateway = await setupGateway({ seen });
    expect((await call(gateway, "GET", "/api/agents/check?name=ui-helper", admin)).body).toEqual({ available: true, name: "ui-helper" });

    // Turn 1: the page's first message gets the recorded interview; no agent yet.
    const interview = await run(gateway, admin, "t-bootstrap", PROMPT, BOOTSTRAP);
    expect(shape(interview)).toEqual([
      ["human", ""],
      ["ai", ""],
    ]);
    expect(interview[1]!.content).toBe(INTERVIEW.turns[0]!.output.data.content);
    expect((await call(gateway, "GET", "/api/agents/ui-helper", admin)).status).toBe(404);
    expect((await call(gateway, "GET", "/api/agents/check?name=ui-helper", admin)).body).toEqual({ available: true, name: "ui-helper" });

    // Turn 2: Save agent. The page waits for a setup_agent tool result (hasToolResult), then reads the agent.
    const messages = await run(gateway, admin, "t-bootstrap", UI_SAVE_MESSAGE, BOOTSTRAP, true);
    expect(shape(messages)).toEqual([
      ["human", ""],
      ["ai", ""],
      ["human", ""],
      ["ai", "setup_agent"],
      ["tool", "setup_agent"],
      ["ai", ""],
    ]);
    expect(messages.at(-1)!.content).toBe(SAVE.turns[1]!.output.data.content);
    expect(toolResult(messages)?.content).toBe("Agent 'ui-helper' created successfully!");
    expect(toolResult(messages)?.status).not.toBe("error");
    // The recorded title call played too: the chat is titled, with no replay miss.
    expect((await call(gateway, "GET", "/api/threads/t-bootstrap/state", admin)).body.values.title).toBe("Designing the ui-helper Agent");
    // Both bootstrap runs use the one assembly with setup_agent (reading the state builds a plain one).
    const offered = seen.filter((d) => d.tools.some((t) => t.name === "setup_agent"));
    expect(offered).toHaveLength(1);
    expect(offered[0]!.effective_policies).toMatchObject({ agent_bootstrap: true });

    const created = await call(gateway, "GET", "/api/agents/ui-helper", user);
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ name: "ui-helper", soul: RECORDED_SOUL, description: RECORDED_DESCRIPTION, model: null, tool_groups: null, skills: null });
    expect((await call(gateway, "GET", "/api/agents/check?name=ui-helper", user)).body).toEqual({ available: false, name: "ui-helper" });

    // A chat with the new agent (the demo model: the recording plays only its own prompt).
    await run(gateway, user, "t-chat", "hello", { agent_name: "ui-helper", model_name: "demo" });
    const chat = seen.filter((d) => d.agent_name === "ui-helper");
    expect(chat).toHaveLength(1);
    expect(chat[0]!.tools.map((t) => t.name)).not.toContain("setup_agent");
    expect(chat[0]!.base_prompt_hash).not.toBe(offered[0]!.base_prompt_hash);
    const me = { id: "u1", systemRole: "user" as const, authSource: "api_key" as const, isInternal: false, permissions: new Set<never>() };
    const agent = await gateway.deps.agentFactory({ user: me, agentName: "ui-helper" });
    const prompt = String(agent.systemMessage?.content ?? "");
    expect(prompt).toContain('<agent name="ui-helper">');
    expect(prompt).toContain("You are ui-helper, a patient guide to DeerFlow's web UI.");
    expect(prompt).not.toContain("<agent_creation>");
  });

  it("is offered only in a bootstrap run that names an agent, which sees only the bootstrap skill", async () => {
    const seen: AgentAssemblyDescriptor[] = [];
    const storage = createMemoryKeyValue();
    const skill = (name: string) => `---\nname: ${name}\ndescription: The ${name} skill.\n---\n# ${name}\n`;
    await storage.setItem("skills:public:bootstrap:SKILL.md", skill("bootstrap"));
    await storage.setItem("skills:public:pdf-tools:SKILL.md", skill("pdf-tools"));
    const gateway = await setupGateway({ seen, storage });
    await run(gateway, admin, "t-plain", "hello", { model_name: "demo" });
    await run(gateway, admin, "t-nameless", "hello", { model_name: "demo", is_bootstrap: true });
    for (const descriptor of seen) {
      expect(descriptor.tools.map((t) => t.name)).not.toContain("setup_agent");
      expect(descriptor.effective_policies).not.toHaveProperty("agent_bootstrap");
      expect(descriptor.enabled_skills).toEqual(["bootstrap", "pdf-tools"]);
    }
    await run(gateway, admin, "t-creating", PROMPT, BOOTSTRAP);
    const creatingRun = seen.filter((d) => d.tools.some((t) => t.name === "setup_agent"));
    expect(creatingRun).toHaveLength(1);
    expect(creatingRun[0]!.enabled_skills).toEqual(["bootstrap"]);
    const me = { id: "ops", systemRole: "admin" as const, authSource: "api_key" as const, isInternal: false, permissions: new Set<never>() };
    const plain = await gateway.deps.agentFactory({ user: me });
    const creating = await gateway.deps.agentFactory({ user: me, bootstrap: true });
    expect(String(plain.systemMessage?.content)).not.toContain("setup_agent");
    expect(String(creating.systemMessage?.content)).toContain("<agent_creation>");
    expect(String(creating.systemMessage?.content)).toContain("call setup_agent");
  });

  it("updates an agent that exists (upstream's upsert): the SOUL and description change, the rest is kept", async () => {
    const gateway = await setupGateway();
    const body = { name: "ui-helper", soul: "old soul", description: "old", model: "demo", tool_groups: ["web"] };
    expect((await call(gateway, "POST", "/api/agents", withBody(admin, body))).status).toBe(201);
    const messages = await createAgent(gateway, admin, "t-again");
    expect(toolResult(messages)?.content).toBe("Agent 'ui-helper' updated successfully!");
    const updated = (await call(gateway, "GET", "/api/agents/ui-helper", admin)).body;
    expect(updated).toMatchObject({ soul: RECORDED_SOUL, description: RECORDED_DESCRIPTION, model: "demo", tool_groups: ["web"] });
  });

  it("a user who is not an administrator gets a tool error saying so, and no agent is written", async () => {
    const gateway = await setupGateway();
    const messages = await createAgent(gateway, user, "t-user");
    const result = toolResult(messages)!;
    expect(result.status).toBe("error");
    expect(String(result.content)).toContain("Only an administrator may create or change custom agents");
    // The model read the error and still answered: the run finished.
    expect(messages.at(-1)?.type).toBe("ai");
    expect((await call(gateway, "GET", "/api/agents/ui-helper", user)).status).toBe(404);
  });

  it("invalid arguments are a tool error the model can read, and nothing is written", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ soul: "   ", description: "blank" }, "soul: the SOUL is empty"],
      [{ description: "no soul" }, "soul: required key is missing"],
      [{ soul: "fine", description: "x", skills: "all" }, "skills: expected"],
    ];
    for (const [index, [args, expected]] of cases.entries()) {
      const broken = structuredClone(SAVE);
      broken.turns[0]!.output.data.tool_calls![0]!.args = args;
      const gateway = await setupGateway({ recordings: [INTERVIEW, broken] });
      const messages = await createAgent(gateway, admin, `t-bad-${index}`);
      const result = toolResult(messages)!;
      expect(result.status, JSON.stringify(args)).toBe("error");
      expect(String(result.content), JSON.stringify(args)).toContain(expected);
      expect(String(result.content)).toContain("Nothing was saved");
      expect((await call(gateway, "GET", "/api/agents/ui-helper", admin)).status).toBe(404);
    }
  });

  it("an agent_name that is not a valid name is a tool error, and nothing is written", async () => {
    const broken = structuredClone(INTERVIEW);
    broken.prompt = UI_BOOTSTRAP_MESSAGE.replace("{name}", "bad name!");
    const gateway = await setupGateway({ recordings: [broken, SAVE] });
    const messages = await createAgent(gateway, admin, "t-bad-name", broken.prompt, { ...BOOTSTRAP, agent_name: "bad name!" });
    expect(toolResult(messages)?.status).toBe("error");
    expect(String(toolResult(messages)?.content)).toContain('"bad name!" is not a valid agent name');
    expect((await call(gateway, "GET", "/api/agents", admin)).body).toEqual({ agents: [] });
  });

  it("one replay model with the write_read_file and agent-creation recordings plays both conversations in one gateway", async () => {
    const writeRead = await fixture("write_read_file.ultra.json");
    const gateway = await setupGateway({ fixtures: ["write_read_file.ultra.json", "setup_agent.interview.json", "setup_agent.save.json"] });
    // The UI's chat (ultra mode) plays write_read_file: the real tools write and read the file.
    const ultra = { mode: "ultra", thinking_enabled: true, is_plan_mode: true, subagent_enabled: true };
    const chat = await run(gateway, admin, "t-write-read", writeRead.prompt, ultra);
    expect(shape(chat)).toEqual([
      ["human", ""],
      ["ai", "write_file"],
      ["tool", "write_file"],
      ["ai", "read_file"],
      ["tool", "read_file"],
      ["ai", ""],
    ]);
    expect(String(chat[4]!.content)).toContain("hi from replay.");
    expect((await call(gateway, "GET", "/api/threads/t-write-read/state", admin)).body.values.title).toBe("Direct File Creation and Readback");
    // The agent-creation chat on the same gateway: turn 1 saves nothing, turn 2 creates ui-helper.
    const messages = await createAgent(gateway, admin, "t-create");
    expect(toolResult(messages)?.content).toBe("Agent 'ui-helper' created successfully!");
    expect((await call(gateway, "GET", "/api/agents/ui-helper", admin)).body).toMatchObject({ name: "ui-helper", soul: RECORDED_SOUL });
    expect((await call(gateway, "GET", "/api/threads/t-create/state", admin)).body.values.title).toBe("Designing the ui-helper Agent");
  });
});

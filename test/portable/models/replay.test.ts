import { readFile } from "node:fs/promises";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { loadReplayRecordings, parseReplayRecording, type ReplayRecording } from "../../../src/config/index.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { createChatModel, describeModel } from "../../../src/models/factory.ts";
import { REPLAY_MODEL_MARKER, ReplayChatModel } from "../../../src/models/replay.ts";

const FIXTURE_URL = new URL("../../fixtures/replay/write_read_file.ultra.json", import.meta.url);
const FIXTURE_TEXT = await readFile(FIXTURE_URL, "utf8");
const RECORDING = parseReplayRecording(FIXTURE_TEXT, "write_read_file.ultra.json");
const PROMPT = RECORDING.prompt;
const SUGGESTIONS = RECORDING.turns.find((turn) => turn.caller === "suggest_agent")!.output.data.content as string;

function replayModel(recording: ReplayRecording = RECORDING): ReplayChatModel {
  return new ReplayChatModel({ recordings: [{ recording, source: "fixtures/write_read_file.ultra.json" }], modelName: "scenario-model" });
}

/** The tool result a sandbox tool would give, so the conversation goes on as a run's does. */
function resultOf(reply: AIMessage, content: string): ToolMessage {
  const call = reply.tool_calls![0]!;
  return new ToolMessage({ tool_call_id: call.id!, name: call.name, content });
}

describe("ReplayChatModel", () => {
  it("plays the recorded turns for the recorded prompt: write_file, then read_file, then the answer", async () => {
    const model = replayModel();
    const messages: BaseMessage[] = [new SystemMessage("You are DeerFlow."), new HumanMessage(PROMPT)];

    const first = (await model.invoke(messages)) as AIMessage;
    expect(first.tool_calls).toEqual([
      expect.objectContaining({
        name: "write_file",
        args: { description: "Create the requested output file with exact content", path: "/mnt/user-data/outputs/note.txt", content: "hi from replay." },
      }),
    ]);
    expect(first.additional_kwargs[REPLAY_MODEL_MARKER]).toBe(true);
    expect(first.response_metadata.finish_reason).toBe("tool_calls");
    messages.push(first, resultOf(first, "OK"));

    const second = (await model.invoke(messages)) as AIMessage;
    expect(second.tool_calls?.map((call) => [call.name, call.args.path])).toEqual([["read_file", "/mnt/user-data/outputs/note.txt"]]);
    messages.push(second, resultOf(second, "hi from replay."));

    const last = (await model.invoke(messages)) as AIMessage;
    expect(last.content).toBe("hi from replay.");
    expect(last.tool_calls ?? []).toEqual([]);
    expect(last.usage_metadata).toMatchObject({ input_tokens: 3768, output_tokens: 8, total_tokens: 3776 });
    expect(new Set([first.id, second.id, last.id]).size).toBe(3);
  });

  it("reads the prompt through the lead chain's input guard and the UI's system reminder", async () => {
    const guarded = `<system-reminder>Today is Monday.</system-reminder>\n--- BEGIN USER INPUT ---\n${PROMPT}\n--- END USER INPUT ---`;
    const reply = (await replayModel().invoke([new HumanMessage(guarded)])) as AIMessage;
    expect(reply.tool_calls?.[0]?.name).toBe("write_file");
  });

  it("streams the recorded answer word by word, then the tool calls, and reports each token", async () => {
    const recording: ReplayRecording = {
      ...RECORDING,
      turns: [
        {
          caller: "lead_agent",
          output: {
            type: "ai",
            data: {
              content: "Writing it now, then reading back.",
              tool_calls: [{ name: "write_file", args: { path: "/mnt/user-data/outputs/a.txt", content: "x" }, id: "call_1" }],
            },
          },
        },
      ],
    };
    const tokens: string[] = [];
    const handler = BaseCallbackHandler.fromMethods({ handleLLMNewToken: (token: string) => void tokens.push(token) });
    const chunks: AIMessageChunk[] = [];
    for await (const chunk of await replayModel(recording).stream([new HumanMessage(PROMPT)], { callbacks: [handler] })) chunks.push(chunk);

    const words = chunks.filter((chunk) => chunk.content !== "").map((chunk) => chunk.content);
    expect(words).toEqual(["Writing ", "it ", "now, ", "then ", "reading ", "back."]);
    expect(tokens.filter((token) => token !== "")).toEqual(words);
    const merged = chunks.reduce((sum, chunk) => sum.concat(chunk));
    expect(merged.content).toBe("Writing it now, then reading back.");
    expect(merged.tool_calls).toEqual([expect.objectContaining({ name: "write_file", id: "call_1", args: { path: "/mnt/user-data/outputs/a.txt", content: "x" } })]);
    expect(merged.response_metadata.finish_reason).toBe("tool_calls");
    expect(merged.additional_kwargs[REPLAY_MODEL_MARKER]).toBe(true);
  });

  it("answers a host call by its caller: the recorded title and suggestions", async () => {
    const model = replayModel();
    const titlePrompt = `Write a short title for this conversation.\nUser: ${PROMPT}\nAssistant: hi from replay.`;
    const title = await model.invoke(titlePrompt, { runName: "title_agent", tags: ["middleware:title", "langsmith:nostream"] });
    expect(title.content).toBe("Direct File Creation and Readback");
    const suggestions = await model.invoke(
      [
        new SystemMessage("You are generating follow-up questions. Output MUST be a JSON array of strings only."),
        new HumanMessage(`Conversation Context:\nUser: ${PROMPT}\nAssistant: hi from replay.\n\nGenerate 3 follow-up questions`),
      ],
      { runName: "suggest_agent", tags: ["langsmith:nostream"] },
    );
    expect(suggestions.content).toBe(SUGGESTIONS);
  });

  it("takes a run name for a caller only when the recording has that caller (the graph names its step \"model\")", async () => {
    const reply = (await replayModel().invoke([new HumanMessage(PROMPT)], { runName: "model" })) as AIMessage;
    expect(reply.tool_calls?.[0]?.name).toBe("write_file");
  });

  it("fails a prompt it has no recording for, naming the prompt's first words and the fixture", async () => {
    const model = replayModel();
    await expect(model.invoke([new HumanMessage("Tell me a joke about penguins, please, a long one")])).rejects.toMatchObject({
      code: "replay_miss",
      message: expect.stringMatching(/the prompt "Tell me a joke about penguins.*fixtures\/write_read_file\.ultra\.json/),
    });
    // A host call about another conversation is refused too, not answered with this recording.
    await expect(model.invoke("Title: Tell me a joke", { tags: ["middleware:title"] })).rejects.toMatchObject({ code: "replay_miss" });
  });

  it("fails a run that goes past the recording instead of making an answer up", async () => {
    const model = replayModel();
    const extra = [new HumanMessage(PROMPT), new AIMessage("a"), new AIMessage("b"), new AIMessage("c")];
    await expect(model.invoke(extra)).rejects.toMatchObject({ code: "replay_miss", message: expect.stringContaining("call 4 of lead_agent") });
  });

  it("plays several recordings, each for its own prompt: a thread's second message plays the other one", async () => {
    const SAVE_PROMPT = "Now save it as a skill, please.";
    const save: ReplayRecording = {
      scenario: "save",
      prompt: SAVE_PROMPT,
      turns: [
        { caller: "lead_agent", output: { type: "ai", data: { content: "", tool_calls: [{ name: "save_skill", args: { name: "note" }, id: "call_save" }] } } },
        { caller: "lead_agent", output: { type: "ai", data: { content: "Saved." } } },
        { caller: "middleware:title", output: { type: "ai", data: { content: "Saving a skill" } } },
      ],
    };
    const model = new ReplayChatModel({
      recordings: [
        { recording: RECORDING, source: "fixtures/write_read_file.ultra.json" },
        { recording: save, source: "fixtures/save.json" },
      ],
      modelName: "scenario-model",
    });
    // Each prompt opens its own recording, in a fresh thread.
    expect(((await model.invoke([new HumanMessage(SAVE_PROMPT)])) as AIMessage).tool_calls?.[0]?.name).toBe("save_skill");
    // In one thread: the first message plays write_read_file to its end, the second plays save.
    const messages: BaseMessage[] = [new HumanMessage(PROMPT)];
    for (const content of ["OK", "hi from replay."]) {
      const reply = (await model.invoke(messages)) as AIMessage;
      messages.push(reply, resultOf(reply, content));
    }
    messages.push((await model.invoke(messages)) as AIMessage, new HumanMessage(SAVE_PROMPT));
    const saving = (await model.invoke(messages)) as AIMessage;
    expect(saving.tool_calls?.map((call) => call.name)).toEqual(["save_skill"]);
    messages.push(saving, resultOf(saving, "saved"));
    expect(((await model.invoke(messages)) as AIMessage).content).toBe("Saved.");
    // A host call answers for the recording it quotes.
    expect((await model.invoke(`Title: ${SAVE_PROMPT}`, { tags: ["middleware:title"] })).content).toBe("Saving a skill");
    expect((await model.invoke(`Title: ${PROMPT}`, { tags: ["middleware:title"] })).content).toBe("Direct File Creation and Readback");
    // A prompt neither records: the miss names both fixtures and both prompts.
    await expect(model.invoke([new HumanMessage("Something else entirely")])).rejects.toMatchObject({
      code: "replay_miss",
      message: expect.stringMatching(/in fixtures\/write_read_file\.ultra\.json, fixtures\/save\.json \(it records the prompts ".*", "Now save it as a skill, please\."\)/),
    });
  });
});

describe("ReplayChatModel: a hidden message of the client's", () => {
  const SAVE_PROMPT = "Please save this custom agent now.";
  const save: ReplayRecording = {
    scenario: "save",
    prompt: SAVE_PROMPT,
    turns: [{ caller: "lead_agent", output: { type: "ai", data: { content: "", tool_calls: [{ name: "setup_agent", args: { soul: "Be kind." }, id: "call_setup" }] } } }],
  };
  const model = () =>
    new ReplayChatModel({
      recordings: [
        { recording: RECORDING, source: "fixtures/write_read_file.ultra.json" },
        { recording: save, source: "fixtures/save.json" },
      ],
      modelName: "scenario-model",
    });

  it("plays the recording a hidden human message names (DeerFlow's UI sends \"Save agent\" hidden)", async () => {
    const hidden = new HumanMessage({ content: SAVE_PROMPT, additional_kwargs: { hide_from_ui: true } });
    const reply = (await model().invoke([new HumanMessage("Hello there"), new AIMessage("Hi."), hidden])) as AIMessage;
    expect(reply.tool_calls?.map((call) => call.name)).toEqual(["setup_agent"]);
  });

  it("passes over a hidden reminder a middleware added after the user's prompt", async () => {
    const reminder = new HumanMessage({ content: "<system-reminder>Your todo list is empty.</system-reminder>", additional_kwargs: { hide_from_ui: true } });
    const reply = (await model().invoke([new HumanMessage(PROMPT), reminder])) as AIMessage;
    expect(reply.tool_calls?.map((call) => call.name)).toEqual(["write_file"]);
  });
});

describe("use: replay in config", () => {
  const files = new Map<string, string>([["conf/fixtures/session.json", FIXTURE_TEXT]]);
  const source = { readText: async (path: string) => files.get(path), baseDir: "conf" };

  it("reads the fixture relative to the config file and builds a labelled replay model", async () => {
    const config = await loadReplayRecordings(
      validateLeadConfig({ models: [{ name: "scenario-model", use: "replay", fixture: "fixtures/session.json" }] }, "conf/config.yaml"),
      source,
      "conf/config.yaml",
    );
    expect(describeModel(undefined, config)).toMatchObject({ name: "scenario-model", provider: "replay", model: "replay:write_read_file", is_demo: false });
    const model = createChatModel(config, "scenario-model", mapEnv({}));
    expect(model).toBeInstanceOf(ReplayChatModel);
    const reply = (await model.invoke([new HumanMessage(PROMPT)])) as AIMessage;
    expect(reply.tool_calls?.[0]?.name).toBe("write_file");
    // The loaded config validates again as it is (an embedding may pass the recording inline).
    expect(validateLeadConfig(config, "again.yaml").models[0]!.recording?.prompt).toBe(PROMPT);
  });

  it("fails at load with the fixture's file and field when the fixture is bad", async () => {
    const bad = JSON.parse(FIXTURE_TEXT) as { turns: Array<{ output: { type: string } }> };
    bad.turns[2]!.output.type = "human";
    files.set("conf/bad.json", JSON.stringify(bad));
    const config = validateLeadConfig({ models: [{ name: "r", use: "replay", fixture: "bad.json" }] }, "conf/config.yaml");
    await expect(loadReplayRecordings(config, source, "conf/config.yaml")).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringMatching(/^conf\/bad\.json: turns\[2\]\.output\.type: expected "ai"/),
    });
    files.set("conf/noprompt.json", JSON.stringify({ turns: bad.turns }));
    const noPrompt = validateLeadConfig({ models: [{ name: "r", use: "replay", fixture: "noprompt.json" }] }, "conf/config.yaml");
    await expect(loadReplayRecordings(noPrompt, source, "conf/config.yaml")).rejects.toMatchObject({
      message: expect.stringMatching(/^conf\/noprompt\.json: prompt: required key is missing/),
    });
    files.set("conf/notjson.json", "{ turns: ");
    const notJson = validateLeadConfig({ models: [{ name: "r", use: "replay", fixture: "notjson.json" }] }, "conf/config.yaml");
    await expect(loadReplayRecordings(notJson, source, "conf/config.yaml")).rejects.toMatchObject({ message: expect.stringMatching(/^conf\/notjson\.json: not valid JSON/) });
  });

  it("fails at load when the fixture file is missing, and at validation when a replay model names none", async () => {
    const config = validateLeadConfig({ models: [{ name: "r", use: "replay", fixture: "gone.json" }] }, "conf/config.yaml");
    await expect(loadReplayRecordings(config, source, "conf/config.yaml")).rejects.toMatchObject({
      code: "config_not_found",
      message: expect.stringMatching(/^conf\/config\.yaml: models\[0\]\.fixture: the replay fixture conf\/gone\.json does not exist/),
    });
    expect(() => validateLeadConfig({ models: [{ name: "r", use: "replay" }] }, "c.yaml")).toThrow(/c\.yaml: models\[0\]\.fixture: required when use is "replay"/);
    expect(() => validateLeadConfig({ models: [{ name: "m", use: "openai-compatible", model: "gpt", fixture: "x.json" }] }, "c.yaml")).toThrow(
      /models\[0\]\.fixture: only read when use is "replay"/,
    );
    // A replay model whose fixture was never read refuses to be built, instead of failing a run later.
    expect(() => createChatModel(config, "r", mapEnv({}))).toThrow(/Replay model "r" has no recording loaded from gone\.json/);
  });

  it("reads fixtures: [...] (several recordings) and plays each for its own prompt", async () => {
    const other = { ...JSON.parse(FIXTURE_TEXT), scenario: "other", prompt: "A second, different prompt." };
    files.set("conf/fixtures/other.json", JSON.stringify(other));
    const config = await loadReplayRecordings(
      validateLeadConfig({ models: [{ name: "r", use: "replay", fixtures: ["fixtures/session.json", "fixtures/other.json"] }] }, "conf/config.yaml"),
      source,
      "conf/config.yaml",
    );
    expect(config.models[0]!.recordings?.map((recording) => recording.prompt)).toEqual([PROMPT, "A second, different prompt."]);
    const model = createChatModel(config, "r", mapEnv({}));
    for (const prompt of [PROMPT, "A second, different prompt."]) {
      expect(((await model.invoke([new HumanMessage(prompt)])) as AIMessage).tool_calls?.[0]?.name).toBe("write_file");
    }
    expect(validateLeadConfig(config, "again.yaml").models[0]!.recordings).toHaveLength(2);
  });

  it("refuses two fixtures with the same prompt at load, naming both files", async () => {
    const twin = { ...JSON.parse(FIXTURE_TEXT), scenario: "twin", prompt: `  ${PROMPT.replace(/ /g, "\n")} ` };
    files.set("conf/fixtures/twin.json", JSON.stringify(twin));
    const config = validateLeadConfig({ models: [{ name: "r", use: "replay", fixtures: ["fixtures/session.json", "fixtures/twin.json"] }] }, "conf/config.yaml");
    await expect(loadReplayRecordings(config, source, "conf/config.yaml")).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringMatching(/^conf\/config\.yaml: models\[0\]\.fixtures\[1\]: conf\/fixtures\/twin\.json records the same prompt as conf\/fixtures\/session\.json/),
    });
    // Inline recordings too, at validation.
    expect(() => validateLeadConfig({ models: [{ name: "r", use: "replay", recordings: [RECORDING, twin] }] }, "c.yaml")).toThrow(
      /c\.yaml: models\[0\]\.recordings\[1\]\.prompt: the same prompt as recordings\[0\]/,
    );
  });

  it("refuses fixture and fixtures together, and names a missing file of the list", async () => {
    expect(() => validateLeadConfig({ models: [{ name: "r", use: "replay", fixture: "a.json", fixtures: ["b.json"] }] }, "c.yaml")).toThrow(
      /c\.yaml: models\[0\]\.fixtures: give either fixture \(one recording\) or fixtures \(a list\), not both/,
    );
    expect(() => validateLeadConfig({ models: [{ name: "r", use: "replay", fixtures: [] }] }, "c.yaml")).toThrow(/models\[0\]\.fixtures: expected at least one fixture file/);
    const config = validateLeadConfig({ models: [{ name: "r", use: "replay", fixtures: ["fixtures/session.json", "gone.json"] }] }, "conf/config.yaml");
    await expect(loadReplayRecordings(config, source, "conf/config.yaml")).rejects.toMatchObject({
      code: "config_not_found",
      message: expect.stringMatching(/^conf\/config\.yaml: models\[0\]\.fixtures\[1\]: the replay fixture conf\/gone\.json does not exist/),
    });
    expect(() => createChatModel(config, "r", mapEnv({}))).toThrow(/Replay model "r" has no recording loaded from fixtures\/session\.json, gone\.json/);
  });
});

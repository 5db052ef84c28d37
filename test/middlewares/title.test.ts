import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { GraphInterrupt, MemorySaver } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentState } from "../../src/engine/types.ts";
import { canonicalHash } from "../../src/extension-api/index.ts";
import {
  DEFAULT_TITLE_PROMPT_TEMPLATE,
  TITLE_DEFAULTS,
  TITLE_NAME,
  cleanModelTitle,
  createTitleMiddleware,
  fallbackTitle,
  formatTitleTemplate,
  localTitleFor,
  shouldGenerateTitle,
  type TitleConfigInput,
  type TitleDeps,
} from "../../src/middlewares/title.ts";
import { emptyThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

function state(messages: BaseMessage[], title: string | null = null): AgentState {
  return { ...emptyThreadState(), messages, title };
}

async function afterModel(s: AgentState, config: TitleConfigInput = {}, deps: TitleDeps = {}, runtime = makeRuntime()) {
  const mw = createTitleMiddleware(config, deps);
  return (mw.afterModel as (state: AgentState, runtime: unknown) => Promise<{ title: string } | undefined>)(s, runtime);
}

const memoryReminder = (text: string) =>
  new HumanMessage({ content: `<system-reminder>\n<memory>${text}</memory>\n</system-reminder>`, additional_kwargs: { dynamic_context_reminder: true } });

describe("when a title is due", () => {
  it("after the first complete exchange", () => {
    expect(shouldGenerateTitle(state([new HumanMessage("帮我总结这段代码"), new AIMessage("好的，我先看结构")]))).toBe(true);
  });

  it("a dynamic-context reminder and hidden framework messages are not user turns", () => {
    const hint = new HumanMessage({ content: "reminder", name: "todo_reminder", additional_kwargs: { hide_from_ui: true } });
    const date = new SystemMessage({ content: "<current_date>…</current_date>", additional_kwargs: { dynamic_context_reminder: true } });
    expect(shouldGenerateTitle(state([date, memoryReminder("likes Python"), new HumanMessage("q"), hint, new AIMessage("a")]))).toBe(true);
  });

  it("never when disabled, already titled, or past the first user turn", async () => {
    expect(await afterModel(state([new HumanMessage("Q"), new AIMessage("A")]), { enabled: false })).toBeUndefined();
    expect(shouldGenerateTitle(state([new HumanMessage("Q"), new AIMessage("A")], "Existing Title"))).toBe(false);
    expect(shouldGenerateTitle(state([new HumanMessage("1"), new AIMessage("1"), new HumanMessage("2"), new AIMessage("2")]))).toBe(false);
  });

  it("a lone user message only counts on the interrupted-run path", () => {
    const lone = state([new HumanMessage("只有人类消息，AI 还没回复")]);
    expect(shouldGenerateTitle(lone)).toBe(false);
    expect(shouldGenerateTitle(lone, { allowPartialExchange: true })).toBe(true);
    expect(localTitleFor(lone)).toBe("只有人类消息，AI 还没回复");
    expect(localTitleFor(state([new HumanMessage("问题")], "Already set"))).toBeNull();
  });
});

describe("the local title", () => {
  it("is the user's text when it is short, and its first 50 characters plus ... otherwise", () => {
    expect(fallbackTitle("请帮我写测试", 60)).toBe("请帮我写测试");
    expect(fallbackTitle("x".repeat(50), 60)).toBe("x".repeat(50));
    expect(fallbackTitle("x".repeat(200), 60)).toBe(`${"x".repeat(50)}...`);
    expect(fallbackTitle("   ", 60)).toBe("New Conversation");
  });

  it.each([10, 20, 40, 49, 50, 52, 53, 60, 200])("never exceeds max_chars=%i, like the model path", (maxChars) => {
    expect(fallbackTitle("x".repeat(200), maxChars).length).toBeLessThanOrEqual(maxChars);
    expect(fallbackTitle("x".repeat(200), maxChars).endsWith("...")).toBe(true);
    expect(cleanModelTitle("x".repeat(200), maxChars).length).toBeLessThanOrEqual(maxChars);
  });

  it("counts characters, not UTF-16 units, and never splits an emoji", () => {
    const title = fallbackTitle("😀".repeat(60), 60);
    expect(title).toBe(`${"😀".repeat(50)}...`);
  });

  it("uses the text the user typed, not a prefixed upload listing", async () => {
    const message = new HumanMessage({
      content: "<current_uploads>\n- a.pdf (2.0 KB)\n</current_uploads>\n\nsummarize the report",
      additional_kwargs: { original_user_content: "summarize the report" },
    });
    expect(await afterModel(state([message, new AIMessage("ok")]))).toEqual({ title: "summarize the report" });
  });

  it("normalizes structured user content", async () => {
    expect(await afterModel(state([new HumanMessage({ content: [{ type: "text", text: "请帮我总结这段代码" }] }), new AIMessage("好的")]))).toEqual({
      title: "请帮我总结这段代码",
    });
  });
});

describe("the model title", () => {
  it("is the model's answer, cleaned and capped at max_chars", async () => {
    const model = fakeModel().respond(new AIMessage("短标题"));
    expect(await afterModel(state([new HumanMessage("请帮我写一个很长很长的脚本标题"), new AIMessage("好的")]), { max_chars: 12 }, { model })).toEqual({
      title: "短标题",
    });
    expect(model.callCount).toBe(1);
  });

  it.each([
    ['"Quarterly Report"', "Quarterly Report"],
    ["'Quarterly Report'", "Quarterly Report"],
    ["\u201cQuarterly Report\u201d", "Quarterly Report"],
    ["**Quarterly Report**", "Quarterly Report"],
    ["# Quarterly Report", "Quarterly Report"],
    ['Title: "Quarterly Report"', "Quarterly Report"],
    ["Quarterly Report\n\nThis title captures the request.", "Quarterly Report"],
    ["<think>用户想研究贵阳。</think>贵阳发展研究", "贵阳发展研究"],
    ["<think>just thinking, no real title</think>", ""],
  ])("cleans %j to %j", (raw, clean) => {
    expect(cleanModelTitle(raw, 60)).toBe(clean);
  });

  it("normalizes structured model output", () => {
    expect(cleanModelTitle([{ type: "text", text: "贵阳" }, { type: "text", text: "发展" }], 60)).toBe("贵阳");
    expect(cleanModelTitle([{ type: "text", text: "Report on Guiyang" }], 60)).toBe("Report on Guiyang");
    expect(cleanModelTitle({ content: [{ text: "Nested" }] }, 60)).toBe("Nested");
  });

  it("its prompt carries the real user text and the answer without think blocks or reminders", async () => {
    const model = fakeModel().respond(new AIMessage("贵阳发展报告研究"));
    await afterModel(
      state([memoryReminder("User prefers Python."), new HumanMessage("贵阳发展报告研究"), new AIMessage("<think>分析用户需求</think>我将为您研究贵阳的发展情况。")]),
      { max_words: 4 },
      { model },
    );
    const prompt = String(model.calls[0]!.messages[0]!.content);
    expect(prompt).toContain("at most 4 words");
    expect(prompt).toContain("User: 贵阳发展报告研究");
    expect(prompt).toContain("Assistant: 我将为您研究贵阳的发展情况。");
    expect(prompt).not.toContain("<think>");
    expect(prompt).not.toContain("User prefers Python");
  });

  it("a failing model or an empty answer falls back to the local title", async () => {
    const messages = [new HumanMessage("这是一个非常长的问题描述，需要被截断以形成fallback标题"), new AIMessage("收到")];
    const failing = await afterModel(state(messages), { max_chars: 20 }, { model: fakeModel().respond(new Error("model unavailable")) });
    expect(failing!.title.startsWith("这是一个非常长的问题描述")).toBe(true);
    expect(failing!.title.endsWith("...")).toBe(true);
    const empty = await afterModel(state([new HumanMessage("hi there"), new AIMessage("hello")]), {}, { model: fakeModel().respond(new AIMessage("<think>x</think>")) });
    expect(empty).toEqual({ title: "hi there" });
  });

  it("an abort or a graph interrupt during the title call propagates", async () => {
    const interrupt = new GraphInterrupt();
    await expect(afterModel(state([new HumanMessage("q"), new AIMessage("a")]), {}, { model: fakeModel().respond(interrupt) })).rejects.toBe(interrupt);
    const controller = new AbortController();
    const aborting = fakeModel().respond(() => {
      controller.abort();
      return new Error("aborted");
    });
    await expect(afterModel(state([new HumanMessage("q"), new AIMessage("a")]), {}, { model: aborting }, makeRuntime({ signal: controller.signal }))).rejects.toThrow(
      "aborted",
    );
  });
});

describe("scenario M44: titles through the real engine", () => {
  it("scenario M44: without a title model the first exchange titles the thread with the user text, and later exchanges never change it", async () => {
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("first answer")).respond(new AIMessage("second answer")),
      middlewares: [createTitleMiddleware()],
      checkpointer: new MemorySaver(),
      services: { clock: systemClock },
    });
    const first = await agent.invoke({ messages: [new HumanMessage("Plan a trip to Kyoto")] }, { threadId: "t44" });
    expect(first.title).toBe("Plan a trip to Kyoto");
    const second = await agent.invoke({ messages: [new HumanMessage("Now make it a week longer, please")] }, { threadId: "t44" });
    expect(second.title).toBe("Plan a trip to Kyoto");
  });

  it("scenario M44: a long first message becomes its first 50 characters plus ...", async () => {
    const text = "Please compare the three quarterly revenue reports and explain every difference";
    const agent = createAgent({ model: fakeModel().respond(new AIMessage("ok")), middlewares: [createTitleMiddleware()], services: { clock: systemClock } });
    const result = await agent.invoke({ messages: [new HumanMessage(text)] }, { threadId: "t44b" });
    expect(result.title).toBe(`${text.slice(0, 50).trimEnd()}...`);
    expect(result.title!.length).toBeLessThanOrEqual(53);
  });

  it("scenario M44: with a title model the title is its cleaned answer (at most 60 chars), and it never streams to the client", async () => {
    const titleModel = fakeModel().respond(new AIMessage(`**"${"Kyoto travel plan ".repeat(5)}"**`));
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("visible answer")),
      middlewares: [createTitleMiddleware({ model_name: "title-model" }, { model: titleModel })],
      services: { clock: systemClock },
    });
    const streamed: string[] = [];
    let title: string | null = null;
    for await (const chunk of agent.stream({ messages: [new HumanMessage("Plan a trip to Kyoto")] }, { threadId: "t44c", streamMode: ["messages", "values"] })) {
      const [mode, payload] = chunk as [string, unknown];
      if (mode === "messages") streamed.push(String((payload as [BaseMessage])[0].content));
      else title = (payload as AgentState).title;
    }
    expect(title).toBe("Kyoto travel plan Kyoto travel plan Kyoto travel plan Kyoto");
    expect(title!.length).toBeLessThanOrEqual(60);
    expect(streamed.join("|")).toContain("visible answer");
    expect(streamed.join("|")).not.toContain("Kyoto travel plan");
  });
});

describe("Title config", () => {
  it("defaults as upstream and declares its policy with the prompt hashed", async () => {
    expect(TITLE_NAME).toBe("Title");
    expect(TITLE_DEFAULTS).toMatchObject({ enabled: true, max_words: 6, max_chars: 60, model_name: null });
    expect(createTitleMiddleware().releasePolicyParameters!()).toEqual({
      enabled: true,
      max_words: 6,
      max_chars: 60,
      mode: "local",
      title_model: null,
      prompt_template_hash: await canonicalHash(DEFAULT_TITLE_PROMPT_TEMPLATE),
    });
    expect(createTitleMiddleware({ model_name: "m" }, { model: fakeModel() }).releasePolicyParameters!()).toMatchObject({ mode: "model", title_model: "m" });
  });

  it.each([
    [{ max_words: 0 }, "Title.max_words"],
    [{ max_words: 21 }, "Title.max_words"],
    [{ max_chars: 5 }, "Title.max_chars"],
    [{ max_chars: 201 }, "Title.max_chars"],
    [{ prompt_template: "Title for {usr_msg}" }, "Title.prompt_template: prompt_template has an unknown field {usr_msg}"],
    [{ model: "x" }, "Title.model"],
  ])("rejects %j", (config, message) => {
    expect(() => createTitleMiddleware(config as TitleConfigInput)).toThrow(expect.objectContaining({ message: expect.stringContaining(message) }));
  });

  it("formats templates with Python's brace rules", () => {
    expect(formatTitleTemplate("{{json}} {user_msg} {max_words}", { max_words: "6", user_msg: "hi", assistant_msg: "" })).toBe("{json} hi 6");
  });
});

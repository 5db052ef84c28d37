import * as v from "valibot";
import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, HookResult, NodeHook } from "../../src/engine/types.ts";
import { PROVENANCE_CONTENT_KIND_KEY, PROVENANCE_PRODUCER_KIND_KEY } from "../../src/extension-api/provenance.ts";
import { currentDateFormatter } from "../../src/middlewares/dynamic-context.ts";
import { HIDE_FROM_UI } from "../../src/middlewares/messages.ts";
import {
  SubagentDateContextConfigSchema,
  createSubagentDateContextMiddleware,
} from "../../src/middlewares/subagent-date-context.ts";
import { createSystemMessageCoalescingMiddleware } from "../../src/middlewares/system-message-coalescing.ts";
import { emptyThreadState, type ThreadState } from "../../src/state/thread-state.ts";
import { makeRuntime } from "./runtime.ts";

// The section as its schema fills it in when nothing is configured.
const SUBAGENT_DATE_CONTEXT_DEFAULTS = v.parse(SubagentDateContextConfigSchema, {});

// 2026-05-08 23:30 UTC is already Saturday the 9th in Shanghai.
const LATE_FRIDAY_UTC = Date.UTC(2026, 4, 8, 23, 30, 0);

function runtimeAt(epochMs: number): AgentRuntime {
  return makeRuntime({ services: { clock: new ManualClock(epochMs) } });
}

async function beforeAgent(mw: AgentMiddleware, messages: BaseMessage[], runtime: AgentRuntime): Promise<HookResult> {
  const spec = mw.beforeAgent!;
  const hook: NodeHook = typeof spec === "function" ? spec : spec.hook;
  return hook({ ...emptyThreadState(), messages } as ThreadState, runtime);
}

describe("SubagentDateContext", () => {
  it("defaults to UTC and declares the zone", () => {
    expect(SUBAGENT_DATE_CONTEXT_DEFAULTS).toEqual({ current_date_timezone: "UTC" });
    const mw = createSubagentDateContextMiddleware();
    expect(mw.name).toBe("SubagentDateContext");
    expect(mw.releasePolicyParameters!()).toEqual({ current_date_timezone: "UTC" });
    expect(createSubagentDateContextMiddleware({ current_date_timezone: "Asia/Shanghai" }).releasePolicyParameters!()).toEqual({
      current_date_timezone: "Asia/Shanghai",
    });
  });

  it("rejects an unknown zone or key with a config error naming the key", () => {
    expect(() => createSubagentDateContextMiddleware({ current_date_timezone: "Mars/Olympus" })).toThrow(/SubagentDateContext\.current_date_timezone/);
    expect(() => createSubagentDateContextMiddleware({ zone: "UTC" } as never)).toThrow(/SubagentDateContext/);
  });

  it("adds one hidden date SystemMessage, flagged and stamped like DynamicContext's reminder", async () => {
    const result = await beforeAgent(createSubagentDateContextMiddleware(), [new HumanMessage("do the task")], runtimeAt(LATE_FRIDAY_UTC));
    const added = (result as { messages: BaseMessage[] }).messages;
    expect(added).toHaveLength(1);
    const reminder = added[0]!;
    expect(SystemMessage.isInstance(reminder)).toBe(true);
    expect(reminder.content).toBe("<system-reminder>\n<current_date>2026-05-08, Friday</current_date>\n</system-reminder>");
    expect(reminder.id).toBeTruthy();
    expect(reminder.additional_kwargs).toMatchObject({
      [HIDE_FROM_UI]: true,
      dynamic_context_reminder: true,
      reminder_date: "2026-05-08, Friday",
      [PROVENANCE_CONTENT_KIND_KEY]: "middleware_injection",
      [PROVENANCE_PRODUCER_KIND_KEY]: "dynamic_context",
    });
  });

  it("reads the date in the configured zone", async () => {
    const result = await beforeAgent(
      createSubagentDateContextMiddleware({ current_date_timezone: "Asia/Shanghai" }),
      [new HumanMessage("x")],
      runtimeAt(LATE_FRIDAY_UTC),
    );
    expect((result as { messages: BaseMessage[] }).messages[0]!.additional_kwargs["reminder_date"]).toBe("2026-05-09, Saturday");
  });

  it("does not add a second reminder for the same day on a resumed run, but does on a new day", async () => {
    const mw = createSubagentDateContextMiddleware();
    const first = (await beforeAgent(mw, [new HumanMessage("x")], runtimeAt(LATE_FRIDAY_UTC))) as { messages: BaseMessage[] };
    const history = [new HumanMessage("x"), ...first.messages];
    expect(await beforeAgent(mw, history, runtimeAt(LATE_FRIDAY_UTC))).toBeUndefined();
    const nextDay = (await beforeAgent(mw, history, runtimeAt(LATE_FRIDAY_UTC + 3_600_000))) as { messages: BaseMessage[] };
    expect(nextDay.messages[0]!.additional_kwargs["reminder_date"]).toBe("2026-05-09, Saturday");
  });

  it("in the engine, the subagent prompt and the date reach the model as one leading system block", async () => {
    const model = fakeModel().respond(new AIMessage("done"));
    const agent = createAgent({
      model,
      tools: [],
      systemPrompt: "You are a research subagent.",
      middlewares: [createSubagentDateContextMiddleware(), createSystemMessageCoalescingMiddleware()],
      services: { clock: systemClock },
    });
    const dayBefore = currentDateFormatter("UTC")(Date.now());
    const state = await agent.invoke({ messages: [new HumanMessage("find the release date")] }, { threadId: "sub-thread" });
    expect(model.callCount).toBe(1);
    const sent = model.calls[0]!.messages;
    const systems = sent.filter((m) => SystemMessage.isInstance(m));
    expect(systems).toHaveLength(1);
    expect(SystemMessage.isInstance(sent[0]!)).toBe(true);
    const dayAfter = currentDateFormatter("UTC")(Date.now());
    expect(String(sent[0]!.content)).toContain("You are a research subagent.");
    // Either side of a midnight the run may straddle.
    expect([dayBefore, dayAfter].some((day) => String(sent[0]!.content).includes(`<current_date>${day}</current_date>`))).toBe(true);
    const reminders = state.messages.filter((m) => SystemMessage.isInstance(m) && m.additional_kwargs["dynamic_context_reminder"] === true);
    expect(reminders).toHaveLength(1);
    expect(reminders[0]!.additional_kwargs[HIDE_FROM_UI]).toBe(true);
  });
});

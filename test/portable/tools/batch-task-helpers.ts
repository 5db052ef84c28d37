import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { vi } from "vitest";
import { GENERAL_PURPOSE_SUBAGENT, type SubagentType } from "../../../src/agents/subagent-types.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent, type Agent } from "../../../src/engine/agent.ts";
import type { AgentRuntime, AgentTool, ToolOutput } from "../../../src/engine/types.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { BATCH_TASK_TOOL_NAME } from "../../../src/tools/batch-task.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";

export const GP: SubagentType = { ...GENERAL_PURPOSE_SUBAGENT, maxTurns: 25, timeoutMs: 60_000 };
export const ITEM_USAGE = { input_tokens: 10, output_tokens: 5, total_tokens: 15 };

function promptOf(messages: readonly BaseMessage[]): string {
  const human = messages.find((m) => HumanMessage.isInstance(m));
  return typeof human?.content === "string" ? human.content : "";
}

/**
 * Scripted subagents: each calls the `work` tool once and then reports `done: <prompt>`. The work
 * tool records which prompts ran and how many ran at once; it can hold calls at a gate, block one
 * prompt until the run is aborted, or fail one prompt.
 */
export class SubagentScript {
  active = 0;
  maxActive = 0;
  finished = 0;
  readonly prompts: string[] = [];
  readonly built: string[] = [];
  gated = false;
  blockOn: string | undefined;
  failOn: string | undefined;
  onBlocked: (() => void) | undefined;
  #waiters: Array<() => void> = [];

  get waiting(): number {
    return this.#waiters.length;
  }

  releaseAll(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const release of waiters) release();
  }

  readonly workTool: AgentTool = {
    name: "work",
    description: "does the delegated work",
    schema: { type: "object", properties: {} },
    invoke: async (_args, { state, runtime }): Promise<ToolOutput> => {
      const prompt = promptOf(state.messages);
      this.prompts.push(prompt);
      if (this.failOn !== undefined && prompt === this.failOn) throw new Error(`work on "${prompt}" exploded`);
      if (this.blockOn !== undefined && prompt === this.blockOn) {
        return new Promise<never>((_, reject) => {
          const signal = runtime.signal!;
          if (signal.aborted) reject(signal.reason);
          else signal.addEventListener("abort", () => reject(signal.reason), { once: true });
          this.onBlocked?.();
        });
      }
      this.active += 1;
      this.maxActive = Math.max(this.maxActive, this.active);
      if (this.gated) await new Promise<void>((resolve) => this.#waiters.push(resolve));
      this.active -= 1;
      this.finished += 1;
      return "worked";
    },
  };

  readonly buildAgent = (type: SubagentType): Agent => {
    this.built.push(type.name);
    const model = fakeModel()
      .respondWithTools([{ name: "work", args: {}, id: "w1" }])
      .respond((messages) => new AIMessage({ content: `done: ${promptOf(messages)}`, usage_metadata: { ...ITEM_USAGE } }));
    return createAgent({ model, tools: [this.workTool], services: { clock: systemClock } });
  };
}

/**
 * Runs `body` with the script's gate closed, opening it each time exactly as many items wait as
 * may run at once. Any extra item the tool started would show in maxActive before the gate opens.
 */
export async function driveGated<T>(script: SubagentScript, total: number, width: number, body: Promise<T>): Promise<T> {
  script.gated = true;
  let settled = false;
  const outcome = body.finally(() => (settled = true));
  outcome.catch(() => {});
  while (!settled) {
    const expected = Math.min(width, total - script.finished);
    await vi.waitFor(() => {
      if (!settled && script.waiting < expected) throw new Error(`waiting for ${expected} items at the gate, ${script.waiting} there`);
    });
    // Give an over-eager pool every chance to start more before the gate opens.
    for (let i = 0; i < 10; i += 1) await new Promise((resolve) => setTimeout(resolve, 0));
    script.releaseAll();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  return outcome;
}

export function task(prompt: string, description = prompt) {
  return { description, prompt, subagent_type: GP.name };
}

export function batchCall(args: Record<string, unknown>, id = "bt-1"): ToolCall {
  return { id, name: BATCH_TASK_TOOL_NAME, args, type: "tool_call" };
}

export function toolRuntime(storage: KeyValue | undefined, options: { threadId?: string; signal?: AbortSignal; runId?: string; writer?: (chunk: unknown) => void; context?: Record<string, unknown> } = {}): AgentRuntime {
  const runtime = makeRuntime({
    threadId: options.threadId ?? "thread-1",
    runId: options.runId ?? "run-1",
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.context ? { context: options.context } : {}),
    services: storage ? { storage } : {},
  });
  return options.writer ? { ...runtime, writer: options.writer } : runtime;
}

export async function invokeBatch(tool: AgentTool, args: Record<string, unknown>, runtime: AgentRuntime, id = "bt-1") {
  return tool.invoke(args, { toolCall: batchCall(args, id), state: emptyThreadState(), runtime });
}

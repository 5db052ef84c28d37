// Shared by the run-lifecycle tests: a scripted model, tools a test can hold open, and an
// in-memory thread store. Nothing here uses a timer; tests order events with promises.
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { ChatResult } from "@langchain/core/outputs";
import { interrupt } from "@langchain/langgraph/web";
import { systemClock } from "../../../src/core/clock.ts";
import { newId } from "../../../src/core/ids.ts";
import { createAgent } from "../../../src/engine/index.ts";
import type { AgentTool } from "../../../src/engine/types.ts";
import type { Clock } from "../../../src/ports/runtime-ports.ts";
import type { RunAgentFactory, RunPrincipal, RunThreadStatus, RunThreadStore } from "../../../src/runtime/runs/types.ts";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";

export interface Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Reads the last human message: `tool:<name> [more words]` calls that tool once (the name ends at
 * the first space, so a test may add text for the title), then answers `done: <text>` after the
 * tool result. Every answer gets a fresh id (the messages reducer merges
 * equal ids).
 */
export class ScriptedModel extends BaseChatModel {
  _llmType(): string {
    return "scripted-runs";
  }

  override bindTools(tools: any[], kwargs?: Record<string, unknown>): any {
    return this.withConfig({ tools, ...kwargs } as never);
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const index = messages.findLastIndex((m) => HumanMessage.isInstance(m));
    const text = index >= 0 ? String(messages[index]!.content) : "";
    const answered = messages.slice(index + 1).some((m) => m.getType() === "tool");
    const message =
      text.startsWith("tool:") && !answered
        ? new AIMessage({ id: newId("ai"), content: "", tool_calls: [{ name: text.slice(5).split(" ")[0]!, args: {}, id: newId("call"), type: "tool_call" }] })
        : new AIMessage({ id: newId("ai"), content: `done: ${text}` });
    return { generations: [{ text: String(message.content), message }] };
  }
}

/** Tools a test drives: `block` waits for `gates.block` (or the run's abort), `ask` pauses the graph, `boom` throws, `whoami` echoes identity, `note` writes a custom event. */
export function testTools(gates: { block?: Deferred<string> } = {}): AgentTool[] {
  const schema = { type: "object", properties: {} };
  return [
    {
      name: "block",
      description: "waits",
      schema,
      invoke: async (_args, { runtime }) => {
        const gate = gates.block ?? deferred<string>();
        return new Promise<string>((resolve, reject) => {
          gate.promise.then(resolve, reject);
          runtime.signal?.addEventListener("abort", () => reject(runtime.signal!.reason), { once: true });
        });
      },
    },
    { name: "ask", description: "asks the user", schema, invoke: async () => `user said ${String(interrupt({ question: "continue?" }))}` },
    {
      name: "boom",
      description: "fails",
      schema,
      invoke: async () => {
        throw new TypeError("the tool exploded");
      },
    },
    {
      name: "whoami",
      description: "reports the run context identity",
      schema,
      invoke: async (_args, { runtime }) => {
        const { user_id, user_role, is_internal, thread_id, run_id, model_name } = runtime.context as Record<string, unknown>;
        const keys = Object.keys(runtime.context).filter((k) => k.startsWith("__")).sort();
        return JSON.stringify({ user_id, user_role, is_internal, thread_id, run_id, model_name, keys });
      },
    },
    {
      name: "note",
      description: "reports progress",
      schema,
      invoke: async (_args, { runtime }) => {
        runtime.writer({ type: "task_running", message: "working" });
        return "noted";
      },
    },
  ];
}

export function scriptedAgentFactory(
  checkpointer: BaseCheckpointSaver,
  options: { gates?: { block?: Deferred<string> }; clock?: Clock; onBuild?: (user: RunPrincipal) => void } = {},
): RunAgentFactory {
  return async ({ user }) => {
    options.onBuild?.(user);
    return createAgent({
      name: "lead-agent",
      model: new ScriptedModel({}),
      tools: testTools(options.gates),
      services: { clock: options.clock ?? systemClock },
      checkpointer,
    });
  };
}

export class MemoryThreads implements RunThreadStore {
  readonly rows = new Map<string, { thread_id: string; status: RunThreadStatus; display_name: string | null }>();
  readonly statusLog: Array<[string, RunThreadStatus]> = [];

  add(threadId: string): void {
    this.rows.set(threadId, { thread_id: threadId, status: "idle", display_name: null });
  }

  async get(threadId: string) {
    return this.rows.get(threadId);
  }

  async update(threadId: string, patch: { status?: RunThreadStatus; display_name?: string | null }) {
    const row = this.rows.get(threadId);
    if (!row) return undefined;
    if (patch.status) {
      row.status = patch.status;
      this.statusLog.push([threadId, patch.status]);
    }
    if (patch.display_name !== undefined) row.display_name = patch.display_name;
    return row;
  }
}

export const ALICE: RunPrincipal = Object.freeze({ id: "alice", systemRole: "user", isInternal: false });

/** Collects a subscription's frames. */
export async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/** Polls (bounded) until `check` holds: for "eventually" without measuring time. */
export async function eventually(check: () => boolean | Promise<boolean>, attempts = 500): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error("condition never became true");
}

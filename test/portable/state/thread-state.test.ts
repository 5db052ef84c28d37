import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Overwrite } from "@langchain/langgraph/web";
import { describe, expect, expectTypeOf, it } from "vitest";
import * as stateIndex from "../../../src/state/index.ts";
import {
  StateConflictError,
  StateUpdateError,
  ThreadStateAnnotation,
  applyStateUpdate,
  emptyThreadState,
  threadStateChannels,
  type ThreadState,
  type ThreadStateUpdate,
} from "../../../src/state/thread-state.ts";
import { deepFreeze, thrown } from "./helpers.ts";

const CHANNELS = [
  "messages",
  "sandbox",
  "thread_data",
  "title",
  "uploaded_files",
  "summary_text",
  "background_tasks",
  "artifacts",
  "todos",
  "goal",
  "viewed_images",
  "promoted",
  "delegations",
  "skill_context",
] as const;

describe("emptyThreadState", () => {
  it("holds every channel at its default", () => {
    expect(emptyThreadState()).toEqual({
      messages: [],
      sandbox: null,
      thread_data: null,
      title: null,
      uploaded_files: null,
      summary_text: null,
      background_tasks: null,
      artifacts: [],
      todos: null,
      goal: null,
      viewed_images: {},
      promoted: null,
      delegations: [],
      skill_context: [],
    });
  });

  it("gives each caller its own lists and maps", () => {
    const first = emptyThreadState();
    first.artifacts.push("leak");
    first.viewed_images["/x"] = { mime_type: "image/png", size: 1, actual_path: "/x" };
    const second = emptyThreadState();
    expect(second.artifacts).toEqual([]);
    expect(second.viewed_images).toEqual({});
  });
});

describe("threadStateChannels and ThreadStateAnnotation", () => {
  it("define exactly the ThreadState channels", () => {
    expect(Object.keys(threadStateChannels).sort()).toEqual([...CHANNELS].sort());
    expect(Object.keys(ThreadStateAnnotation.spec).sort()).toEqual([...CHANNELS].sort());
  });

  it("the annotation uses the very same reducer and default functions as the channel table", () => {
    for (const name of CHANNELS) {
      const channel = ThreadStateAnnotation.spec[name] as unknown as { operator: unknown; initialValueFactory: unknown };
      expect(channel.operator, name).toBe(threadStateChannels[name].reducer);
      expect(channel.initialValueFactory, name).toBe(threadStateChannels[name].default);
    }
  });

  it("cannot have a reducer swapped out by another module", () => {
    expect(Object.isFrozen(threadStateChannels)).toBe(true);
    expect(() => {
      (threadStateChannels as unknown as Record<string, unknown>).artifacts = { reducer: () => [], default: () => [] };
    }).toThrow(TypeError);
  });

  it("the annotation's state type is ThreadState", () => {
    expectTypeOf<typeof ThreadStateAnnotation.State>().toEqualTypeOf<ThreadState>();
  });

  it("the folder index re-exports the public names", () => {
    for (const name of ["applyStateUpdate", "emptyThreadState", "threadStateChannels", "ThreadStateAnnotation", "StateConflictError", "StateUpdateError", "reduceSandbox", "lastValue"]) {
      expect(stateIndex, name).toHaveProperty(name);
    }
  });
});

describe("applyStateUpdate", () => {
  const base = (): ThreadState => ({
    ...emptyThreadState(),
    messages: [new HumanMessage({ id: "m1", content: "hi" })],
    sandbox: { sandbox_id: "sb1" },
    title: "first title",
    artifacts: ["/mnt/user-data/outputs/a.md"],
    delegations: [{ id: "t1", description: "d", subagent_type: "s", status: "completed", run_id: "r1" }],
  });

  it("folds each present key through its channel reducer", () => {
    const next = applyStateUpdate(base(), {
      messages: [new AIMessage({ id: "a1", content: "hello" })],
      artifacts: ["/mnt/user-data/outputs/b.md", "/mnt/user-data/outputs/a.md"],
      title: "second title",
      delegations: [{ id: "t1", status: "in_progress", run_id: "r2" }],
      todos: [],
    });
    expect(next.messages.map((m) => m.id)).toEqual(["m1", "a1"]);
    expect(next.artifacts).toEqual(["/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/b.md"]);
    expect(next.title).toBe("second title");
    expect(next.delegations[0]).toMatchObject({ status: "completed", run_id: "r1" });
    expect(next.todos).toEqual([]);
  });

  it("keeps the same reference for every channel the update does not name", () => {
    const state = base();
    const next = applyStateUpdate(state, { title: "new" });
    expect(next).not.toBe(state);
    for (const name of CHANNELS) {
      if (name !== "title") expect(next[name], name).toBe(state[name]);
    }
  });

  it("never mutates the state or the update", () => {
    const state = deepFreeze(base());
    const update = deepFreeze({ artifacts: ["x"], viewed_images: {}, summary_text: null } satisfies ThreadStateUpdate);
    const next = applyStateUpdate(state, update);
    expect(state.artifacts).toEqual(["/mnt/user-data/outputs/a.md"]);
    expect(state.summary_text).toBeNull();
    expect(next.artifacts).toEqual(["/mnt/user-data/outputs/a.md", "x"]);
  });

  it("returns the state itself for an empty update", () => {
    const state = base();
    expect(applyStateUpdate(state, {})).toBe(state);
  });

  it("treats a key sent as undefined as untouched, and an explicit null on a last-write channel as a write", () => {
    const state = base();
    const next = applyStateUpdate(state, { title: undefined, sandbox: undefined, messages: undefined });
    expect(next.title).toBe("first title");
    expect(next.messages).toBe(state.messages);
    expect(applyStateUpdate(state, { title: null }).title).toBeNull();
  });

  it("throws StateUpdateError unknown_channel naming the key, and lists the channels", () => {
    const error = thrown(() => applyStateUpdate(base(), { title: "ok", jump_to: "end" } as ThreadStateUpdate));
    expect(error).toBeInstanceOf(StateUpdateError);
    expect(error.code).toBe("unknown_channel");
    expect(error.message).toContain("'jump_to'");
    expect(error.message).toContain("skill_context");
  });

  it("rejects inherited names and __proto__ instead of writing through the prototype", () => {
    expect(thrown(() => applyStateUpdate(base(), JSON.parse('{"__proto__": {"polluted": true}}'))).code).toBe("unknown_channel");
    expect(thrown(() => applyStateUpdate(base(), { toString: "x" } as ThreadStateUpdate)).code).toBe("unknown_channel");
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("lets a sandbox conflict escape as StateConflictError", () => {
    const error = thrown(() => applyStateUpdate(base(), { sandbox: { sandbox_id: "sb2" } }));
    expect(error).toBeInstanceOf(StateConflictError);
    expect(error.code).toBe("sandbox_conflict");
  });

  it("writes an Overwrite value directly, bypassing the reducer, as a graph step does", () => {
    const state = base();
    const viaInstance = applyStateUpdate(state, { artifacts: new Overwrite(["only"]) } as unknown as ThreadStateUpdate);
    expect(viaInstance.artifacts).toEqual(["only"]);
    const viaWire = applyStateUpdate(state, { sandbox: { __overwrite__: { sandbox_id: "sb2" } } } as unknown as ThreadStateUpdate);
    expect(viaWire.sandbox).toEqual({ sandbox_id: "sb2" });
  });
});

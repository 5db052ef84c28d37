import { AIMessage, HumanMessage, RemoveMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, END, MemorySaver, START, StateGraph } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import {
  StateConflictError,
  ThreadStateAnnotation,
  applyStateUpdate,
  emptyThreadState,
  type ThreadState,
  type ThreadStateUpdate,
} from "../../../src/state/thread-state.ts";

type Write = [keyof ThreadState, unknown];

/** A one-node graph whose node returns `writes` as a tuple-form Command, checkpointed in memory. */
function oneStepGraph(writes: Write[]) {
  return new StateGraph(ThreadStateAnnotation)
    .addNode("step", () => new Command({ update: writes }))
    .addEdge(START, "step")
    .addEdge("step", END)
    .compile({ checkpointer: new MemorySaver() });
}

function foldWrites(input: ThreadStateUpdate, writes: Write[]): ThreadState {
  let state = applyStateUpdate(emptyThreadState(), input);
  for (const [key, value] of writes) state = applyStateUpdate(state, { [key]: value } as ThreadStateUpdate);
  return state;
}

/** Checkpoints round-trip messages through the serializer, so compare what a reader can see. */
function comparable(state: ThreadState) {
  return {
    ...state,
    messages: state.messages.map((m: BaseMessage) => ({ type: m.getType(), id: m.id, content: m.content })),
  };
}

let threadCounter = 0;
const freshThread = () => ({ configurable: { thread_id: `thread-${++threadCounter}` } });

describe("ThreadStateAnnotation inside a LangGraph StateGraph", () => {
  it("folds several tuple writes to one channel in one step exactly like applyStateUpdate", async () => {
    const msg1 = new AIMessage({ id: "a1", content: "working" });
    const msg2 = new AIMessage({ id: "a2", content: "done" });
    const writes: Write[] = [
      ["artifacts", ["a"]],
      ["artifacts", ["b", "a"]],
      ["messages", [msg1]],
      ["messages", [msg2]],
    ];
    const input: ThreadStateUpdate = { messages: [new HumanMessage({ id: "h1", content: "go" })] };
    const graph = oneStepGraph(writes);
    const config = freshThread();
    await graph.invoke(input, config);
    const checkpointed = (await graph.getState(config)).values as ThreadState;

    const expected = foldWrites(input, writes);
    expect(expected.artifacts).toEqual(["a", "b"]);
    expect(expected.messages.map((m) => m.id)).toEqual(["h1", "a1", "a2"]);
    expect(comparable(checkpointed)).toEqual(comparable(expected));
  });

  it("matches applyStateUpdate on every channel, including replaces, removals and repeated writes", async () => {
    const input: ThreadStateUpdate = {
      messages: [new HumanMessage({ id: "h1", content: "go" }), new AIMessage({ id: "a0", content: "draft" })],
      sandbox: { sandbox_id: "sb1" },
      title: "first",
      todos: [{ content: "plan", status: "in_progress" }],
      promoted: { catalog_hash: "h1", names: ["slack_send"] },
      delegations: [{ id: "t1", description: "research", subagent_type: "general-purpose", status: "in_progress", run_id: "r1", created_at: "c1" }],
    };
    const writes: Write[] = [
      ["messages", [new AIMessage({ id: "a0", content: "final" }), new ToolMessage({ id: "tm1", content: "ok", tool_call_id: "c1" })]],
      ["messages", [new RemoveMessage({ id: "h1" })]],
      ["sandbox", { sandbox_id: "sb1" }],
      ["sandbox", { sandbox_id: "sb1" }],
      ["title", null],
      ["title", "second"],
      ["todos", []],
      ["goal", { objective: "ship" }],
      ["goal", null],
      ["viewed_images", { "/a.png": { mime_type: "image/png", size: 1, actual_path: "/a.png" } }],
      ["viewed_images", {}],
      ["viewed_images", { "/b.png": { mime_type: "image/png", size: 2, actual_path: "/b.png" } }],
      ["promoted", { catalog_hash: "h1", names: ["jira_create", "slack_send"] }],
      ["promoted", null],
      ["delegations", [{ id: "t1", status: "completed", result_brief: "found it", run_id: "r2" }]],
      ["delegations", [{ id: "t1", status: "in_progress" }, { id: "t2", description: "write", subagent_type: "bash", status: "failed" }]],
      ["skill_context", [{ name: "pdf", path: "/mnt/skills/pdf/SKILL.md", description: "pdf", loaded_at: 1, body: "x" }]],
      ["skill_context", [{ name: "web", path: "/mnt/skills/web/SKILL.md", description: "web", loaded_at: 2 }]],
      ["skill_context", [{ name: "pdf", path: "/mnt/skills/pdf/SKILL.md", description: "pdf again", loaded_at: 3 }]],
    ];
    const graph = oneStepGraph(writes);
    const config = freshThread();
    await graph.invoke(input, config);
    const checkpointed = (await graph.getState(config)).values as ThreadState;

    const expected = foldWrites(input, writes);
    expect(expected.delegations[0]).toMatchObject({ status: "completed", run_id: "r1", created_at: "c1" });
    expect(expected.skill_context.map((e) => e.description)).toEqual(["web", "pdf again"]);
    expect(comparable(checkpointed)).toEqual(comparable(expected));
  });

  it("rejects graph.invoke with the sandbox conflict; the checkpoint keeps the old sandbox", async () => {
    const saver = new MemorySaver();
    const graph = new StateGraph(ThreadStateAnnotation)
      .addNode("step", () => new Command({ update: [["sandbox", { sandbox_id: "sb2" }]] }))
      .addEdge(START, "step")
      .addEdge("step", END)
      .compile({ checkpointer: saver });
    const config = freshThread();
    const failure = graph.invoke({ sandbox: { sandbox_id: "sb1" } }, config);
    await expect(failure).rejects.toBeInstanceOf(StateConflictError);
    await expect(failure).rejects.toMatchObject({ code: "sandbox_conflict", existingId: "sb1", incomingId: "sb2" });
    const saved = await saver.getTuple(config);
    expect(saved?.checkpoint.channel_values.sandbox).toEqual({ sandbox_id: "sb1" });
    // LangGraph keeps the failed step's writes as pending writes and replays them in getState, so the
    // thread reads as conflicted until a new run supersedes that step.
    await expect(graph.getState(config)).rejects.toMatchObject({ code: "sandbox_conflict" });
  });

  it("rejects graph.invoke when two writes in one step disagree about the sandbox", async () => {
    const graph = oneStepGraph([
      ["sandbox", { sandbox_id: "sb1" }],
      ["sandbox", { sandbox_id: "sb2" }],
    ]);
    await expect(graph.invoke({}, freshThread())).rejects.toMatchObject({ code: "sandbox_conflict" });
  });

  it("leaves a channel untouched when a node returns its key as undefined, as applyStateUpdate does", async () => {
    const graph = new StateGraph(ThreadStateAnnotation)
      .addNode("step", () => ({ title: undefined, artifacts: undefined, messages: undefined }))
      .addEdge(START, "step")
      .addEdge("step", END)
      .compile({ checkpointer: new MemorySaver() });
    const config = freshThread();
    const input: ThreadStateUpdate = { title: "kept", artifacts: ["a"], messages: [new HumanMessage({ id: "h1", content: "x" })] };
    await graph.invoke(input, config);
    const checkpointed = (await graph.getState(config)).values as ThreadState;
    expect(comparable(checkpointed)).toEqual(comparable(foldWrites(input, [])));
    expect(checkpointed.title).toBe("kept");
  });
});

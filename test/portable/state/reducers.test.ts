import { AIMessage, AIMessageChunk, HumanMessage, RemoveMessage, ToolMessage } from "@langchain/core/messages";
import { REMOVE_ALL_MESSAGES, messagesStateReducer } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import {
  MAX_DELEGATIONS,
  MAX_SKILL_CONTEXT_ENTRIES,
  MAX_SKILL_DESCRIPTION_CHARS,
  StateConflictError,
  StateUpdateError,
  lastValue,
  reduceArtifacts,
  reduceDelegations,
  reduceGoal,
  CLEAR_GOAL,
  reduceMessages,
  reducePromoted,
  reduceSandbox,
  reduceSkillContext,
  reduceTodos,
  reduceViewedImages,
  type Delegation,
  type DelegationUpdate,
  type SkillContextEntry,
  type SkillContextInput,
  type Todo,
  type ViewedImage,
} from "../../../src/state/thread-state.ts";
import { deepFreeze, thrown } from "./helpers.ts";

const human = (id: string, content = id) => new HumanMessage({ id, content });
const ids = (messages: { id?: string | undefined }[]) => messages.map((m) => m.id);

describe("messages channel (LangGraph messagesStateReducer)", () => {
  it("appends messages with new ids in order", () => {
    const result = reduceMessages([human("m1")], [human("m2"), human("m3")]);
    expect(ids(result)).toEqual(["m1", "m2", "m3"]);
  });

  it("accepts a single message as well as a list", () => {
    expect(ids(reduceMessages([human("m1")], human("m2")))).toEqual(["m1", "m2"]);
  });

  it("replaces a message with the same id in place, keeping its position", () => {
    const result = reduceMessages([human("m1"), human("m2"), human("m3")], [human("m2", "edited")]);
    expect(ids(result)).toEqual(["m1", "m2", "m3"]);
    expect(result[1]?.content).toBe("edited");
  });

  it("deletes a message by id with RemoveMessage", () => {
    const result = reduceMessages([human("m1"), human("m2"), human("m3")], [new RemoveMessage({ id: "m2" })]);
    expect(ids(result)).toEqual(["m1", "m3"]);
  });

  it("REMOVE_ALL_MESSAGES drops the history and keeps only what follows the marker", () => {
    const result = reduceMessages(
      [human("m1"), human("m2")],
      [human("before"), new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), human("s1"), human("s2")],
    );
    expect(ids(result)).toEqual(["s1", "s2"]);
  });

  it("LangGraph itself throws when a RemoveMessage names an id that is not in the history", () => {
    expect(() => messagesStateReducer([human("m1")], [new RemoveMessage({ id: "ghost" })])).toThrow(
      "Attempting to delete a message with an ID that doesn't exist ('ghost')",
    );
  });

  it("re-raises the unknown-id removal as StateUpdateError with code unknown_message_id", () => {
    const error = thrown(() => reduceMessages([human("m1")], [new RemoveMessage({ id: "ghost" })]));
    expect(error).toBeInstanceOf(StateUpdateError);
    expect(error.code).toBe("unknown_message_id");
    expect(error.channel).toBe("messages");
    expect(error.message).toContain("ghost");
    expect(error.cause).toBeInstanceOf(Error);
  });

  it("a removal of a message added earlier in the same update succeeds", () => {
    const result = reduceMessages([human("m1")], [human("m2"), new RemoveMessage({ id: "m2" })]);
    expect(ids(result)).toEqual(["m1"]);
  });

  it("gives an id-less message a generated id, in place, as LangGraph does", () => {
    const fresh = new HumanMessage("no id yet");
    const result = reduceMessages([human("m1")], [fresh]);
    expect(result[1]?.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(fresh.id).toBe(result[1]?.id);
  });

  it("coerces message-like objects and turns chunks into full messages", () => {
    const result = reduceMessages(
      [],
      [{ role: "user", content: "hi", id: "u1" }, new AIMessageChunk({ content: "yo", id: "a1" })],
    );
    expect(result[0]).toBeInstanceOf(HumanMessage);
    expect(result[1]).toBeInstanceOf(AIMessage);
    expect(result[1]).not.toBeInstanceOf(AIMessageChunk);
  });

  it("an undefined update keeps the stored list itself; null is rejected with a hint", () => {
    const stored = [human("m1")];
    expect(reduceMessages(stored, undefined)).toBe(stored);
    const error = thrown(() => reduceMessages(stored, null as never));
    expect(error).toBeInstanceOf(StateUpdateError);
    expect(error.code).toBe("invalid_messages_update");
    expect(error.message).toContain("REMOVE_ALL_MESSAGES");
  });
});

describe("sandbox channel", () => {
  it("takes the first sandbox id a thread gets", () => {
    expect(reduceSandbox(null, { sandbox_id: "sb1" })).toEqual({ sandbox_id: "sb1" });
  });

  it("keeps the stored sandbox on a null or undefined update", () => {
    const stored = { sandbox_id: "sb1" };
    expect(reduceSandbox(stored, null)).toBe(stored);
    expect(reduceSandbox(stored, undefined)).toBe(stored);
    expect(reduceSandbox(null, null)).toBeNull();
  });

  it("treats the same id again as a no-op that returns the stored object", () => {
    const stored = { sandbox_id: "sb1" };
    expect(reduceSandbox(stored, { sandbox_id: "sb1" })).toBe(stored);
  });

  it("raises StateConflictError naming both ids when a different sandbox id arrives", () => {
    const error = thrown(() => reduceSandbox({ sandbox_id: "sb1" }, { sandbox_id: "sb2" }));
    expect(error).toBeInstanceOf(StateConflictError);
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe("sandbox_conflict");
    expect(error.message).toContain('"sb1"');
    expect(error.message).toContain('"sb2"');
    expect(error).toMatchObject({ existingId: "sb1", incomingId: "sb2" });
  });

  it("rejects an update without a usable sandbox_id", () => {
    const error = thrown(() => reduceSandbox(null, { sandbox_id: "" }));
    expect(error).toBeInstanceOf(StateUpdateError);
    expect(error.code).toBe("invalid_update");
    expect(thrown(() => reduceSandbox(null, { id: "sb1" } as never)).code).toBe("invalid_update");
  });
});

describe("last-write-wins channels (thread_data, title, uploaded_files, summary_text, background_tasks)", () => {
  it("replaces the stored value with any defined update", () => {
    expect(lastValue<string | null>("old title", "new title")).toBe("new title");
  });

  it("replaces an object wholesale instead of merging it", () => {
    const stored = { workspace_path: "/w1", uploads_path: "/u1", outputs_path: "/o1" };
    const next = { workspace_path: "/w2", uploads_path: "/u2", outputs_path: "/o2" };
    expect(lastValue<typeof stored | null>(stored, next)).toBe(next);
  });

  it("writes an explicit null, so a writer can clear the value", () => {
    expect(lastValue<string | null>("summary", null)).toBeNull();
  });

  it("keeps the stored value when the update is undefined", () => {
    const stored = [{ filename: "a.txt", size: 1, path: "/mnt/user-data/uploads/a.txt" }];
    expect(lastValue(stored, undefined)).toBe(stored);
  });
});

describe("artifacts channel", () => {
  it("keeps the stored order and appends each new path once", () => {
    expect(reduceArtifacts(["a", "b"], ["c", "a", "d"])).toEqual(["a", "b", "c", "d"]);
  });

  it("collapses duplicates inside one update", () => {
    expect(reduceArtifacts([], ["x", "x", "y", "x"])).toEqual(["x", "y"]);
  });

  it("returns the stored list itself when nothing is new, or the update is null or undefined", () => {
    const stored = ["a", "b"];
    expect(reduceArtifacts(stored, ["b", "a"])).toBe(stored);
    expect(reduceArtifacts(stored, null)).toBe(stored);
    expect(reduceArtifacts(stored, undefined)).toBe(stored);
  });

  it("rejects entries that are not strings", () => {
    expect(thrown(() => reduceArtifacts([], ["ok", 3] as never)).code).toBe("invalid_update");
  });
});

describe("todos channel", () => {
  const todos: Todo[] = [
    { content: "plan", status: "completed" },
    { content: "build", status: "in_progress" },
  ];

  it("keeps the stored list on a null or undefined update", () => {
    expect(reduceTodos(todos, null)).toBe(todos);
    expect(reduceTodos(todos, undefined)).toBe(todos);
  });

  it("replaces the whole list with a new one, without merging items", () => {
    const next: Todo[] = [{ content: "ship", status: "pending" }];
    expect(reduceTodos(todos, next)).toEqual(next);
  });

  it("treats an empty list as an explicit write that clears the todos", () => {
    expect(reduceTodos(todos, [])).toEqual([]);
  });

  it("rejects an update that is not a list", () => {
    expect(thrown(() => reduceTodos(todos, { content: "x" } as never)).code).toBe("invalid_update");
  });
});

describe("goal channel", () => {
  it("keeps the stored goal on a null or undefined update and replaces it otherwise", () => {
    const goal = { objective: "ship v1" };
    expect(reduceGoal(goal, null)).toBe(goal);
    expect(reduceGoal(goal, undefined)).toBe(goal);
    // Clearing takes the sentinel: null stays "not touched".
    expect(reduceGoal(goal, { ...CLEAR_GOAL })).toBeNull();
    const next = { objective: "ship v2" };
    expect(reduceGoal(goal, next)).toBe(next);
    expect(reduceGoal(null, next)).toBe(next);
  });
});

describe("viewed_images channel", () => {
  const png = (path: string, size = 10): ViewedImage => ({ mime_type: "image/png", size, actual_path: path });

  it("merges by image path, the update winning for a path it repeats", () => {
    const result = reduceViewedImages({ "/a.png": png("/a", 1), "/b.png": png("/b", 2) }, { "/b.png": png("/b", 99), "/c.png": png("/c") });
    expect(result).toEqual({ "/a.png": png("/a", 1), "/b.png": png("/b", 99), "/c.png": png("/c") });
  });

  it("clears every entry when the update is an empty object", () => {
    expect(reduceViewedImages({ "/a.png": png("/a") }, {})).toEqual({});
  });

  it("keeps the stored map on a null or undefined update", () => {
    const stored = { "/a.png": png("/a") };
    expect(reduceViewedImages(stored, null)).toBe(stored);
    expect(reduceViewedImages(stored, undefined)).toBe(stored);
  });
});

describe("promoted channel", () => {
  it("stores the first promotion with its names deduplicated", () => {
    expect(reducePromoted(null, { catalog_hash: "h1", names: ["a", "b", "a"] })).toEqual({ catalog_hash: "h1", names: ["a", "b"] });
  });

  it("keeps the stored promotion on a null, undefined or empty update", () => {
    const stored = { catalog_hash: "h1", names: ["a"] };
    expect(reducePromoted(stored, null)).toBe(stored);
    expect(reducePromoted(stored, undefined)).toBe(stored);
    expect(reducePromoted(stored, {} as never)).toBe(stored);
  });

  it("takes the ordered union of names under the same catalog hash", () => {
    expect(reducePromoted({ catalog_hash: "h1", names: ["a", "b"] }, { catalog_hash: "h1", names: ["c", "a", "c"] })).toEqual({
      catalog_hash: "h1",
      names: ["a", "b", "c"],
    });
  });

  it("returns the stored object when the same hash promotes nothing new", () => {
    const stored = { catalog_hash: "h1", names: ["a", "b"] };
    expect(reducePromoted(stored, { catalog_hash: "h1", names: ["b"] })).toBe(stored);
  });

  it("replaces everything when the catalog hash changes, dropping the old names", () => {
    expect(reducePromoted({ catalog_hash: "h1", names: ["a", "b"] }, { catalog_hash: "h2", names: ["c"] })).toEqual({
      catalog_hash: "h2",
      names: ["c"],
    });
  });

  it("rejects a promotion without a catalog hash or a names list", () => {
    expect(thrown(() => reducePromoted(null, { names: ["a"] } as never)).code).toBe("invalid_update");
    expect(thrown(() => reducePromoted(null, { catalog_hash: "h1" } as never)).code).toBe("invalid_update");
  });
});

describe("delegations channel", () => {
  const dispatch = (id: string, extra: Partial<Delegation> = {}): Delegation => ({
    id,
    description: `task ${id}`,
    subagent_type: "general-purpose",
    status: "in_progress",
    ...extra,
  });

  it("keeps the stored ledger on a null, undefined or empty update", () => {
    const stored = [dispatch("t1")];
    expect(reduceDelegations(stored, null)).toBe(stored);
    expect(reduceDelegations(stored, undefined)).toBe(stored);
    expect(reduceDelegations(stored, [])).toBe(stored);
  });

  it("upserts by id and keeps first-seen order", () => {
    const result = reduceDelegations([dispatch("t1"), dispatch("t2")], [dispatch("t3"), { id: "t1", status: "completed" }]);
    expect(ids(result)).toEqual(["t1", "t2", "t3"]);
    expect(result[0]?.status).toBe("completed");
  });

  it("merges the fields of an update over the stored entry", () => {
    const [entry] = reduceDelegations([dispatch("t1", { updated_at: "t0" })], [
      { id: "t1", status: "completed", result_brief: "done", result_sha256: "abc", updated_at: "t9" },
    ]);
    expect(entry).toEqual({
      id: "t1",
      description: "task t1",
      subagent_type: "general-purpose",
      status: "completed",
      result_brief: "done",
      result_sha256: "abc",
      updated_at: "t9",
    });
  });

  it("never downgrades a terminal status to in_progress, but still merges the other fields", () => {
    const [entry] = reduceDelegations([dispatch("t1", { status: "timed_out" })], [
      { id: "t1", status: "in_progress", result_brief: "late echo", updated_at: "t5" },
    ]);
    expect(entry?.status).toBe("timed_out");
    expect(entry?.result_brief).toBe("late echo");
    expect(entry?.updated_at).toBe("t5");
  });

  it("lets one terminal status replace another", () => {
    const [entry] = reduceDelegations([dispatch("t1", { status: "polling_timed_out" })], [{ id: "t1", status: "completed" }]);
    expect(entry?.status).toBe("completed");
  });

  it("keeps created_at and run_id of the stored entry, and takes them when it had none", () => {
    const [kept] = reduceDelegations([dispatch("t1", { created_at: "c1", run_id: "r1" })], [
      { id: "t1", status: "completed", created_at: "c2", run_id: "r2" },
    ]);
    expect(kept).toMatchObject({ created_at: "c1", run_id: "r1", status: "completed" });
    const [filled] = reduceDelegations([dispatch("t1")], [{ id: "t1", created_at: "c2", run_id: "r2" }]);
    expect(filled).toMatchObject({ created_at: "c2", run_id: "r2" });
  });

  it("does not erase a stored field when the update sends it as undefined", () => {
    const [entry] = reduceDelegations([dispatch("t1", { error: "boom" })], [{ id: "t1", status: "failed", error: undefined }]);
    expect(entry?.error).toBe("boom");
  });

  it("folds repeated ids inside one update in order", () => {
    const result = reduceDelegations([], [dispatch("t1"), { id: "t1", status: "failed", error: "x" }, { id: "t1", status: "in_progress" }]);
    expect(result).toHaveLength(1);
    expect(result[0]).toMatchObject({ status: "failed", error: "x" });
  });

  it("keeps only the newest 50 entries, in order", () => {
    const stored = Array.from({ length: MAX_DELEGATIONS }, (_, i) => dispatch(`t${i}`));
    const result = reduceDelegations(stored, [dispatch("new1"), dispatch("new2")]);
    expect(MAX_DELEGATIONS).toBe(50);
    expect(result).toHaveLength(50);
    expect(result[0]?.id).toBe("t2");
    expect(result.slice(-2).map((d) => d.id)).toEqual(["new1", "new2"]);
  });

  it("an update to an old entry does not move it toward the newest end", () => {
    const stored = Array.from({ length: MAX_DELEGATIONS }, (_, i) => dispatch(`t${i}`));
    const result = reduceDelegations(stored, [{ id: "t0", status: "completed" }, dispatch("new")]);
    expect(result.map((d) => d.id)).not.toContain("t0");
    expect(result.at(-1)?.id).toBe("new");
  });

  it("rejects an entry without an id, an unknown status, or a new entry without a status", () => {
    const missingId = thrown(() => reduceDelegations([], [{ status: "completed" } as never]));
    expect(missingId).toMatchObject({ code: "invalid_update", channel: "delegations" });
    const badStatus = thrown(() => reduceDelegations([dispatch("t1")], [{ id: "t1", status: "done" } as never]));
    expect(badStatus.code).toBe("invalid_update");
    expect(badStatus.message).toContain('"done"');
    const noStatus = thrown(() => reduceDelegations([], [{ id: "t9", description: "x" }]));
    expect(noStatus.code).toBe("invalid_update");
    expect(noStatus.message).toContain("t9");
  });

  it("fills description and subagent_type with empty strings when a new entry omits them", () => {
    const [entry] = reduceDelegations([], [{ id: "t1", status: "completed" } satisfies DelegationUpdate]);
    expect(entry).toEqual({ id: "t1", description: "", subagent_type: "", status: "completed" });
  });
});

describe("skill_context channel", () => {
  const read = (path: string, extra: Partial<SkillContextInput> = {}): SkillContextInput => ({
    name: path.split("/").at(-2) ?? "",
    path,
    description: `about ${path}`,
    loaded_at: 1,
    ...extra,
  });

  it("keeps the stored list on a null, undefined or empty update", () => {
    const stored: SkillContextEntry[] = [{ name: "a", path: "/a/SKILL.md", description: "", loaded_at: 0 }];
    expect(reduceSkillContext(stored, null)).toBe(stored);
    expect(reduceSkillContext(stored, undefined)).toBe(stored);
    expect(reduceSkillContext(stored, [])).toBe(stored);
  });

  it("stores only name, path, description and loaded_at, dropping body and content", () => {
    const [entry] = reduceSkillContext([], [read("/mnt/skills/pdf/SKILL.md", { body: "# full body", content: "also body", extra: 1 })]);
    expect(entry).toEqual({ name: "pdf", path: "/mnt/skills/pdf/SKILL.md", description: "about /mnt/skills/pdf/SKILL.md", loaded_at: 1 });
  });

  it("normalises legacy stored entries that still carry a body when the channel is next written", () => {
    const legacy = [{ ...read("/old/SKILL.md"), body: "verbatim" }] as unknown as SkillContextEntry[];
    const result = reduceSkillContext(legacy, [read("/new/SKILL.md")]);
    expect(result[0]).not.toHaveProperty("body");
    expect(result.map((e) => e.path)).toEqual(["/old/SKILL.md", "/new/SKILL.md"]);
  });

  it("truncates the description to 500 characters and flattens its whitespace", () => {
    const [long] = reduceSkillContext([], [read("/a/SKILL.md", { description: "x".repeat(900) })]);
    expect(MAX_SKILL_DESCRIPTION_CHARS).toBe(500);
    expect(long?.description).toBe("x".repeat(500));
    const [flat] = reduceSkillContext([], [read("/a/SKILL.md", { description: "  two\n\nlines\tand  gaps " })]);
    expect(flat?.description).toBe("two lines and gaps");
  });

  it("counts the cap in characters, never splitting an emoji", () => {
    const [entry] = reduceSkillContext([], [read("/a/SKILL.md", { description: "😀".repeat(600) })]);
    expect(Array.from(entry?.description ?? "")).toHaveLength(500);
    expect(entry?.description).toBe("😀".repeat(500));
  });

  it("moves a re-read skill to the newest position with its new values", () => {
    const stored = reduceSkillContext([], [read("/a/SKILL.md"), read("/b/SKILL.md"), read("/c/SKILL.md")]);
    const result = reduceSkillContext(stored, [read("/a/SKILL.md", { description: "fresh", loaded_at: 7 })]);
    expect(result.map((e) => e.path)).toEqual(["/b/SKILL.md", "/c/SKILL.md", "/a/SKILL.md"]);
    expect(result[2]).toMatchObject({ description: "fresh", loaded_at: 7 });
  });

  it("keeps only the newest 8 entries", () => {
    const reads = Array.from({ length: 11 }, (_, i) => read(`/s${i}/SKILL.md`));
    const result = reduceSkillContext([], reads);
    expect(MAX_SKILL_CONTEXT_ENTRIES).toBe(8);
    expect(result.map((e) => e.path)).toEqual(reads.slice(3).map((r) => r.path));
  });

  it("rejects an entry without a path", () => {
    const error = thrown(() => reduceSkillContext([], [{ name: "x", description: "y" } as never]));
    expect(error).toMatchObject({ code: "invalid_update", channel: "skill_context" });
  });
});

describe("reducers never mutate their inputs", () => {
  type Case = [name: string, reducer: (left: never, right: never) => unknown, left: unknown, right: unknown];
  const cases: Case[] = [
    ["sandbox", reduceSandbox, { sandbox_id: "sb1" }, { sandbox_id: "sb1" }],
    ["artifacts", reduceArtifacts, ["a", "b"], ["b", "c", "c"]],
    ["todos", reduceTodos, [{ content: "a", status: "pending" }], [{ content: "b", status: "completed" }]],
    ["goal", reduceGoal, { objective: "a" }, { objective: "b" }],
    [
      "viewed_images",
      reduceViewedImages,
      { "/a": { mime_type: "image/png", size: 1, actual_path: "/a" } },
      { "/b": { mime_type: "image/png", size: 2, actual_path: "/b" } },
    ],
    ["promoted", reducePromoted, { catalog_hash: "h", names: ["a"] }, { catalog_hash: "h", names: ["b", "a"] }],
    [
      "delegations",
      reduceDelegations,
      [{ id: "t1", description: "d", subagent_type: "s", status: "completed", created_at: "c", run_id: "r" }],
      [
        { id: "t1", status: "in_progress", result_brief: "b", created_at: "c2" },
        { id: "t2", description: "d", subagent_type: "s", status: "in_progress" },
      ],
    ],
    [
      "skill_context",
      reduceSkillContext,
      [
        { name: "a", path: "/a", description: "d", loaded_at: 1 },
        { name: "b", path: "/b", description: "d", loaded_at: 2 },
      ],
      [{ name: "a", path: "/a", description: "new", loaded_at: 3, body: "x" }],
    ],
  ];

  it.each(cases)("%s leaves deep-frozen inputs intact", (_name, reducer, left, right) => {
    const snapshot = structuredClone({ left, right });
    deepFreeze(left);
    deepFreeze(right);
    expect(() => reducer(left as never, right as never)).not.toThrow();
    expect({ left, right }).toEqual(snapshot);
  });

  it("leaves frozen message lists and messages that already have ids intact", () => {
    const left = deepFreeze([human("m1"), human("m2")]);
    const right = deepFreeze([human("m2", "edited"), new RemoveMessage({ id: "m1" }), new ToolMessage({ id: "t1", content: "ok", tool_call_id: "c1" })]);
    const result = reduceMessages(left, right);
    expect(ids(result)).toEqual(["m2", "t1"]);
    expect(ids(left)).toEqual(["m1", "m2"]);
    expect(left[1]?.content).toBe("m2");
  });
});

import { describe, expect, it } from "vitest";
import { DEFAULT_USER_ID, runThreadId, runUserId } from "../../src/engine/run-identity.ts";
import { resolveThreadId, resolveUserId } from "../../src/middlewares/thread-data.ts";
import { makeRuntime } from "../middlewares/runtime.ts";

describe("run identity", () => {
  it("takes the run's own thread before the caller context's thread_id", () => {
    expect(runThreadId(makeRuntime({ threadId: "t-run", context: { thread_id: "t-ctx" } }))).toBe("t-run");
  });

  it("falls back to context.thread_id only when the run has no thread (an embedded caller)", () => {
    expect(runThreadId(makeRuntime({ context: { thread_id: "t-ctx" } }))).toBe("t-ctx");
    expect(runThreadId(makeRuntime({ threadId: "", context: { thread_id: "t-ctx" } }))).toBe("t-ctx");
  });

  it("answers undefined when neither names a usable thread", () => {
    expect(runThreadId(makeRuntime())).toBeUndefined();
    expect(runThreadId(makeRuntime({ context: { thread_id: "" } }))).toBeUndefined();
    expect(runThreadId(makeRuntime({ context: { thread_id: 42 } }))).toBeUndefined();
  });

  it("takes the user from context.user_id, else the shared default scope", () => {
    expect(runUserId(makeRuntime({ context: { user_id: "u1" } }))).toBe("u1");
    expect(DEFAULT_USER_ID).toBe("default");
    expect(runUserId(makeRuntime())).toBe(DEFAULT_USER_ID);
    expect(runUserId(makeRuntime({ context: { user_id: "" } }))).toBe(DEFAULT_USER_ID);
  });

  it("ThreadData resolves in the same order and still validates what it is given", () => {
    expect(resolveThreadId(makeRuntime({ threadId: "t-run", context: { thread_id: "t-ctx" } }))).toBe("t-run");
    expect(resolveThreadId(makeRuntime({ context: { thread_id: "t-ctx" } }))).toBe("t-ctx");
    expect(() => resolveThreadId(makeRuntime({ context: { thread_id: 42 } }))).toThrow(expect.objectContaining({ code: "invalid_thread_id" }));
    expect(resolveUserId(makeRuntime())).toBe(DEFAULT_USER_ID);
    expect(resolveUserId(makeRuntime({ context: { user_id: "u1" } }))).toBe("u1");
    expect(() => resolveUserId(makeRuntime({ context: { user_id: "" } }))).toThrow(expect.objectContaining({ code: "invalid_user_id" }));
  });
});

import { describe, expect, it } from "vitest";
import { PROVENANCE_CONTENT_KIND_KEY } from "../../../src/extension-api/provenance.ts";
import { clampRecursionLimit, parseRunBody } from "../../../src/gateway/run-request.ts";
import { statusOfRunOperation } from "../../../src/gateway/errors.ts";
import { RunOperationError } from "../../../src/runtime/runs/types.ts";

function refusal(body: unknown): RunOperationError {
  try {
    parseRunBody(body);
  } catch (error) {
    expect(error).toBeInstanceOf(RunOperationError);
    return error as RunOperationError;
  }
  throw new Error("parseRunBody accepted the body");
}

describe("parseRunBody", () => {
  it("applies the defaults: assistant lead_agent, stream mode values, on_disconnect cancel, multitask reject", () => {
    const { request, configurableThreadId } = parseRunBody({ input: { messages: [{ role: "user", content: "hi" }] } });
    expect(request).toMatchObject({
      assistantId: "lead_agent",
      streamMode: ["values"],
      onDisconnect: "cancel",
      multitaskStrategy: "reject",
      command: null,
      metadata: {},
    });
    expect(request.recursionLimit).toBeUndefined();
    expect(configurableThreadId).toBeUndefined();
  });

  it("strips server-owned keys from context, configurable and input messages, keeping the caller's own", () => {
    const { request, configurableThreadId } = parseRunBody({
      input: {
        messages: [
          {
            type: "human",
            content: "hi",
            additional_kwargs: { [PROVENANCE_CONTENT_KIND_KEY]: "memory", mine: 1 },
          },
        ],
      },
      context: { user_id: "mallory", is_internal: true, authz_attributes: { admin: true }, __deerflow_extension_snapshot: {}, channel_user_id: "x", model_name: "demo" },
      config: { configurable: { thread_id: "t-1", user_role: "admin", original_user_content: "x", reasoning_effort: "high" } },
    });
    expect(request.context).toEqual({ model_name: "demo" });
    expect(request.configurable).toEqual({ reasoning_effort: "high" });
    expect(configurableThreadId).toBe("t-1");
    const [message] = request.input!.messages as Array<{ additional_kwargs: Record<string, unknown> }>;
    expect(message!.additional_kwargs).toEqual({ mine: 1 });
  });

  // Spec, middleware-chain.md (authorization identity plumbing): "accepts channel_user_id only from
  // an internally authenticated IM caller's top-level body.context; free-form body.config can never
  // supply it". Item 1 (InputSanitizationMiddleware): "Gateway strips caller-supplied values for
  // non-internal run requests, trusted IM calls may carry the string they captured".
  it("an internal caller keeps channel_user_id from the top-level context and original_user_content in a message's kwargs; config supplies neither", () => {
    const body = {
      input: {
        messages: [
          {
            type: "human",
            content: "[telegram] hi\n<uploaded_files>...</uploaded_files>",
            additional_kwargs: { original_user_content: "hi", subagent_status: "completed", mine: 1 },
            response_metadata: { original_user_content: "planted" },
            original_user_content: "top-level",
          },
        ],
      },
      command: { update: { messages: [{ type: "human", content: "more", additional_kwargs: { original_user_content: "more" } }] } },
      context: { channel_user_id: "tg-42", is_internal: true, user_id: "mallory", model_name: "demo" },
      config: { configurable: { channel_user_id: "from-config", original_user_content: "from-config" } },
    };
    const internal = parseRunBody(body, { caller: "internal" }).request;
    expect(internal.context).toEqual({ channel_user_id: "tg-42", model_name: "demo" });
    expect(internal.configurable).toEqual({});
    const [message] = internal.input!.messages as Array<Record<string, unknown>>;
    expect(message).toEqual({
      type: "human",
      content: "[telegram] hi\n<uploaded_files>...</uploaded_files>",
      additional_kwargs: { original_user_content: "hi", mine: 1 },
      response_metadata: {},
    });
    expect((internal.command!.update as { messages: Array<{ additional_kwargs: unknown }> }).messages[0]!.additional_kwargs).toEqual({ original_user_content: "more" });

    // The same body from anyone else (the default): both stripped.
    const external = parseRunBody(body).request;
    expect(external.context).toEqual({ model_name: "demo" });
    expect((external.input!.messages as Array<{ additional_kwargs: unknown }>)[0]!.additional_kwargs).toEqual({ mine: 1 });
    expect(parseRunBody(body, { caller: "external" }).request.context).toEqual({ model_name: "demo" });
  });

  it("an internal caller's channel_user_id or original_user_content that is not a string is a 422 naming the key; null leaves it out", () => {
    const internalRefusal = (body: unknown) => {
      try {
        parseRunBody(body, { caller: "internal" });
      } catch (error) {
        expect(error).toBeInstanceOf(RunOperationError);
        return error as RunOperationError;
      }
      throw new Error("parseRunBody accepted the body");
    };
    const badChannel = internalRefusal({ context: { channel_user_id: 42 } });
    expect(statusOfRunOperation(badChannel)).toBe(422);
    expect(badChannel.message).toMatch(/^context\.channel_user_id: expected a string, got number/);
    const badOriginal = internalRefusal({ input: { messages: [{ type: "human", content: "hi" }, { type: "human", content: "x", additional_kwargs: { original_user_content: ["x"] } }] } });
    expect(badOriginal.message).toMatch(/^input\.messages\[1\]\.additional_kwargs\.original_user_content: expected a string, got a list/);
    expect(parseRunBody({ context: { channel_user_id: null, mode: "pro" } }, { caller: "internal" }).request.context).toEqual({ mode: "pro" });
    // From an external caller a wrong type is stripped like any server-owned value, never echoed.
    expect(parseRunBody({ context: { channel_user_id: 42 } }).request.context).toEqual({});
  });

  it("clamps recursion_limit to the maximum and refuses zero, negative, fractional, boolean and string limits with a 422", () => {
    expect(clampRecursionLimit(undefined, 1000)).toBeUndefined();
    expect(clampRecursionLimit(50, 1000)).toBe(50);
    expect(clampRecursionLimit(5000, 1000)).toBe(1000);
    expect(parseRunBody({ config: { recursion_limit: 99_999 } }, { maxRecursionLimit: 250 }).request.recursionLimit).toBe(250);
    expect(parseRunBody({ config: { recursion_limit: 7 } }).request.recursionLimit).toBe(7);
    for (const bad of [0, -1, -3, 2.5, true, "20"]) {
      const error = refusal({ config: { recursion_limit: bad } });
      expect(statusOfRunOperation(error)).toBe(422);
      expect(error.message).toContain("config.recursion_limit: expected a whole number >= 1");
    }
  });

  it("refuses a body that is not a JSON object, and arrays where an object belongs", () => {
    for (const body of [[], null, "x", 3, true]) {
      const error = refusal(body);
      expect(statusOfRunOperation(error)).toBe(422);
      expect(error.message).toMatch(/^body: expected a JSON object, got /);
    }
    for (const [body, field] of [
      [{ metadata: [] }, "metadata"],
      [{ input: [] }, "input"],
      [{ context: [] }, "context"],
      [{ config: [] }, "config"],
      [{ config: { configurable: [] } }, "config.configurable"],
      [{ command: [] }, "command"],
    ] as const) {
      const error = refusal(body);
      expect(statusOfRunOperation(error)).toBe(422);
      expect(error.message).toContain(`${field}: expected a JSON object, got an array`);
    }
    // An empty body is still the empty run body.
    expect(parseRunBody(undefined).request.metadata).toEqual({});
  });

  it("takes the checkpoint to run from out of checkpoint_id or checkpoint", () => {
    expect(parseRunBody({ checkpoint_id: "c1" }).request.configurable).toEqual({ checkpoint_id: "c1" });
    expect(parseRunBody({ checkpoint: { checkpoint_id: "c2", checkpoint_ns: "" } }).request.configurable).toEqual({ checkpoint_id: "c2" });
  });

  it("names every refused field in one 422", () => {
    const error = refusal({ stream_mode: ["values", "events"], after_seconds: 5, command: { goto: "x" }, interrupt_before: "*" });
    expect(statusOfRunOperation(error)).toBe(422);
    expect(error.message).toContain('stream_mode: unsupported stream mode "events"');
    expect(error.message).toContain("after_seconds is not supported");
    expect(error.message).toContain("command.goto: unknown field");
    expect(error.message).toContain("interrupt_before is not supported");
  });

  it("accepts stream modes as a string or a list, without duplicates, and enqueue", () => {
    expect(parseRunBody({ stream_mode: "messages-tuple" }).request.streamMode).toEqual(["messages-tuple"]);
    expect(parseRunBody({ stream_mode: ["values", "custom", "values"], multitask_strategy: "enqueue" }).request).toMatchObject({
      streamMode: ["values", "custom"],
      multitaskStrategy: "enqueue",
    });
  });
});

import { describe, expect, it } from "vitest";
import { NAMED_ID_MAX, SCOPE_ID_MAX, idFormatHint, isNamedId, isScopeId, toIdAlphabet } from "../../src/core/ids.ts";
import { assertThreadId, isValidThreadId } from "../../src/runtime/thread-store.ts";
import { assertBatchId } from "../../src/tools/batch-store.ts";
import { assertValidScope } from "../../src/sandbox/scope.ts";
import { resolveThreadId, resolveUserId } from "../../src/middlewares/thread-data.ts";
import { parseGatewayConfig } from "../../src/config/gateway.ts";
import { makeRuntime } from "../middlewares/runtime.ts";

describe("id format", () => {
  it("limits named ids to 64 and scope ids to 128 (1, limit and limit + 1)", () => {
    expect(NAMED_ID_MAX).toBe(64);
    expect(SCOPE_ID_MAX).toBe(128);
    for (const [check, max] of [[isNamedId, NAMED_ID_MAX], [isScopeId, SCOPE_ID_MAX]] as const) {
      expect(check("")).toBe(false);
      expect(check("a")).toBe(true);
      expect(check("a".repeat(max))).toBe(true);
      expect(check("a".repeat(max + 1))).toBe(false);
    }
  });

  it("accepts only letters, digits, '_' and '-'", () => {
    expect(isScopeId("Ab9_-")).toBe(true);
    for (const bad of ["..", "a/b", "a:b", "a b", "é", "a\n", 42, null, undefined]) expect(isScopeId(bad)).toBe(false);
    expect(isNamedId("550e8400-e29b-41d4-a716-446655440000")).toBe(true);
    expect(toIdAlphabet("a/b:c d", "_")).toBe("a_b_c_d");
    expect(idFormatHint(64)).toBe('1-64 letters, digits, "_" or "-"');
  });

  it("every site that checks a named id uses the 64 limit", () => {
    expect(isValidThreadId("t".repeat(64))).toBe(true);
    expect(isValidThreadId("t".repeat(65))).toBe(false);
    expect(() => assertThreadId("t".repeat(65))).toThrow(expect.objectContaining({ code: "invalid_thread_id", message: expect.stringContaining("Thread id") }));
    expect(() => assertBatchId("b".repeat(64))).not.toThrow();
    expect(() => assertBatchId("b".repeat(65))).toThrow(expect.objectContaining({ code: "invalid_batch_id", message: expect.stringContaining("batch_id") }));
  });

  it("every site that checks a scope id uses the 128 limit, and names the field it rejects", () => {
    expect(() => assertValidScope({ userId: "u".repeat(128), threadId: "t" })).not.toThrow();
    expect(() => assertValidScope({ userId: "u".repeat(129), threadId: "t" })).toThrow(/sandbox userId/);
    expect(() => assertValidScope({ userId: "u", threadId: "t".repeat(129) })).toThrow(/sandbox threadId/);
    expect(resolveThreadId(makeRuntime({ threadId: "t".repeat(128) }))).toHaveLength(128);
    expect(() => resolveThreadId(makeRuntime({ threadId: "t".repeat(129) }))).toThrow(/Invalid thread_id/);
    expect(resolveUserId(makeRuntime({ context: { user_id: "u".repeat(128) } }))).toHaveLength(128);
    expect(() => resolveUserId(makeRuntime({ context: { user_id: "u".repeat(129) } }))).toThrow(/Invalid user_id/);
    const withUser = (userId: string) => () => parseGatewayConfig({ auth: { mode: "api_key", api_keys: [{ key_env: "KEY", user_id: userId }] } });
    expect(withUser("u".repeat(128))).not.toThrow();
    expect(withUser("u".repeat(129))).toThrow(/expected a user id of 1-128 letters/);
  });
});

import { describe, expect, it } from "vitest";
import { HOST_ORDERING_CONSTRAINTS, orderingViolations } from "../../src/extensions/ordering.ts";

describe("host ordering invariants", () => {
  it("finds a tool wrapper placed outside ToolReceipt", () => {
    const violations = orderingViolations(["SandboxAudit", "ToolReceipt", "ToolErrorHandling"]);
    expect(violations.map((v) => [v.constraint.outer, v.constraint.inner])).toEqual([["ToolReceipt", "SandboxAudit"]]);
  });

  it("finds ToolErrorHandling outside ToolProgress and McpRouting after DeferredToolFilter (scenario M59's shapes)", () => {
    const names = orderingViolations(["ToolErrorHandling", "ToolProgress", "DeferredToolFilter", "McpRouting"]).map((v) => `${v.constraint.outer}>${v.constraint.inner}`);
    expect(names).toContain("ToolProgress>ToolErrorHandling");
    expect(names).toContain("McpRouting>DeferredToolFilter");
  });

  it("ignores constraints whose members are absent, and requires Clarification last", () => {
    expect(orderingViolations(["ToolErrorHandling"])).toEqual([]);
    expect(orderingViolations(["Clarification", "Extra"]).map((v) => v.constraint.inner)).toEqual(["(end of stack)"]);
  });

  it("is data: every constraint names two members and a reason", () => {
    for (const c of HOST_ORDERING_CONSTRAINTS) {
      expect(c.outer).toMatch(/^[A-Za-z]+$/);
      expect(c.inner).toMatch(/^[A-Za-z]+$/);
      expect(c.reason.length).toBeGreaterThan(10);
    }
  });
});

import { describe, expect, it } from "vitest";
import {
  AGENT_SCOPE_VALUES,
  AgentScope,
  PLACEMENT_VALUES,
  Placement,
  isAgentScope,
  isPlacement,
} from "../../src/extension-api/index.ts";

describe("Placement", () => {
  it("names the five semantic placements with their wire values", () => {
    expect(Placement).toEqual({
      MODEL_LOGICAL: "model_logical",
      MODEL_PHYSICAL: "model_physical",
      TOOL_VISIBLE: "tool_visible",
      TOOL_RAW: "tool_raw",
      STANDARD: "standard",
    });
    expect(PLACEMENT_VALUES).toEqual(Object.values(Placement));
  });

  it("recognises placements and nothing else", () => {
    for (const value of PLACEMENT_VALUES) expect(isPlacement(value)).toBe(true);
    for (const value of ["MODEL_LOGICAL", "model", "", "lead", null, 3, undefined, {}]) {
      expect(isPlacement(value)).toBe(false);
    }
  });

  it("cannot be changed at runtime", () => {
    expect(Object.isFrozen(Placement)).toBe(true);
    expect(() => {
      (Placement as { STANDARD: string }).STANDARD = "other";
    }).toThrow(TypeError);
  });
});

describe("AgentScope", () => {
  it("names lead, subagent and both", () => {
    expect(AgentScope).toEqual({ LEAD: "lead", SUBAGENT: "subagent", BOTH: "both" });
    expect(AGENT_SCOPE_VALUES).toEqual(["lead", "subagent", "both"]);
  });

  it("recognises scopes and nothing else", () => {
    for (const value of AGENT_SCOPE_VALUES) expect(isAgentScope(value)).toBe(true);
    for (const value of ["LEAD", "all", "standard", "", null, 1]) expect(isAgentScope(value)).toBe(false);
    expect(Object.isFrozen(AgentScope)).toBe(true);
  });
});

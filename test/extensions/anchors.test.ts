import { describe, expect, it } from "vitest";
import { Placement } from "../../src/extension-api/index.ts";
import { END, LEAD_ANCHORS, SUBAGENT_ANCHORS, anchorsForScope, innerOfLastAfter, outerOf, resolveAnchor, resolveRule } from "../../src/extensions/anchors.ts";

const LEAD = ["InputSanitization", "LLMErrorHandling", "Summarization", "TerminalResponse", "SafetyFinishReason", "Clarification"];

describe("anchor rules", () => {
  it("resolve outer/inner of the first and last match, start and end, and miss with undefined", () => {
    const names = ["A", "B", "A", "C"];
    expect(resolveRule({ kind: "outer", names: ["A"] }, names)).toBe(0);
    expect(resolveRule({ kind: "inner", names: ["A"] }, names)).toBe(1);
    expect(resolveRule({ kind: "outer_last", names: ["A"] }, names)).toBe(2);
    expect(resolveRule({ kind: "inner_last", names: ["A"] }, names)).toBe(3);
    expect(resolveRule({ kind: "start" }, names)).toBe(0);
    expect(resolveRule(END, names)).toBe(4);
    expect(resolveRule({ kind: "outer", names: ["Z"] }, names)).toBeUndefined();
  });

  it("inner_last_after only counts a match that follows the last boundary member", () => {
    expect(resolveRule(innerOfLastAfter(["S"], ["T"]), ["T", "S", "X"])).toBe(2);
    expect(resolveRule(innerOfLastAfter(["S"], ["T"]), ["S", "T", "X"])).toBeUndefined();
    expect(resolveRule(innerOfLastAfter(["S"], ["T"]), ["S", "X"])).toBeUndefined();
  });

  it("a chain reports whether its primary rule decided, and falls to the end when all miss", () => {
    expect(resolveAnchor([outerOf("B"), END], ["A", "B"])).toMatchObject({ index: 1, primary: true });
    expect(resolveAnchor([outerOf("Z"), END], ["A", "B"])).toMatchObject({ index: 2, primary: false });
    expect(resolveAnchor([outerOf("Z")], ["A", "B"])).toMatchObject({ index: 2, primary: false, rule: END });
  });

  it("an end index never passes a trailing Clarification", () => {
    expect(resolveAnchor([END], ["A", "Clarification"])).toMatchObject({ index: 1, primary: true });
    expect(resolveAnchor([outerOf("Z")], ["A", "Clarification"])).toMatchObject({ index: 1, primary: false });
  });
});

describe("lead anchor table", () => {
  const at = (placement: Placement, names: readonly string[]) => resolveAnchor(LEAD_ANCHORS[placement], names);

  it("MODEL_LOGICAL is outer of the first LLMErrorHandling; without it, a fallback", () => {
    expect(at(Placement.MODEL_LOGICAL, LEAD)).toMatchObject({ index: 1, primary: true });
    expect(at(Placement.MODEL_LOGICAL, ["A", "Clarification"])).toMatchObject({ index: 1, primary: false });
  });

  it("MODEL_PHYSICAL: inner of Safety after Terminal, else inner of Terminal, else outer of Clarification, else end", () => {
    expect(at(Placement.MODEL_PHYSICAL, LEAD)).toMatchObject({ index: 5, primary: true });
    // Safety before Terminal does not count: it would not see the terminal tail's rewrite.
    expect(at(Placement.MODEL_PHYSICAL, ["SafetyFinishReason", "TerminalResponse", "X", "Clarification"])).toMatchObject({ index: 2, primary: false });
    expect(at(Placement.MODEL_PHYSICAL, ["A", "Clarification", "B"])).toMatchObject({ index: 1, primary: false });
    expect(at(Placement.MODEL_PHYSICAL, ["A", "B"])).toMatchObject({ index: 2, primary: false });
  });

  it("TOOL_VISIBLE is index 0; TOOL_RAW is outer of the last Clarification, else end", () => {
    expect(at(Placement.TOOL_VISIBLE, LEAD)).toMatchObject({ index: 0, primary: true });
    expect(at(Placement.TOOL_RAW, LEAD)).toMatchObject({ index: 5, primary: true });
    expect(at(Placement.TOOL_RAW, ["A", "B"])).toMatchObject({ index: 2, primary: false });
  });

  it("STANDARD is outer of the first LLMErrorHandling, else end", () => {
    expect(at(Placement.STANDARD, ["A", "LLMErrorHandling", "LLMErrorHandling2"])).toMatchObject({ index: 1, primary: true });
    expect(at(Placement.STANDARD, ["A", "B"])).toMatchObject({ index: 2, primary: false });
  });
});

describe("subagent anchor table", () => {
  it("MODEL_PHYSICAL first tries inner of the last SystemMessageCoalescing, then the lead chain as fallbacks", () => {
    const sub = (names: readonly string[]) => resolveAnchor(SUBAGENT_ANCHORS[Placement.MODEL_PHYSICAL], names);
    expect(sub(["LLMErrorHandling", "SystemMessageCoalescing", "X", "SystemMessageCoalescing", "Y"])).toMatchObject({ index: 4, primary: true });
    expect(sub(["LLMErrorHandling", "TerminalResponse", "Y"])).toMatchObject({ index: 2, primary: false });
    // Clarification stays last even when SystemMessageCoalescing is the member just before it.
    expect(sub(["SystemMessageCoalescing", "Clarification"])).toMatchObject({ index: 1, primary: true });
  });

  it("shares every other placement with the lead table", () => {
    expect(anchorsForScope("lead")).toBe(LEAD_ANCHORS);
    expect(anchorsForScope("subagent")).toBe(SUBAGENT_ANCHORS);
    for (const placement of [Placement.MODEL_LOGICAL, Placement.TOOL_VISIBLE, Placement.TOOL_RAW, Placement.STANDARD]) {
      expect(SUBAGENT_ANCHORS[placement]).toBe(LEAD_ANCHORS[placement]);
    }
  });
});

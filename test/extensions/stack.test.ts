import { describe, expect, it } from "vitest";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { createAgent, type AgentMiddleware } from "../../src/engine/index.ts";
import { systemClock } from "../../src/core/clock.ts";
import { unwrapMiddleware, middlewareName } from "../../src/extension-api/index.ts";
import type { ExtensionDiagnostic } from "../../src/extensions/isolation.ts";
import { composeWithExtensions, CORE_ORDER_BLAME, ExtensionOrderingError, type ExtensionMiddlewareContribution } from "../../src/extensions/stack.ts";

const mw = (name: string): AgentMiddleware => ({ name });
const host = (...names: string[]) => names.map(mw);
const LEAD = host("InputSanitization", "LLMErrorHandling", "ToolProgress", "ToolErrorHandling", "TerminalResponse", "SafetyFinishReason", "Clarification");

function compose(stack: AgentMiddleware[], contributions: ExtensionMiddlewareContribution[], scope: "lead" | "subagent" = "lead") {
  const runtime: ExtensionDiagnostic[] = [];
  const result = composeWithExtensions(stack, contributions, { scope, onDiagnostic: (d) => void runtime.push(d) });
  return { ...result, runtime, names: result.stack.map((m) => m.name), inner: result.stack.map((m) => middlewareName(unwrapMiddleware(m))) };
}

describe("composeWithExtensions: placement", () => {
  it("scenario G11: TOOL_VISIBLE lands at index 0 and MODEL_LOGICAL immediately outside LLMErrorHandling", () => {
    const { inner, provenance, diagnostics } = compose(LEAD, [
      { source: "logic", middleware: mw("Logical"), placement: "model_logical" },
      { source: "vis", middleware: mw("Visible"), placement: "tool_visible" },
    ]);
    expect(inner[0]).toBe("Visible");
    expect(inner.indexOf("Logical")).toBe(inner.indexOf("LLMErrorHandling") - 1);
    expect(provenance).toEqual(new Map([[0, "vis"], [inner.indexOf("Logical"), "logic"]]));
    expect(diagnostics).toEqual([]);
  });

  it("places MODEL_PHYSICAL inside SafetyFinishReason and TOOL_RAW just outside Clarification, which stays last", () => {
    const { inner } = compose(LEAD, [
      { source: "phys", middleware: mw("Physical"), placement: "model_physical" },
      { source: "raw", middleware: mw("Raw"), placement: "tool_raw" },
    ]);
    expect(inner.slice(-4)).toEqual(["SafetyFinishReason", "Physical", "Raw", "Clarification"]);
  });

  it("scenario G12: a missing primary anchor lands at the fallback with one warning naming the extension", () => {
    const { inner, diagnostics } = compose(host("A", "B", "Clarification"), [{ source: "std-ext", middleware: mw("Std"), placement: "standard" }]);
    expect(inner).toEqual(["A", "B", "Std", "Clarification"]);
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]).toMatchObject({ level: "warning", source: "std-ext" });
    expect(diagnostics[0]!.message).toContain("standard");
  });

  it("subagent MODEL_PHYSICAL goes inside the last SystemMessageCoalescing without a warning", () => {
    const { inner, diagnostics } = compose(host("LLMErrorHandling", "SystemMessageCoalescing", "Tail"), [
      { source: "phys", middleware: mw("Physical"), placement: "model_physical" },
    ], "subagent");
    expect(inner).toEqual(["LLMErrorHandling", "SystemMessageCoalescing", "Physical", "Tail"]);
    expect(diagnostics).toEqual([]);
  });
});

describe("composeWithExtensions: order, ties, scope", () => {
  it("scenario G9: two STANDARD contributions at one anchor, order -1 and 0: the -1 one is outer", () => {
    const { inner } = compose(LEAD, [
      { source: "zero", middleware: mw("Zero"), placement: "standard", order: 0 },
      { source: "minus", middleware: mw("Minus"), placement: "standard", order: -1 },
    ]);
    expect(inner.slice(0, 4)).toEqual(["InputSanitization", "Minus", "Zero", "LLMErrorHandling"]);
  });

  it("at equal order, registration decides; the earlier-sorted item ends up outermost at a shared index", () => {
    const { inner } = compose(LEAD, [
      { source: "first", middleware: mw("First"), placement: "tool_visible" },
      { source: "second", middleware: mw("Second"), placement: "tool_visible" },
      { source: "third", middleware: mw("Third"), placement: "tool_visible", order: -5 },
    ]);
    expect(inner.slice(0, 4)).toEqual(["Third", "First", "Second", "InputSanitization"]);
  });

  it("scenario G10: LEAD-scoped contributions are absent from subagent stacks; BOTH-scoped ones are in both", () => {
    const contributions: ExtensionMiddlewareContribution[] = [
      { source: "l", middleware: mw("LeadOnly"), placement: "tool_visible", scope: "lead" },
      { source: "s", middleware: mw("SubOnly"), placement: "tool_visible", scope: "subagent" },
      { source: "b", middleware: mw("Both"), placement: "tool_visible", scope: "both" },
      { source: "d", middleware: mw("Default"), placement: "tool_visible" },
    ];
    expect(compose(LEAD, contributions, "lead").inner.slice(0, 3)).toEqual(["LeadOnly", "Both", "Default"]);
    expect(compose(host("LLMErrorHandling"), contributions, "subagent").inner).toEqual(["SubOnly", "Both", "Default", "LLMErrorHandling"]);
  });
});

describe("composeWithExtensions: validation and naming", () => {
  it("scenario G13: only the valid item is inserted; each invalid one is skipped with an error diagnostic", () => {
    const { inner, diagnostics } = compose(LEAD, [
      { source: "ext", middleware: mw("Valid"), placement: "standard" },
      "not-a-placement" as unknown as ExtensionMiddlewareContribution,
      { source: "ext", middleware: mw("BoolOrder"), placement: "standard", order: true },
      { source: "ext", middleware: mw("FloatOrder"), placement: "standard", order: 1.5 },
      { source: "ext", middleware: mw("BadPlacement"), placement: "somewhere" },
      { source: "ext", middleware: mw("BadScope"), placement: "standard", scope: "everyone" },
      { source: "ext", middleware: { beforeModel: () => undefined }, placement: "standard" },
      { source: "ext", middleware: { name: "BadHook", wrapToolCall: 3 }, placement: "standard" },
    ]);
    expect(inner.filter((n) => !LEAD.some((m) => m.name === n))).toEqual(["Valid"]);
    expect(diagnostics).toHaveLength(7);
    expect(diagnostics.every((d) => d.level === "error")).toBe(true);
    expect(diagnostics.map((d) => d.message)).toEqual([
      expect.stringContaining("got string"),
      expect.stringContaining("invalid order true"),
      expect.stringContaining("invalid order 1.5"),
      expect.stringContaining('invalid placement "somewhere"'),
      expect.stringContaining('invalid scope "everyone"'),
      expect.stringContaining("non-empty string `name`"),
      expect.stringContaining("wrapToolCall must be a function"),
    ]);
  });

  it("scenario G14: names are graph-safe `extension:<source>:<name>:<order>` and collisions get _2, _3", () => {
    const { names, stack } = compose(host("LLMErrorHandling", "extension_my_ext_Obs_0"), [
      { source: "my ext", middleware: mw("Obs"), placement: "tool_visible" },
      { source: "my ext", middleware: mw("Obs"), placement: "tool_visible" },
      { source: "my/ext", middleware: mw("Obs"), placement: "standard", order: -2 },
    ]);
    // All three resolve to index 0; order -2 sorts first, so it is outermost.
    expect(names).toEqual(["extension_my_ext_Obs_-2", "extension_my_ext_Obs_0_2", "extension_my_ext_Obs_0_3", "LLMErrorHandling", "extension_my_ext_Obs_0"]);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^[A-Za-z0-9_.-]+$/);
    // The engine accepts the composed stack (it refuses duplicate or unsafe names).
    expect(() => createAgent({ model: fakeModel(), middlewares: stack, services: { clock: systemClock } })).not.toThrow();
  });

  it("routes the wrappers' runtime failures to onDiagnostic, attributed to the extension", async () => {
    const { stack, runtime } = compose(host("LLMErrorHandling"), [
      { source: "crashy", middleware: { name: "Crash", beforeModel: () => { throw new Error("nope"); } }, placement: "standard" },
    ]);
    const model = fakeModel().respond(new AIMessage("fine"));
    const state = await createAgent({ model, middlewares: stack, services: { clock: systemClock } }).invoke({ messages: [new HumanMessage("hi")] });
    expect(state.messages.at(-1)?.content).toBe("fine");
    expect(runtime).toEqual([expect.objectContaining({ level: "error", source: "crashy", message: "Crash.beforeModel failed and was skipped: nope" })]);
  });

  it("returns the stack unchanged (but still validated) with no contributions", () => {
    const { stack, provenance, diagnostics } = compose(LEAD, []);
    expect(stack).toEqual(LEAD);
    expect(stack).not.toBe(LEAD);
    expect(provenance.size).toBe(0);
    expect(diagnostics).toEqual([]);
    expect(() => compose(host("ToolErrorHandling", "ToolProgress"), [])).toThrow(ExtensionOrderingError);
  });
});

describe("composeWithExtensions: ordering blame", () => {
  it("scenario G15: a ToolErrorHandling contributed at TOOL_VISIBLE (outside ToolProgress) fails the build naming the extension", () => {
    let caught: unknown;
    try {
      compose(LEAD, [{ source: "bad-errors", middleware: mw("ToolErrorHandling"), placement: "tool_visible" }]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ExtensionOrderingError);
    expect(caught).toMatchObject({ code: "extension_ordering_violation", blame: ["bad-errors"] });
    expect((caught as Error).message).toContain("ToolProgress must wrap ToolErrorHandling");
    expect((caught as Error).message).toContain("contributed by: bad-errors");
  });

  it("an McpRouting contributed after DeferredToolFilter fails naming the extension", () => {
    expect(() =>
      compose(host("DeferredToolFilter", "LLMErrorHandling", "Clarification"), [{ source: "mcp-ext", middleware: mw("McpRouting"), placement: "tool_raw" }]),
    ).toThrow(expect.objectContaining({ code: "extension_ordering_violation", blame: ["mcp-ext"] }));
  });

  it("a second copy of an outer member placed inside its inner is caught even when the first copies are in order", () => {
    expect(() =>
      compose(host("ToolProgress", "ToolErrorHandling", "Clarification"), [{ source: "late-progress", middleware: mw("ToolProgress"), placement: "tool_raw" }]),
    ).toThrow(expect.objectContaining({ blame: ["late-progress"] }));
  });

  it("a misordered host stack is blamed on the core middleware order", () => {
    expect(() => compose(host("ToolErrorHandling", "ToolProgress"), [{ source: "innocent", middleware: mw("Obs"), placement: "tool_visible" }])).toThrow(
      expect.objectContaining({ blame: [CORE_ORDER_BLAME], message: expect.stringContaining("contributed by: core middleware order") }),
    );
  });

  it("rejects an unknown build scope with a stable code", () => {
    expect(() => composeWithExtensions(LEAD, [], { scope: "both" as "lead", onDiagnostic: () => undefined })).toThrow(
      expect.objectContaining({ code: "invalid_agent_scope" }),
    );
  });
});

import * as v from "valibot";
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { Command } from "@langchain/langgraph/web";
import { describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentRuntime, AgentTool, ModelRequest, ToolCallRequest, ToolResult } from "../../../src/engine/types.ts";
import { SERVER_OWNED_MESSAGE_METADATA_KEYS } from "../../../src/extension-api/provenance.ts";
import { HIDE_FROM_UI } from "../../../src/middlewares/messages.ts";
import { createToolErrorHandlingMiddleware } from "../../../src/middlewares/tool-error-handling/tool-error-handling.ts";
import { createToolProgressMiddleware } from "../../../src/middlewares/tool-progress/tool-progress.ts";
import {
  ToolReceiptConfigSchema,
  RECEIPT_LEDGER_MESSAGE_NAME,
  TOOL_RECEIPT_CONTEXT_KEY,
  TOOL_RECEIPT_EVENT,
  TOOL_RECEIPT_KEY,
  TOOL_RECEIPT_LEDGER_KEY,
  TOOL_RECEIPT_NAME,
  citingTurnReceipts,
  createToolReceiptMiddleware,
  extractToolReceipts,
  formatCitation,
  makeToolReceipt,
  parseCitations,
  processesSubagentResult,
  pythonJsonDumps,
  receiptId,
  renderCitationVerdict,
  renderReceiptLedger,
  validateCitationVerdict,
  validateReceiptSnapshot,
  verifyCitations,
  type ToolReceipt,
  type ToolReceiptConfigInput,
  type ToolReceiptDeps,
  type ToolReceiptStamp,
} from "../../../src/middlewares/tool-receipt/tool-receipt.ts";
import { TOOL_META_KEY } from "../../../src/middlewares/tool-result-meta.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import { makeRuntime } from "../runtime.ts";

// The section as its schema fills it in when nothing is configured.
const TOOL_RECEIPT_DEFAULTS = v.parse(ToolReceiptConfigSchema, {});

// ---------------------------------------------------------------------------------------------
// Helpers

const NOW = Date.UTC(2026, 4, 8, 12, 0, 0);

function call(name = "bash", id = `tc-${name}`, args: Record<string, unknown> = { cmd: "ls" }): ToolCall {
  return { name, id, args, type: "tool_call" };
}

function toolMessage(content: ToolMessage["content"], options: { id?: string; name?: string; metaStatus?: string; status?: "success" | "error" } = {}): ToolMessage {
  const name = options.name ?? "bash";
  return new ToolMessage({
    content,
    tool_call_id: options.id ?? `tc-${name}`,
    name,
    ...(options.status ? { status: options.status } : {}),
    additional_kwargs: options.metaStatus === undefined ? {} : { [TOOL_META_KEY]: { status: options.metaStatus } },
  });
}

function stamp(index: number, overrides: Partial<ToolReceiptStamp> = {}): ToolReceiptStamp {
  return {
    tool_call_id: `tc-${index}`,
    tool_name: `tool-${index}`,
    status: "success",
    args_sha256: "a".repeat(16),
    output_sha256: "b".repeat(16),
    output_bytes: 2,
    created_at: "2026-05-08T12:00:00.000Z",
    ...overrides,
  };
}

function stamped(index: number, overrides: Partial<ToolReceiptStamp> = {}): ToolMessage {
  const message = toolMessage("ok", { id: `tc-${index}`, name: overrides.tool_name ?? `tool-${index}`, metaStatus: "success" });
  message.additional_kwargs = { ...message.additional_kwargs, [TOOL_RECEIPT_KEY]: stamp(index, overrides) };
  return message;
}

function receipts(count: number, from = 1): ToolReceipt[] {
  return extractToolReceipts(Array.from({ length: count }, (_, i) => stamped(i + from)));
}

function runtimeWith(events?: unknown[], clock = new ManualClock(NOW)): AgentRuntime {
  const base = makeRuntime({ threadId: "t1", services: { clock } });
  return events ? { ...base, writer: (event: unknown) => void events.push(event) } : base;
}

function toolRequest(toolCall: ToolCall = call(), runtime = runtimeWith()): ToolCallRequest {
  return { toolCall, tool: undefined, state: emptyThreadState(), runtime };
}

function receiptOf(result: ToolResult): ToolReceiptStamp | undefined {
  return (result as ToolMessage).additional_kwargs?.[TOOL_RECEIPT_KEY] as ToolReceiptStamp | undefined;
}

function receiptsMiddleware(config: ToolReceiptConfigInput = {}, deps: ToolReceiptDeps = { subagent: true }): AgentMiddleware {
  return createToolReceiptMiddleware(config, deps);
}

/** Runs wrapModelCall and returns what the model received and the response it returned. */
async function modelCall(
  mw: AgentMiddleware,
  messages: BaseMessage[],
  response: AIMessage = new AIMessage("done"),
): Promise<{ request: ModelRequest; seen: ModelRequest; response: AIMessage }> {
  const request = { model: fakeModel(), systemMessage: undefined, messages, tools: [], state: { ...emptyThreadState(), messages }, runtime: runtimeWith() } as ModelRequest;
  let seen = request;
  const result = await mw.wrapModelCall!(request, async (req) => {
    seen = req;
    return response;
  });
  return { request, seen, response: result };
}

function ledgersIn(messages: readonly BaseMessage[]): HumanMessage[] {
  return messages.filter((m): m is HumanMessage => HumanMessage.isInstance(m) && m.additional_kwargs?.[TOOL_RECEIPT_CONTEXT_KEY] === true);
}

// ---------------------------------------------------------------------------------------------

describe("ToolReceipt config and declaration", () => {
  it("is named after the upstream class; receipts on, lead renders only for delegations", () => {
    const mw = createToolReceiptMiddleware();
    expect(mw.name).toBe(TOOL_RECEIPT_NAME);
    expect(mw.name).toBe("ToolReceipt");
    expect(TOOL_RECEIPT_DEFAULTS).toEqual({ receipts_enabled: true, receipts_render_mode: "delegation_only", judge_enabled: false, judge_model_name: null });
    expect(mw.releasePolicyParameters!()).toMatchObject({ receipts_enabled: true, receipts_render_mode: "delegation_only" });
  });

  it("a subagent chain always renders, whatever the config says", () => {
    const mw = createToolReceiptMiddleware({ receipts_render_mode: "delegation_only" }, { subagent: true });
    expect(mw.releasePolicyParameters!()).toMatchObject({ receipts_render_mode: "always" });
  });

  it("declares its behaviour, the ledger texts only as a hash", () => {
    const declared = createToolReceiptMiddleware({ receipts_render_mode: "always" }).releasePolicyParameters!();
    expect(declared).toEqual({
      receipts_enabled: true,
      receipts_render_mode: "always",
      ledger_char_budget: 2000,
      hash_hex_chars: 16,
      max_citation_id_digits: 10,
      ledger_placement: "after_leading_system_messages",
      ledger_text_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      receipt_key: "deerflow_tool_receipt",
      snapshot_key: "deerflow_tool_receipt_ledger",
    });
    expect(JSON.stringify(declared)).not.toContain("Execution evidence");
  });

  it("rejects unknown keys, bad modes and a judge that does not exist", () => {
    expect(() => createToolReceiptMiddleware({ receipt_enabled: true } as never)).toThrow(/ToolReceipt/);
    expect(() => createToolReceiptMiddleware({ receipts_render_mode: "never" as never })).toThrow(/ToolReceipt\.receipts_render_mode: expected "always" or "delegation_only"/);
    expect(() => createToolReceiptMiddleware({ judge_enabled: true })).toThrow(/judge_enabled.*not available yet/);
    expect(() => createToolReceiptMiddleware({ judge_model_name: "small", judge_enabled: false })).not.toThrow();
  });

  it("the receipt key is server-owned, so the Gateway strips a client's forgery", () => {
    expect(SERVER_OWNED_MESSAGE_METADATA_KEYS).toContain(TOOL_RECEIPT_KEY);
  });
});

describe("makeToolReceipt", () => {
  it("hashes arguments and output to 16 hex digits and counts output bytes", async () => {
    const receipt = await makeToolReceipt(call("write_file", "tc-1", { path: "/tmp/a.txt", content: "hello" }), toolMessage("ok", { metaStatus: "success" }), NOW);
    expect(receipt).toEqual({
      tool_call_id: "tc-1",
      tool_name: "write_file",
      status: "success",
      args_sha256: expect.stringMatching(/^[0-9a-f]{16}$/),
      output_sha256: "2689367b205c16ce",
      output_bytes: 2,
      created_at: "2026-05-08T12:00:00.000Z",
    });
  });

  it("hashes arguments exactly as the Python host does (sorted keys, spaced separators, ASCII escapes)", async () => {
    const args = { path: "/tmp/é.txt", b: [1, 2.5, true, null], a: { z: "x\u007f\n", y: "😀" } };
    expect(pythonJsonDumps(args)).toBe('{"a": {"y": "\\ud83d\\ude00", "z": "x\\u007f\\n"}, "b": [1, 2.5, true, null], "path": "/tmp/\\u00e9.txt"}');
    const receipt = await makeToolReceipt(call("t", "x", args), toolMessage("r"), NOW);
    expect(receipt.args_sha256).toBe("23d7c788c86dab34");
  });

  it("is key-order invariant and treats non-object arguments as {}", async () => {
    const first = await makeToolReceipt(call("t", "x", { a: 1, b: 2 }), toolMessage("r"), NOW);
    const second = await makeToolReceipt(call("t", "x", { b: 2, a: 1 }), toolMessage("r"), NOW);
    const none = await makeToolReceipt({ name: "t", id: "x", args: "oops" as never }, toolMessage("r"), NOW);
    const empty = await makeToolReceipt(call("t", "x", {}), toolMessage("r"), NOW);
    expect(first.args_sha256).toBe(second.args_sha256);
    expect(none.args_sha256).toBe(empty.args_sha256);
  });

  it("hashes list content as the host's JSON of it", async () => {
    const receipt = await makeToolReceipt(call(), toolMessage([{ type: "text", text: "hé" }]), NOW);
    expect(receipt.output_sha256).toBe("dba227fc4d88536d");
    expect(receipt.output_bytes).toBe(37);
  });

  it("takes the status from deerflow_tool_meta, else from the message, else success", async () => {
    expect((await makeToolReceipt(call(), toolMessage("Error: 404", { metaStatus: "error" }), NOW)).status).toBe("error");
    expect((await makeToolReceipt(call(), toolMessage("half", { metaStatus: "partial_success", status: "success" }), NOW)).status).toBe("partial_success");
    expect((await makeToolReceipt(call(), toolMessage("denied", { status: "error" }), NOW)).status).toBe("error");
    expect((await makeToolReceipt(call(), toolMessage("ok"), NOW)).status).toBe("success");
  });
});

describe("ToolReceipt stamping (wrapToolCall)", () => {
  const mw = createToolReceiptMiddleware();

  it("stamps a direct result, at the runtime clock's time", async () => {
    const clock = new ManualClock(NOW);
    await clock.advance(1500);
    const result = await mw.wrapToolCall!(toolRequest(call(), runtimeWith(undefined, clock)), async () => toolMessage("ok", { metaStatus: "success" }));
    expect(receiptOf(result)).toMatchObject({ tool_name: "bash", tool_call_id: "tc-bash", status: "success", created_at: "2026-05-08T12:00:01.500Z" });
  });

  it("overwrites a receipt the tool shipped itself", async () => {
    const forged = stamp(1, { tool_call_id: "tc-bash", output_bytes: 999, created_at: "1970-01-01T00:00:00+00:00" });
    const result = await mw.wrapToolCall!(toolRequest(), async () => {
      const message = toolMessage("ok");
      message.additional_kwargs = { [TOOL_RECEIPT_KEY]: forged };
      return message;
    });
    expect(receiptOf(result)).toMatchObject({ output_bytes: 2, created_at: "2026-05-08T12:00:00.000Z" });
  });

  it("stamps only the matching ToolMessages inside a Command (object update)", async () => {
    const matching = toolMessage("done", { id: "tc-task", name: "task" });
    const unrelated = toolMessage("other", { id: "tc-other", name: "other" });
    const command = new Command({ update: { messages: [unrelated, matching], other_state: true } });
    const result = await mw.wrapToolCall!(toolRequest(call("task", "tc-task")), async () => command);
    expect(result).toBe(command);
    expect(unrelated.additional_kwargs[TOOL_RECEIPT_KEY]).toBeUndefined();
    expect(matching.additional_kwargs[TOOL_RECEIPT_KEY]).toMatchObject({ tool_call_id: "tc-task", tool_name: "task" });
  });

  it("stamps a single message and tuple-form updates too", async () => {
    const single = toolMessage("x", { id: "tc-view", name: "view_image" });
    await mw.wrapToolCall!(toolRequest(call("view_image", "tc-view")), async () => new Command({ update: { messages: single } }));
    expect(single.additional_kwargs[TOOL_RECEIPT_KEY]).toMatchObject({ tool_name: "view_image" });

    const tupled = toolMessage("x", { id: "tc-p", name: "present_files" });
    const command = new Command({ update: [["messages", [tupled]], ["artifacts", ["/a"]]] as never });
    await mw.wrapToolCall!(toolRequest(call("present_files", "tc-p")), async () => command);
    expect(tupled.additional_kwargs[TOOL_RECEIPT_KEY]).toMatchObject({ tool_name: "present_files" });
  });

  it("a stamping failure never breaks the call, and is reported", async () => {
    const events: unknown[] = [];
    const circular: Record<string, unknown> = {};
    circular["self"] = circular;
    const message = toolMessage("ok");
    const result = await mw.wrapToolCall!(toolRequest(call("bash", "tc-bash", circular), runtimeWith(events)), async () => message);
    expect(result).toBe(message);
    expect(receiptOf(result)).toBeUndefined();
    expect(events).toEqual([expect.objectContaining({ type: TOOL_RECEIPT_EVENT, action: "stamp_failed", tool_name: "bash" })]);
  });

  it("a stamping failure in an aborted run propagates instead of being swallowed", async () => {
    const controller = new AbortController();
    controller.abort();
    const circular: Record<string, unknown> = {};
    circular["self"] = circular;
    const runtime = { ...runtimeWith(), signal: controller.signal };
    await expect(mw.wrapToolCall!(toolRequest(call("bash", "tc-bash", circular), runtime), async () => toolMessage("ok"))).rejects.toThrow(/Circular/);
  });

  it("stamps nothing when receipts are disabled", async () => {
    const off = createToolReceiptMiddleware({ receipts_enabled: false });
    const result = await off.wrapToolCall!(toolRequest(), async () => toolMessage("ok"));
    expect(receiptOf(result)).toBeUndefined();
  });
});

describe("extractToolReceipts", () => {
  it("assigns r1..rN in message order and skips unstamped messages", () => {
    const extracted = extractToolReceipts([
      new AIMessage({ content: "working", tool_calls: [call("bash", "tc-9")] }),
      toolMessage("unstamped", { id: "tc-0" }),
      stamped(1, { tool_name: "write_file" }),
      stamped(2, { tool_name: "bash" }),
    ]);
    expect(extracted.map((r) => [r.id, r.tool_name])).toEqual([
      ["r1", "write_file"],
      ["r2", "bash"],
    ]);
  });

  it("skips malformed persisted receipts and drops unknown keys of newer ones", () => {
    const malformed = ["not-a-dict", {}, { tool_call_id: "tc-1" }, stamp(3, { output_bytes: "2" as never }), stamp(4, { output_bytes: -1 }), stamp(5, { status: "s".repeat(257) })].map(
      (payload) => {
        const message = toolMessage("bad");
        message.additional_kwargs = { [TOOL_RECEIPT_KEY]: payload };
        return message;
      },
    );
    const newer = stamped(7);
    newer.additional_kwargs[TOOL_RECEIPT_KEY] = { ...stamp(7), layer2_field: { nested: true } };
    const extracted = extractToolReceipts([...malformed, stamped(6), newer]);
    expect(extracted.map((r) => [r.id, r.tool_call_id])).toEqual([
      ["r1", "tc-6"],
      ["r2", "tc-7"],
    ]);
    expect(Object.keys(extracted[1]!)).not.toContain("layer2_field");
  });
});

describe("renderReceiptLedger", () => {
  it("renders nothing for no receipts", () => {
    expect(renderReceiptLedger([])).toEqual({ text: "", receipts: [] });
  });

  it("states its evidence boundary and an example citation the parser reads back", () => {
    const { text, receipts: visible } = renderReceiptLedger(receipts(1, 1).map((r) => ({ ...r, tool_name: "write_file" })));
    expect(text.split("\n")[0]).toBe("## Tool receipts (execution record)");
    expect(text).toContain("do not validate claim correctness");
    const example = formatCitation(receiptId(1), "write_file");
    expect(text).toContain(`e.g. ${example})`);
    expect(parseCitations(example)).toEqual([{ id: "r1", anchor: "write_file" }]);
    expect(text).toContain("- [r1] write_file status=success args_sha256=aaaaaaaaaaaaaaaa output_sha256=bbbbbbbbbbbbbbbb bytes=2");
    expect(visible).toHaveLength(1);
  });

  it("over budget keeps the newest receipts, in order, with their original ids, after an omission marker", () => {
    const all = receipts(12);
    const { text, receipts: visible } = renderReceiptLedger(all, { maxChars: 500 });
    expect([...text].length).toBeLessThanOrEqual(500);
    expect(text).toContain("[r12] tool-12");
    expect(text).not.toContain("[r1] tool-1 ");
    expect(text).toContain("- ... older receipts omitted (context budget)");
    expect(text.indexOf("older receipts omitted")).toBeLessThan(text.indexOf(`[${visible[0]!.id}]`));
    // The subset returned is exactly the receipts visible in the text.
    expect(visible.length).toBeGreaterThan(0);
    expect(visible.at(-1)!.id).toBe("r12");
    for (const receipt of all) expect(text.includes(`[${receipt.id}] `)).toBe(visible.includes(receipt));
    const ids = visible.map((r) => Number(r.id.slice(1)));
    expect(ids).toEqual(ids.map((_, i) => ids[0]! + i));
  });

  it("at the default 2,000-character budget, 30 receipts keep a consecutive tail ending at r30", () => {
    const { text, receipts: visible } = renderReceiptLedger(receipts(30));
    expect([...text].length).toBeLessThanOrEqual(2000);
    expect(visible[0]!.id).not.toBe("r1");
    expect(visible.at(-1)!.id).toBe("r30");
    expect(validateReceiptSnapshot(visible)).toEqual(visible);
  });

  it("measures in code points, as the host does", () => {
    const wide = receipts(3).map((r) => ({ ...r, tool_name: "😀".repeat(20) }));
    const full = renderReceiptLedger(wide, { maxChars: 100000 }).text;
    const budget = [...full].length;
    expect(renderReceiptLedger(wide, { maxChars: budget }).receipts).toHaveLength(3);
    expect(full.length).toBeGreaterThan(budget);
  });

  it("a budget below the header cuts hard and keeps no receipts", () => {
    const tiny = renderReceiptLedger(receipts(1), { maxChars: 10 });
    expect([...tiny.text].length).toBeLessThanOrEqual(10);
    expect(tiny.text.endsWith("\n...")).toBe(true);
    expect(tiny.receipts).toEqual([]);
    expect(renderReceiptLedger(receipts(1), { maxChars: 3 }).text).toBe("## ");
    expect(renderReceiptLedger(receipts(1), { maxChars: 0 })).toEqual({ text: "", receipts: [] });
  });
});

describe("validateReceiptSnapshot and citingTurnReceipts", () => {
  it("accepts a strictly consecutive positive original-id range such as r24-r30", () => {
    const retained = receipts(30).slice(23);
    expect(retained.map((r) => r.id)).toEqual(["r24", "r25", "r26", "r27", "r28", "r29", "r30"]);
    expect(validateReceiptSnapshot(retained.map((r) => ({ ...r })))).toEqual(retained);
    expect(validateReceiptSnapshot([])).toEqual([]);
  });

  it("rejects gaps, reordering, r0, leading zeros, oversized ids and malformed entries", () => {
    const three = receipts(3);
    expect(validateReceiptSnapshot([three[0], three[2]])).toBeNull();
    expect(validateReceiptSnapshot([three[1], three[0]])).toBeNull();
    expect(validateReceiptSnapshot([{ ...three[0]!, id: "r0" }])).toBeNull();
    expect(validateReceiptSnapshot([{ ...three[0]!, id: "r01" }])).toBeNull();
    expect(validateReceiptSnapshot([{ ...three[0]!, id: `r${"9".repeat(11)}` }])).toBeNull();
    expect(validateReceiptSnapshot([{ ...three[0]!, id: 1 }])).toBeNull();
    expect(validateReceiptSnapshot([{ ...three[0]!, status: 5 }])).toBeNull();
    expect(validateReceiptSnapshot("r1")).toBeNull();
    expect(validateReceiptSnapshot({ 0: three[0] })).toBeNull();
  });

  it("resolves against the citing turn's snapshot, not the post-compaction renumbering", () => {
    const original = extractToolReceipts([stamped(1, { tool_name: "write_file" }), stamped(2, { tool_name: "bash" })]);
    const report = new AIMessage({ content: "saved it [r1]", additional_kwargs: { [TOOL_RECEIPT_LEDGER_KEY]: original.map((r) => ({ ...r })) } });
    // Summarization dropped r1's ToolMessage: a re-scan would now call tc-2 "r1".
    const compacted = [stamped(2, { tool_name: "bash" }), report];
    expect(citingTurnReceipts(compacted)).toEqual(original);
    expect(extractToolReceipts(compacted)[0]).toMatchObject({ id: "r1", tool_call_id: "tc-2" });
  });

  it("uses the newest snapshot only: malformed means null, never an older one", () => {
    const good = new AIMessage({ content: "a", additional_kwargs: { [TOOL_RECEIPT_LEDGER_KEY]: receipts(1) } });
    const bad = new AIMessage({ content: "b", additional_kwargs: { [TOOL_RECEIPT_LEDGER_KEY]: [{ broken: true }] } });
    const plain = new AIMessage("c");
    expect(citingTurnReceipts([good, plain])).toEqual(receipts(1));
    expect(citingTurnReceipts([good, bad, plain])).toBeNull();
    expect(citingTurnReceipts([plain, new HumanMessage("x")])).toBeNull();
  });
});

describe("parseCitations", () => {
  it("reads bare and anchored citations", () => {
    expect(parseCitations(formatCitation("r2", "write_file"))).toEqual([{ id: "r2", anchor: "write_file" }]);
    expect(parseCitations(formatCitation("r2"))).toEqual([{ id: "r2", anchor: null }]);
    expect(parseCitations("see [r3  mcp.fetch-url] and [r007] and [rx] and [r]")).toEqual([
      { id: "r3", anchor: "mcp.fetch-url" },
      { id: "r7", anchor: null },
    ]);
  });

  it("ignores oversized model-generated ids instead of converting them", () => {
    const oversized = "9".repeat(5000);
    expect(parseCitations(`bad [r${oversized}] then valid [r2]`)).toEqual([{ id: "r2", anchor: null }]);
    expect(parseCitations(`[r${"9".repeat(10)}] [r${"9".repeat(11)}]`)).toEqual([{ id: `r${"9".repeat(10)}`, anchor: null }]);
  });

  it("de-duplicates exact (id, anchor) pairs, not ids alone", () => {
    expect(parseCitations("[r1] [r1] [r1 bash] [r1 bash] [r1 write_file] [r01]")).toEqual([
      { id: "r1", anchor: null },
      { id: "r1", anchor: "bash" },
      { id: "r1", anchor: "write_file" },
    ]);
  });
});

describe("verifyCitations", () => {
  const ledger = [
    ...extractToolReceipts([stamped(1, { tool_name: "write_file" }), stamped(2, { tool_name: "bash", status: "error" })]),
  ];

  it("resolves, fails and reports unknown citations separately", () => {
    const verdict = verifyCitations("wrote it [r1 write_file], ran [r2], and [r9], also [r1 bash]", ledger);
    expect(verdict).toEqual({
      source: "receipt_citations",
      requirement: "cited_ids_in_execution_record",
      citation_resolved: false,
      cited: ["r1", "r2", "r9", "r1"],
      resolved: ["r1"],
      failed: [
        { id: "r2", reason: "receipt status=error" },
        { id: "r1", reason: "anchor mismatch: cited as bash, receipt r1 is write_file" },
      ],
      unknown: ["r9"],
      no_citation_claims: false,
    });
    expect(renderCitationVerdict(verdict)).toBe("citations: 1 resolved, 2 failed, 1 unknown — execution evidence only, does not validate claim correctness");
  });

  it("a fully resolved report is citation_resolved", () => {
    const verdict = verifyCitations("Saved the report [r1].", ledger);
    expect(verdict.citation_resolved).toBe(true);
    expect(renderCitationVerdict(verdict)).toBe("citations: 1 resolved — execution evidence only, does not validate claim correctness");
  });

  it("action claims without citations are flagged UNVERIFIED; a claim-free report passes vacuously", () => {
    const claims = verifyCitations("I created /mnt/user-data/outputs/report.md", ledger);
    expect(claims).toMatchObject({ citation_resolved: false, no_citation_claims: true, cited: [] });
    expect(renderCitationVerdict(claims)).toBe("citations: UNVERIFIED — action claims without receipt citations");
    expect(verifyCitations("Here is notes.txt", ledger).no_citation_claims).toBe(true);
    const none = verifyCitations("The capital of France is Paris.", ledger);
    expect(none).toMatchObject({ citation_resolved: true, no_citation_claims: false });
    expect(renderCitationVerdict(none)).toBe("");
    expect(verifyCitations("réwrote nothing", ledger).no_citation_claims).toBe(false);
  });

  it("a persisted verdict is re-validated; malformed ones are dropped", () => {
    const verdict = verifyCitations("ran [r2]", ledger);
    expect(validateCitationVerdict(JSON.parse(JSON.stringify(verdict)))).toEqual(verdict);
    expect(validateCitationVerdict({ ...verdict, citation_resolved: "yes" })).toBeNull();
    expect(validateCitationVerdict({ ...verdict, cited: [1] })).toBeNull();
    expect(validateCitationVerdict({ ...verdict, failed: [{ id: "r2" }] })).toBeNull();
    expect(validateCitationVerdict([verdict])).toBeNull();
  });
});

describe("ToolReceipt ledger (wrapModelCall)", () => {
  it("injects a hidden ledger after the leading system messages and snapshots it on the response", async () => {
    const mw = receiptsMiddleware();
    const system = new SystemMessage("reminder");
    const { seen, response } = await modelCall(mw, [system, new HumanMessage("go"), new AIMessage("hi"), stamped(1, { tool_name: "bash" })], new AIMessage("done [r1]"));
    const [ledger] = ledgersIn(seen.messages);
    expect(seen.messages[0]).toBe(system);
    expect(seen.messages[1]).toBe(ledger);
    expect(ledger!.name).toBe(RECEIPT_LEDGER_MESSAGE_NAME);
    expect(ledger!.additional_kwargs[HIDE_FROM_UI]).toBe(true);
    expect(ledger!.content).toContain("[r1] bash");
    expect(response.additional_kwargs[TOOL_RECEIPT_LEDGER_KEY]).toEqual([{ id: "r1", ...stamp(1, { tool_name: "bash" }) }]);
  });

  it("the ledger lives in the request only", async () => {
    const messages = [new HumanMessage("go"), stamped(1)];
    await modelCall(receiptsMiddleware(), messages);
    expect(messages).toHaveLength(2);
    expect(ledgersIn(messages)).toEqual([]);
  });

  it("the snapshot holds only the receipts rendered within the budget", async () => {
    const { seen, response } = await modelCall(receiptsMiddleware(), [new HumanMessage("go"), ...Array.from({ length: 30 }, (_, i) => stamped(i + 1))]);
    const [ledger] = ledgersIn(seen.messages);
    const snapshot = response.additional_kwargs[TOOL_RECEIPT_LEDGER_KEY] as ToolReceipt[];
    expect(snapshot[0]!.id).not.toBe("r1");
    expect(snapshot.at(-1)!.id).toBe("r30");
    for (const receipt of snapshot) expect(ledger!.content).toContain(`[${receipt.id}]`);
    expect(ledger!.content).not.toContain("[r1]");
    expect(ledger!.content).toContain("older receipts omitted");
  });

  it("overwrites a snapshot the provider put on its own response", async () => {
    const forged = new AIMessage({ content: "done [r5]", additional_kwargs: { [TOOL_RECEIPT_LEDGER_KEY]: receipts(5) } });
    const { response } = await modelCall(receiptsMiddleware(), [new HumanMessage("go"), stamped(1)], forged);
    expect((response.additional_kwargs[TOOL_RECEIPT_LEDGER_KEY] as ToolReceipt[]).map((r) => r.id)).toEqual(["r1"]);
  });

  it("without receipts the request passes through untouched and nothing is snapshotted", async () => {
    const { request, seen, response } = await modelCall(receiptsMiddleware(), [new HumanMessage("go")]);
    expect(seen).toBe(request);
    expect(response.additional_kwargs[TOOL_RECEIPT_LEDGER_KEY]).toBeUndefined();
  });

  it("renders nothing when receipts are disabled", async () => {
    const { request, seen } = await modelCall(receiptsMiddleware({ receipts_enabled: false }), [new HumanMessage("go"), stamped(1)]);
    expect(seen).toBe(request);
  });

  describe("delegation_only (the lead's default)", () => {
    const lead = () => createToolReceiptMiddleware();
    const subagentResult = (content = "Task Succeeded. Result: done [r1]") =>
      new ToolMessage({ content, tool_call_id: "tc-task", name: "task", additional_kwargs: { subagent_status: "completed" } });

    it("skips a plain conversation", async () => {
      const { request, seen } = await modelCall(lead(), [new HumanMessage("go"), stamped(1)]);
      expect(seen).toBe(request);
    });

    it("renders while the current turn processes a subagent result", async () => {
      const { seen } = await modelCall(lead(), [new HumanMessage("go"), stamped(1), subagentResult()]);
      expect(ledgersIn(seen.messages)).toHaveLength(1);
    });

    it("ignores a delegation from an earlier turn", async () => {
      const messages = [new HumanMessage("first"), stamped(1), subagentResult(), new AIMessage("report [r1]"), new HumanMessage("unrelated follow-up")];
      const { request, seen } = await modelCall(lead(), messages);
      expect(seen).toBe(request);
    });

    it("hidden framework messages do not start a turn", async () => {
      const reminder = new HumanMessage({ content: "<system_reminder>todo</system_reminder>", additional_kwargs: { [HIDE_FROM_UI]: true } });
      const { seen } = await modelCall(lead(), [new HumanMessage("go"), reminder, stamped(1), subagentResult()]);
      expect(ledgersIn(seen.messages)).toHaveLength(1);
      expect(processesSubagentResult([stamped(1), subagentResult()])).toBe(true);
    });
  });
});

describe("ToolReceipt through the real engine", () => {
  const services = { clock: systemClock };

  function scriptedTool(name: string, outputs: ToolResult[] | string[], log: string[]): AgentTool {
    return {
      name,
      description: name,
      schema: { type: "object", properties: {} },
      async invoke(_args, context) {
        log.push(`${name}:${context.toolCall.id}`);
        return (outputs.shift() as string | undefined) ?? "ok";
      },
    };
  }

  it("as the outermost tool wrapper it stamps normal results, Command results and inner short-circuits, then shows the ledger", async () => {
    const log: string[] = [];
    /** An inner gate that answers `rm` itself, the way Guardrail or ReadBeforeWrite do. */
    const gate: AgentMiddleware = {
      name: "Gate",
      async wrapToolCall(request, handler) {
        if (request.toolCall.name !== "rm") return handler(request);
        return new ToolMessage({ content: "Guardrail denied: rm", tool_call_id: request.toolCall.id ?? "", name: "rm", status: "error" });
      },
    };
    const present: AgentTool = {
      name: "present_files",
      description: "present",
      schema: { type: "object", properties: {} },
      async invoke(_args, context) {
        return new Command({
          update: { messages: [new ToolMessage({ content: "presented", tool_call_id: context.toolCall.id ?? "", name: "present_files" })], artifacts: ["/a.md"] },
        });
      },
    };
    const model = fakeModel()
      .respondWithTools([
        { name: "web_search", args: { query: "x" }, id: "w1" },
        { name: "rm", args: { path: "/" }, id: "g1" },
      ])
      .respondWithTools([{ name: "present_files", args: {}, id: "p1" }])
      .respond(new AIMessage("done [r1] [r3]"));
    const agent = createAgent({
      model,
      tools: [scriptedTool("web_search", ["Error: 401 Unauthorized"], log), scriptedTool("rm", [], log), present],
      middlewares: [
        createToolReceiptMiddleware({}, { subagent: true }),
        gate,
        createToolProgressMiddleware({ enabled: true }),
        createToolErrorHandlingMiddleware(),
      ],
      services,
    });

    const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t1" });

    expect(log).toEqual(["web_search:w1"]);
    const byId = (id: string) => state.messages.find((m) => ToolMessage.isInstance(m) && m.tool_call_id === id) as ToolMessage;
    expect(receiptOf(byId("w1"))).toMatchObject({ tool_name: "web_search", status: "error" });
    expect(receiptOf(byId("g1"))).toMatchObject({ tool_name: "rm", status: "error" });
    expect(receiptOf(byId("p1"))).toMatchObject({ tool_name: "present_files", status: "success" });
    expect(state.artifacts).toEqual(["/a.md"]);

    // The second call sees the two receipts of the first batch; the third sees all three.
    expect(ledgersIn(model.calls[0]!.messages)).toEqual([]);
    expect(ledgersIn(model.calls[1]!.messages)[0]!.content).toMatch(/\[r1\] (web_search|rm)[\s\S]*\[r2\] (web_search|rm)/);
    expect(ledgersIn(model.calls[2]!.messages)[0]!.content).toContain("[r3] present_files");
    expect(ledgersIn(state.messages)).toEqual([]);

    const final = state.messages.at(-1) as AIMessage;
    expect(final.content).toBe("done [r1] [r3]");
    const snapshot = citingTurnReceipts(state.messages)!;
    expect(snapshot.map((r) => r.id)).toEqual(["r1", "r2", "r3"]);
    expect(verifyCitations(String(final.content), snapshot)).toMatchObject({ resolved: ["r3"], failed: [{ id: "r1" }] });
  });

  it("stamps a ToolProgress block as an error receipt", async () => {
    const log: string[] = [];
    const model = fakeModel()
      .respondWithTools([{ name: "web_search", args: { query: "a" }, id: "w1" }])
      .respondWithTools([{ name: "web_search", args: { query: "b" }, id: "w2" }])
      .respond(new AIMessage("stopped"));
    const agent = createAgent({
      model,
      tools: [scriptedTool("web_search", ["Error: invalid api key"], log)],
      middlewares: [createToolReceiptMiddleware(), createToolProgressMiddleware({ enabled: true }), createToolErrorHandlingMiddleware()],
      services,
    });
    const state = await agent.invoke({ messages: [new HumanMessage("go")] }, { threadId: "t1" });
    expect(log).toEqual(["web_search:w1"]);
    const blocked = state.messages.find((m) => ToolMessage.isInstance(m) && m.tool_call_id === "w2") as ToolMessage;
    expect(String(blocked.content)).toMatch(/^\[TOOL_BLOCKED\] Authentication failure/);
    expect(receiptOf(blocked)).toMatchObject({ tool_call_id: "w2", tool_name: "web_search", status: "error" });
    // delegation_only on the lead: no subagent result, so no ledger and no snapshot.
    expect(model.calls.every((c) => ledgersIn(c.messages).length === 0)).toBe(true);
    expect((state.messages.at(-1) as AIMessage).additional_kwargs[TOOL_RECEIPT_LEDGER_KEY]).toBeUndefined();
  });
});

describe("receipt hashing paths", () => {
  it("hashes a large output (crypto.subtle) exactly as a small one (synchronous digest) would", async () => {
    const { makeToolReceipt } = await import("../../../src/middlewares/tool-receipt/stamp.ts");
    const { sha256HexSync } = await import("../../../src/extension-api/sha256-sync.ts");
    const { ToolMessage } = await import("@langchain/core/messages");
    const large = "é".repeat(10_000);
    const receipt = await makeToolReceipt(
      { id: "c1", name: "bash", args: { command: "x".repeat(9_000) } },
      new ToolMessage({ content: large, tool_call_id: "c1" }),
      0,
    );
    expect(receipt.output_sha256).toBe(sha256HexSync(large).slice(0, receipt.output_sha256.length));
    expect(receipt.output_bytes).toBe(20_000);
    expect(receipt.args_sha256).toBe(sha256HexSync(`{"command": "${"x".repeat(9_000)}"}`).slice(0, receipt.args_sha256.length));
  });
});

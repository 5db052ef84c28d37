import { describe, expect, it } from "vitest";
import { canonicalHash, sha256Hex } from "../../../src/extension-api/index.ts";
import { canonicalHashSync, sha256HexSync } from "../../../src/extension-api/sha256-sync.ts";
import {
  MAX_FORM_SERIALIZED_BYTES,
  RESERVED_FIELD_NAMES,
  normalizeClarification,
  normalizeClarificationFields,
  normalizeClarificationOptions,
  type HumanInputRequest,
} from "../../../src/middlewares/clarification/payload.ts";

type Args = Record<string, unknown>;

function text(args: Args): string {
  return normalizeClarification(args, { toolCallId: "call-abc" }).text;
}

function payload(args: Args, toolCallId = "call-abc"): HumanInputRequest {
  return normalizeClarification(args, { toolCallId }).payload;
}

const form = (fields: unknown, extra: Args = {}): HumanInputRequest =>
  payload({ question: "Details please", clarification_type: "missing_info", fields, ...extra });

describe("clarification text fallback", () => {
  it("numbers native list options", () => {
    const result = text({ question: "Which env?", clarification_type: "approach_choice", options: ["dev", "staging", "prod"] });
    expect(result).toBe("🔀 Which env?\n\n  1. dev\n  2. staging\n  3. prod");
  });

  it("decodes options sent as a JSON string instead of iterating its characters", () => {
    const result = text({ question: "Which env?", clarification_type: "approach_choice", options: JSON.stringify(["dev", "staging", "prod"]) });
    expect(result).toContain("1. dev");
    expect(result).toContain("3. prod");
    expect(result).not.toContain("1. [");
    expect(result).not.toContain('2. "');
  });

  it("treats a JSON string holding a scalar as one option", () => {
    const result = text({ question: "Which env?", clarification_type: "approach_choice", options: JSON.stringify("development") });
    expect(result).toContain("1. development");
    expect(result).not.toContain("2.");
  });

  it("treats a non-JSON string as one option", () => {
    expect(text({ question: "Which env?", clarification_type: "approach_choice", options: "just one option" })).toContain("1. just one option");
  });

  it.each([
    ["null", { options: null }],
    ["an empty list", { options: [] }],
    ["a missing key", {}],
  ])("renders no options for %s", (_label, extra) => {
    const result = text({ question: "Tell me more", clarification_type: "missing_info", ...extra });
    expect(result).toBe("❓ Tell me more");
  });

  it("puts the context first, then the question", () => {
    const result = text({
      question: "Which env?",
      clarification_type: "approach_choice",
      context: "Need target env for config",
      options: ["dev", "prod"],
    });
    expect(result).toBe("🔀 Need target env for config\n\nWhich env?\n\n  1. dev\n  2. prod");
  });

  it("writes non-string options the way the Python upstream does (True, None)", () => {
    const result = text({ question: "Pick one", clarification_type: "approach_choice", options: JSON.stringify(["Option A", 2, true, null]) });
    expect(result).toContain("1. Option A");
    expect(result).toContain("2. 2");
    expect(result).toContain("3. True");
    expect(result).toContain("4. None");
  });

  it("picks the icon by type and never reads a prototype member for an odd type", () => {
    expect(text({ question: "q", clarification_type: "risk_confirmation" })).toBe("⚠️ q");
    expect(text({ question: "q", clarification_type: "suggestion" })).toBe("💡 q");
    expect(text({ question: "q", clarification_type: "constructor" })).toBe("❓ q");
    expect(text({ question: "q", clarification_type: [] })).toBe("❓ q");
  });

  it("lists form fields with required marks, options and the reply hint", () => {
    const result = text({
      question: "Please provide the expense details.",
      clarification_type: "missing_info",
      fields: expenseFields(),
    });
    expect(result).toContain("1. Amount (required)");
    expect(result).toContain("2. Category (required) — options: travel / meals");
    expect(result).toContain("3. Receipts — options: A-1 / A-2 (multiple allowed)");
    expect(result).toContain("4. note");
    expect(result.endsWith("\n\nPlease reply with a value for each field.")).toBe(true);
  });

  it("says a checkbox is yes/no defaulting to no, and that a required one means consent", () => {
    const result = text({
      question: "Before I deploy",
      clarification_type: "risk_confirmation",
      fields: [
        { name: "notify", label: "Notify the team", type: "checkbox" },
        { name: "agree", label: "I accept the downtime", type: "checkbox", required: true },
      ],
    });
    expect(result).toContain("1. Notify the team (yes/no, default no)");
    expect(result).toContain("2. I accept the downtime (required: reply yes to agree)");
  });
});

function expenseFields(): Args[] {
  return [
    { name: "amount", label: "Amount", type: "number", required: true },
    { name: "category", label: "Category", type: "select", options: ["travel", "meals"], required: true },
    { name: "receipts", label: "Receipts", type: "multi_select", options: ["A-1", "A-2"] },
    { name: "note", type: "textarea" },
  ];
}

describe("human_input payload, v1 modes", () => {
  it("builds a version-1 choice_with_other card from native options", () => {
    expect(
      payload({
        question: "Which environment should I deploy to?",
        clarification_type: "approach_choice",
        context: "Need the target environment for config.",
        options: ["development", "staging", "production"],
      }),
    ).toEqual({
      version: 1,
      kind: "human_input_request",
      source: "ask_clarification",
      request_id: "clarification:call-abc",
      tool_call_id: "call-abc",
      clarification_type: "approach_choice",
      question: "Which environment should I deploy to?",
      context: "Need the target environment for config.",
      input_mode: "choice_with_other",
      options: [
        { id: "option-1", label: "development", value: "development" },
        { id: "option-2", label: "staging", value: "staging" },
        { id: "option-3", label: "production", value: "production" },
      ],
    });
  });

  it("labels JSON-string options with Python's spelling of non-strings", () => {
    const result = payload({ question: "Pick one", clarification_type: "approach_choice", options: JSON.stringify(["Option A", 2, true, null]) });
    expect(result.input_mode).toBe("choice_with_other");
    expect(result.options?.map((o) => o.label)).toEqual(["Option A", "2", "True", "None"]);
    expect(result.options?.map((o) => o.id)).toEqual(["option-1", "option-2", "option-3", "option-4"]);
  });

  it("flattens XML-to-dict options in source order and strips the leftover tags", () => {
    const result = payload({
      question: "How should the document structure change?",
      clarification_type: "approach_choice",
      options: {
        item: {
          item: "Move the system section earlier</item>",
          $text: "Merge it into the shared patterns section</item>",
        },
        $text: "Add a standalone section</item>",
      },
    });
    expect(result.options).toEqual([
      { id: "option-1", label: "Move the system section earlier", value: "Move the system section earlier" },
      { id: "option-2", label: "Merge it into the shared patterns section", value: "Merge it into the shared patterns section" },
      { id: "option-3", label: "Add a standalone section", value: "Add a standalone section" },
    ]);
  });

  it("flattens nested dict/list containers recursively, keeping string and number leaves and dropping nulls", () => {
    expect(normalizeClarificationOptions({ item: [["First</item>"], { $text: 2 }], $text: null })).toEqual(["First", "2"]);
  });

  it("flattens containers nested inside a list instead of printing them as one label", () => {
    expect(normalizeClarificationOptions(["a", { item: "<item>b</item>" }, ["c", ["a"]]])).toEqual(["a", "b", "c"]);
  });

  it("strips tags with attributes and Unicode name characters after an ASCII start (as Python's \\w does), then trims", () => {
    expect(normalizeClarificationOptions(['<opt id="1"> 部署 </opt>', "<item名>生产</item名>", "<选项>kept</选项>", "a < b"])).toEqual(["部署", "生产", "<选项>kept</选项>", "a < b"]);
  });

  it("trims like Python's strip(): U+0085 goes, U+FEFF stays", () => {
    expect(normalizeClarificationOptions(["\u0085dev\u001c", "\ufeffprod"])).toEqual(["dev", "\ufeffprod"]);
  });

  it("makes a plain string a one-option choice", () => {
    expect(payload({ question: "Pick one", clarification_type: "approach_choice", options: "just one option" }).options).toEqual([
      { id: "option-1", label: "just one option", value: "just one option" },
    ]);
  });

  it("is free_text without options, and has no options key", () => {
    for (const extra of [{ options: null }, {}, { options: ["", "  "] }]) {
      const result = payload({ question: "Tell me more", clarification_type: "missing_info", ...extra });
      expect(result.input_mode).toBe("free_text");
      expect(result.version).toBe(1);
      expect(result).not.toHaveProperty("options");
    }
  });

  it("trims top-level options, drops blanks and duplicates", () => {
    expect(payload({ question: "Which env?", clarification_type: "approach_choice", options: [" dev ", "", "prod", "dev"] }).options).toEqual([
      { id: "option-1", label: "dev", value: "dev" },
      { id: "option-2", label: "prod", value: "prod" },
    ]);
  });

  it("keeps context only when given, null when given as null", () => {
    expect(payload({ question: "q" })).not.toHaveProperty("context");
    expect(payload({ question: "q", context: null }).context).toBeNull();
    expect(payload({ question: "q", context: 42 }).context).toBe("42");
  });

  it("defaults the type to missing_info and writes a non-string type as text without failing", () => {
    expect(payload({ question: "q" }).clarification_type).toBe("missing_info");
    expect(payload({ question: "q", clarification_type: [] }).clarification_type).toBe("[]");
    expect(payload({ question: null }).question).toBe("");
  });

  it("accepts the arguments as a JSON string, and anything else as no arguments", () => {
    expect(normalizeClarification(JSON.stringify({ question: "q?", options: ["a"] })).payload.input_mode).toBe("choice_with_other");
    expect(normalizeClarification(["not", "args"]).payload).toMatchObject({ question: "", input_mode: "free_text" });
  });

  it("omits tool_call_id without one and derives the request id from the text's SHA-256", async () => {
    const result = normalizeClarification({ question: "Which environment should I use?", clarification_type: "missing_info" });
    expect(result.payload).not.toHaveProperty("tool_call_id");
    expect(result.payload.request_id).toBe(`clarification:${(await sha256Hex(result.text)).slice(0, 16)}`);
  });
});

describe("human_input payload, v2 forms", () => {
  it("scenario M57: valid fields produce a version-2 form", () => {
    const result = form(expenseFields());
    expect(result.version).toBe(2);
    expect(result.input_mode).toBe("form");
    expect(result.fields).toEqual([
      { name: "amount", label: "Amount", type: "number", required: true },
      {
        name: "category",
        label: "Category",
        type: "select",
        required: true,
        options: [
          { id: "category-option-1", label: "travel", value: "travel" },
          { id: "category-option-2", label: "meals", value: "meals" },
        ],
      },
      {
        name: "receipts",
        label: "Receipts",
        type: "multi_select",
        required: false,
        options: [
          { id: "receipts-option-1", label: "A-1", value: "A-1" },
          { id: "receipts-option-2", label: "A-2", value: "A-2" },
        ],
      },
      { name: "note", label: "note", type: "textarea", required: false },
    ]);
  });

  it("accepts fields sent as a JSON string", () => {
    const result = form(JSON.stringify([{ name: "amount", type: "number" }]));
    expect(result.input_mode).toBe("form");
    expect(result.fields).toEqual([{ name: "amount", label: "amount", type: "number", required: false }]);
  });

  it("lets a form take precedence over options", () => {
    const result = form([{ name: "amount" }], { options: ["dev", "prod"] });
    expect(result.input_mode).toBe("form");
    expect(result).not.toHaveProperty("options");
  });

  it("degrades an unknown type, including unhashable JSON such as [] or {}, to text without failing", () => {
    for (const badType of ["slider", [], {}, ["select"], { t: "select" }, 3, null]) {
      expect(form([{ name: "amount", type: badType }]).fields?.[0]?.type).toBe("text");
    }
  });

  it("degrades an option-less select to text, without an options key", () => {
    for (const options of [undefined, [], ["", "  "], null]) {
      const field = form([{ name: "category", type: "select", options }]).fields?.[0];
      expect(field?.type).toBe("text");
      expect(field).not.toHaveProperty("options");
    }
  });

  it("ignores options on a field that is not a select", () => {
    expect(form([{ name: "note", type: "text", options: ["a"] }]).fields).toEqual([{ name: "note", label: "note", type: "text", required: false }]);
  });

  it("degrades the whole form when any entry is structurally broken, falling back to the options", () => {
    for (const badEntry of ["not-a-dict", ["name"], null, { label: "no name" }, { name: "   " }, { name: 7 }]) {
      const result = form([badEntry, { name: "amount", type: "number" }], { options: ["dev", "prod"] });
      expect(result.version).toBe(1);
      expect(result.input_mode).toBe("choice_with_other");
      expect(result).not.toHaveProperty("fields");
    }
  });

  it("degrades the whole form on duplicate names (after trimming)", () => {
    const result = form([
      { name: "amount", type: "number" },
      { name: " amount ", type: "text" },
    ]);
    expect(result.version).toBe(1);
    expect(result.input_mode).toBe("free_text");
    expect(result).not.toHaveProperty("fields");
  });

  it("scenario M57: a field named __proto__ (or any Object.prototype member) downgrades the whole form to v1", () => {
    for (const reserved of RESERVED_FIELD_NAMES) {
      const result = form([{ name: "amount" }, { name: reserved, type: "text" }]);
      expect(result.input_mode, reserved).toBe("free_text");
      expect(result.version).toBe(1);
      expect(result).not.toHaveProperty("fields");
    }
    // As a model sends it: JSON text whose parse makes `__proto__` an own key of the entry.
    const parsed = form('[{"name": "__proto__", "__proto__": {"polluted": true}}]');
    expect(parsed.input_mode).toBe("free_text");
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
  });

  it("scenario M57: 17 fields downgrade the whole form to v1; 16 are accepted", () => {
    const fields = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `field_${i}`, type: "text" }));
    const over = form(fields(17));
    expect(over.version).toBe(1);
    expect(over.input_mode).toBe("free_text");
    expect(over).not.toHaveProperty("fields");
    expect(form(fields(16)).fields).toHaveLength(16);
  });

  it("degrades the whole form on 25 options in one field; 24 are accepted", () => {
    const options = (n: number) => Array.from({ length: n }, (_, i) => `option-${i}`);
    expect(form([{ name: "category", type: "select", options: options(25) }]).input_mode).toBe("free_text");
    expect(form([{ name: "category", type: "select", options: options(24) }]).fields?.[0]?.options).toHaveLength(24);
  });

  it("degrades the whole form on a 201-character name, label, option or placeholder; 200 are accepted (code points)", () => {
    const long = "x".repeat(201);
    for (const entry of [
      { name: long },
      { name: "a", label: long },
      { name: "a", type: "select", options: [long] },
      { name: "a", placeholder: long },
    ]) {
      expect(form([entry]).input_mode).toBe("free_text");
    }
    // 200 astral characters are 400 UTF-16 units but 200 code points, as Python counts them.
    expect(form([{ name: "a", label: "😀".repeat(200) }]).input_mode).toBe("form");
  });

  it("degrades the whole form over the 16 KB serialised budget even when every item is within its cap", () => {
    const fields = Array.from({ length: 16 }, (_, i) => ({
      name: `field_${i}`,
      label: "标".repeat(190),
      type: "select",
      options: Array.from({ length: 20 }, (_, j) => `${"选".repeat(190)}${j}`),
    }));
    const result = form(fields);
    expect(result.input_mode).toBe("free_text");
    expect(result).not.toHaveProperty("fields");
  });

  it("measures the budget as Python's json.dumps bytes, separators included", () => {
    const utf8 = (value: string) => new TextEncoder().encode(value).length;
    // n bytes in at most 200 code points: 4-byte characters plus up to three ASCII ones.
    const fill = (n: number) => "😀".repeat(Math.floor(n / 4)) + "x".repeat(n % 4);
    // Sixteen text fields whose normalised form is exactly `total` bytes as Python writes it.
    const formOfBytes = (total: number) => {
      const overhead = utf8('{"name": "", "label": "", "type": "text", "required": false}');
      let content = total - 2 - 2 * 15 - 16 * overhead;
      return Array.from({ length: 16 }, (_, i) => {
        const share = Math.ceil(content / (16 - i));
        content -= share;
        const prefix = `f${String(i).padStart(2, "0")}`;
        const nameBytes = Math.floor(share / 2);
        return { name: prefix + fill(nameBytes - prefix.length), label: fill(share - nameBytes), type: "text" };
      });
    };
    const atBudget = formOfBytes(MAX_FORM_SERIALIZED_BYTES);
    const overBudget = formOfBytes(MAX_FORM_SERIALIZED_BYTES + 1);
    const accepted = form(atBudget);
    expect(accepted.input_mode).toBe("form");
    expect(accepted.fields).toHaveLength(16);
    expect(form(overBudget).input_mode).toBe("free_text");
    // Compact JSON would have let the second form through: the separators are what tip it over.
    const compact = utf8(JSON.stringify(overBudget.map((f) => ({ ...f, required: false }))));
    expect(compact).toBeLessThan(MAX_FORM_SERIALIZED_BYTES);
  });

  it("keeps the text fallback of every form the budget accepts under 30 KB (strictest IM channel)", () => {
    let largest: string | undefined;
    for (let count = 1; count <= 16; count++) {
      const fields = Array.from({ length: count }, (_, i) => ({
        name: `field_${i}`,
        label: "标".repeat(150),
        type: "select",
        options: Array.from({ length: 10 }, (_, j) => `${"选".repeat(100)}${j}`),
      }));
      const result = normalizeClarification({ question: "Q", clarification_type: "missing_info", fields }, { toolCallId: "c" });
      if (result.payload.input_mode !== "form") break;
      largest = result.text;
    }
    expect(largest).toBeDefined();
    expect(new TextEncoder().encode(largest!).length).toBeLessThan(30_000);
  });

  it("reads required from booleans, 1/0 and 'true' strings", () => {
    const fields = form([
      { name: "a", required: 1 },
      { name: "b", required: 0 },
      { name: "c", required: " TRUE " },
      { name: "d", required: "yes" },
      { name: "e", required: [true] },
      { name: "f", required: true },
    ]).fields!;
    expect(fields.map((f) => f.required)).toEqual([true, false, true, false, false, true]);
  });

  it("keeps a trimmed placeholder and drops a blank one", () => {
    expect(form([{ name: "note", placeholder: "  Optional remarks " }]).fields?.[0]?.placeholder).toBe("Optional remarks");
    expect(form([{ name: "note", placeholder: "   " }]).fields?.[0]).not.toHaveProperty("placeholder");
  });

  it("trims, dedupes and drops blank field options", () => {
    const field = form([{ name: "category", type: "select", options: [" travel ", "", "  ", "travel", "meals"] }]).fields?.[0];
    expect(field?.options?.map((o) => o.label)).toEqual(["travel", "meals"]);
  });

  it("is deterministic: the same arguments give the same card and text", () => {
    const args = { question: "Q", fields: expenseFields(), options: ["x"] };
    expect(normalizeClarification(args)).toEqual(normalizeClarification(structuredClone(args)));
  });

  it("exposes the field normaliser on its own (empty means 'degrade')", () => {
    expect(normalizeClarificationFields("not json")).toEqual([]);
    expect(normalizeClarificationFields({ name: "a" })).toEqual([]);
    expect(normalizeClarificationFields([{ name: "a" }])).toHaveLength(1);
  });
});

describe("synchronous SHA-256", () => {
  it("matches crypto.subtle across block boundaries and non-ASCII text", async () => {
    const inputs = ["", "abc", "a".repeat(55), "a".repeat(56), "a".repeat(63), "a".repeat(64), "a".repeat(65), "标😀é", "x".repeat(1000)];
    for (const input of inputs) expect(sha256HexSync(input), `length ${input.length}`).toBe(await sha256Hex(input));
  });

  it("computes canonicalHash synchronously", async () => {
    for (const value of ["short", "z".repeat(300), { b: [1, "标"], a: null }]) {
      expect(canonicalHashSync(value)).toBe(await canonicalHash(value));
    }
  });
});

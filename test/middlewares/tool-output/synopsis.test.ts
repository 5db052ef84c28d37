import { describe, expect, it } from "vitest";
import { rawDecodeJson, JsonNumber } from "../../../src/middlewares/tool-output/json.ts";
import { buildToolOutputSynopsis, renderToolOutputPreview } from "../../../src/middlewares/tool-output/synopsis.ts";
import { PyText, codePointLength, pyFloatRepr, pySplitlines, pyStrip } from "../../../src/middlewares/tool-output/text.ts";
import { parseXmlOutline } from "../../../src/middlewares/tool-output/xml.ts";

/*
 * The synopsis is a port of upstream's tool_output_synopsis.py; these pin its behaviour with
 * upstream's own cases (TestBuildPreview, TestToolOutputSynopsis and the PR #3377 review
 * regressions). The rendered text was also compared line for line against the Python module on a
 * few hundred generated inputs while porting.
 */

function preview(content: string, toolName: string, headChars: number, tailChars: number, path = "/mnt/test/out.log"): string {
  return renderToolOutputPreview(content, { toolName, virtualPath: path, headChars, tailChars });
}

describe("tool output synopsis: preview", () => {
  it("starts with the file reference and carries a typed summary and a read_file hint", () => {
    const text = preview(`HEAD_${"x".repeat(5000)}_TAIL`, "bash", 100, 50, "/mnt/test/bash-abc.log");
    expect(text.startsWith("[Full bash output saved to /mnt/test/bash-abc.log (5010 chars, ~1252 tokens).]")).toBe(true);
    expect(text).toContain("[Preview kind: text. This is a structured synopsis, not a raw head/tail truncation.]");
    expect(text).toContain("Text output:");
    expect(text).toContain("- Use read_file on /mnt/test/bash-abc.log with start_line and end_line to inspect the raw output.");
  });

  it("JSON: top-level keys, nested container paths and scalar examples, plus the raw sample", () => {
    const content = `{"meta":{"source":"unit"},"items":[{"id":1,"name":"alpha"},{"id":2,"name":"beta"}],"payload":"${"x".repeat(5000)}","tail_marker":"SHOULD_NOT_NEED_TAIL"}`;
    const text = preview(content, "mcp_json", 80, 40);
    expect(text).toContain("Preview kind: json");
    expect(text).toContain("JSON object with 4 top-level keys");
    expect(text).toContain("Top-level keys: meta, items, payload, tail_marker");
    expect(text).toContain("items: array length 2");
    expect(text).toContain('$.meta.source: "unit"');
    expect(text).toContain("Raw sample (head + tail");
    expect(text.split("x").length - 1).toBeGreaterThanOrEqual(50);
  });

  it("JSON: nested paths without line or byte anchors", () => {
    const data = { data: { items: Array.from({ length: 47 }, (_, id) => ({ id, name: `item-${id}` })), next_cursor: "cursor-2" }, meta: { source: "unit" } };
    const text = preview(JSON.stringify(data, null, 2), "api_tool", 80, 40);
    expect(text).toContain("$.data: object keys 2; keys items, next_cursor");
    expect(text).toContain("$.data.items: array length 47; first item object");
    expect(text.split("Access:")[0]).not.toContain("line ");
    expect(text).not.toContain("byte offset ");
    const leading = preview(`\n\n${JSON.stringify({ data: { items: [1, 2, 3] } }, null, 2)}`, "api_tool", 80, 40);
    expect(leading).toContain("$.data: object keys 1; keys items");
  });

  it("JSON: a key that also appears as a value earlier gets its path and no offset", () => {
    const text = preview('{"label": "items", "items": {"id": 1, "name": "foo"}}', "api_tool", 200, 200);
    expect(text).not.toContain("byte offset");
    expect(text).toContain("$.items");
  });

  it("CSV: columns and the first data row", () => {
    const content = `name,score\n${Array.from({ length: 10 }, (_, i) => `Ada${i},${90 + i}`).join("\n")}\n`;
    const text = preview(content, "csv_tool", 80, 40);
    expect(text).toContain("Preview kind: csv");
    expect(text).toContain("CSV table with 10 data rows and 2 columns");
    expect(text).toContain("columns: name, score");
    expect(text).toContain("first data row: name=Ada0 | score=90");
  });

  it("restores raw head and tail bytes for text (head_chars / tail_chars are operational)", () => {
    const logs = preview("log line 1\n".repeat(200), "bash", 400, 400);
    expect(logs).toContain("Raw sample (head + tail");
    expect(logs.split("log line 1").length - 1).toBeGreaterThanOrEqual(70);
    const words = preview("alpha ".repeat(1000), "bash", 300, 300);
    expect(words.split("alpha").length - 1).toBeGreaterThanOrEqual(50);
  });

  it("reports size in code points and ~chars/4 tokens", () => {
    const text = preview("😀".repeat(1000), "t", 10, 10);
    expect(text).toContain("(1000 chars, ~250 tokens)");
  });
});

describe("tool output synopsis: detectors", () => {
  it("code: imports and symbols", () => {
    const result = buildToolOutputSynopsis("import os\nfrom pathlib import Path\n\nclass Runner:\n    pass\n\ndef main():\n    return Path(os.getcwd())\n", "python");
    expect(result.kind).toBe("code");
    expect(result.structure[0]).toContain("line count");
    expect(result.structure).toContain("imports: os, pathlib");
    expect(result.notableItems).toEqual(["class Runner", "def main"]);
  });

  it("yaml: top-level keys and their types", () => {
    const result = buildToolOutputSynopsis("name: deer\nsettings:\n  enabled: true\n  retries: 3\nitems:\n  - alpha\n", "config");
    expect(result.kind).toBe("yaml");
    expect(result.summary).toContain("Top-level keys: name, settings, items");
    expect(result.structure).toEqual(["name: string", "settings: object", "items: array"]);
  });

  it("xml: root tag and child counts", () => {
    const result = buildToolOutputSynopsis('<feed><entry id="1"/><entry id="2"/><meta/></feed>', "xml");
    expect(result.kind).toBe("xml");
    expect(result.summary).toContain("XML document with root tag feed.");
    expect(result.structure).toEqual(["root tag: feed", "root attributes: 0", "entry: 2", "meta: 1"]);
  });

  it("review 5: LEVEL: message log lines are text, not YAML", () => {
    const logs = "INFO: starting service\nERROR: failed to connect\nWARN: retrying\nINFO: connected\n".repeat(200);
    expect(buildToolOutputSynopsis(logs, "bash").kind).toBe("text");
  });

  it("review 7: deeply nested JSON is summarised without unbounded recursion", () => {
    let deep: unknown = { k: 1 };
    for (let i = 0; i < 500; i++) deep = { k: deep };
    expect(buildToolOutputSynopsis(JSON.stringify(deep)).kind).toBe("json");
  });

  it("review 8: a quoted CSV cell holding the delimiter round-trips in the first data row", () => {
    const rows = [
      'Ada,"a fine, brilliant logician",98',
      'Grace,"a creator, of compilers",99',
      'Alan,"a pioneer, of computing",95',
      'Kurt,"a poet, of logic",91',
      'Ada2,"another, fine mind",97',
      'Grace2,"yet another, creator",93',
    ];
    const result = buildToolOutputSynopsis(`name,description,score\n${rows.join("\n")}\n`, "csv_tool");
    expect(result.kind).toBe("csv");
    const firstRow = result.structure.find((line) => line.startsWith("first data row:"))!;
    expect(firstRow).toBe("first data row: name=Ada | description=a fine, brilliant logician | score=98");
  });

  it("review 9: tab-indented bash output (ls -l) is not TSV", () => {
    const row = "drwxr-xr-x  2 user  group   64 Jun 24 17:00 dir";
    const out = `ls -l output:\n\ttotal 0\n${[1, 2, 3, 4, 5].map((i) => `\t${row}${i}`).join("\n")}\n`;
    expect(buildToolOutputSynopsis(out, "bash").kind).toBe("text");
  });

  it("TSV with an identifier header is a table", () => {
    const out = `a\tb\tc\n${Array.from({ length: 20 }, (_, i) => `${i}\t${i * 2}\tq${i}`).join("\n")}`;
    const result = buildToolOutputSynopsis(out, "tool");
    expect(result.kind).toBe("tsv");
    expect(result.summary).toEqual(["TSV table with 20 data rows and 3 columns."]);
  });

  it("review 11: short text has an opening excerpt and no closing one", () => {
    const result = buildToolOutputSynopsis("hello world ".repeat(30));
    expect(result.summary.some((line) => line.startsWith("Opening excerpt: "))).toBe(true);
    expect(result.summary.some((line) => line.startsWith("Closing excerpt: "))).toBe(false);
  });

  it("text: section headers are detected and deduplicated", () => {
    const result = buildToolOutputSynopsis("# Title\n\nSome text\n## Section Two\nMORE TEXT HEADER\nok\n# Title\n");
    expect(result.summary[1]).toBe("Detected section headers: # Title | ## Section Two | MORE TEXT HEADER.");
  });

  it("empty and binary-like output are unknown", () => {
    expect(buildToolOutputSynopsis("")).toMatchObject({ kind: "unknown", title: "Empty output" });
    const binary = buildToolOutputSynopsis("x\x01\x02\x03".repeat(300));
    expect(binary).toMatchObject({ kind: "unknown", title: "Binary-like output" });
    expect(binary.sample).toContain("\n...\n");
  });

  it("a Rust/Java hint needs a strong signal: 'use the following' is prose", () => {
    expect(buildToolOutputSynopsis("use the following steps\nthen more prose\n").kind).toBe("text");
    expect(buildToolOutputSynopsis("use std::io;\nfn main() {\n}\n").kind).toBe("code");
  });
});

describe("tool output synopsis: JSON reader", () => {
  it("reads the first value, keeps key order and the int/float distinction", () => {
    const decoded = rawDecodeJson('{"b": 1, "2": 1.0, "1": [true, null, 1e16, 0.0001, 1e-5, -0]} tail')!;
    expect(decoded.end).toBe('{"b": 1, "2": 1.0, "1": [true, null, 1e16, 0.0001, 1e-5, -0]}'.length);
    const value = decoded.value as Map<string, unknown>;
    expect([...value.keys()]).toEqual(["b", "2", "1"]);
    expect((value.get("2") as JsonNumber).repr).toBe("1.0");
    expect((value.get("1") as unknown[]).slice(2).map((n) => (n as JsonNumber).repr)).toEqual(["1e+16", "0.0001", "1e-05", "0"]);
  });

  it("rejects raw control characters in strings and bad escapes, accepts NaN and Infinity", () => {
    expect(rawDecodeJson('{"a": "x\ny"}')).toBeNull();
    expect(rawDecodeJson('{"a": "\\q"}')).toBeNull();
    expect(rawDecodeJson("[1, 2")).toBeNull();
    expect(((rawDecodeJson("[NaN, -Infinity]")!.value as JsonNumber[])[1]!).repr).toBe("-inf");
  });

  it("a repeated key keeps its first position and the last value", () => {
    const value = rawDecodeJson('{"a": 1, "b": 2, "a": 3}')!.value as Map<string, JsonNumber>;
    expect([...value.keys()]).toEqual(["a", "b"]);
    expect(value.get("a")!.repr).toBe("3");
  });

  it("gives up on absurd depth instead of exhausting the stack", () => {
    expect(rawDecodeJson(`${"[".repeat(5000)}${"]".repeat(5000)}`)).toBeNull();
  });
});

describe("tool output synopsis: XML reader", () => {
  it("names namespaced tags as ElementTree does and does not count xmlns declarations", () => {
    const outline = parseXmlOutline('<?xml version="1.0"?>\n<!-- c -->\n<r xmlns="urn:a" xmlns:b="urn:b" b:x="1" y="2"><b:c/><d/><d>t &amp; &#65;</d><![CDATA[<x>]]></r>\n');
    expect(outline).toEqual({ rootTag: "{urn:a}r", rootAttributeCount: 2, childTags: ["{urn:b}c", "{urn:a}d", "{urn:a}d"] });
  });

  it.each([
    ["<r><a></b></r>", "mismatched tags"],
    ["<r/>junk", "junk after the root"],
    ["<r>&bad;</r>", "an undefined entity"],
    ["<a:r/>", "an unbound prefix"],
    ['<r x="1" x="2"/>', "a duplicate attribute"],
    ["<r>", "an unclosed root"],
    ['<!DOCTYPE r [<!ENTITY a "aaaa">]><r>&a;</r>', "an entity declaration"],
    ["<r/><r/>", "two roots"],
  ])("refuses %s (%s)", (text) => {
    expect(parseXmlOutline(text)).toBeNull();
  });

  it("a billion-laughs document is not expanded, just refused", () => {
    const bomb = `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">${Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i || ""};`.repeat(10)}">`).join("")}]><lolz>&lol9;</lolz>`;
    expect(parseXmlOutline(bomb)).toBeNull();
    expect(buildToolOutputSynopsis(bomb).kind).not.toBe("xml");
  });
});

describe("tool output synopsis: Python text semantics", () => {
  it("counts and slices by code point", () => {
    const text = PyText.of("a😀b😀c");
    expect(text.length).toBe(5);
    expect(text.slice(1, 3)).toBe("😀b");
    expect(text.tail(2)).toBe("😀c");
    expect(text.rfind("b", 0, 5)).toBe(2);
    expect(codePointLength("😀😀")).toBe(2);
  });

  it("splits lines and strips whitespace as str.splitlines() and str.strip()", () => {
    expect(pySplitlines("a\r\nb\x0bc\u2028d\n")).toEqual(["a", "b", "c", "d"]);
    expect(pySplitlines("")).toEqual([]);
    expect(pyStrip("\x1c\u3000 x \x85")).toBe("x");
  });

  it("formats floats as repr()", () => {
    expect([1, 1.5, 1e16, 1e15, 0.0001, 0.00001, -0, 123.456, 1.5e-7].map(pyFloatRepr)).toEqual([
      "1.0",
      "1.5",
      "1e+16",
      "1000000000000000.0",
      "0.0001",
      "1e-05",
      "-0.0",
      "123.456",
      "1.5e-07",
    ]);
  });
});

// Comments stand on their own: whatever a comment or a test title cites must be in the repo. A
// section sign with a number, a pitfall number ("P3"), or a bare "scenario 12" points at documents
// the repo does not hold; a cited path must exist; a cited docs heading ("docs/toolchain.md, Deno
// permissions for langsmith") must be a heading of that file; "scenario M12" / "scenario G12" must
// be listed in docs/scenarios.md. The docs themselves may only name repo files that exist.
import { describe, expect, it } from "vitest";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SCANNED = ["src", "test", "bench", "adapters", "scripts", "deploy", "examples", "bin"];
const SOURCE = /\.(?:ts|mts|mjs|js|sh)$/;
const SKIPPED_DIRS = new Set(["node_modules", "dist", ".langgraph_api"]);

function walk(dir: string, keep: RegExp, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (!SKIPPED_DIRS.has(name)) walk(path, keep, out);
    } else if (keep.test(name)) out.push(path);
  }
  return out;
}

const rel = (path: string) => relative(ROOT, path).split("\\").join("/");

/** Comment text of a source file, line by line: `//` and `#` line comments and block comments. */
function commentLines(text: string, shell: boolean): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = [];
  const lines = text.split("\n");
  let inBlock = false;
  lines.forEach((raw, index) => {
    let line = raw;
    let comment = "";
    for (;;) {
      if (inBlock) {
        const end = line.indexOf("*/");
        if (end < 0) {
          comment += ` ${line}`;
          break;
        }
        comment += ` ${line.slice(0, end)}`;
        line = line.slice(end + 2);
        inBlock = false;
        continue;
      }
      // A comment opens at the line start or after whitespace or punctuation, never inside a word
      // or a path such as "https://host" or "src/*.ts".
      const opener = shell ? /(?:^|\s)#(?!!)/.exec(line) : /(?:^|[\s;,(){}[\]])(\/\/|\/\*)/.exec(line);
      if (!opener) break;
      const at = opener.index + opener[0].length;
      if (shell || opener[1] === "//") {
        comment += ` ${line.slice(at)}`;
        break;
      }
      line = line.slice(at);
      inBlock = true;
    }
    if (comment.trim() !== "") out.push({ line: index + 1, text: comment });
  });
  return out;
}

function headingsOf(doc: string): string[] {
  return readFileSync(join(ROOT, doc), "utf8")
    .split("\n")
    .filter((line) => /^#{1,6} /.test(line))
    .map((line) => line.replace(/^#{1,6} /, "").trim());
}

const scenarioIds = (): Set<string> =>
  new Set([...readFileSync(join(ROOT, "docs/scenarios.md"), "utf8").matchAll(/^- \*\*([MG]\d+)\*\*/gm)].map((m) => m[1]!));

/**
 * Every problem in one piece of text (a comment line, or a whole test file for its titles). `next`
 * is the comment line after it: a docs heading cited at the end of a line may go on there.
 */
function problems(text: string, where: string, scenarios: Set<string>, inComment: boolean, next = ""): string[] {
  const found: string[] = [];
  if (inComment) {
    for (const m of text.matchAll(/§\s*\d[\d.]*/g)) found.push(`${where}: cites "${m[0]}", a section of a document the repo does not hold; name a heading in docs/ or say it in plain words`);
    for (const m of text.matchAll(/\bP\d+[a-z]?\b/g)) found.push(`${where}: cites pitfall "${m[0]}"; name its heading in docs/toolchain.md instead`);
    for (const m of text.matchAll(/(?<![\w./-])((?:docs|test|src|bench|adapters|scripts|deploy)\/[\w./-]*[\w-]\.(?:ts|md|mjs|json|sh))\b/g)) {
      const path = m[1]!;
      if (!existsSync(join(ROOT, path))) {
        found.push(`${where}: names ${path}, which does not exist; fix the path or the comment`);
        continue;
      }
      const after = text.slice(m.index + m[0].length);
      if (!after.startsWith(",")) continue;
      const cited = `${after.slice(1)} ${next.replace(/^\s*\*?\s*/, "")}`.replace(/\s+/g, " ").trim();
      if (path.startsWith("docs/") && path.endsWith(".md") && /^[A-Z]/.test(cited)) {
        const headings = headingsOf(path);
        if (!headings.some((heading) => cited.startsWith(heading) && !/^[\w'-]/.test(cited.slice(heading.length)))) {
          found.push(`${where}: cites "${path}, ${cited}", but ${path} has no such heading (it has: ${headings.join("; ")})`);
        }
      }
    }
  }
  for (const m of text.matchAll(/\bscenarios?\s+(\d+)/gi)) found.push(`${where}: "${m[0]}" names no list; write scenario M${m[1]} or G${m[1]} (docs/scenarios.md)`);
  for (const m of text.matchAll(/\bscenarios?\s+([MG]\d+(?:(?:, | and )[MG]\d+)*)/gi)) {
    for (const id of m[1]!.match(/[MG]\d+/g)!) if (!scenarios.has(id)) found.push(`${where}: scenario ${id} is not listed in docs/scenarios.md`);
  }
  return found;
}

describe("references in comments and test titles", () => {
  it("finds a known-bad reference of every kind (the checks are live)", () => {
    const scenarios = new Set(["M1", "G1"]);
    const bad = [
      "see inventory §1.8",
      "toolchain pitfall P3b",
      "as src/nowhere/missing.ts says",
      "docs/toolchain.md, No such heading here",
      "scenario 12",
      "scenario M999",
    ];
    for (const text of bad) expect(problems(text, "x", scenarios, true), text).toHaveLength(1);
    const good = ["docs/toolchain.md, Deno permissions for langsmith)", "scenario M1 and G1", "src/index.ts", "https://example.com/src/x.ts"];
    for (const text of good) expect(problems(text, "x", scenarios, true), text).toEqual([]);
    // A heading may go on on the next comment line, but it must still be whole.
    expect(problems("(docs/toolchain.md, Deno permissions for", "x", scenarios, true, " * langsmith); and so on")).toEqual([]);
    expect(problems("(docs/toolchain.md,", "x", scenarios, true, " * Bun's idle timeout); the")).toEqual([]);
    expect(problems("(docs/toolchain.md, Deno permissions for", "x", scenarios, true, " * lang")).toHaveLength(1);
    expect(commentLines('const glob = "src/*.ts"; // see docs/chain.md\n/* a\n b */ x', false).map((c) => c.text.trim())).toEqual([
      "see docs/chain.md",
      "a",
      "b",
    ]);
  });

  it("every comment in src/, test/, bench/, adapters/, scripts/, deploy/, examples/ and bin/ cites what the repo holds", () => {
    const scenarios = scenarioIds();
    const found: string[] = [];
    for (const folder of SCANNED) {
      for (const file of walk(join(ROOT, folder), SOURCE)) {
        const text = readFileSync(file, "utf8");
        const name = rel(file);
        if (name === "test/house/references.test.ts") continue; // its own examples are bad on purpose
        const comments = commentLines(text, file.endsWith(".sh"));
        comments.forEach((comment, i) => {
          const following = comments[i + 1];
          const next = following && following.line === comment.line + 1 ? following.text : "";
          found.push(...problems(comment.text, `${name}:${comment.line}`, scenarios, true, next));
        });
        // Test titles are strings, not comments: only their scenario names are checked.
        if (name.startsWith("test/")) found.push(...problems(text, name, scenarios, false));
      }
    }
    expect(found).toEqual([]);
  });

  it("every repo file the docs name exists", () => {
    const found: string[] = [];
    for (const doc of walk(join(ROOT, "docs"), /\.md$/)) {
      const text = readFileSync(doc, "utf8");
      for (const m of text.matchAll(/`((?:src|test|bench|adapters|scripts|deploy|docs)\/[\w./-]+)`/g)) {
        if (!existsSync(join(ROOT, m[1]!))) found.push(`${rel(doc)} names ${m[1]}, which does not exist`);
      }
    }
    expect(found).toEqual([]);
  });
});

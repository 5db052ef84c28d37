// The relative-import graph of src/, read from the sources (shared by the house import-graph test
// and the extension-layer guard in test/extensions/layering.test.ts).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

export const SRC: string = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");

export interface Edge {
  readonly from: string;
  readonly to: string;
  readonly specifier: string;
}

/** Every .ts file below `dir` (default src/), as absolute paths. */
export function sourceFiles(dir: string = SRC, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

function resolveImport(fromFile: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const base = resolve(dirname(fromFile), specifier);
  for (const candidate of [base, base.replace(/\.js$/, ".ts"), `${base}.ts`, join(base, "index.ts")]) {
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not this candidate
    }
  }
  throw new Error(`${relative(SRC, fromFile)}: import "${specifier}" resolves to no file under src/`);
}

/**
 * The module specifiers a source names: `import ... from`, `export ... from`, `import "x"`,
 * `import type`, `import("x")` and `typeof import("x")`. Comment lines are skipped; a specifier found
 * anywhere else must resolve to a file (resolveImport throws otherwise), so a false match is loud.
 */
export function specifiers(source: string): string[] {
  const found: string[] = [];
  let inBlockComment = false;
  for (const line of source.split("\n")) {
    const trimmed = line.trimStart();
    if (inBlockComment) {
      if (trimmed.includes("*/")) inBlockComment = false;
      continue;
    }
    if (trimmed.startsWith("//") || trimmed.startsWith("*")) continue;
    if (trimmed.startsWith("/*")) {
      inBlockComment = !trimmed.includes("*/");
      continue;
    }
    const code = line.replace(/\s\/\/\s.*$/, "");
    for (const match of code.matchAll(/\b(?:from|import)\s*\(?\s*(["'])([^"'\n]+)\1/g)) found.push(match[2]!);
  }
  return found;
}

/** Every relative import of every .ts file under `src`, as src-relative paths with "/" separators. */
export function importEdges(src: string = SRC): { files: string[]; edges: Edge[] } {
  const rel = (path: string) => relative(src, path).split(sep).join("/");
  const files = sourceFiles(src);
  const edges: Edge[] = [];
  for (const file of files) {
    for (const specifier of specifiers(readFileSync(file, "utf8"))) {
      const target = resolveImport(file, specifier);
      if (target !== undefined) edges.push({ from: rel(file), to: rel(target), specifier });
    }
  }
  return { files: files.map(rel), edges };
}

/** The folder a src-relative file belongs to: its first path segment, or "index.ts" for the entry. */
export function folderOf(file: string): string {
  const slash = file.indexOf("/");
  return slash < 0 ? file : file.slice(0, slash);
}

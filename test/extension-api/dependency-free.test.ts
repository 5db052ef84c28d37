import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const apiRoot = fileURLToPath(new URL("../../src/extension-api/", import.meta.url));

interface ImportViolation {
  readonly specifier: string;
  readonly reason: string;
}

/**
 * Every module specifier the source names, and why it is not allowed. Deliberately conservative:
 * a false alarm costs a rewording, a miss lets a dependency into the public contract.
 */
function findImportViolations(source: string, fileRelativePath: string): ImportViolation[] {
  const violations: ImportViolation[] = [];
  const staticSpecifier = /\b(?:from|import)\s*(['"`])([^'"`]*)\1/g;
  for (const match of source.matchAll(staticSpecifier)) {
    const specifier = match[2] ?? "";
    const reason = relativeSpecifierProblem(specifier, fileRelativePath);
    if (reason !== null) violations.push({ specifier, reason });
  }
  for (const match of source.matchAll(/\bimport\s*\(([^)]*)\)?/g)) {
    violations.push({ specifier: `import(${match[1] ?? ""})`, reason: "dynamic import" });
  }
  for (const match of source.matchAll(/\brequire\s*\(([^)]*)\)?/g)) {
    violations.push({ specifier: `require(${match[1] ?? ""})`, reason: "require" });
  }
  for (const match of source.matchAll(/\/\/\/\s*<reference\b[^>]*>/g)) {
    violations.push({ specifier: match[0], reason: "triple-slash reference" });
  }
  return violations;
}

function relativeSpecifierProblem(specifier: string, fileRelativePath: string): string | null {
  if (!specifier.startsWith("./")) return "not a ./ path inside src/extension-api";
  if (specifier.split("/").includes("..")) return "climbs out with ..";
  if (!specifier.endsWith(".ts")) return "relative imports name the .ts file";
  const target = posix.normalize(posix.join(posix.dirname(fileRelativePath), specifier));
  if (target.startsWith("../")) return "resolves outside src/extension-api";
  return null;
}

function listSourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    return entry.isDirectory() ? listSourceFiles(path) : [path];
  });
}

const files = listSourceFiles(apiRoot).map((path) => ({
  path: relative(apiRoot, path).split("\\").join("/"),
  source: readFileSync(path, "utf8"),
}));

describe("src/extension-api stays dependency-free", () => {
  it("holds the public contract's modules", () => {
    const names = files.map((file) => file.path);
    for (const expected of ["index.ts", "canonical.ts", "provenance.ts", "placement.ts", "release.ts", "assembly.ts"]) {
      expect(names).toContain(expected);
    }
  });

  for (const file of files) {
    it(`${file.path} imports only sibling files that exist`, () => {
      expect(findImportViolations(file.source, file.path)).toEqual([]);
      for (const match of file.source.matchAll(/\b(?:from|import)\s*["'](\.\/[^"']+)["']/g)) {
        const target = join(apiRoot, posix.dirname(file.path), match[1] ?? "");
        expect(existsSync(target), `${file.path} imports missing ${match[1]}`).toBe(true);
      }
    });

    it(`${file.path} uses no runtime-specific global`, () => {
      const runtimeGlobal = /\b(?:process|Deno|Bun)\s*(?:\.|\[)|\b(?:Buffer|__dirname|__filename)\b/;
      expect(file.source.match(runtimeGlobal)?.[0] ?? null).toBeNull();
    });
  }

  it("re-exports every module from index.ts", () => {
    const index = files.find((file) => file.path === "index.ts")?.source ?? "";
    for (const file of files) {
      if (file.path === "index.ts") continue;
      expect(index, `index.ts does not re-export ./${file.path}`).toContain(`export * from "./${file.path}"`);
    }
  });
});

describe("findImportViolations", () => {
  const rejected: ReadonlyArray<[string, string]> = [
    ['import x from "valibot";', "valibot"],
    ['import * as v from "valibot"', "valibot"],
    ['import type { BaseMessage } from "@langchain/core/messages";', "@langchain/core/messages"],
    ['import { webcrypto } from "node:crypto";', "node:crypto"],
    ["import '../core/ids.ts';", "../core/ids.ts"],
    ['export * from "../core/ids.ts";', "../core/ids.ts"],
    ['export { a } from "./nested/../../core/a.ts";', "./nested/../../core/a.ts"],
    ['export type { T } from "hono";', "hono"],
    ['import {\n  a,\n  b,\n} from "yaml";', "yaml"],
    ['import x from "/abs/path.ts";', "/abs/path.ts"],
    ['import x from "./canonical.js";', "./canonical.js"],
    ['import x from "./canonical";', "./canonical"],
    ['const m = await import("./canonical.ts");', 'import("./canonical.ts")'],
    ["const m = await import(name);", "import(name)"],
    ['const fs = require("fs");', 'require("fs")'],
    ['/// <reference types="node" />', '/// <reference types="node" />'],
  ];
  for (const [source, specifier] of rejected) {
    it(`flags ${JSON.stringify(source)}`, () => {
      const violations = findImportViolations(source, "sample.ts");
      expect(violations.map((violation) => violation.specifier)).toContain(specifier);
    });
  }

  const accepted = [
    'import { canonicalJson } from "./canonical.ts";',
    'import type { Placement } from "./placement.ts";',
    'export * from "./release.ts";',
    'export { ContentKind } from "./provenance.ts";',
    'import "./side-effect.ts";',
    "import {\n  a,\n  b,\n} from './assembly.ts';",
    "const message = `nothing is imported here`;",
  ];
  for (const source of accepted) {
    it(`allows ${JSON.stringify(source)}`, () => {
      expect(findImportViolations(source, "sample.ts")).toEqual([]);
    });
  }

  it("allows a subfolder file to import a sibling inside the folder but not one above it", () => {
    expect(findImportViolations('import { a } from "./b.ts";', "sub/a.ts")).toEqual([]);
    expect(findImportViolations('import { a } from "../canonical.ts";', "sub/a.ts")).not.toEqual([]);
  });
});

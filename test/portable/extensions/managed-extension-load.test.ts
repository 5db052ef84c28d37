import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createModuleLoader } from "../../../adapters/shared/module-loader.ts";
import { loadExtensions } from "../../../src/extensions/loader.ts";
import { parsePlugins } from "../../../src/extensions/config.ts";
import { checkExtensionEntry } from "../../../src/extensions/manager/entry-check.ts";
import { managedUse, readExtensionEntry } from "../../../src/extensions/manager/packaging.ts";

/*
 * The layout `deerflow-edge extension install` leaves behind (npm copies the package into
 * extensions/node_modules/<package>/ next to config.yaml) and the `use` it records must load on
 * every runtime. npm itself runs only in the Node suite; here the fixture package is copied into
 * the same layout, which is exactly what npm's packed folder install produces.
 */

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";
const fixture = fileURLToPath(new URL("../../fixtures/extensions/managed-extension/", import.meta.url));
const made: string[] = [];

afterAll(async () => {
  await Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true })));
});

describe(`an installed extension package (${runtime})`, () => {
  it("loads from extensions/node_modules through the recorded use, and its install registers", async () => {
    const project = await mkdtemp(join(tmpdir(), "deerflow-managed-load-"));
    made.push(project);
    const { readFile } = await import("node:fs/promises");
    const entry = readExtensionEntry(await readFile(join(fixture, "package.json"), "utf8"), "fixture package.json");
    await cp(fixture, join(project, "extensions", "node_modules", entry.packageName), { recursive: true });

    const use = managedUse(entry.packageName, entry);
    expect(use).toBe("./extensions/node_modules/deerflow-extension-fixture/index.js:install");
    const loader = createModuleLoader({ baseDir: project });
    expect(await checkExtensionEntry(loader, use)).toEqual({ loads: true });

    const result = await loadExtensions(parsePlugins([{ name: entry.name, package: entry.packageName, use, required: true, config: { serviceName: "from-config" } }]), loader);
    expect(result.loaded).toEqual([use]);
    expect(result.extensions.services.map((service) => service.value.name)).toEqual(["from-config"]);
  });

  it("reports an entry whose export is missing as not loading, with the reason", async () => {
    const project = await mkdtemp(join(tmpdir(), "deerflow-managed-load-"));
    made.push(project);
    await cp(fixture, join(project, "extensions", "node_modules", "deerflow-extension-fixture"), { recursive: true });
    const loader = createModuleLoader({ baseDir: project });
    const check = await checkExtensionEntry(loader, "./extensions/node_modules/deerflow-extension-fixture/index.js:setup");
    expect(check).toEqual({ loads: false, reason: 'the module has no export "setup"' });
  });
});

import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFsDeploymentFiles } from "../../../adapters/shared/fs-deployment-files.ts";

/*
 * The skills folder as a place to install into: a folder appears whole or not at all, an existing
 * folder is never replaced, and a path that leaves the folder is refused before anything is written.
 */

const bytes = (text: string) => new TextEncoder().encode(text);
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "deerflow-deployment-files-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function everything(): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.map((entry) => join(entry.parentPath, entry.name).slice(dir.length + 1)).sort();
}

describe("fs deployment files", () => {
  it("creates a folder with its files, nested folders included", async () => {
    const files = createFsDeploymentFiles(dir, "the skills folder");
    expect(await files.createFolder("custom/pdf", [{ path: "SKILL.md", bytes: bytes("skill") }, { path: "references/api.md", bytes: bytes("api") }])).toBe(true);
    expect(await readFile(join(dir, "custom/pdf/references/api.md"), "utf8")).toBe("api");
    expect(await everything()).toEqual(["custom", "custom/pdf", "custom/pdf/SKILL.md", "custom/pdf/references", "custom/pdf/references/api.md"]);
  });

  it("leaves an existing folder as it is and answers false", async () => {
    await mkdir(join(dir, "custom/pdf"), { recursive: true });
    await writeFile(join(dir, "custom/pdf/SKILL.md"), "mine");
    const files = createFsDeploymentFiles(dir);
    expect(await files.createFolder("custom/pdf", [{ path: "SKILL.md", bytes: bytes("theirs") }])).toBe(false);
    expect(await readFile(join(dir, "custom/pdf/SKILL.md"), "utf8")).toBe("mine");
    expect(await everything()).toEqual(["custom", "custom/pdf", "custom/pdf/SKILL.md"]);
  });

  it("of two concurrent creations of one folder, exactly one lands, whole", async () => {
    const files = createFsDeploymentFiles(dir);
    const write = (tag: string) => files.createFolder("custom/pdf", [{ path: "SKILL.md", bytes: bytes(tag) }, { path: "b.md", bytes: bytes(tag) }]);
    const results = await Promise.all([write("one"), write("two")]);
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = results[0] ? "one" : "two";
    expect(await readFile(join(dir, "custom/pdf/SKILL.md"), "utf8")).toBe(winner);
    expect(await readFile(join(dir, "custom/pdf/b.md"), "utf8")).toBe(winner);
    expect(await everything()).toEqual(["custom", "custom/pdf", "custom/pdf/SKILL.md", "custom/pdf/b.md"]);
  });

  it("writes nothing when a write fails part way, and refuses paths that leave the folder", async () => {
    const files = createFsDeploymentFiles(dir, "the skills folder");
    // "a" is written as a file, so "a/b" cannot be: the second write fails after the first landed in staging.
    await expect(files.createFolder("custom/x", [{ path: "a", bytes: bytes("1") }, { path: "a/b", bytes: bytes("2") }])).rejects.toMatchObject({
      code: "deployment_files_write_failed",
    });
    for (const [folder, path] of [["../out", "SKILL.md"], ["custom/x", "../../out"], ["/etc", "SKILL.md"]] as const) {
      await expect(files.createFolder(folder, [{ path, bytes: bytes("x") }])).rejects.toMatchObject({ code: "deployment_files_invalid_path" });
    }
    expect(await everything()).toEqual(["custom"]);
  });
});

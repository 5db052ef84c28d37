import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../../adapters/shared/fs-key-value.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { createSkillRegistry, skillContainerFilePath, type SkillDiagnostic } from "../../../src/skills/registry.ts";
import { RESERVED_SLASH_SKILL_NAMES, parseSlashSkillReference } from "../../../src/skills/slash.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { skillMarkdown } from "./fixtures.ts";

function sha256(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

describe("skill registry", () => {
  let storage: KeyValue;
  beforeEach(() => {
    storage = createMemoryKeyValue();
  });

  it("loads SKILL.md folders from storage with their container path, allowed-tools, body and sha256", async () => {
    const pdf = skillMarkdown("pdf", "Work with PDF files.", "allowed-tools: [bash, read_file]\nlicense: MIT\n");
    await storage.setItem("skills:public:pdf:SKILL.md", pdf);
    await storage.setItem("skills:public:pdf:references:api.md", "# API");
    await storage.setItem("skills:notes:SKILL.md", skillMarkdown("notes", "Take notes."));
    const registry = createSkillRegistry(storage);

    const skills = await registry.list();
    expect(skills.map((s) => s.name)).toEqual(["notes", "pdf"]);
    const skill = (await registry.get("pdf"))!;
    expect(skill).toMatchObject({
      name: "pdf",
      description: "Work with PDF files.",
      license: "MIT",
      allowedTools: ["bash", "read_file"],
      folder: "public/pdf",
      category: "public",
      path: "/mnt/skills/public/pdf/SKILL.md",
      storageKey: "skills:public:pdf:SKILL.md",
      content: pdf,
      body: "# pdf\nDo the thing.\n",
      sha256: sha256(pdf),
      enabled: true,
    });
    const notes = (await registry.get("notes"))!;
    expect(notes.path).toBe("/mnt/skills/notes/SKILL.md");
    expect(notes.allowedTools).toBeNull();
    expect(await registry.readFile(skill, "references/api.md")).toBe("# API");
    expect(await registry.readFile(skill, "references/missing.md")).toBeNull();
    await expect(registry.readFile(skill, "../notes/SKILL.md")).rejects.toMatchObject({ code: "invalid_skill_path" });
    const snapshot = await registry.load();
    expect(snapshot.byPath("/mnt/skills/public/./pdf//SKILL.md")?.name).toBe("pdf");
    expect(snapshot.byPath("/mnt/skills/public/pdf/../notes/SKILL.md")).toBeUndefined();
  });

  it("skips a skill with broken front matter and reports why, without failing the others", async () => {
    await storage.setItem("skills:good:SKILL.md", skillMarkdown("good", "Fine."));
    await storage.setItem("skills:no-front:SKILL.md", "# just markdown\n");
    await storage.setItem("skills:bad-yaml:SKILL.md", "---\nname: bad-yaml\ndescription: Use it: carefully\n---\nbody");
    await storage.setItem("skills:no-desc:SKILL.md", "---\nname: no-desc\n---\nbody");
    await storage.setItem("skills:bad-tools:SKILL.md", skillMarkdown("bad-tools", "x", "allowed-tools: bash\n"));
    await storage.setItem("skills:empty-tool:SKILL.md", skillMarkdown("empty-tool", "x", "allowed-tools: ['  ']\n"));
    await storage.setItemRaw("skills:binary:SKILL.md", new Uint8Array([0xff, 0xfe, 0x00]));
    const seen: SkillDiagnostic[] = [];
    const registry = createSkillRegistry(storage, { onDiagnostic: (d) => seen.push(d) });

    const snapshot = await registry.load();
    expect(snapshot.skills.map((s) => s.name)).toEqual(["good"]);
    const byFolder = Object.fromEntries(snapshot.diagnostics.map((d) => [d.folder, d]));
    expect(byFolder["no-front"]).toMatchObject({ code: "missing_front_matter", name: "no-front" });
    expect(byFolder["bad-yaml"]).toMatchObject({ code: "invalid_yaml", name: "bad-yaml" });
    expect(byFolder["bad-yaml"]!.message).toContain('hint: values containing ":" must be quoted, e.g. description: "Use it: carefully"');
    expect(byFolder["bad-yaml"]!.message).toContain("line 3: description: Use it: carefully");
    expect(byFolder["no-desc"]).toMatchObject({ code: "invalid_field", name: "no-desc" });
    expect(byFolder["bad-tools"]).toMatchObject({ code: "invalid_field", name: "bad-tools" });
    expect(byFolder["bad-tools"]!.message).toContain("allowed-tools");
    expect(byFolder["empty-tool"]).toMatchObject({ code: "invalid_field" });
    expect(byFolder["binary"]).toMatchObject({ code: "unreadable", name: "binary" });
    expect(seen).toHaveLength(6);
  });

  it("reads bytes as UTF-8, accepts a BOM and CRLF line endings, and keeps an explicit empty allowed-tools", async () => {
    const text = "\uFEFF---\r\nname: crlf\r\ndescription: Déjà vu ✓\r\nallowed-tools: []\r\n---\r\nbody\r\n";
    await storage.setItemRaw("skills:crlf:SKILL.md", new TextEncoder().encode(text));
    const skill = (await createSkillRegistry(storage).get("crlf"))!;
    expect(skill.description).toBe("Déjà vu ✓");
    expect(skill.allowedTools).toEqual([]);
    expect(skill.sha256).toBe(sha256(text.slice(1)));
  });

  it("treats a folder with a SKILL.md as a package: nested SKILL.md files and dot folders are not skills", async () => {
    await storage.setItem("skills:public:team:helper:SKILL.md", skillMarkdown("helper", "Namespaced."));
    await storage.setItem("skills:public:pdf:SKILL.md", skillMarkdown("pdf", "PDF."));
    await storage.setItem("skills:public:pdf:evals:fixture:SKILL.md", skillMarkdown("fixture", "Eval fixture."));
    await storage.setItem("skills:.history:old:SKILL.md", skillMarkdown("old", "Old."));
    const registry = createSkillRegistry(storage);
    expect((await registry.list()).map((s) => [s.name, s.path])).toEqual([
      ["helper", "/mnt/skills/public/team/helper/SKILL.md"],
      ["pdf", "/mnt/skills/public/pdf/SKILL.md"],
    ]);
  });

  it("lets a custom skill shadow a bundled one of the same name and reports the shadowed one", async () => {
    await storage.setItem("skills:public:pdf:SKILL.md", skillMarkdown("pdf", "Bundled."));
    await storage.setItem("skills:custom:pdf:SKILL.md", skillMarkdown("pdf", "Mine."));
    const snapshot = await createSkillRegistry(storage).load();
    expect(snapshot.byName("pdf")).toMatchObject({ description: "Mine.", category: "custom" });
    expect(snapshot.diagnostics).toEqual([expect.objectContaining({ code: "duplicate_name", folder: "public/pdf" })]);
  });

  it("enables skills from the config allowlist and extensions toggles, re-reading toggles on every load", async () => {
    await storage.setItem("skills:a:SKILL.md", skillMarkdown("a", "A."));
    await storage.setItem("skills:b:SKILL.md", skillMarkdown("b", "B."));
    await storage.setItem("skills:c:SKILL.md", skillMarkdown("c", "C."));
    expect(await createSkillRegistry(storage, { config: { enabled: ["a", "b"] } }).enabledNames()).toEqual(["a", "b"]);

    let states: Record<string, { enabled: boolean }> = { b: { enabled: false } };
    const registry = createSkillRegistry(storage, { states: () => states });
    expect(await registry.enabledNames()).toEqual(["a", "c"]);
    expect((await registry.get("b"))?.enabled).toBe(false);
    states = { a: { enabled: false } };
    expect(await registry.enabledNames()).toEqual(["b", "c"]);
  });

  it("honours container_path and the storage prefix, and rejects bad config with the key's path", async () => {
    await storage.setItem("kits:x:SKILL.md", skillMarkdown("x", "X."));
    const registry = createSkillRegistry(storage, { prefix: "kits", config: { container_path: "/opt/skills/" } });
    expect((await registry.get("x"))?.path).toBe("/opt/skills/x/SKILL.md");
    expect(skillContainerFilePath("/", "x")).toBe("/x/SKILL.md");
    expect(() => createSkillRegistry(storage, { config: { container_path: "skills" } })).toThrow(
      expect.objectContaining({ code: "invalid_skills_config", message: expect.stringContaining("skills.container_path") }),
    );
    expect(() => createSkillRegistry(storage, { config: { deferred: true } as never })).toThrow(
      expect.objectContaining({ code: "invalid_skills_config" }),
    );
    await expect(createSkillRegistry(storage, { states: { x: { enabled: "yes" } } as never }).list()).rejects.toMatchObject({
      code: "invalid_skills_config",
    });
  });
});

describe("skill registry over the fs KeyValue", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "deerflow-skills-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("reads a real skills/ directory mounted at the `skills` prefix", async () => {
    const text = skillMarkdown("pdf", "PDF work.", "allowed-tools:\n  - bash\n");
    await mkdir(join(dir, "skills", "public", "pdf"), { recursive: true });
    await writeFile(join(dir, "skills", "public", "pdf", "SKILL.md"), text);
    const kv = createFsKeyValue(dir);
    try {
      const skill = (await createSkillRegistry(kv).get("pdf"))!;
      expect(skill).toMatchObject({ path: "/mnt/skills/public/pdf/SKILL.md", content: text, allowedTools: ["bash"], sha256: sha256(text) });
    } finally {
      await kv.dispose();
    }
  });
});

describe("slash skill grammar", () => {
  it("extracts the name and the task text", () => {
    expect(parseSlashSkillReference("/data-analysis analyze uploads/foo.csv")).toEqual({
      name: "data-analysis",
      remainingText: "analyze uploads/foo.csv",
    });
    expect(parseSlashSkillReference("/data-analysis")).toEqual({ name: "data-analysis", remainingText: "" });
    expect(parseSlashSkillReference("/pdf\n  summarize")).toEqual({ name: "pdf", remainingText: "summarize" });
  });

  it("rejects anything but the strict lowercase-hyphen form at the very start", () => {
    for (const text of ["/DataAnalysis run", "/data_analysis run", "please use /data-analysis", "  /data-analysis run", "/data-analysis分析这个文档", "/-x", "/x-"]) {
      expect(parseSlashSkillReference(text)).toBeNull();
    }
  });

  it("ignores the reserved composer commands", () => {
    expect([...RESERVED_SLASH_SKILL_NAMES].sort()).toEqual(["bootstrap", "goal", "help", "memory", "models", "new", "status"]);
    for (const command of RESERVED_SLASH_SKILL_NAMES) expect(parseSlashSkillReference(`/${command} go`)).toBeNull();
  });
});

import { describe, expect, it } from "vitest";
import { readSkillArchive } from "../../../src/skills/archive.ts";
import { zip } from "../../fixtures/skill-zip.ts";

/*
 * Skill archives built byte by byte (test/fixtures/skill-zip.ts), so each bad entry the reader must
 * refuse is exactly the one under test. Web APIs only: Node, Deno and Bun.
 */

const SKILL_MD = "---\nname: pdf-tools\ndescription: Work with PDF files.\n---\n# PDF tools\n";
const LIMITS = { maxEntries: 50, maxBytes: 64 * 1024 };

describe("skill archives", () => {
  it("reads a good archive: one top folder is the skill folder, deflated and stored entries, Finder files dropped", async () => {
    const archive = await readSkillArchive(
      await zip([
        { name: "pdf-tools/" },
        { name: "pdf-tools/SKILL.md", data: SKILL_MD, deflate: true },
        { name: "pdf-tools/references/api.md", data: "API notes ".repeat(200), deflate: true },
        { name: "pdf-tools/.DS_Store", data: "x" },
        { name: "__MACOSX/pdf-tools/._SKILL.md", data: "x" },
      ]),
      LIMITS,
    );
    expect(archive.name).toBe("pdf-tools");
    expect(archive.description).toBe("Work with PDF files.");
    expect(archive.files.map((f) => f.path).sort()).toEqual(["SKILL.md", "references/api.md"]);
    expect(new TextDecoder().decode(archive.files.find((f) => f.path === "references/api.md")!.bytes)).toBe("API notes ".repeat(200));
  });

  it.each([
    ["../evil.md", /"\.\.\/evil\.md" climbs out/],
    ["pdf-tools/../../evil.md", /climbs out/],
    ["/etc/passwd", /"\/etc\/passwd" has an absolute path/],
    ["C:/windows/evil.md", /absolute path/],
    ["pdf-tools\\evil.md", /backslash/],
    ["pdf-tools/run.sh:hidden", /":"/],
  ])("refuses an entry named %s, naming it", async (name, message) => {
    const bytes = await zip([{ name: "pdf-tools/SKILL.md", data: SKILL_MD }, { name, data: "x" }]);
    await expect(readSkillArchive(bytes, LIMITS)).rejects.toMatchObject({ code: "skill_archive_rejected", message: expect.stringMatching(message) });
  });

  it("refuses a symbolic link entry and a device entry", async () => {
    const link = await zip([{ name: "SKILL.md", data: SKILL_MD }, { name: "secrets", data: "/etc/shadow", mode: 0o120777 }]);
    await expect(readSkillArchive(link, LIMITS)).rejects.toThrow(/Entry "secrets" is a symbolic link/);
    const fifo = await zip([{ name: "SKILL.md", data: SKILL_MD }, { name: "pipe", mode: 0o010644 }]);
    await expect(readSkillArchive(fifo, LIMITS)).rejects.toThrow(/Entry "pipe" is not a regular file or folder/);
  });

  it("refuses too many entries, too many bytes, and an entry that unpacks past its recorded size", async () => {
    const many = await zip(Array.from({ length: 6 }, (_, i) => ({ name: i === 0 ? "SKILL.md" : `f${i}.md`, data: i === 0 ? SKILL_MD : "x" })));
    await expect(readSkillArchive(many, { maxEntries: 5, maxBytes: LIMITS.maxBytes })).rejects.toThrow(/6 entries, more than the 5 allowed/);
    const big = await zip([{ name: "SKILL.md", data: SKILL_MD }, { name: "big.txt", data: "a".repeat(4096), deflate: true }]);
    await expect(readSkillArchive(big, { maxEntries: 50, maxBytes: 1024 })).rejects.toThrow(/more than 1024 bytes \(at entry "big\.txt"\)/);
    const liar = await zip([{ name: "SKILL.md", data: SKILL_MD }, { name: "bomb.txt", data: "a".repeat(10_000), deflate: true, claimedSize: 10 }]);
    await expect(readSkillArchive(liar, LIMITS)).rejects.toThrow(/"bomb\.txt" unpacks to more bytes than/);
  });

  it("refuses a file twice, a file under a file, a missing SKILL.md, a bad skill name, a native executable and a non-zip", async () => {
    await expect(readSkillArchive(await zip([{ name: "SKILL.md", data: SKILL_MD }, { name: "SKILL.md", data: SKILL_MD }]), LIMITS)).rejects.toThrow(/appears twice/);
    await expect(readSkillArchive(await zip([{ name: "SKILL.md", data: SKILL_MD }, { name: "a", data: "x" }, { name: "a/b", data: "y" }]), LIMITS)).rejects.toThrow(/lies under "a", which is a file/);
    await expect(readSkillArchive(await zip([{ name: "README.md", data: "hi" }]), LIMITS)).rejects.toThrow(/no SKILL\.md/);
    const badName = SKILL_MD.replace("pdf-tools", "PDF Tools");
    await expect(readSkillArchive(await zip([{ name: "SKILL.md", data: badName }]), LIMITS)).rejects.toThrow(/skill name "PDF Tools"/);
    const elf = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
    await expect(readSkillArchive(await zip([{ name: "SKILL.md", data: SKILL_MD }, { name: "bin/tool", data: elf }]), LIMITS)).rejects.toThrow(/"bin\/tool" is a native executable/);
    await expect(readSkillArchive(new TextEncoder().encode("not a zip at all"), LIMITS)).rejects.toThrow(/not a ZIP archive/);
  });
});

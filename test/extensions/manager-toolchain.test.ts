import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { isAtLeast, NPM_FLOOR } from "../../src/extensions/manager/npm.ts";

/*
 * npm writes extensions/package-lock.json and a different npm can rewrite or reject it, so the
 * toolchain is pinned rather than floating: toolchain.json is the one place, and every file that
 * repeats a version of npm, Deno or Bun must say the same thing. A toolchain upgrade is then one
 * deliberate change that this test makes complete.
 */

const root = new URL("../../", import.meta.url);
const read = (path: string) => readFile(new URL(path, root), "utf8");
type Tool = "npm" | "deno" | "bun";
const TOOLS: readonly Tool[] = ["npm", "deno", "bun"];

/** Files that repeat the pinned versions, besides package.json (checked field by field). */
const REPEATERS = ["deno.json", ".ci/run", "README.md"] as const;

interface Mention {
  readonly tool: Tool;
  readonly version: string;
  /** "npm 10 or newer", "npm >=10": a floor, not a pin. */
  readonly floor: boolean;
  readonly text: string;
}

/** Every "<tool> <version>" in a text: npm@11.19.1, Deno 2.9.6, **Bun** (1.x), npm >=10, npm 10 or newer. */
function versionMentions(text: string): Mention[] {
  const pattern = /\b(npm|deno|bun)\b(?:\*\*)?[ \t]*(?:@|\(|v(?=\d)|version[ \t]+)?[ \t]*(>=[ \t]*)?(\d+(?:\.(?:\d+|x)){0,2})(?![\w.])\)?([ \t]+or[ \t]+(?:newer|later))?/gi;
  const mentions: Mention[] = [];
  for (const match of text.matchAll(pattern)) {
    mentions.push({ tool: match[1]!.toLowerCase() as Tool, version: match[3]!, floor: Boolean(match[2] || match[4]), text: match[0] });
  }
  return mentions;
}

function agrees(mention: Mention, pinned: string): boolean {
  const wanted = mention.floor && mention.tool === "npm" ? NPM_FLOOR : pinned;
  const parts = mention.version.split(".");
  const exact = wanted.split(".");
  return parts.every((part, index) => part === "x" || part === exact[index]);
}

describe("the pinned toolchain", () => {
  it("toolchain.json pins exact npm, Deno and Bun versions, and the manager's npm floor is not above the pin", async () => {
    const pins = JSON.parse(await read("toolchain.json")) as Record<string, string>;
    for (const tool of TOOLS) expect(pins[tool], tool).toMatch(/^\d+\.\d+\.\d+$/);
    expect(isAtLeast(pins["npm"]!, NPM_FLOOR)).toBe(true);
  });

  it("package.json repeats the pins: packageManager, the deno and bun dev dependencies, and the npm floor in engines", async () => {
    const pins = JSON.parse(await read("toolchain.json")) as Record<Tool, string>;
    const pkg = JSON.parse(await read("package.json"));
    expect(pkg.packageManager).toBe(`npm@${pins.npm}`);
    expect(pkg.devDependencies.deno).toBe(pins.deno);
    expect(pkg.devDependencies.bun).toBe(pins.bun);
    expect(pkg.engines.npm).toBe(`>=${NPM_FLOOR}`);
  });

  it("every version of npm, Deno or Bun named in deno.json, .ci/run and README.md agrees with the pins", async () => {
    const pins = JSON.parse(await read("toolchain.json")) as Record<Tool, string>;
    const disagreements: string[] = [];
    let seen = 0;
    for (const file of REPEATERS) {
      for (const mention of versionMentions(await read(file))) {
        seen += 1;
        if (!agrees(mention, pins[mention.tool])) {
          disagreements.push(`${file}: "${mention.text.trim()}" (toolchain.json pins ${mention.tool} ${pins[mention.tool]}${mention.floor ? `, floor ${NPM_FLOOR}` : ""})`);
        }
      }
    }
    expect(disagreements).toEqual([]);
    // README names the Deno and Bun majors today; a check that matched nothing would prove nothing.
    expect(seen).toBeGreaterThan(0);
  });

  it("finds pins, majors and floors in the shapes the docs use, and catches a stale one", () => {
    expect(versionMentions("- **Deno** (2.x): run ... **Bun** (1.x)").map((m) => [m.tool, m.version])).toEqual([
      ["deno", "2.x"],
      ["bun", "1.x"],
    ]);
    expect(versionMentions("npx npm@11.19.1 ci; npm 10 or newer; npm >=10.0.0; bun v1.4.5").map((m) => [m.tool, m.version, m.floor])).toEqual([
      ["npm", "11.19.1", false],
      ["npm", "10", true],
      ["npm", "10.0.0", true],
      ["bun", "1.4.5", false],
    ]);
    expect(versionMentions("npm ci && npm test; Deno and Bun adapters")).toEqual([]);
    const stale = versionMentions("needs Deno 1.46")[0]!;
    expect(agrees(stale, "2.9.6")).toBe(false);
    expect(agrees(versionMentions("Deno 2.x")[0]!, "2.9.6")).toBe(true);
  });
});

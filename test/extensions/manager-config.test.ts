import { readFile, writeFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendEdit, ExtensionManagerError, PluginsConfig, removeEdit, setEnabledEdit, updateEdit } from "../../src/extensions/manager/index.ts";
import { makeManager, makeProject, makeTestHost, npmTestEnv, removeTemporaries } from "./manager-harness.ts";

let env: Record<string, string>;

beforeAll(async () => {
  env = await npmTestEnv();
});

afterAll(async () => {
  await removeTemporaries();
});

const RECORD = { name: "audit", package: "deerflow-audit", use: "./extensions/node_modules/deerflow-audit/index.js:install", enabled: true, required: false, config: {} };

function rewrite(text: string, edit: Parameters<PluginsConfig["rewrite"]>[0]): string {
  return PluginsConfig.parse(text, "config.yaml").rewrite(edit);
}

function thrown(fn: () => unknown): ExtensionManagerError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ExtensionManagerError);
    return error as ExtensionManagerError;
  }
  throw new Error("expected a throw");
}

describe("scenario G41: enable and disable through the manager", () => {
  it("disable then enable changes only enabled: config, required, comments, the following section and CRLF survive", async () => {
    const original = [
      "# deployment settings",
      "models: []",
      "plugins:",
      "  # the audit extension (keep)",
      "  - name: audit",
      "    package: deerflow-audit",
      "    use: ./extensions/node_modules/deerflow-audit/index.js:install",
      "    required: true",
      "    config:",
      "      level: 3 # tuned",
      "",
      "# what follows belongs to my.key",
      "my.key:",
      "  nested: true",
      "",
    ].join("\r\n");
    const project = await makeProject(original);
    const manager = makeManager(makeTestHost(env), project);

    expect(await manager.setEnabled("audit", false)).toEqual({ name: "audit", changed: true });
    const disabled = await readFile(project.config, "utf8");
    expect(disabled).toBe(original.replace("    config:\r\n      level: 3 # tuned\r\n", "    config:\r\n      level: 3 # tuned\r\n    enabled: false\r\n"));
    expect(disabled.replace(/\r\n/g, "")).not.toContain("\n");

    expect(await manager.setEnabled("deerflow-audit", true)).toEqual({ name: "audit", changed: true });
    const enabled = await readFile(project.config, "utf8");
    expect(enabled).toBe(disabled.replace("enabled: false", "enabled: true"));
    expect(parseYaml(enabled).plugins).toEqual([{ ...RECORD, required: true, config: { level: 3 } }]);

    expect(await manager.setEnabled("./extensions/node_modules/deerflow-audit/index.js:install", true)).toEqual({ name: "audit", changed: false });
    expect(await readFile(project.config, "utf8")).toBe(enabled);
  });

  it("refuses two top-level plugins keys without touching the file", async () => {
    const text = "plugins:\n  - name: a\n    use: ./a.js:install\nmodels: []\nplugins: []\n";
    const project = await makeProject(text);
    const host = makeTestHost(env);
    await expect(makeManager(host, project).setEnabled("a", false)).rejects.toThrow(/more than one top-level plugins: key/);
    expect(await readFile(project.config, "utf8")).toBe(text);
    expect(host.calls).toEqual([]);
  });

  it("names unknown and ambiguous NAMEs and lists the records", async () => {
    const project = await makeProject("plugins:\n  - name: a\n    use: ./a.js:install\n  - name: a\n    use: ./b.js:install\n");
    const manager = makeManager(makeTestHost(env), project);
    await expect(manager.setEnabled("zzz", false)).rejects.toThrow(/no configured extension is named "zzz"/);
    await expect(manager.setEnabled("a", false)).rejects.toThrow(/"a" matches 2 configured extensions/);
    await writeFile(project.config, "plugins:\n  - use: ./missing.js:install\n    enabled: false\n");
    const rows = await manager.list();
    expect(rows).toEqual([
      { name: "./missing.js:install", package: undefined, version: undefined, use: "./missing.js:install", enabled: false, required: false, check: { loads: false, reason: expect.stringContaining("Could not load module") } },
    ]);
  });
});

describe("the plugins block rewrite", () => {
  it("keeps a following section whatever its key: quoted, dotted, numeric, $schema, non-ASCII", () => {
    for (const key of ['"quoted key"', "my.key", "2fa", "$schema", "配置", "'single'", "? complex"]) {
      const tail = key === "? complex" ? "? complex\n: value\n" : `${key}:\n  keep: [1, 2]   # neighbour comment\n`;
      const text = `plugins:\n  - use: ./a.js:install\n${tail}`;
      const updated = rewrite(text, setEnabledEdit(0, false));
      expect(updated, key).toBe(`plugins:\n  - use: ./a.js:install\n    enabled: false\n${tail}`);
    }
  });

  it("keeps comments below a file-final block, and the file's last line end", () => {
    const text = "models: []\nplugins:\n  - use: ./a.js:install\n\n# trailing note\n# second line\n";
    expect(rewrite(text, appendEdit(RECORD))).toBe(
      "models: []\nplugins:\n  - use: ./a.js:install\n  - name: audit\n    package: deerflow-audit\n    use: ./extensions/node_modules/deerflow-audit/index.js:install\n    enabled: true\n    required: false\n    config: {}\n\n# trailing note\n# second line\n",
    );
    const indented = "plugins:\n  - use: ./a.js:install\n  # indented trailing comment\nnext: 1\n";
    expect(rewrite(indented, setEnabledEdit(0, false))).toBe("plugins:\n  - use: ./a.js:install\n    enabled: false\n  # indented trailing comment\nnext: 1\n");
  });

  it("appends an absent block after a blank line, and replaces inline empty and null lists with one block", () => {
    expect(rewrite("models: []\n", appendEdit(RECORD))).toMatch(/^models: \[\]\n\nplugins:\n  - name: audit\n/);
    expect(rewrite("models: []", appendEdit(RECORD))).toMatch(/^models: \[\]\n\nplugins:\n  - name: audit\n/);
    expect(rewrite("", appendEdit(RECORD))).toMatch(/^plugins:\n  - name: audit\n/);
    expect(rewrite("# only a comment\n", appendEdit(RECORD))).toMatch(/^# only a comment\n\nplugins:\n  - name: audit\n/);
    expect(rewrite("plugins: []\nnext: 1\n", appendEdit(RECORD))).toMatch(/^plugins:\n  - name: audit\n[^]*config: \{\}\nnext: 1\n$/);
    expect(rewrite("plugins:\nnext: 1\n", appendEdit(RECORD))).toMatch(/^plugins:\n  - name: audit\n[^]*config: \{\}\nnext: 1\n$/);
    expect(rewrite("plugins: ~ # none yet\nnext: 1\n", appendEdit(RECORD))).toMatch(/^plugins:\n  - name: audit\n[^]*\nnext: 1\n$/);
  });

  it("keeps the sequence style of an unindented list and of a nested top level", () => {
    expect(rewrite("plugins:\n- use: ./a.js:install\nnext: 1\n", setEnabledEdit(0, false))).toBe("plugins:\n- use: ./a.js:install\n  enabled: false\nnext: 1\n");
  });

  it("adopts fields without moving the existing ones, and removes one record of several", () => {
    const text = "plugins:\n  - use: ./a.js:install # hand-written\n    required: true\n  - name: b\n    use: ./b.js:install\n";
    expect(rewrite(text, updateEdit(0, { name: "a", package: "pkg-a", enabled: true }))).toBe(
      "plugins:\n  - use: ./a.js:install # hand-written\n    required: true\n    name: a\n    package: pkg-a\n    enabled: true\n  - name: b\n    use: ./b.js:install\n",
    );
    expect(rewrite(text, removeEdit(1))).toBe("plugins:\n  - use: ./a.js:install # hand-written\n    required: true\n");
    expect(rewrite(text, removeEdit(0))).toBe("plugins:\n  - name: b\n    use: ./b.js:install\n");
    expect(rewrite("plugins:\n  - use: ./a.js:install\nnext: 1\n", removeEdit(0))).toBe("plugins: []\nnext: 1\n");
  });

  it("renders an aliased list from plain values and refuses an edit that would change another section", () => {
    const aliased = "defaults: &d\n  level: 1\nplugins:\n  - use: ./a.js:install\n    config: *d\n";
    const updated = rewrite(aliased, setEnabledEdit(0, false));
    expect(parseYaml(updated)).toEqual({ defaults: { level: 1 }, plugins: [{ use: "./a.js:install", config: { level: 1 }, enabled: false }] });
    expect(updated.startsWith("defaults: &d\n  level: 1\nplugins:\n")).toBe(true);
    const anchoredInPlugins = "plugins:\n  - use: ./a.js:install\n    config: &c { level: 1 }\nother: *c\n";
    expect(thrown(() => rewrite(anchoredInPlugins, removeEdit(0))).message).toMatch(/could not be rewritten safely/);
  });

  it("refuses what it cannot manage: not YAML, a list at the top, flow style at the top, several documents, unknown plugin keys", () => {
    expect(thrown(() => PluginsConfig.parse("plugins: [\n", "config.yaml")).message).toMatch(/^config\.yaml: not valid YAML/);
    expect(thrown(() => PluginsConfig.parse("- a\n", "config.yaml")).message).toMatch(/top level must be a mapping/);
    expect(thrown(() => PluginsConfig.parse("{ plugins: [] }\n", "config.yaml").rewrite(appendEdit(RECORD))).message).toMatch(/flow style/);
    expect(thrown(() => PluginsConfig.parse("a: 1\n---\nb: 2\n", "config.yaml")).message).toMatch(/not valid YAML/);
    expect(thrown(() => PluginsConfig.parse("models: 1\nmodels: 2\n", "config.yaml")).message).toMatch(/not valid YAML/);
    expect(thrown(() => PluginsConfig.parse("plugins:\n  - use: ./a.js:install\n    requird: true\n", "config.yaml")).message).toMatch(/requird/);
  });

  it("keeps a byte-order mark and CRLF through an append", () => {
    const text = "\uFEFFmodels: []\r\n";
    const updated = rewrite(text, appendEdit(RECORD));
    expect(updated.startsWith("\uFEFFmodels: []\r\n\r\nplugins:\r\n  - name: audit\r\n")).toBe(true);
    expect(updated.replace(/\r\n/g, "")).not.toContain("\n");
  });
});

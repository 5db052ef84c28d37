import { execFileSync } from "node:child_process";
import { lstat, mkdir, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { createModuleLoader } from "../../adapters/shared/module-loader.ts";
import { parsePlugins } from "../../src/extensions/config.ts";
import { loadExtensions } from "../../src/extensions/loader.ts";
import { ExtensionManagerError, auditExtensionsLock } from "../../src/extensions/manager/index.ts";
import {
  FIXTURE,
  FIXTURE_PACKAGE,
  FIXTURE_USE,
  initGitRepo,
  makeManager,
  makeProject,
  makeSource,
  makeTestHost,
  npmPack,
  npmTestEnv,
  useNpmTestEnv,
  rejectionOf,
  projectState,
  renamed,
  serveFile,
  tempDir,
} from "./manager-harness.ts";

let env!: Record<string, string>;
useNpmTestEnv((e) => (env = e));

const rejection = (promise: Promise<unknown>) => rejectionOf(promise, ExtensionManagerError);

/**
 * Every entry under `root`: folders by inode (a reinstall replaces them), files by their bytes. Not
 * mtimes or file inodes: npm rewrites its hidden node_modules/.package-lock.json on any run,
 * --package-lock-only included, and the manager puts the old bytes back.
 */
async function fileTree(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true });
  const rows: string[] = [];
  for (const entry of entries.sort()) {
    const info = await stat(join(root, entry));
    rows.push(`${entry} ${info.isFile() ? await readFile(join(root, entry), "latin1") : `folder ${info.ino}`}`);
  }
  return rows;
}

function plugins(configText: string | undefined): Array<Record<string, unknown>> {
  return ((parseYaml(configText ?? "") as { plugins?: unknown } | null)?.plugins ?? []) as Array<Record<string, unknown>>;
}

describe("extension install from a local folder (real npm)", () => {
  it("scenario G39 and G41: snapshots a git working copy without .git, node_modules and caches, installs it exactly, and records one managed, fail-open plugin", async () => {
    const source = await makeSource(async (_manifest, dir) => {
      await mkdir(join(dir, "node_modules", "left-over"), { recursive: true });
      await writeFile(join(dir, "node_modules", "left-over", "index.js"), "");
      await mkdir(join(dir, ".cache"), { recursive: true });
      await writeFile(join(dir, ".cache", "x"), "");
      await writeFile(join(dir, "README.md"), "# fixture\n");
    });
    await initGitRepo(source);
    const project = await makeProject("# my settings\nmodels: []\n");
    const host = makeTestHost(env);
    const installed = await makeManager(host, project).install(source, { yes: true });

    expect(installed).toMatchObject({ name: "fixture", package: FIXTURE_PACKAGE, version: "1.0.0", use: FIXTURE_USE, required: false, adopted: false, warnings: [] });
    const snapshot = join(project.extensions, "sources", FIXTURE_PACKAGE);
    expect((await lstat(join(snapshot, "README.md"))).isFile()).toBe(true);
    for (const ignored of [".git", "node_modules", ".cache"]) {
      await expect(lstat(join(snapshot, ignored)), ignored).rejects.toMatchObject({ code: "ENOENT" });
    }
    const state = await projectState(project);
    expect(JSON.parse(state.manifest!).dependencies).toEqual({ [FIXTURE_PACKAGE]: `file:sources/${FIXTURE_PACKAGE}` });
    expect(auditExtensionsLock(state.lock!)).toEqual({ violations: [], warnings: [] });
    expect(state.npmrc).toContain("install-links=true");
    // A packed copy, not a link into the snapshot.
    expect((await lstat(join(project.extensions, "node_modules", FIXTURE_PACKAGE))).isDirectory()).toBe(true);
    expect(state.config!.startsWith("# my settings\nmodels: []\n\nplugins:\n")).toBe(true);
    expect(plugins(state.config)).toEqual([{ name: "fixture", package: FIXTURE_PACKAGE, use: FIXTURE_USE, enabled: true, required: false, config: {} }]);
    expect(host.npmCommands()).toEqual(["--version", "install", "ci"]);

    // The gateway's own loader loads the recorded use from the config folder.
    const loaded = await loadExtensions(parsePlugins(plugins(state.config)), createModuleLoader({ baseDir: project.dir }));
    expect(loaded.diagnostics).toEqual([]);
    expect(loaded.extensions.services.map((entry) => entry.value.name)).toEqual(["managed-fixture"]);

    const listed = await makeManager(host, project).list();
    expect(listed).toEqual([{ name: "fixture", package: FIXTURE_PACKAGE, version: "1.0.0", use: FIXTURE_USE, enabled: true, required: false, check: { loads: true } }]);

    // The committed manifest and lock reproduce the same install with a plain clean install.
    execFileSync("npm", ["ci", "--prefix", project.extensions, "--no-audit", "--no-fund"], { env, stdio: "pipe" });
    expect((await lstat(join(project.extensions, "node_modules", FIXTURE_PACKAGE, "index.js"))).isFile()).toBe(true);
  });

  it("scenario G39: a folder holding .env, a *.pem file or a symlink is rejected before anything is copied or installed", async () => {
    const project = await makeProject();
    const cases: Array<[string, (dir: string) => Promise<void>, RegExp]> = [
      [".env", (dir) => writeFile(join(dir, ".env"), "TOKEN=x\n"), /\.env looks like a credential file/],
      ["pem", (dir) => mkdir(join(dir, "certs")).then(() => writeFile(join(dir, "certs", "server.PEM"), "-----")), /certs\/server\.PEM looks like a credential file/],
      ["id_rsa", (dir) => writeFile(join(dir, "id_rsa"), "key"), /id_rsa looks like a credential file/],
      ["symlink", (dir) => symlink("/etc/hostname", join(dir, "linked")), /linked is a symbolic link/],
    ];
    for (const [label, plant, message] of cases) {
      const source = await makeSource((_manifest, dir) => plant(dir));
      const host = makeTestHost(env);
      const error = await rejection(makeManager(host, project).install(source, { yes: true }));
      expect(error.code, label).toBe("extension_snapshot_rejected");
      expect(error.message, label).toMatch(message);
      expect(host.calls.filter((call) => call.op !== "run" || !call.detail.includes("--version")), label).toEqual([]);
    }
    const linkedRoot = join(await tempDir("linked"), "pkg");
    await symlink(FIXTURE, linkedRoot);
    expect((await rejection(makeManager(makeTestHost(env), project).install(linkedRoot, { yes: true }))).message).toMatch(/source folder is a symbolic link/);
    expect(await projectState(project)).toMatchObject({ manifest: undefined, lock: undefined, sources: [], installed: [] });
  });

  it('"The MVP has no in-place upgrade": a second install of the same folder, even a newer version of it, is refused before npm runs and changes nothing', async () => {
    const project = await makeProject("plugins: []\n");
    await makeManager(makeTestHost(env), project).install(FIXTURE, { yes: true });
    const before = await projectState(project);
    const newer = await makeSource((manifest) => {
      manifest["version"] = "2.0.0";
    });
    for (const [label, source] of [["same folder", FIXTURE], ["newer version", newer]] as const) {
      const host = makeTestHost(env);
      const error = await rejection(makeManager(host, project).install(source, { yes: true }));
      expect(error.code, label).toBe("extension_snapshot_exists");
      expect(error.message, label).toContain(`remove it first (deerflow-edge extension remove ${FIXTURE_PACKAGE})`);
      expect(host.npmCommands(), label).toEqual([]);
      expect(await projectState(project), label).toEqual(before);
    }
    // A hand-deleted snapshot opens no upgrade path either: the package is still a dependency, so
    // npm adds nothing new, and the transaction rolls back (the copied snapshot goes again).
    await rm(join(project.extensions, "sources", FIXTURE_PACKAGE), { recursive: true });
    const withoutSnapshot = await projectState(project);
    const error = await rejection(makeManager(makeTestHost(env), project).install(newer, { yes: true }));
    expect(error.code).toBe("extension_package_invalid");
    expect(error.message).toMatch(/npm added no new package to extensions\/package\.json: that package is already installed/);
    expect(await projectState(project)).toEqual(withoutSnapshot);
  });

  it("refuses a package without exactly one entry, or with an entry outside the package, before npm runs", async () => {
    const project = await makeProject();
    const variants: Array<[(manifest: Record<string, unknown>) => void, RegExp]> = [
      [(m) => delete m["deerflow"], /exactly one extension entry in deerflow\.extensions \(found 0\)/],
      [(m) => (m["deerflow"] = { extensions: { a: "./index.js:install", b: "./index.js:install" } }), /found 2/],
      [(m) => (m["deerflow"] = { extensions: { a: "../outside.js:install" } }), /start(ing)? "\.\/"|outside its package/],
      [(m) => (m["deerflow"] = { extensions: { a: "./missing.js:install" } }), /not a file in the folder/],
      [(m) => (m["name"] = "../escape"), /valid npm package name/],
    ];
    for (const [edit, message] of variants) {
      const host = makeTestHost(env);
      const error = await rejection(makeManager(host, project).install(await makeSource(edit), { yes: true }));
      expect(error.code).toBe("extension_package_invalid");
      expect(error.message).toMatch(message);
      expect(host.npmCommands()).toEqual([]);
    }
  });

  it("scenario G40: an entry that fails to import after npm added it leaves manifest, lock and config byte-identical and removes the snapshot", async () => {
    const project = await makeProject("plugins: []\n");
    const host = makeTestHost(env);
    await makeManager(host, project).install(await makeSource(renamed("first-extension", "first")), { yes: true });
    const before = await projectState(project);

    const broken = await makeSource(async (manifest, dir) => {
      renamed("broken-extension", "broken")(manifest);
      await writeFile(join(dir, "index.js"), 'throw new Error("broken at import");\nexport function install() {}\n');
    });
    const error = await rejection(makeManager(host, project).install(broken, { yes: true }));
    expect(error.code).toBe("extension_entry_unloadable");
    expect(error.message).toContain("broken at import");
    const after = await projectState(project);
    expect(after).toEqual(before);
    expect(after.sources).toEqual(["first-extension"]);
    expect(after.installed).toEqual(["first-extension"]);
    expect(host.npmCommands().slice(-4)).toEqual(["--version", "install", "ci", "ci"]);
  });

  it("--ignore-scripts reaches npm install and the recovery npm ci alike", async () => {
    const project = await makeProject();
    await makeManager(makeTestHost(env), project).install(FIXTURE, { yes: true });
    const host = makeTestHost(env);
    const seen: string[][] = [];
    host.aroundRun = (phase, args) => void (phase === "before" && seen.push([...args]));
    const broken = await makeSource(async (manifest, dir) => {
      renamed("broken-extension", "broken")(manifest);
      await writeFile(join(dir, "index.js"), "export const install = 1;\n");
    });
    await rejection(makeManager(host, project).install(broken, { yes: true, ignoreScripts: true }));
    expect(seen.map((args) => [args[0], args.includes("--ignore-scripts=true")])).toEqual([
      ["--version", false],
      ["install", true],
      ["ci", true],
      ["ci", true],
    ]);
  });

  it("adopts a hand-written record with the same use, keeping its required and config; refuses a record that clashes by name", async () => {
    const handWritten = `plugins:
  # mine: keep this comment
  - use: ${FIXTURE_USE}
    required: true
    config:
      serviceName: from-operator
`;
    const project = await makeProject(handWritten);
    const host = makeTestHost(env);
    const installed = await makeManager(host, project).install(FIXTURE, { yes: true, required: false });
    expect(installed).toMatchObject({ adopted: true, required: true });
    const config = (await projectState(project)).config!;
    expect(config).toContain("# mine: keep this comment");
    expect(plugins(config)).toEqual([
      { use: FIXTURE_USE, required: true, config: { serviceName: "from-operator" }, name: "fixture", package: FIXTURE_PACKAGE, enabled: true },
    ]);

    const clash = await makeProject("plugins:\n  - name: fixture\n    use: ./elsewhere.js:install\n");
    const clashHost = makeTestHost(env);
    const error = await rejection(makeManager(clashHost, clash).install(FIXTURE, { yes: true }));
    expect(error.code).toBe("extension_conflict");
    expect(clashHost.npmCommands()).toEqual([]);
  });

  it("validates the config before any npm command: duplicate plugins keys, a non-list plugins, a missing file", async () => {
    for (const [text, message] of [
      ["plugins: []\nmodels: []\nplugins: []\n", /more than one top-level plugins: key/],
      ["plugins: {a: 1}\n", /plugins must be a list/],
      ["plugins:\n  - use: x.js:install\n    requird: true\n", /requird/],
      ["- just\n- a list\n", /top level must be a mapping/],
    ] as const) {
      const project = await makeProject(text);
      const host = makeTestHost(env);
      const error = await rejection(makeManager(host, project).install(FIXTURE, { yes: true }));
      expect(error.code, text).toBe("extension_config_invalid");
      expect(error.message, text).toMatch(message);
      expect(host.calls, text).toEqual([]);
      expect((await projectState(project)).config).toBe(text);
    }
    const missing = await makeProject();
    const host = makeTestHost(env);
    const error = await rejection(makeManager(host, { ...missing, config: join(missing.dir, "absent.yaml") }).install(FIXTURE, { yes: true }));
    expect(error.message).toMatch(/absent\.yaml does not exist; create it/);
    expect(host.calls).toEqual([]);
  });

  it("fails before any mutation when npm is older than the floor", async () => {
    const project = await makeProject();
    const host = makeTestHost(env);
    host.npmVersion = "9.9.0";
    const error = await rejection(makeManager(host, project).install(FIXTURE, { yes: true }));
    expect(error.code).toBe("extension_npm_unsupported");
    expect(error.message).toContain("needs npm 10.0.0 or newer, found 9.9.0");
    expect(host.calls.map((call) => call.op)).toEqual(["run"]);
    expect(await projectState(project)).toMatchObject({ manifest: undefined, sources: [] });
  });

  it("fails the transaction when the new lock records a local reference outside the managed snapshots", async () => {
    const helper = await tempDir("helper");
    await writeFile(join(helper, "package.json"), '{ "name": "local-helper", "version": "1.0.0" }\n');
    const project = await makeProject();
    const before = await projectState(project);
    const host = makeTestHost(env);
    const source = await makeSource((manifest) => {
      manifest["dependencies"] = { "local-helper": `file:${helper}` };
    });
    const error = await rejection(makeManager(host, project).install(source, { yes: true }));
    expect(error.code).toBe("extension_lock_not_reproducible");
    expect(error.message).toMatch(/node_modules\/local-helper" resolves to a path outside the extensions folder/);
    expect(await projectState(project)).toEqual(before);
  });

  // Spec (extension-system.md): "after every uv add/remove the manager audits the new lock before
  // syncing or enabling anything." Here: npm resolves the lock only (--package-lock-only), the audit
  // reads it, and only an audited lock reaches node_modules through npm ci.
  it('"audits the new lock before syncing or enabling anything": a lock that fails the audit leaves node_modules untouched and runs no install script', async () => {
    const markers = await tempDir("markers");
    const script = (name: string) => `node -e "require('fs').writeFileSync(require('path').join(${JSON.stringify(markers)}, '${name}'), 'ran')"`;
    const helper = await tempDir("helper");
    await writeFile(join(helper, "package.json"), JSON.stringify({ name: "local-helper", version: "1.0.0", scripts: { install: script("helper-install"), postinstall: script("helper-postinstall") } }));
    const project = await makeProject("plugins: []\n");
    await makeManager(makeTestHost(env), project).install(await makeSource(renamed("first-extension", "first")), { yes: true });
    const before = await projectState(project);
    const treeBefore = await fileTree(join(project.extensions, "node_modules"));
    expect(treeBefore.length).toBeGreaterThan(1);

    const host = makeTestHost(env);
    const source = await makeSource((manifest) => {
      renamed("second-extension", "second")(manifest);
      manifest["dependencies"] = { "local-helper": `file:${helper}` };
      manifest["scripts"] = { preinstall: script("ext-preinstall"), postinstall: script("ext-postinstall") };
    });
    const error = await rejection(makeManager(host, project).install(source, { yes: true }));
    expect(error.code).toBe("extension_lock_not_reproducible");
    expect(await readdir(markers)).toEqual([]);
    expect(await fileTree(join(project.extensions, "node_modules"))).toEqual(treeBefore);
    expect(await projectState(project)).toEqual(before);
    // Nothing to re-synchronise: the environment never changed.
    expect(host.npmCommands()).toEqual(["--version", "install"]);
  });

  it("runs npm with redirecting overrides dropped and registry, cache and credential settings kept", async () => {
    const project = await makeProject();
    const hostile = await npmTestEnv({
      npm_config_prefix: "/tmp/elsewhere",
      NPM_CONFIG_GLOBAL: "true",
      npm_config_lockfile_version: "1",
      npm_config_package_lock: "false",
      npm_config_workspace: "other",
      npm_config_strict_ssl: "false",
      npm_config_omit_lockfile_registry_resolved: "true",
      "npm_config_//registry.example.com/:_authToken": "kept-token",
      npm_config_https_proxy: "http://proxy.invalid:3128",
      npm_config_noproxy: "127.0.0.1,localhost",
    });
    const host = makeTestHost(hostile);
    await makeManager(host, project).install(FIXTURE, { yes: true });
    for (const runEnv of host.runEnvs) {
      for (const dropped of ["npm_config_prefix", "NPM_CONFIG_GLOBAL", "npm_config_lockfile_version", "npm_config_package_lock", "npm_config_workspace", "npm_config_strict_ssl"]) {
        expect(runEnv[dropped], dropped).toBeUndefined();
      }
      expect(runEnv["npm_config_cache"]).toBe(hostile["npm_config_cache"]);
      expect(runEnv["npm_config_registry"]).toBe("http://127.0.0.1:9/");
      expect(runEnv["npm_config_//registry.example.com/:_authToken"]).toBe("kept-token");
      expect(runEnv["npm_config_https_proxy"]).toBe("http://proxy.invalid:3128");
    }
    const lock = JSON.parse((await projectState(project)).lock!);
    expect(lock.lockfileVersion).toBe(3);
  });
});

describe("extension install from a remote tarball (real npm, loopback HTTP)", () => {
  it("installs over loopback with a warning, records required when asked, and the lock audit warns about the loopback URL", async () => {
    const packed = npmPack(await makeSource(renamed("remote-extension", "remote")), await tempDir("pack"), env);
    const { url, server } = await serveFile(packed, "/remote-extension-1.0.0.tgz");
    try {
      const project = await makeProject();
      const host = makeTestHost(env);
      const installed = await makeManager(host, project).install(url, { yes: true, required: true });
      expect(installed).toMatchObject({ name: "remote", package: "remote-extension", required: true });
      expect(installed.warnings.some((warning) => warning.includes("plain-HTTP loopback URL"))).toBe(true);
      expect(installed.warnings.some((warning) => warning.includes('"node_modules/remote-extension" is fetched from 127.0.0.1'))).toBe(true);
      const state = await projectState(project);
      expect(state.sources).toEqual([]);
      expect(plugins(state.config)).toEqual([
        { name: "remote", package: "remote-extension", use: "./extensions/node_modules/remote-extension/index.js:install", enabled: true, required: true, config: {} },
      ]);
    } finally {
      server.close();
    }
  });

  it('"The MVP has no in-place upgrade": installing the same tarball a second time is refused and rolls back byte for byte', async () => {
    const packed = npmPack(await makeSource(renamed("remote-extension", "remote")), await tempDir("pack"), env);
    const { url, server } = await serveFile(packed, "/remote-extension-1.0.0.tgz");
    try {
      const project = await makeProject("plugins: []\n");
      await makeManager(makeTestHost(env), project).install(url, { yes: true });
      const before = await projectState(project);
      const error = await rejection(makeManager(makeTestHost(env), project).install(url, { yes: true }));
      expect(error.code).toBe("extension_package_invalid");
      expect(error.message).toMatch(/that package is already installed/);
      expect(await projectState(project)).toEqual(before);
      expect(plugins(before.config).map((record) => record["name"])).toEqual(["remote"]);
    } finally {
      server.close();
    }
  });

  it("rolls back byte for byte when the downloaded package declares no extension entry", async () => {
    const packed = npmPack(await makeSource((manifest) => {
      manifest["name"] = "not-an-extension";
      delete manifest["deerflow"];
    }), await tempDir("pack"), env);
    const { url, server } = await serveFile(packed, "/not-an-extension-1.0.0.tgz");
    try {
      const project = await makeProject("plugins: []\n");
      await makeManager(makeTestHost(env), project).install(FIXTURE, { yes: true });
      const before = await projectState(project);
      const host = makeTestHost(env);
      const error = await rejection(makeManager(host, project).install(url, { yes: true }));
      expect(error.code).toBe("extension_package_invalid");
      expect(error.message).toMatch(/not-an-extension's package\.json: must declare exactly one extension entry/);
      expect(await projectState(project)).toEqual(before);
      expect(host.npmCommands()).toEqual(["--version", "install", "ci", "ci"]);
    } finally {
      server.close();
    }
  });
});

describe("extension remove (real npm)", () => {
  it("scenario G42: of two records sharing a package only the named one goes; removing the last deactivates config before npm uninstall", async () => {
    const project = await makeProject();
    const host = makeTestHost(env);
    const manager = makeManager(host, project);
    await manager.install(FIXTURE, { yes: true });
    // A second, hand-written instance of the same package with its own config.
    const config = (await projectState(project)).config!;
    await writeFile(project.config, `${config}  - name: fixture-two\n    package: ${FIXTURE_PACKAGE}\n    use: ${FIXTURE_USE.replace("index.js", "./index.js")}\n    config:\n      serviceName: two\n`);
    const withTwo = await projectState(project);

    host.calls.length = 0;
    const first = await manager.remove("fixture");
    expect(first).toMatchObject({ name: "fixture", package: FIXTURE_PACKAGE, packageRemoved: false });
    expect(host.npmCommands()).toEqual([]);
    const afterFirst = await projectState(project);
    expect(plugins(afterFirst.config).map((record) => record["name"])).toEqual(["fixture-two"]);
    expect(afterFirst.manifest).toBe(withTwo.manifest);
    expect(afterFirst.lock).toBe(withTwo.lock);
    expect(afterFirst.sources).toEqual([FIXTURE_PACKAGE]);

    host.calls.length = 0;
    const second = await manager.remove(FIXTURE_PACKAGE);
    expect(second).toMatchObject({ name: "fixture-two", packageRemoved: true });
    const order = host.calls.map((call) => `${call.op} ${call.detail}`);
    const configWrite = order.findIndex((line) => line.startsWith(`writeFileAtomic ${project.config}`));
    const uninstall = order.findIndex((line) => line.startsWith("run npm uninstall"));
    expect(configWrite).toBeGreaterThanOrEqual(0);
    expect(uninstall).toBeGreaterThan(configWrite);
    const final = await projectState(project);
    expect(plugins(final.config)).toEqual([]);
    expect(JSON.parse(final.manifest!).dependencies ?? {}).toEqual({});
    expect(final.sources).toEqual([]);
    expect(final.installed).toEqual([]);
    expect(auditExtensionsLock(final.lock!).violations).toEqual([]);
  });

  it("refuses to remove a hand-written record without a package, and names ambiguous or unknown NAMEs", async () => {
    const project = await makeProject("plugins:\n  - name: a\n    use: ./a.js:install\n  - name: b\n    package: shared\n    use: ./b.js:install\n  - name: c\n    package: shared\n    use: ./c.js:install\n");
    const manager = makeManager(makeTestHost(env), project);
    expect((await rejection(manager.remove("a"))).message).toMatch(/has no package recorded/);
    expect((await rejection(manager.remove("shared"))).message).toMatch(/matches 2 configured extensions \(plugins\[1\] b, plugins\[2\] c\)/);
    expect((await rejection(manager.remove("nope"))).code).toBe("extension_not_found");
  });
});

describe("temporary git repositories", () => {
  it("commit with an empty repository-local hooks folder, so a global or template hook never runs", async () => {
    const scratch = await tempDir("git-hooks");
    const marker = join(scratch, "hook-ran");
    const hooks = join(scratch, "global-hooks");
    await mkdir(hooks);
    for (const hook of ["pre-commit", "commit-msg", "post-commit"]) {
      await writeFile(join(hooks, hook), `#!/bin/sh\necho ${hook} >> "${marker}"\n`, { mode: 0o755 });
    }
    const globalConfig = join(scratch, "gitconfig");
    await writeFile(globalConfig, `[core]\n\thooksPath = ${hooks}\n[init]\n\ttemplateDir = ${scratch}/template\n`);
    await mkdir(join(scratch, "template", "hooks"), { recursive: true });
    await writeFile(join(scratch, "template", "hooks", "pre-commit"), `#!/bin/sh\necho template >> "${marker}"\n`, { mode: 0o755 });
    const repo = await makeSource();
    await initGitRepo(repo, { ...process.env, GIT_CONFIG_GLOBAL: globalConfig, GIT_CONFIG_NOSYSTEM: "1" });
    expect(execFileSync("git", ["log", "--oneline"], { cwd: repo }).toString()).toMatch(/fixture/);
    await expect(lstat(marker)).rejects.toMatchObject({ code: "ENOENT" });
  });
});

describe("reading the fixture", () => {
  it("declares its one entry in package.json", async () => {
    const manifest = JSON.parse(await readFile(join(FIXTURE, "package.json"), "utf8"));
    expect(manifest.deerflow).toEqual({ extensions: { fixture: "./index.js:install" } });
    expect(manifest.dependencies).toBeUndefined();
  });
});

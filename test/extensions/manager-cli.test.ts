import { dirname } from "node:path";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createModuleLoader } from "../../adapters/shared/module-loader.ts";
import { extensionCommand } from "../../src/cli/extension.ts";
import type { CliHost } from "../../src/cli/host.ts";
import { systemClock } from "../../src/core/clock.ts";
import { mapEnv } from "../../src/core/env.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import {
  FIXTURE,
  FIXTURE_PACKAGE,
  FIXTURE_USE,
  makeProject,
  makeTestHost,
  useNpmTestEnv,
  projectState,
  tempDir,
  type TestHost,
} from "./manager-harness.ts";

let env!: Record<string, string>;
useNpmTestEnv((e) => (env = e));

interface FakeCli extends CliHost {
  out(): string;
  err(): string;
}

function cli(answers: string[] = [], options: { interactive?: boolean } = {}): FakeCli {
  const out: string[] = [];
  const err: string[] = [];
  return {
    argv: [],
    env: mapEnv({}),
    clock: systemClock,
    stdout: { write: (text) => void out.push(text), isTTY: false },
    stderr: { write: (text) => void err.push(text), isTTY: false },
    readFile: async () => undefined,
    createStorage: () => createMemoryKeyValue(),
    createSandboxProvider: (_config, kv) => createVirtualSandboxProvider({ storage: kv }),
    createModuleLoader: (baseDir) => createModuleLoader({ baseDir }),
    dirname,
    onInterrupt: () => () => {},
    serve: async () => {
      throw new Error("not served in these tests");
    },
    ...(options.interactive === false ? {} : { readLine: async () => answers.shift() }),
    out: () => out.join(""),
    err: () => err.join(""),
  };
}

async function run(host: FakeCli, managerHost: TestHost, args: string[]): Promise<number> {
  return extensionCommand(host, args, { managerHost, lockTimeoutMs: 5_000 });
}

describe("deerflow-edge extension (CLI)", () => {
  it("scenario G37: credentials, secret queries and the SSH shorthand exit 1 before npm runs, change nothing and never print the secret", async () => {
    const project = await makeProject();
    const before = await projectState(project);
    for (const [source, hint] of [
      ["git+https://host/org/repo.git?token=abc123SECRET", /credential/],
      ["https://user:pw123SECRET@host/p.tgz", /embeds credentials/],
      ["git@host:org/repo.git", /git\+https:\/\/host\/org\/repo\.git/],
    ] as const) {
      for (const yes of [true, false]) {
        const host = cli(["y"]);
        const managerHost = makeTestHost(env);
        const code = await run(host, managerHost, ["install", source, "--config", project.config, ...(yes ? ["--yes"] : [])]);
        expect(code, source).toBe(1);
        expect(host.err(), source).toMatch(/^extension command failed: rejected extension source: /);
        expect(host.err(), source).toMatch(hint);
        expect(host.err() + host.out(), source).not.toContain("SECRET");
        expect(host.err(), source).not.toContain("[y/N]");
        expect(managerHost.calls, source).toEqual([]);
      }
    }
    expect(await projectState(project)).toEqual(before);
  });

  it("scenario G38: an existing tarball file, a missing path, ssh, file: and public http are rejected; loopback http and a registry range get past validation", async () => {
    const project = await makeProject();
    const tarball = join(await tempDir("tgz"), "pkg-1.0.0.tgz");
    await writeFile(tarball, "not really a tarball");
    for (const source of [tarball, "./missing-folder", "ssh://git@host/org/repo.git", "file:///tmp/p.tgz", "http://example.com/p.tgz"]) {
      const host = cli();
      const managerHost = makeTestHost(env);
      expect(await run(host, managerHost, ["install", source, "--yes", "--config", project.config]), source).toBe(1);
      expect(host.err(), source).toMatch(/rejected extension source|local file/);
      expect(managerHost.npmCommands(), source).toEqual([]);
    }
    for (const source of ["http://127.0.0.1:9/p.tgz", "pkg@>=1"]) {
      const host = cli();
      const managerHost = makeTestHost(env);
      // Validation passes, so npm runs (and fails offline); the config stays as it was.
      expect(await run(host, managerHost, ["install", source, "--yes", "--config", project.config]), source).toBe(1);
      expect(host.err(), source).toMatch(/npm install failed/);
      expect(managerHost.npmCommands(), source).toEqual(["--version", "install"]);
    }
    expect((await projectState(project)).config).toBe("models: []\n");
  });

  it("asks before installing: no, end of input and a host without input exit 2 without running npm; yes installs and says to restart", async () => {
    const project = await makeProject();
    for (const host of [cli(["n"]), cli([]), cli([], { interactive: false })]) {
      const managerHost = makeTestHost(env);
      expect(await run(host, managerHost, ["install", FIXTURE, "--config", project.config])).toBe(2);
      expect(host.err()).toContain("runs its code with the gateway's rights");
      expect(host.err()).toContain("[y/N]");
      expect(host.err()).toContain("Extension installation cancelled");
      expect(managerHost.calls).toEqual([]);
    }
    const host = cli([" Yes "]);
    const managerHost = makeTestHost(env);
    expect(await run(host, managerHost, ["install", FIXTURE, "--config", project.config, "--required"])).toBe(0);
    expect(host.out()).toBe(`Installed and enabled fixture (${FIXTURE_PACKAGE}@1.0.0), required: yes.\nRestart the gateway to load it.\n`);

    const list = cli();
    expect(await run(list, makeTestHost(env), ["list", "--config", project.config])).toBe(0);
    expect(list.out()).toBe(`NAME\tPACKAGE\tVERSION\tENABLED\tREQUIRED\tLOADS\nfixture\t${FIXTURE_PACKAGE}\t1.0.0\tyes\tyes\tyes\n`);

    const disable = cli();
    expect(await run(disable, makeTestHost(env), ["disable", FIXTURE_USE, "--config", project.config])).toBe(0);
    expect(disable.out()).toBe("Disabled fixture. Restart the gateway to apply the change.\n");
    const again = cli();
    expect(await run(again, makeTestHost(env), ["disable", "fixture", "--config", project.config])).toBe(0);
    expect(again.out()).toBe("fixture is already disabled; nothing changed.\n");
    const enable = cli();
    expect(await run(enable, makeTestHost(env), ["enable", FIXTURE_PACKAGE, "--config", project.config])).toBe(0);
    expect(enable.out()).toBe("Enabled fixture. Restart the gateway to apply the change.\n");

    const remove = cli();
    expect(await run(remove, makeTestHost(env), ["remove", "fixture", "--config", project.config])).toBe(0);
    expect(remove.out()).toBe(`Removed fixture and its package ${FIXTURE_PACKAGE}. Restart the gateway to apply the change.\n`);
    const empty = cli();
    expect(await run(empty, makeTestHost(env), ["list", "--no-check", "--config", project.config])).toBe(0);
    expect(empty.out()).toBe(`No extensions are configured in ${project.config}.\n`);
  });

  it("reads the config from $DEER_FLOW_CONFIG and reports failures in one line without a stack", async () => {
    const project = await makeProject("plugins: []\nplugins: []\n");
    const base = cli();
    const host: FakeCli = { ...base, env: mapEnv({ DEER_FLOW_CONFIG: project.config }) };
    expect(await run(host, makeTestHost(env), ["enable", "x"])).toBe(1);
    expect(host.err()).toMatch(/^extension command failed: .*config\.yaml: has more than one top-level plugins: key.*\n$/);
  });

  it("answers usage errors with exit 2", async () => {
    for (const args of [[], ["frobnicate"], ["install"], ["list", "extra"], ["enable", "a", "--yes"], ["install", "x", "--bogus"], ["list", "--config"]]) {
      const host = cli();
      expect(await run(host, makeTestHost(env), args), args.join(" ")).toBe(2);
      expect(host.err(), args.join(" ")).not.toBe("");
    }
    const help = cli();
    expect(await run(help, makeTestHost(env), ["--help"])).toBe(0);
    expect(help.out()).toContain("deerflow-edge extension install SOURCE [--yes] [--required]");
  });
});

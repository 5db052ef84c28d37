import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ExtensionManagerError } from "../../src/extensions/manager/index.ts";
import { ManagerLockBusyError } from "../../src/ports/extension-manager.ts";
import {
  FIXTURE,
  FIXTURE_PACKAGE,
  makeManager,
  makeProject,
  makeSource,
  makeTestHost,
  useNpmTestEnv,
  rejectionOf,
  projectState,
  renamed,
  type Project,
} from "./manager-harness.ts";

let env!: Record<string, string>;
useNpmTestEnv((e) => (env = e));

const failure = (promise: Promise<unknown>) => rejectionOf(promise, Error);

/** A project that already has one installed extension, so manifest and lock exist and are non-trivial. */
async function projectWithOne(): Promise<Project> {
  const project = await makeProject("# operator comment\nmodels: []\nplugins: []\n\n# trailing note\n");
  await makeManager(makeTestHost(env), project).install(await makeSource(renamed("first-extension", "first")), { yes: true });
  return project;
}

describe("the install and remove transactions (real npm)", () => {
  it("a failure injected at every step of install leaves manifest, lock, config and snapshots byte-identical", async () => {
    const source = await makeSource(renamed("second-extension", "second"));
    // One clean run on a copy counts the mutating steps.
    const counting = makeTestHost(env);
    await makeManager(counting, await projectWithOne()).install(source, { yes: true });
    const steps = counting.mutations;
    // npm --version, the snapshot folder and copy, npm install, the one config write.
    expect(counting.calls.map((call) => call.op)).toEqual(["run", "mkdir", "copyTree", "run", "writeFileAtomic", "run", "writeFileAtomic"]);

    const project = await projectWithOne();
    const before = await projectState(project);
    for (let step = 1; step <= steps; step++) {
      const host = makeTestHost(env);
      host.failAt = step;
      const error = await failure(makeManager(host, project).install(source, { yes: true }));
      const failedCall = host.calls[step - 1]!;
      expect(error.message, `step ${step}: ${failedCall.op} ${failedCall.detail}`).toContain(`injected failure at step ${step}`);
      expect(await projectState(project), `step ${step}: ${failedCall.op} ${failedCall.detail}`).toEqual(before);
    }
    // And with no failure the same project takes the install.
    await makeManager(makeTestHost(env), project).install(source, { yes: true });
    expect((await projectState(project)).installed).toEqual(["first-extension", "second-extension"]);
  });

  it("a failure injected at every step of a first install (no manifest yet) removes everything it created", async () => {
    const counting = makeTestHost(env);
    await makeManager(counting, await makeProject()).install(FIXTURE, { yes: true });
    // ... plus creating the extensions folder, its manifest and its .npmrc.
    expect(counting.calls.map((call) => call.op)).toEqual(["run", "mkdir", "writeFileAtomic", "writeFileAtomic", "mkdir", "copyTree", "run", "remove", "run", "writeFileAtomic"]);
    const project = await makeProject("models: []\r\n");
    const before = await projectState(project);
    for (let step = 1; step <= counting.mutations; step++) {
      const host = makeTestHost(env);
      host.failAt = step;
      await failure(makeManager(host, project).install(FIXTURE, { yes: true }));
      expect(await projectState(project), `step ${step}: ${host.calls[step - 1]!.op}`).toEqual(before);
    }
  });

  it("a failure injected at every step of remove restores the record, the package and its snapshot", async () => {
    const counting = makeTestHost(env);
    await makeManager(counting, await projectWithOne()).remove("first");
    const steps = counting.mutations;
    // npm --version, the deactivating config write, npm uninstall, retiring the snapshot.
    expect(counting.calls.map((call) => call.op)).toEqual(["run", "writeFileAtomic", "run", "rename", "remove"]);

    const project = await projectWithOne();
    const before = await projectState(project);
    for (let step = 1; step <= steps; step++) {
      const host = makeTestHost(env);
      host.failAt = step;
      const error = await failure(makeManager(host, project).remove("first"));
      expect(error.message).toContain(`injected failure at step ${step}`);
      expect(await projectState(project), `step ${step}: ${host.calls[step - 1]!.op} ${host.calls[step - 1]!.detail}`).toEqual(before);
    }
    await makeManager(makeTestHost(env), project).remove("first");
    expect(await projectState(project)).toMatchObject({ sources: [], installed: [] });
  });

  it("restores the files even when the recovery sync fails, and reports both failures", async () => {
    const project = await projectWithOne();
    const before = await projectState(project);
    const host = makeTestHost(env);
    const broken = await makeSource(async (manifest, dir) => {
      renamed("broken-extension", "broken")(manifest);
      await writeFile(join(dir, "index.js"), "export const install = 42;\n");
    });
    let ciRuns = 0;
    host.aroundRun = async (phase, args) => {
      // The recovery `npm ci` (the second: the first installs the audited lock) fails after
      // scribbling on the lock it should never write.
      if (phase === "before" && args[0] === "ci" && ++ciRuns === 2) {
        await writeFile(join(project.extensions, "package-lock.json"), "{ scribbled");
        throw new Error("recovery npm ci exploded");
      }
    };
    const error = await failure(makeManager(host, project).install(broken, { yes: true }));
    expect(error).toBeInstanceOf(ExtensionManagerError);
    expect((error as ExtensionManagerError).code).toBe("extension_recovery_failed");
    expect(error.message).toContain("recovery npm ci exploded");
    expect(error.message).toContain('Original failure: the installed extension broken');
    const after = await projectState(project);
    expect(after.manifest).toBe(before.manifest);
    expect(after.lock).toBe(before.lock);
    expect(after.config).toBe(before.config);
    expect(after.sources).toEqual(before.sources);
  });

  it("Ctrl-C during npm install restores the files and skips the recovery sync", async () => {
    const project = await projectWithOne();
    const before = await projectState(project);
    const host = makeTestHost(env);
    host.aroundRun = (phase, args) => {
      if (phase === "before" && args[0] === "install") setTimeout(() => host.interrupt(), 50);
    };
    const error = await failure(makeManager(host, project).install(await makeSource(renamed("second-extension", "second")), { yes: true }));
    expect((error as ExtensionManagerError).code).toBe("extension_interrupted");
    expect(error.message).toContain("node_modules was not re-synchronised");
    expect(host.npmCommands()).toEqual(["--version", "install"]);
    const after = await projectState(project);
    expect({ ...after, installed: undefined }).toEqual({ ...before, installed: undefined });
  });

  it("keeps a concurrent edit of the lock made during npm install, restores nothing, and says so", async () => {
    const project = await projectWithOne();
    const host = makeTestHost(env);
    const lockPath = join(project.extensions, "package-lock.json");
    let theirs = "";
    // Someone edits the lock after npm finished; then the config write (the last step) fails.
    host.beforeMutation = async (op, detail) => {
      if (op === "writeFileAtomic" && detail === project.config) {
        theirs = `${await readFile(lockPath, "utf8")}\n`;
        await writeFile(lockPath, theirs);
        throw new Error("config write failed");
      }
    };
    const error = await failure(makeManager(host, project).install(await makeSource(renamed("second-extension", "second")), { yes: true }));
    expect((error as ExtensionManagerError).code).toBe("extension_concurrent_edit");
    expect(error.message).toContain("package-lock.json changed meanwhile outside this command");
    expect(await readFile(lockPath, "utf8")).toBe(theirs);
    expect((await projectState(project)).sources).toEqual(["first-extension"]);
  });

  it("remove keeps a concurrent config edit made during npm uninstall and leaves the plugin deactivated", async () => {
    const project = await projectWithOne();
    const before = await projectState(project);
    const host = makeTestHost(env);
    const theirs = "# rewritten by the operator meanwhile\nmodels: []\nplugins: []\n";
    host.aroundRun = async (phase, args) => {
      if (phase === "before" && args[0] === "uninstall") {
        await writeFile(project.config, theirs);
        throw new Error("npm uninstall crashed");
      }
    };
    const error = await failure(makeManager(host, project).remove("first"));
    expect((error as ExtensionManagerError).code).toBe("extension_concurrent_edit");
    expect(error.message).toContain("config.yaml was edited meanwhile");
    const after = await projectState(project);
    expect(after.config).toBe(theirs);
    expect(after.manifest).toBe(before.manifest);
    expect(after.lock).toBe(before.lock);
    expect(after.sources).toEqual(before.sources);
  });
});

describe("the cross-process lock", () => {
  it("two managers started at once run one after the other, and both installs land", async () => {
    const project = await makeProject();
    const events: string[] = [];
    const hostFor = (label: string) => {
      const host = makeTestHost(env);
      host.aroundRun = (phase, args) => void events.push(`${label} ${phase} ${args[0]}`);
      return host;
    };
    const waits: string[] = [];
    const [a, b] = await Promise.all([
      makeManager(hostFor("A"), project, { onLockWait: () => waits.push("A") }).install(await makeSource(renamed("a-extension", "a")), { yes: true }),
      makeManager(hostFor("B"), project, { onLockWait: () => waits.push("B") }).install(await makeSource(renamed("b-extension", "b")), { yes: true }),
    ]);
    expect([a.name, b.name]).toEqual(["a", "b"]);
    expect(waits).toHaveLength(1);
    // No interleaving: all of one manager's npm runs, then all of the other's.
    const labels = events.map((event) => event[0]);
    expect(labels.join("")).toMatch(/^(A+B+|B+A+)$/);
    expect((await projectState(project)).installed).toEqual(["a-extension", "b-extension"]);
  });

  it("fails at once with a clear message when asked not to wait, and takes over a lock whose holder is gone", async () => {
    const project = await makeProject("plugins:\n  - name: x\n    use: ./x.js:install\n");
    const holder = makeTestHost(env);
    const release = await holder.lock(join(project.dir, ".deer-flow", "extension-manager.lock"), { timeoutMs: 0 });
    const error = await failure(makeManager(makeTestHost(env), project, { lockTimeoutMs: 0 }).setEnabled("x", false));
    expect(error).toBeInstanceOf(ManagerLockBusyError);
    expect(error.message).toMatch(/^another extension-manager operation is running \(pid \d+ on .+\); wait for it to finish/);

    // Ctrl-C while waiting ends the wait and says nothing changed.
    const waiting = makeTestHost(env);
    const pending = makeManager(waiting, project, { lockTimeoutMs: 60_000, onLockWait: () => waiting.interrupt() }).setEnabled("x", false);
    const interrupted = await failure(pending);
    expect((interrupted as ExtensionManagerError).code).toBe("extension_interrupted");
    expect(interrupted.message).toBe("interrupted while waiting for another extension-manager operation; nothing was changed");
    await release();

    await writeFile(join(project.dir, ".deer-flow", "extension-manager.lock"), JSON.stringify({ pid: 2 ** 22 + 12345, host: (await import("node:os")).hostname(), token: "dead", since: "then" }));
    expect(await makeManager(makeTestHost(env), project, { lockTimeoutMs: 0 }).setEnabled("x", false)).toEqual({ name: "x", changed: true });
  });
});

describe("npm output", () => {
  it("names the failing npm command and its error lines", async () => {
    const project = await makeProject();
    const host = makeTestHost(env);
    const error = await failure(makeManager(host, project).install("deerflow-no-such-package-for-tests@1.0.0", { yes: true }));
    expect((error as ExtensionManagerError).code).toBe("extension_npm_failed");
    expect(error.message).toMatch(/^npm install failed \(exit \d+\):\nnpm error/);
    expect(await projectState(project)).toMatchObject({ manifest: undefined, lock: undefined, installed: [] });
    expect(FIXTURE_PACKAGE).toBe("deerflow-extension-fixture");
  });
});

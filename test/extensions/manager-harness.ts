import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, expect } from "vitest";
import { createServer, type Server } from "node:http";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createExtensionManagerHost } from "../../adapters/shared/extension-manager-host.ts";
import { createModuleLoader } from "../../adapters/shared/module-loader.ts";
import { ExtensionManager, type ExtensionManagerOptions } from "../../src/extensions/manager/index.ts";
import type { ManagerHost, ManagerRunResult } from "../../src/ports/extension-manager.ts";

/*
 * Shared by the extension-manager suites: temporary projects, copies of the fixture package, a
 * real npm that never reaches the network (a private cache, a registry on a closed loopback port,
 * an empty user config), and a ManagerHost wrapper that logs every call, injects one failure at a
 * chosen mutating step, and lets a test act around npm runs (edit a file, press Ctrl-C).
 */

export const FIXTURE = fileURLToPath(new URL("../fixtures/extensions/managed-extension/", import.meta.url));
export const FIXTURE_PACKAGE = "deerflow-extension-fixture";
export const FIXTURE_USE = `./extensions/node_modules/${FIXTURE_PACKAGE}/index.js:install`;

const cleanup: string[] = [];
let sharedRoot: string | undefined;

async function root(): Promise<string> {
  sharedRoot ??= await mkdtemp(join(tmpdir(), "deerflow-manager-"));
  return sharedRoot;
}

export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(await root(), `${prefix}-`));
  return dir;
}

export async function removeTemporaries(): Promise<void> {
  if (sharedRoot) await rm(sharedRoot, { recursive: true, force: true });
  sharedRoot = undefined;
  await Promise.all(cleanup.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
}

/** The environment npm runs with in tests: hermetic and offline. */
export async function npmTestEnv(extra: Record<string, string> = {}): Promise<Record<string, string>> {
  const base = await root();
  const userconfig = join(base, "empty-npmrc");
  await writeFile(userconfig, "");
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (typeof value === "string" && !/^npm_/i.test(name)) env[name] = value;
  }
  return {
    ...env,
    npm_config_cache: join(base, "npm-cache"),
    npm_config_userconfig: userconfig,
    // Nothing in these tests may come from a registry: a closed loopback port fails fast.
    npm_config_registry: "http://127.0.0.1:9/",
    npm_config_prefer_offline: "true",
    npm_config_fetch_retries: "0",
    npm_config_update_notifier: "false",
    ...extra,
  };
}

export interface Project {
  readonly dir: string;
  readonly config: string;
  readonly extensions: string;
}

export async function makeProject(configText = "models: []\n"): Promise<Project> {
  const dir = await tempDir("project");
  const config = join(dir, "config.yaml");
  await writeFile(config, configText);
  return { dir, config, extensions: join(dir, "extensions") };
}

/** A copy of the fixture package, changed by `edit` (package.json object, folder path). */
export async function makeSource(
  edit?: (manifest: Record<string, unknown>, dir: string) => void | Promise<void>,
): Promise<string> {
  const dir = join(await tempDir("source"), "pkg");
  await cp(FIXTURE, dir, { recursive: true });
  if (edit) {
    const manifest = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as Record<string, unknown>;
    await edit(manifest, dir);
    await writeFile(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  }
  return dir;
}

/** A fixture variant with another package name and extension name, so two can be installed side by side. */
export function renamed(packageName: string, extensionName: string) {
  return (manifest: Record<string, unknown>) => {
    manifest["name"] = packageName;
    manifest["deerflow"] = { extensions: { [extensionName]: "./index.js:install" } };
  };
}

/**
 * A git repository with one commit. Its hooks directory is an empty repository-local folder, so
 * no developer or CI hook (global core.hooksPath, templates) ever runs here.
 */
export async function initGitRepo(dir: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const hooks = join(dir, ".git-empty-hooks");
  const git = (...args: string[]) => execFileSync("git", args, { cwd: dir, env, stdio: "pipe" });
  git("init", "-q");
  await mkdir(hooks, { recursive: true });
  git("config", "core.hooksPath", hooks);
  git("config", "user.email", "test@example.invalid");
  git("config", "user.name", "deerflow test");
  git("config", "commit.gpgsign", "false");
  git("add", "-A");
  git("commit", "-q", "-m", "fixture");
  // The empty hooks folder is test scaffolding, not package content.
  await rm(hooks, { recursive: true, force: true });
}

export interface LoggedCall {
  readonly op: string;
  readonly detail: string;
}

export interface TestHost extends ManagerHost {
  readonly calls: LoggedCall[];
  /** Every env the package manager was started with. */
  readonly runEnvs: Array<Readonly<Record<string, string>>>;
  /** 1-based index of the mutating call to fail (writeFileAtomic, mkdir, rename, remove, copyTree, run). */
  failAt: number | undefined;
  /** Mutating calls so far. */
  mutations: number;
  /** Runs around each command; `after` sees its result. */
  aroundRun: ((phase: "before" | "after", args: readonly string[], result?: ManagerRunResult) => void | Promise<void>) | undefined;
  /** Runs before each mutating call (after the failure check); may act on the files or throw. */
  beforeMutation: ((op: string, detail: string) => void | Promise<void>) | undefined;
  /** Answers `npm --version` with this instead of asking npm. */
  npmVersion: string | undefined;
  /** Calls the registered Ctrl-C handlers. */
  interrupt(): void;
  /** The npm subcommands run, in order ("--version", "install", "ci", "uninstall"). */
  npmCommands(): string[];
}

export function makeTestHost(env: Record<string, string>): TestHost {
  const handlers = new Set<() => void>();
  const real = createExtensionManagerHost({
    env,
    onInterrupt(handler) {
      handlers.add(handler);
      return () => void handlers.delete(handler);
    },
    lockPollMs: 20,
  });
  const host: TestHost = {
    ...real,
    calls: [],
    runEnvs: [],
    failAt: undefined,
    mutations: 0,
    aroundRun: undefined,
    beforeMutation: undefined,
    npmVersion: undefined,
    interrupt() {
      for (const handler of [...handlers]) handler();
    },
    npmCommands() {
      return host.calls.filter((call) => call.op === "run").map((call) => call.detail.split(" ")[1] ?? "");
    },
  };
  const mutating = <F extends (...args: never[]) => Promise<unknown>>(op: string, describe: (...args: Parameters<F>) => string, fn: F): F =>
    (async (...args: Parameters<F>) => {
      const detail = describe(...args);
      host.calls.push({ op, detail });
      host.mutations += 1;
      if (host.failAt === host.mutations) throw new Error(`injected failure at step ${host.mutations} (${op} ${detail})`);
      await host.beforeMutation?.(op, detail);
      return fn(...args);
    }) as F;
  host.writeFileAtomic = mutating<ManagerHost["writeFileAtomic"]>("writeFileAtomic", (path) => path, real.writeFileAtomic);
  host.mkdir = mutating<ManagerHost["mkdir"]>("mkdir", (path) => path, real.mkdir);
  host.rename = mutating<ManagerHost["rename"]>("rename", (from, to) => `${from} -> ${to}`, real.rename);
  host.remove = mutating<ManagerHost["remove"]>("remove", (path) => path, real.remove);
  host.copyTree = mutating<ManagerHost["copyTree"]>("copyTree", (from, to) => `${from} -> ${to}`, real.copyTree);
  host.run = mutating<ManagerHost["run"]>(
    "run",
    (command, args) => `${command} ${args.filter((arg, index) => (!arg.startsWith("--") || arg === "--version") && args[index - 1] !== "--prefix").join(" ")}`,
    async (command, args, options) => {
      host.runEnvs.push(options.env);
      if (host.npmVersion !== undefined && args[0] === "--version") return { code: 0, stdout: `${host.npmVersion}\n`, stderr: "" };
      await host.aroundRun?.("before", args);
      const result = await real.run(command, args, options);
      await host.aroundRun?.("after", args, result);
      return result;
    },
  );
  return host;
}

export function makeManager(host: ManagerHost, project: Project, options: Partial<ExtensionManagerOptions> = {}): ExtensionManager {
  return new ExtensionManager({
    host,
    configPath: project.config,
    moduleLoader: createModuleLoader({ baseDir: project.dir }),
    lockTimeoutMs: 30_000,
    ...options,
  });
}

export interface ProjectState {
  readonly manifest: string | undefined;
  readonly lock: string | undefined;
  readonly npmrc: string | undefined;
  readonly config: string | undefined;
  readonly sources: string[];
  readonly installed: string[];
}

async function maybeRead(path: string): Promise<string | undefined> {
  try {
    // latin1 keeps every byte as one character, so string equality is byte equality.
    return await readFile(path, "latin1");
  } catch {
    return undefined;
  }
}

async function maybeList(path: string): Promise<string[]> {
  try {
    return (await readdir(path)).filter((name) => !name.startsWith(".")).sort();
  } catch {
    return [];
  }
}

/** Manifest, lock, .npmrc and config as bytes, plus what sits in sources/ and node_modules/. */
export async function projectState(project: Project): Promise<ProjectState> {
  return {
    manifest: await maybeRead(join(project.extensions, "package.json")),
    lock: await maybeRead(join(project.extensions, "package-lock.json")),
    npmrc: await maybeRead(join(project.extensions, ".npmrc")),
    config: await maybeRead(project.config),
    sources: await maybeList(join(project.extensions, "sources")),
    installed: await maybeList(join(project.extensions, "node_modules")),
  };
}

/** `npm pack` of a package folder into `destination`; returns the tarball's path. */
export function npmPack(dir: string, destination: string, env: Record<string, string>): string {
  const out = execFileSync("npm", ["pack", "--pack-destination", destination, "--json"], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] }).toString();
  const [packed] = JSON.parse(out) as Array<{ filename: string }>;
  return join(destination, packed!.filename);
}

/** Serves one file on 127.0.0.1; close() when done. */
export async function serveFile(path: string, urlPath: string): Promise<{ url: string; server: Server }> {
  const body = await readFile(path);
  const server = createServer((request, response) => {
    if (request.url === urlPath) {
      response.writeHead(200, { "content-type": "application/octet-stream", "content-length": body.length });
      response.end(body);
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}${urlPath}`, server };
}

/** Every suite's npm environment (an isolated cache and config) and the clean-up of its temporary folders. */
export function useNpmTestEnv(receive: (env: Record<string, string>) => void): void {
  beforeAll(async () => receive(await npmTestEnv()));
  afterAll(async () => {
    await removeTemporaries();
  });
}

/** The error `promise` rejects with, checked to be a `type`; fails the test when it resolves. */
export async function rejectionOf<T extends Error>(promise: Promise<unknown>, type: abstract new (...args: never[]) => T): Promise<T> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(type);
  return error as T;
}

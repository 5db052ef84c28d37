import type { ManagerHost, ManagerRunResult } from "../../ports/extension-manager.ts";
import type { ModuleLoader } from "../../ports/module-loader.ts";
import { PluginsConfig } from "./config-file.ts";
import { ExtensionManagerError } from "./errors.ts";
import { auditExtensionsLock } from "./lock-audit.ts";
import { commonNpmFlags, controlledNpmEnv, npmOutputTail } from "./npm.ts";

// What every manager operation works on: the config file, the extensions folder's manifest, lock
// and .npmrc, and npm run inside that folder.

export interface ExtensionManagerOptions {
  readonly host: ManagerHost;
  /** config.yaml; its folder is the project root, holding extensions/ and .deer-flow/. */
  readonly configPath: string;
  /** The gateway's module loader with the config folder as base: the import check and `list` use it. */
  readonly moduleLoader: ModuleLoader;
  /** How long to wait for another manager operation; default 10 minutes. */
  readonly lockTimeoutMs?: number;
  readonly onLockWait?: (holder: string) => void;
  /** How long the import check waits for a module's top level; default 30 s. */
  readonly importTimeoutMs?: number;
}

export const encoder = new TextEncoder();
// ignoreBOM keeps a byte-order mark in the text, so a rewrite writes it back.
export const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

export function sameBytes(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.length !== b.length) return false;
  for (let index = 0; index < a.length; index++) if (a[index] !== b[index]) return false;
  return true;
}

export function parentOf(path: string): string {
  const trimmed = path.replace(/[\\/]+$/, "");
  const cut = Math.max(trimmed.lastIndexOf("/"), trimmed.lastIndexOf("\\"));
  if (cut === -1) return ".";
  return cut === 0 ? trimmed.slice(0, 1) : trimmed.slice(0, cut);
}

export function dependencyNames(manifest: Uint8Array | undefined): Set<string> {
  if (manifest === undefined) return new Set();
  try {
    const parsed = JSON.parse(decoder.decode(manifest)) as { dependencies?: Record<string, unknown> };
    return new Set(Object.keys(parsed.dependencies ?? {}));
  } catch {
    return new Set();
  }
}

export function interruptedError(): ExtensionManagerError {
  return new ExtensionManagerError(
    "extension_interrupted",
    "interrupted: the extensions manifest, lock, config and snapshot were restored; node_modules was not re-synchronised, so run `npm ci --prefix extensions` next to config.yaml (or the next extension command) to bring it in step",
  );
}

/** The files one transaction protects, as bytes (undefined: the file did not exist). */
export interface DependencyFiles {
  manifest: Uint8Array | undefined;
  lock: Uint8Array | undefined;
  npmrc: Uint8Array | undefined;
}

export const DEPENDENCY_FILES = ["manifest", "lock", "npmrc"] as const;

export class ManagerWorkspace {
  readonly configPath: string;
  readonly projectRoot: string;
  readonly extensionsDir: string;
  readonly host: ManagerHost;
  readonly loader: ModuleLoader;
  readonly displayConfig: string;

  constructor(readonly options: ExtensionManagerOptions) {
    this.host = options.host;
    this.loader = options.moduleLoader;
    this.displayConfig = options.configPath;
    this.configPath = options.host.resolvePath(options.configPath);
    this.projectRoot = parentOf(this.configPath);
    this.extensionsDir = `${this.projectRoot}/extensions`;
  }

  get paths() {
    const ext = this.extensionsDir;
    return {
      manifest: `${ext}/package.json`,
      lock: `${ext}/package-lock.json`,
      npmrc: `${ext}/.npmrc`,
      sources: `${ext}/sources`,
      nodeModules: `${ext}/node_modules`,
      managerLock: `${this.projectRoot}/.deer-flow/extension-manager.lock`,
    };
  }

  async readConfig(): Promise<{ bytes: Uint8Array; config: PluginsConfig }> {
    const bytes = await this.host.readFile(this.configPath);
    if (bytes === undefined) {
      throw new ExtensionManagerError(
        "extension_config_invalid",
        `${this.displayConfig} does not exist; create it (an empty file is fine) or name another with --config`,
      );
    }
    return { bytes, config: PluginsConfig.parse(decoder.decode(bytes), this.displayConfig) };
  }

  async writeConfig(text: string): Promise<Uint8Array> {
    const bytes = encoder.encode(text);
    await this.host.writeFileAtomic(this.configPath, bytes);
    return bytes;
  }

  async readDependencyFiles(): Promise<DependencyFiles> {
    const paths = this.paths;
    const [manifest, lock, npmrc] = await Promise.all([this.host.readFile(paths.manifest), this.host.readFile(paths.lock), this.host.readFile(paths.npmrc)]);
    return { manifest, lock, npmrc };
  }

  async installedVersion(dependency: string): Promise<string | undefined> {
    const bytes = await this.host.readFile(`${this.paths.nodeModules}/${dependency}/package.json`);
    if (bytes === undefined) return undefined;
    try {
      const version = (JSON.parse(decoder.decode(bytes)) as { version?: unknown }).version;
      return typeof version === "string" ? version : undefined;
    } catch {
      return undefined;
    }
  }

  npmEnv(): Record<string, string> {
    return controlledNpmEnv(this.host.env);
  }

  async npm(args: string[], what: string, signal: AbortSignal): Promise<ManagerRunResult> {
    // Subcommand first, then the common flags, then its own arguments (which may end in "-- <spec>").
    const [subcommand, ...rest] = args;
    const result = await this.host.run("npm", [subcommand!, ...commonNpmFlags(this.extensionsDir), ...rest], {
      cwd: this.extensionsDir,
      env: this.npmEnv(),
      signal,
    });
    if (result.code !== 0) {
      const tail = npmOutputTail(result);
      throw new ExtensionManagerError("extension_npm_failed", `${what} failed (exit ${result.code})${tail ? `:\n${tail}` : ""}`);
    }
    return result;
  }

  /** Brings node_modules in step with the (restored) manifest and lock, never rewriting the lock. */
  async syncEnvironment(signal: AbortSignal, extraFlags: readonly string[]): Promise<void> {
    const files = await this.readDependencyFiles();
    if (files.manifest === undefined) {
      await this.host.remove(this.paths.nodeModules);
      return;
    }
    if (files.lock !== undefined) await this.npm(["ci", ...extraFlags], "npm ci (re-synchronising node_modules with the restored lock)", signal);
    else await this.npm(["install", "--save=false", ...extraFlags], "npm install (re-synchronising node_modules)", signal);
  }

  async restoreDependencyFiles(files: DependencyFiles): Promise<void> {
    const paths = this.paths;
    const current = await this.readDependencyFiles();
    for (const key of DEPENDENCY_FILES) {
      if (sameBytes(current[key], files[key])) continue;
      const bytes = files[key];
      if (bytes === undefined) await this.host.remove(paths[key]);
      else await this.host.writeFileAtomic(paths[key], bytes);
    }
  }

  auditLock(lock: Uint8Array | undefined, warnings: string[]): void {
    if (lock === undefined) {
      throw new ExtensionManagerError("extension_lock_not_reproducible", "npm wrote no extensions/package-lock.json; the extensions cannot be reproduced without it");
    }
    const audit = auditExtensionsLock(decoder.decode(lock));
    warnings.push(...audit.warnings);
    if (audit.violations.length > 0) {
      throw new ExtensionManagerError(
        "extension_lock_not_reproducible",
        `the new extensions lock records a reference a clean install on another machine could not reproduce: ${audit.violations.join("; ")}. ` +
          "Check npm's configuration (registry, .npmrc, npm_config_* variables) and install local code as a folder snapshot",
        { details: { violations: audit.violations } },
      );
    }
  }
}

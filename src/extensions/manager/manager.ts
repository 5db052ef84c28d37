import { errorMessage, isAbortError } from "../../core/errors.ts";
import type { ManagerHost, ManagerRunResult } from "../../ports/extension-manager.ts";
import type { ModuleLoader } from "../../ports/module-loader.ts";
import { appendEdit, PluginsConfig, removeEdit, setEnabledEdit, updateEdit, type PluginRecord, type PluginsEdit } from "./config-file.ts";
import { checkExtensionEntry, type EntryCheck } from "./entry-check.ts";
import { ExtensionManagerError } from "./errors.ts";
import { auditExtensionsLock } from "./lock-audit.ts";
import { commonNpmFlags, controlledNpmEnv, npmOutputTail, requireSupportedNpm } from "./npm.ts";
import { managedUse, readExtensionEntry, type ExtensionEntry } from "./packaging.ts";
import { checkSnapshotSource, includeInSnapshot } from "./snapshot.ts";
import { validateExtensionSource } from "./source.ts";

/*
 * The extension manager owns one transaction over four things: the extensions manifest and lock
 * (extensions/package.json, extensions/package-lock.json, plus the .npmrc that keeps folder installs
 * reproducible), config.yaml's plugins block, and the source snapshot under extensions/sources/.
 * npm is the only writer of the lock and the manager the only caller of npm for it.
 *
 * Install: validate the source and the config (before any package code can run), check npm, copy
 * the snapshot, npm install, audit the lock, find the one entry, load it, and only then write the
 * plugin record, the one config write. Remove: deactivate the record first (an abrupt exit must
 * never leave a required plugin pointing at a package that is gone), then npm uninstall, audit, and
 * retire the snapshot.
 *
 * Any failure restores the manifest, lock and config byte for byte and puts the snapshot back
 * where it was, then re-synchronises node_modules from the restored lock (`npm ci`), and restores
 * the files once more because a recovery command may itself write. The restore is not blanket: a
 * file someone else changed meanwhile is left alone and the operation ends with an error saying so.
 * Ctrl-C skips the recovery sync: the files are already back, and holding an interrupt hostage to a
 * full reinstall invites the second Ctrl-C that kills the process mid-restore.
 */

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

export interface InstallOptions {
  /** The operator's confirmation: extension code (and npm install scripts npm allows) runs with the gateway's rights. */
  readonly yes: boolean;
  /** Written on a new record only; an adopted record keeps its own. Default false. */
  readonly required?: boolean;
  /** Passes --ignore-scripts to npm. */
  readonly ignoreScripts?: boolean;
  readonly signal?: AbortSignal;
}

export interface InstalledExtension {
  readonly name: string;
  readonly package: string;
  readonly version: string | undefined;
  readonly use: string;
  readonly required: boolean;
  /** True when an existing hand-written record with the same `use` was taken over. */
  readonly adopted: boolean;
  readonly warnings: readonly string[];
}

export interface ConfiguredExtension {
  readonly name: string;
  /** The recorded package, or undefined for a hand-written record without one. */
  readonly package: string | undefined;
  readonly version: string | undefined;
  readonly use: string;
  readonly enabled: boolean;
  readonly required: boolean;
  /** Undefined when the load check was skipped. */
  readonly check: EntryCheck | undefined;
}

export interface RemovedExtension {
  readonly name: string;
  readonly package: string;
  /** False when another record still uses the package, so only the record went. */
  readonly packageRemoved: boolean;
  readonly warnings: readonly string[];
}

const MANIFEST_TEMPLATE = `${JSON.stringify(
  {
    name: "deerflow-extensions",
    private: true,
    description: "Extensions installed by `deerflow-edge extension install`; change this folder only through `deerflow-edge extension`.",
    dependencies: {},
  },
  null,
  2,
)}\n`;
const NPMRC_TEMPLATE =
  "# Written by deerflow-edge extension: local extension folders install as copies, exactly as a clean `npm ci` here reproduces them.\ninstall-links=true\n";
const DEFAULT_LOCK_TIMEOUT_MS = 10 * 60_000;

const encoder = new TextEncoder();
// ignoreBOM keeps a byte-order mark in the text, so a rewrite writes it back.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

function sameBytes(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.length !== b.length) return false;
  for (let index = 0; index < a.length; index++) if (a[index] !== b[index]) return false;
  return true;
}

function parentOf(path: string): string {
  const trimmed = path.replace(/[\\/]+$/, "");
  const cut = Math.max(trimmed.lastIndexOf("/"), trimmed.lastIndexOf("\\"));
  if (cut === -1) return ".";
  return cut === 0 ? trimmed.slice(0, 1) : trimmed.slice(0, cut);
}

function randomSuffix(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

function dependencyNames(manifest: Uint8Array | undefined): Set<string> {
  if (manifest === undefined) return new Set();
  try {
    const parsed = JSON.parse(decoder.decode(manifest)) as { dependencies?: Record<string, unknown> };
    return new Set(Object.keys(parsed.dependencies ?? {}));
  } catch {
    return new Set();
  }
}

function recordName(record: PluginRecord): string {
  return typeof record["name"] === "string" && record["name"] !== "" ? record["name"] : String(record["use"]);
}

function interruptedError(): ExtensionManagerError {
  return new ExtensionManagerError(
    "extension_interrupted",
    "interrupted: the extensions manifest, lock, config and snapshot were restored; node_modules was not re-synchronised, so run `npm ci --prefix extensions` next to config.yaml (or the next extension command) to bring it in step",
  );
}

/** The files one transaction protects, as bytes (undefined: the file did not exist). */
interface DependencyFiles {
  manifest: Uint8Array | undefined;
  lock: Uint8Array | undefined;
  npmrc: Uint8Array | undefined;
}

const DEPENDENCY_FILES = ["manifest", "lock", "npmrc"] as const;

export class ExtensionManager {
  readonly configPath: string;
  readonly projectRoot: string;
  readonly extensionsDir: string;
  private readonly host: ManagerHost;
  private readonly loader: ModuleLoader;
  private readonly displayConfig: string;

  constructor(private readonly options: ExtensionManagerOptions) {
    this.host = options.host;
    this.loader = options.moduleLoader;
    this.displayConfig = options.configPath;
    this.configPath = options.host.resolvePath(options.configPath);
    this.projectRoot = parentOf(this.configPath);
    this.extensionsDir = `${this.projectRoot}/extensions`;
  }

  private get paths() {
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

  /** Installs SOURCE (a package spec, an https URL or a local folder) and enables its entry. */
  async install(source: string, options: InstallOptions): Promise<InstalledExtension> {
    if (!options.yes) {
      throw new ExtensionManagerError(
        "extension_not_confirmed",
        "installing an extension runs its code (and any install scripts npm allows) with the gateway's rights; confirm with --yes once you trust the source",
      );
    }
    return this.locked(options.signal, (signal) => this.installLocked(source, options, signal));
  }

  /** Sets one record's `enabled`; its config, required flag and everything else stay as they are. */
  async setEnabled(identifier: string, enabled: boolean, options: { signal?: AbortSignal } = {}): Promise<{ name: string; changed: boolean }> {
    return this.locked(options.signal, async () => {
      const { config } = await this.readConfig();
      const index = this.resolveIndex(config.records, identifier);
      const record = config.records[index]!;
      const current = record["enabled"] === undefined ? true : record["enabled"] === true;
      if (current === enabled && record["enabled"] !== undefined) return { name: recordName(record), changed: false };
      await this.writeConfig(config.rewrite(setEnabledEdit(index, enabled)));
      return { name: recordName(record), changed: true };
    });
  }

  /** Removes one record; the package (and its snapshot) too when no other record uses it. */
  async remove(identifier: string, options: { signal?: AbortSignal } = {}): Promise<RemovedExtension> {
    return this.locked(options.signal, (signal) => this.removeLocked(identifier, signal));
  }

  /** Every configured plugin record in load order, with its installed version and, unless `check` is false, whether it loads. */
  async list(options: { check?: boolean } = {}): Promise<ConfiguredExtension[]> {
    const { config } = await this.readConfig();
    const out: ConfiguredExtension[] = [];
    for (const record of config.records) {
      const pkg = typeof record["package"] === "string" ? record["package"] : undefined;
      const use = String(record["use"]);
      out.push({
        name: recordName(record),
        package: pkg,
        version: pkg ? await this.installedVersion(pkg) : undefined,
        use,
        enabled: record["enabled"] !== false,
        required: record["required"] === true,
        check: options.check === false ? undefined : await checkExtensionEntry(this.loader, use, { timeoutMs: this.options.importTimeoutMs }),
      });
    }
    return out;
  }

  // --- the lock and Ctrl-C ---------------------------------------------------------------------

  private async locked<T>(outer: AbortSignal | undefined, body: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    const unregister = this.host.onInterrupt(() => controller.abort(interruptedError()));
    const signal = outer ? AbortSignal.any([outer, controller.signal]) : controller.signal;
    let started = false;
    try {
      const release = await this.host.lock(this.paths.managerLock, {
        signal,
        timeoutMs: this.options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
        onWait: this.options.onLockWait,
      });
      started = true;
      try {
        return await body(signal);
      } finally {
        await release();
      }
    } catch (error) {
      if (signal.aborted && !started) {
        throw new ExtensionManagerError("extension_interrupted", "interrupted while waiting for another extension-manager operation; nothing was changed");
      }
      if (signal.aborted && !(error instanceof ExtensionManagerError)) throw interruptedError();
      throw error;
    } finally {
      unregister();
    }
  }

  // --- reading -------------------------------------------------------------------------------

  private async readConfig(): Promise<{ bytes: Uint8Array; config: PluginsConfig }> {
    const bytes = await this.host.readFile(this.configPath);
    if (bytes === undefined) {
      throw new ExtensionManagerError(
        "extension_config_invalid",
        `${this.displayConfig} does not exist; create it (an empty file is fine) or name another with --config`,
      );
    }
    return { bytes, config: PluginsConfig.parse(decoder.decode(bytes), this.displayConfig) };
  }

  private async writeConfig(text: string): Promise<Uint8Array> {
    const bytes = encoder.encode(text);
    await this.host.writeFileAtomic(this.configPath, bytes);
    return bytes;
  }

  private resolveIndex(records: readonly PluginRecord[], identifier: string): number {
    const matches = records.flatMap((record, index) =>
      record["name"] === identifier || record["package"] === identifier || record["use"] === identifier ? [index] : [],
    );
    if (matches.length === 1) return matches[0]!;
    if (matches.length === 0) {
      throw new ExtensionManagerError(
        "extension_not_found",
        `no configured extension is named "${identifier}" (by name, package or use) in ${this.displayConfig}; run "deerflow-edge extension list" to see them`,
      );
    }
    const names = matches.map((index) => `plugins[${index}] ${recordName(records[index]!)}`).join(", ");
    throw new ExtensionManagerError(
      "extension_not_found",
      `"${identifier}" matches ${matches.length} configured extensions (${names}); name exactly one, by its name or its use value`,
    );
  }

  private async readDependencyFiles(): Promise<DependencyFiles> {
    const paths = this.paths;
    const [manifest, lock, npmrc] = await Promise.all([this.host.readFile(paths.manifest), this.host.readFile(paths.lock), this.host.readFile(paths.npmrc)]);
    return { manifest, lock, npmrc };
  }

  private async installedVersion(dependency: string): Promise<string | undefined> {
    const bytes = await this.host.readFile(`${this.paths.nodeModules}/${dependency}/package.json`);
    if (bytes === undefined) return undefined;
    try {
      const version = (JSON.parse(decoder.decode(bytes)) as { version?: unknown }).version;
      return typeof version === "string" ? version : undefined;
    } catch {
      return undefined;
    }
  }

  // --- npm -------------------------------------------------------------------------------------

  private npmEnv(): Record<string, string> {
    return controlledNpmEnv(this.host.env);
  }

  private async npm(args: string[], what: string, signal: AbortSignal): Promise<ManagerRunResult> {
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
  private async syncEnvironment(signal: AbortSignal, extraFlags: readonly string[]): Promise<void> {
    const files = await this.readDependencyFiles();
    if (files.manifest === undefined) {
      await this.host.remove(this.paths.nodeModules);
      return;
    }
    if (files.lock !== undefined) await this.npm(["ci", ...extraFlags], "npm ci (re-synchronising node_modules with the restored lock)", signal);
    else await this.npm(["install", "--save=false", ...extraFlags], "npm install (re-synchronising node_modules)", signal);
  }

  private async restoreDependencyFiles(files: DependencyFiles): Promise<void> {
    const paths = this.paths;
    const current = await this.readDependencyFiles();
    for (const key of DEPENDENCY_FILES) {
      if (sameBytes(current[key], files[key])) continue;
      const bytes = files[key];
      if (bytes === undefined) await this.host.remove(paths[key]);
      else await this.host.writeFileAtomic(paths[key], bytes);
    }
  }

  private auditLock(lock: Uint8Array | undefined, warnings: string[]): void {
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

  /**
   * The shared failure path: keep concurrent edits, otherwise restore files, undo the snapshot
   * change, re-synchronise (not after Ctrl-C), restore again, and say what happened.
   */
  private async recover(
    error: unknown,
    state: {
      before: DependencyFiles;
      managed: DependencyFiles;
      configBefore: Uint8Array;
      configWritten: Uint8Array | undefined;
      npmAttempted: boolean;
      /** Flags the operator chose for this operation's npm calls (--ignore-scripts), repeated by the re-sync. */
      npmFlags: readonly string[];
      undoSnapshot: () => Promise<void>;
    },
    signal: AbortSignal,
  ): Promise<never> {
    const interrupted = signal.aborted || isAbortError(error);
    const current = await this.readDependencyFiles();
    // A file is someone else's edit only when it is neither what this command last left there nor
    // what it started from (a write that failed leaves the latter).
    const dependencyConflict = DEPENDENCY_FILES.filter((key) => !sameBytes(current[key], state.managed[key]) && !sameBytes(current[key], state.before[key]));
    const configNow = await this.host.readFile(this.configPath);
    const configChanged = state.configWritten !== undefined && !sameBytes(configNow, state.configBefore);
    const configConflict = configChanged && !sameBytes(configNow, state.configWritten);
    const original = interrupted ? interruptedError() : error;
    // The snapshot goes back first in every case: it is this command's own folder, and a
    // half-retired snapshot would block the next install or break the restored lock.
    await state.undoSnapshot();
    if (dependencyConflict.length > 0) {
      throw new ExtensionManagerError(
        "extension_concurrent_edit",
        `the operation failed (${errorMessage(original)}), and ${dependencyConflict.map((key) => this.paths[key]).join(" and ")} changed meanwhile outside this command; ` +
          "that edit was kept and nothing was restored: check the extensions folder, then run `npm ci --prefix extensions` or the command again",
        { cause: original },
      );
    }
    await this.restoreDependencyFiles(state.before);
    if (configChanged && !configConflict) await this.host.writeFileAtomic(this.configPath, state.configBefore);
    let recoveryError: unknown;
    if (state.npmAttempted && !interrupted) {
      try {
        await this.syncEnvironment(signal, state.npmFlags);
      } catch (syncError) {
        recoveryError = syncError;
      } finally {
        // A recovery command may write the files it reads; they end as they began regardless.
        await this.restoreDependencyFiles(state.before);
      }
    }
    if (signal.aborted) throw interruptedError();
    if (recoveryError !== undefined) {
      throw new ExtensionManagerError(
        "extension_recovery_failed",
        `the operation failed and the restored extensions could not be re-synchronised (${errorMessage(recoveryError).split("\n")[0]}); ` +
          `the manifest, lock and config are restored, run \`npm ci --prefix extensions\` next to config.yaml. Original failure: ${errorMessage(original)}`,
        { cause: original },
      );
    }
    if (configConflict) {
      throw new ExtensionManagerError(
        "extension_concurrent_edit",
        `the operation failed (${errorMessage(original)}) and ${this.displayConfig} was edited meanwhile; that edit was kept, so check its plugins block by hand`,
        { cause: original },
      );
    }
    throw original;
  }

  // --- install ---------------------------------------------------------------------------------

  private async installLocked(source: string, options: InstallOptions, signal: AbortSignal): Promise<InstalledExtension> {
    const host = this.host;
    const paths = this.paths;
    const warnings: string[] = [];
    const trimmed = source.trim();

    // Which kind of source, decided before anything runs.
    const sourcePath = host.resolvePath(trimmed);
    const sourceInfo = trimmed === "" ? undefined : await host.lstat(sourcePath);
    let local: { path: string; entry: ExtensionEntry; snapshot: string } | undefined;
    if (sourceInfo?.kind === "directory" || sourceInfo?.kind === "symlink") {
      await checkSnapshotSource(host, sourcePath);
      const manifestBytes = await host.readFile(`${sourcePath}/package.json`);
      if (manifestBytes === undefined) {
        throw new ExtensionManagerError("extension_package_invalid", "the source folder has no package.json; an extension package declares its entry there");
      }
      const entry = readExtensionEntry(decoder.decode(manifestBytes), "the source folder's package.json");
      if ((await host.lstat(`${sourcePath}/${entry.modulePath}`))?.kind !== "file") {
        throw new ExtensionManagerError("extension_package_invalid", `the source folder's package.json names ./${entry.modulePath}, which is not a file in the folder`);
      }
      const snapshot = `${paths.sources}/${entry.packageName}`;
      if ((await host.lstat(snapshot)) !== undefined) {
        throw new ExtensionManagerError(
          "extension_snapshot_exists",
          `extensions/sources/${entry.packageName} already exists: ${entry.packageName} is installed; remove it first (deerflow-edge extension remove ${entry.packageName}) to install a new copy`,
        );
      }
      local = { path: sourcePath, entry, snapshot };
    } else if (sourceInfo !== undefined) {
      throw new ExtensionManagerError(
        "extension_source_rejected",
        "the source is a local file; local files and tarballs cannot be reproduced elsewhere, so pass the package's folder (it is copied into extensions/sources/) or publish it",
        { details: { category: "local_path" } },
      );
    } else {
      const check = validateExtensionSource(trimmed);
      if (!check.ok) throw new ExtensionManagerError("extension_source_rejected", `rejected extension source: ${check.message}`, { details: { category: check.category } });
      if (check.warning) warnings.push(check.warning);
    }

    // The config must be one this manager can write before npm runs any package code.
    const { bytes: configBefore, config: configAtStart } = await this.readConfig();
    if (local) this.planRecord(configAtStart, { name: local.entry.name, package: local.entry.packageName, use: managedUse(local.entry.packageName, local.entry) }, options.required ?? false);
    const env = this.npmEnv();
    await requireSupportedNpm(host, this.projectRoot, env, signal);

    const npmFlags = options.ignoreScripts ? ["--ignore-scripts=true"] : [];
    const before = await this.readDependencyFiles();
    const managed: DependencyFiles = { ...before };
    let snapshotCreated = false;
    let npmAttempted = false;
    let configWritten: Uint8Array | undefined;
    try {
      if (before.manifest === undefined) {
        await host.mkdir(this.extensionsDir);
        const manifest = encoder.encode(MANIFEST_TEMPLATE);
        await host.writeFileAtomic(paths.manifest, manifest);
        managed.manifest = manifest;
      }
      if (before.npmrc === undefined) {
        const npmrc = encoder.encode(NPMRC_TEMPLATE);
        await host.writeFileAtomic(paths.npmrc, npmrc);
        managed.npmrc = npmrc;
      }
      if (local) {
        await host.mkdir(parentOf(local.snapshot));
        snapshotCreated = true;
        await host.copyTree(local.path, local.snapshot, includeInSnapshot);
      }
      const dependenciesBefore = dependencyNames(managed.manifest);
      npmAttempted = true;
      const spec = local ? `./sources/${local.entry.packageName}` : trimmed;
      try {
        await this.npm(["install", "--save=true", "--save-exact=true", ...npmFlags, "--", spec], "npm install", signal);
      } finally {
        // npm's writes, even a failed run's partial ones, belong to this transaction.
        Object.assign(managed, await this.readDependencyFiles());
      }
      this.auditLock(managed.lock, warnings);

      const added = [...dependencyNames(managed.manifest)].filter((name) => !dependenciesBefore.has(name));
      if (added.length !== 1) {
        throw new ExtensionManagerError(
          "extension_package_invalid",
          added.length === 0
            ? "npm added no new package to extensions/package.json: that package is already installed (see deerflow-edge extension list)"
            : `npm added ${added.length} packages (${added.join(", ")}) for one source; install one extension package at a time`,
        );
      }
      const dependency = added[0]!;
      if (local && dependency !== local.entry.packageName) {
        throw new ExtensionManagerError("extension_package_invalid", `npm installed the folder as "${dependency}", not as its package name "${local.entry.packageName}"`);
      }
      const installedManifest = await host.readFile(`${paths.nodeModules}/${dependency}/package.json`);
      if (installedManifest === undefined) {
        throw new ExtensionManagerError("extension_package_invalid", `npm recorded ${dependency} but extensions/node_modules/${dependency}/package.json is missing`);
      }
      const entry = readExtensionEntry(decoder.decode(installedManifest), `${dependency}'s package.json`);
      if (local && (entry.name !== local.entry.name || entry.modulePath !== local.entry.modulePath || entry.exportName !== local.entry.exportName)) {
        throw new ExtensionManagerError("extension_package_invalid", `the installed ${dependency} declares a different extension entry than its source folder`);
      }
      if ((await host.lstat(`${paths.nodeModules}/${dependency}/${entry.modulePath}`))?.kind !== "file") {
        throw new ExtensionManagerError("extension_package_invalid", `${dependency}'s package.json names ./${entry.modulePath}, which the installed package does not contain`);
      }
      const use = managedUse(dependency, entry);
      const check = await checkExtensionEntry(this.loader, use, { timeoutMs: this.options.importTimeoutMs });
      if (!check.loads) {
        throw new ExtensionManagerError("extension_entry_unloadable", `the installed extension ${entry.name} (${use}) does not load: ${check.reason}`);
      }
      if (signal.aborted) throw signal.reason;

      // The one config write, last, against the file as it is now.
      const { config } = await this.readConfig();
      const plan = this.planRecord(config, { name: entry.name, package: dependency, use }, options.required ?? false);
      const nextText = config.rewrite(plan.edit);
      const nextBytes = encoder.encode(nextText);
      await host.writeFileAtomic(this.configPath, nextBytes);
      configWritten = nextBytes;
      return {
        name: entry.name,
        package: dependency,
        version: entry.version,
        use,
        required: plan.required,
        adopted: plan.adopted,
        warnings,
      };
    } catch (error) {
      return this.recover(
        error,
        {
          before,
          managed,
          configBefore,
          configWritten,
          npmAttempted,
          npmFlags,
          undoSnapshot: async () => {
            if (snapshotCreated && local) await host.remove(local.snapshot);
          },
        },
        signal,
      );
    }
  }

  /** A new record, or the adoption of a hand-written one with the same `use`; refuses identity clashes. */
  private planRecord(
    config: PluginsConfig,
    candidate: { name: string; package: string; use: string },
    required: boolean,
  ): { edit: PluginsEdit; adopted: boolean; required: boolean } {
    const records = config.records;
    const sameUse = records.flatMap((record, index) => (record["use"] === candidate.use ? [index] : []));
    const clashes = records.flatMap((record, index) =>
      !sameUse.includes(index) && (record["name"] === candidate.name || record["package"] === candidate.package) ? [index] : [],
    );
    if (sameUse.length > 1 || clashes.length > 0) {
      const where = [...sameUse.slice(sameUse.length > 1 ? 0 : 1), ...clashes].map((index) => `plugins[${index}] ${recordName(records[index]!)}`).join(", ");
      throw new ExtensionManagerError(
        "extension_conflict",
        `${this.displayConfig} already has a plugin record with the name "${candidate.name}", the package ${candidate.package} or its entry (${where}); remove or rename that record first`,
      );
    }
    if (sameUse.length === 1) {
      const index = sameUse[0]!;
      const existing = records[index]!;
      if ((existing["name"] !== undefined && existing["name"] !== candidate.name) || (existing["package"] !== undefined && existing["package"] !== candidate.package)) {
        throw new ExtensionManagerError(
          "extension_conflict",
          `plugins[${index}] in ${this.displayConfig} loads the same entry under another name or package; fix or remove that record first`,
        );
      }
      const fields: PluginRecord = {};
      if (existing["name"] !== candidate.name) fields["name"] = candidate.name;
      if (existing["package"] !== candidate.package) fields["package"] = candidate.package;
      if (existing["enabled"] !== true) fields["enabled"] = true;
      if (existing["required"] === undefined) fields["required"] = required;
      if (existing["config"] === undefined) fields["config"] = {};
      const keptRequired = existing["required"] === undefined ? required : existing["required"] === true;
      return { edit: updateEdit(index, fields), adopted: true, required: keptRequired };
    }
    return {
      edit: appendEdit({ name: candidate.name, package: candidate.package, use: candidate.use, enabled: true, required, config: {} }),
      adopted: false,
      required,
    };
  }

  // --- remove ----------------------------------------------------------------------------------

  private async removeLocked(identifier: string, signal: AbortSignal): Promise<RemovedExtension> {
    const host = this.host;
    const paths = this.paths;
    const warnings: string[] = [];
    const { bytes: configBefore, config } = await this.readConfig();
    const index = this.resolveIndex(config.records, identifier);
    const record = config.records[index]!;
    const name = recordName(record);
    const dependency = record["package"];
    if (typeof dependency !== "string" || dependency === "") {
      throw new ExtensionManagerError(
        "extension_not_found",
        `${name} has no package recorded, so it was not installed by the manager; delete its record from ${this.displayConfig} by hand`,
      );
    }
    const nextText = config.rewrite(removeEdit(index));
    const sharedWith = config.records.filter((other, otherIndex) => otherIndex !== index && other["package"] === dependency);
    if (sharedWith.length > 0) {
      await this.writeConfig(nextText);
      return { name, package: dependency, packageRemoved: false, warnings };
    }
    await requireSupportedNpm(host, this.projectRoot, this.npmEnv(), signal);

    const before = await this.readDependencyFiles();
    const managed: DependencyFiles = { ...before };
    const snapshot = `${paths.sources}/${dependency}`;
    const staging = `${this.extensionsDir}/.remove-${randomSuffix()}`;
    let staged = false;
    let npmAttempted = false;
    let configWritten: Uint8Array | undefined;
    try {
      // Deactivate first: an abrupt exit after this leaves a config that no longer loads the package.
      const deactivated = encoder.encode(nextText);
      await host.writeFileAtomic(this.configPath, deactivated);
      configWritten = deactivated;
      if (before.manifest !== undefined && dependencyNames(before.manifest).has(dependency)) {
        npmAttempted = true;
        try {
          await this.npm(["uninstall", "--save=true", "--", dependency], "npm uninstall", signal);
        } finally {
          Object.assign(managed, await this.readDependencyFiles());
        }
        this.auditLock(managed.lock, warnings);
      }
      if ((await host.lstat(snapshot)) !== undefined) {
        await host.rename(snapshot, staging);
        staged = true;
        await host.remove(staging);
        staged = false;
      }
      return { name, package: dependency, packageRemoved: true, warnings };
    } catch (error) {
      return this.recover(
        error,
        {
          before,
          managed,
          configBefore,
          configWritten,
          npmAttempted,
          npmFlags: [],
          undoSnapshot: async () => {
            if (staged && (await host.lstat(snapshot)) === undefined) await host.rename(staging, snapshot);
          },
        },
        signal,
      );
    }
  }
}

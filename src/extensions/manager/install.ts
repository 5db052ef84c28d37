import { checkExtensionEntry } from "./entry-check.ts";
import { ExtensionManagerError } from "./errors.ts";
import { requireSupportedNpm } from "./npm.ts";
import { managedUse, readExtensionEntry, type ExtensionEntry } from "./packaging.ts";
import { planRecord } from "./records.ts";
import { recover } from "./recovery.ts";
import { checkSnapshotSource, includeInSnapshot } from "./snapshot.ts";
import { validateExtensionSource } from "./source.ts";
import { decoder, dependencyNames, encoder, parentOf, sameBytes, type DependencyFiles, type ManagerWorkspace } from "./workspace.ts";

// Install, inside the manager's lock: the source checked, the snapshot copied, npm install, the
// lock audited, the entry loaded, and only then the one config write (see manager.ts).

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

export async function installLocked(ws: ManagerWorkspace, source: string, options: InstallOptions, signal: AbortSignal): Promise<InstalledExtension> {
  const host = ws.host;
  const paths = ws.paths;
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
  const { bytes: configBefore, config: configAtStart } = await ws.readConfig();
  if (local) planRecord(configAtStart, { name: local.entry.name, package: local.entry.packageName, use: managedUse(local.entry.packageName, local.entry) }, options.required ?? false, ws.displayConfig);
  const env = ws.npmEnv();
  await requireSupportedNpm(host, ws.projectRoot, env, signal);

  const npmFlags = options.ignoreScripts ? ["--ignore-scripts=true"] : [];
  const before = await ws.readDependencyFiles();
  const managed: DependencyFiles = { ...before };
  let snapshotCreated = false;
  let npmAttempted = false;
  let configWritten: Uint8Array | undefined;
  try {
    if (before.manifest === undefined) {
      await host.mkdir(ws.extensionsDir);
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
    const spec = local ? `./sources/${local.entry.packageName}` : trimmed;
    // Resolve only: the manifest and lock change and no install script runs. npm still writes its
    // hidden node_modules/.package-lock.json for the resolved tree; that file goes back as it was,
    // so node_modules keeps describing what is really installed.
    const hiddenLockPath = `${paths.nodeModules}/.package-lock.json`;
    const nodeModulesBefore = await host.lstat(paths.nodeModules);
    const hiddenLockBefore = nodeModulesBefore === undefined ? undefined : await host.readFile(hiddenLockPath);
    try {
      await ws.npm(["install", "--package-lock-only=true", "--save=true", "--save-exact=true", ...npmFlags, "--", spec], "npm install", signal);
    } finally {
      // npm's writes, even a failed run's partial ones, belong to this transaction.
      Object.assign(managed, await ws.readDependencyFiles());
      if (nodeModulesBefore === undefined) await host.remove(paths.nodeModules);
      else if (hiddenLockBefore === undefined) await host.remove(hiddenLockPath);
      else if (!sameBytes(await host.readFile(hiddenLockPath), hiddenLockBefore)) await host.writeFileAtomic(hiddenLockPath, hiddenLockBefore);
    }
    // The new lock is audited before the environment changes (spec: "audits the new lock before
    // syncing or enabling anything").
    ws.auditLock(managed.lock, warnings);

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
    // Only now does node_modules change: a clean install of exactly the audited lock.
    npmAttempted = true;
    try {
      await ws.npm(["ci", ...npmFlags], "npm ci (installing the audited lock)", signal);
    } finally {
      Object.assign(managed, await ws.readDependencyFiles());
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
    const check = await checkExtensionEntry(ws.loader, use, { timeoutMs: ws.options.importTimeoutMs });
    if (!check.loads) {
      throw new ExtensionManagerError("extension_entry_unloadable", `the installed extension ${entry.name} (${use}) does not load: ${check.reason}`);
    }
    if (signal.aborted) throw signal.reason;

    // The one config write, last, against the file as it is now.
    const { config } = await ws.readConfig();
    const plan = planRecord(config, { name: entry.name, package: dependency, use }, options.required ?? false, ws.displayConfig);
    const nextText = config.rewrite(plan.edit);
    const nextBytes = encoder.encode(nextText);
    await host.writeFileAtomic(ws.configPath, nextBytes);
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
    return recover(
      ws,
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

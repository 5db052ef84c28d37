import { setEnabledEdit } from "./config-file.ts";
import { checkExtensionEntry, type EntryCheck } from "./entry-check.ts";
import { ExtensionManagerError } from "./errors.ts";
import { installLocked, type InstalledExtension, type InstallOptions } from "./install.ts";
import { recordName, resolveIndex } from "./records.ts";
import { removeLocked, type RemovedExtension } from "./remove.ts";
import { interruptedError, ManagerWorkspace, type ExtensionManagerOptions } from "./workspace.ts";

/*
 * The extension manager owns one transaction over four things: the extensions manifest and lock
 * (extensions/package.json, extensions/package-lock.json, plus the .npmrc that keeps folder installs
 * reproducible), config.yaml's plugins block, and the source snapshot under extensions/sources/.
 * npm is the only writer of the lock and the manager the only caller of npm for it.
 *
 * Install: validate the source and the config (before any package code can run), check npm, copy
 * the snapshot, resolve the lock only (npm install --package-lock-only: no node_modules write, no
 * install script), audit it, npm ci, find the one entry, load it, and only then write the
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

export type { ExtensionManagerOptions } from "./workspace.ts";
export type { InstalledExtension, InstallOptions } from "./install.ts";
export type { RemovedExtension } from "./remove.ts";

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

const DEFAULT_LOCK_TIMEOUT_MS = 10 * 60_000;

export class ExtensionManager {
  readonly configPath: string;
  readonly projectRoot: string;
  readonly extensionsDir: string;
  readonly #workspace: ManagerWorkspace;

  constructor(options: ExtensionManagerOptions) {
    this.#workspace = new ManagerWorkspace(options);
    this.configPath = this.#workspace.configPath;
    this.projectRoot = this.#workspace.projectRoot;
    this.extensionsDir = this.#workspace.extensionsDir;
  }

  /** Installs SOURCE (a package spec, an https URL or a local folder) and enables its entry. */
  async install(source: string, options: InstallOptions): Promise<InstalledExtension> {
    if (!options.yes) {
      throw new ExtensionManagerError(
        "extension_not_confirmed",
        "installing an extension runs its code (and any install scripts npm allows) with the gateway's rights; confirm with --yes once you trust the source",
      );
    }
    return this.locked(options.signal, (signal) => installLocked(this.#workspace, source, options, signal));
  }

  /** Sets one record's `enabled`; its config, required flag and everything else stay as they are. */
  async setEnabled(identifier: string, enabled: boolean, options: { signal?: AbortSignal } = {}): Promise<{ name: string; changed: boolean }> {
    return this.locked(options.signal, async () => {
      const { config } = await this.#workspace.readConfig();
      const index = resolveIndex(config.records, identifier, this.#workspace.displayConfig);
      const record = config.records[index]!;
      const current = record["enabled"] === undefined ? true : record["enabled"] === true;
      if (current === enabled && record["enabled"] !== undefined) return { name: recordName(record), changed: false };
      await this.#workspace.writeConfig(config.rewrite(setEnabledEdit(index, enabled)));
      return { name: recordName(record), changed: true };
    });
  }

  /** Removes one record; the package (and its snapshot) too when no other record uses it. */
  async remove(identifier: string, options: { signal?: AbortSignal } = {}): Promise<RemovedExtension> {
    return this.locked(options.signal, (signal) => removeLocked(this.#workspace, identifier, signal));
  }

  /** Every configured plugin record in load order, with its installed version and, unless `check` is false, whether it loads. */
  async list(options: { check?: boolean } = {}): Promise<ConfiguredExtension[]> {
    const { config } = await this.#workspace.readConfig();
    const out: ConfiguredExtension[] = [];
    for (const record of config.records) {
      const pkg = typeof record["package"] === "string" ? record["package"] : undefined;
      const use = String(record["use"]);
      out.push({
        name: recordName(record),
        package: pkg,
        version: pkg ? await this.#workspace.installedVersion(pkg) : undefined,
        use,
        enabled: record["enabled"] !== false,
        required: record["required"] === true,
        check: options.check === false ? undefined : await checkExtensionEntry(this.#workspace.loader, use, { timeoutMs: this.#workspace.options.importTimeoutMs }),
      });
    }
    return out;
  }

  // --- the lock and Ctrl-C ---------------------------------------------------------------------

  private async locked<T>(outer: AbortSignal | undefined, body: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    const unregister = this.#workspace.host.onInterrupt(() => controller.abort(interruptedError()));
    const signal = outer ? AbortSignal.any([outer, controller.signal]) : controller.signal;
    let started = false;
    try {
      const release = await this.#workspace.host.lock(this.#workspace.paths.managerLock, {
        signal,
        timeoutMs: this.#workspace.options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
        onWait: this.#workspace.options.onLockWait,
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
}

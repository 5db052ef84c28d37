import { bytesToHex } from "../../core/hex.ts";
import { removeEdit } from "./config-file.ts";
import { ExtensionManagerError } from "./errors.ts";
import { requireSupportedNpm } from "./npm.ts";
import { recordName, resolveIndex } from "./records.ts";
import { recover } from "./recovery.ts";
import { dependencyNames, encoder, type DependencyFiles, type ManagerWorkspace } from "./workspace.ts";

// Remove, inside the manager's lock: the record deactivated first, then npm uninstall, the lock
// audited and the snapshot retired (see manager.ts).

export interface RemovedExtension {
  readonly name: string;
  readonly package: string;
  /** False when another record still uses the package, so only the record went. */
  readonly packageRemoved: boolean;
  readonly warnings: readonly string[];
}

function randomSuffix(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return bytesToHex(bytes);
}

export async function removeLocked(ws: ManagerWorkspace, identifier: string, signal: AbortSignal): Promise<RemovedExtension> {
  const host = ws.host;
  const paths = ws.paths;
  const warnings: string[] = [];
  const { bytes: configBefore, config } = await ws.readConfig();
  const index = resolveIndex(config.records, identifier, ws.displayConfig);
  const record = config.records[index]!;
  const name = recordName(record);
  const dependency = record["package"];
  if (typeof dependency !== "string" || dependency === "") {
    throw new ExtensionManagerError(
      "extension_not_found",
      `${name} has no package recorded, so it was not installed by the manager; delete its record from ${ws.displayConfig} by hand`,
    );
  }
  const nextText = config.rewrite(removeEdit(index));
  const sharedWith = config.records.filter((other, otherIndex) => otherIndex !== index && other["package"] === dependency);
  if (sharedWith.length > 0) {
    await ws.writeConfig(nextText);
    return { name, package: dependency, packageRemoved: false, warnings };
  }
  await requireSupportedNpm(host, ws.projectRoot, ws.npmEnv(), signal);

  const before = await ws.readDependencyFiles();
  const managed: DependencyFiles = { ...before };
  const snapshot = `${paths.sources}/${dependency}`;
  const staging = `${ws.extensionsDir}/.remove-${randomSuffix()}`;
  let staged = false;
  let npmAttempted = false;
  let configWritten: Uint8Array | undefined;
  try {
    // Deactivate first: an abrupt exit after this leaves a config that no longer loads the package.
    const deactivated = encoder.encode(nextText);
    await host.writeFileAtomic(ws.configPath, deactivated);
    configWritten = deactivated;
    if (before.manifest !== undefined && dependencyNames(before.manifest).has(dependency)) {
      npmAttempted = true;
      try {
        await ws.npm(["uninstall", "--save=true", "--", dependency], "npm uninstall", signal);
      } finally {
        Object.assign(managed, await ws.readDependencyFiles());
      }
      ws.auditLock(managed.lock, warnings);
    }
    if ((await host.lstat(snapshot)) !== undefined) {
      await host.rename(snapshot, staging);
      staged = true;
      await host.remove(staging);
      staged = false;
    }
    return { name, package: dependency, packageRemoved: true, warnings };
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
        npmFlags: [],
        undoSnapshot: async () => {
          if (staged && (await host.lstat(snapshot)) === undefined) await host.rename(staging, snapshot);
        },
      },
      signal,
    );
  }
}

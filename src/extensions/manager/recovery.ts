import { errorMessage, isAbortError } from "../../core/errors.ts";
import { ExtensionManagerError } from "./errors.ts";
import { DEPENDENCY_FILES, interruptedError, sameBytes, type DependencyFiles, type ManagerWorkspace } from "./workspace.ts";

// The rollback every failed install or remove ends in (see manager.ts for the transaction).

/**
 * The shared failure path: keep concurrent edits, otherwise restore files, undo the snapshot
 * change, re-synchronise (not after Ctrl-C), restore again, and say what happened.
 */
export async function recover(
  ws: ManagerWorkspace,
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
  const current = await ws.readDependencyFiles();
  // A file is someone else's edit only when it is neither what this command last left there nor
  // what it started from (a write that failed leaves the latter).
  const dependencyConflict = DEPENDENCY_FILES.filter((key) => !sameBytes(current[key], state.managed[key]) && !sameBytes(current[key], state.before[key]));
  const configNow = await ws.host.readFile(ws.configPath);
  const configChanged = state.configWritten !== undefined && !sameBytes(configNow, state.configBefore);
  const configConflict = configChanged && !sameBytes(configNow, state.configWritten);
  const original = interrupted ? interruptedError() : error;
  // The snapshot goes back first in every case: it is this command's own folder, and a
  // half-retired snapshot would block the next install or break the restored lock.
  await state.undoSnapshot();
  if (dependencyConflict.length > 0) {
    throw new ExtensionManagerError(
      "extension_concurrent_edit",
      `the operation failed (${errorMessage(original)}), and ${dependencyConflict.map((key) => ws.paths[key]).join(" and ")} changed meanwhile outside this command; ` +
        "that edit was kept and nothing was restored: check the extensions folder, then run `npm ci --prefix extensions` or the command again",
      { cause: original },
    );
  }
  await ws.restoreDependencyFiles(state.before);
  if (configChanged && !configConflict) await ws.host.writeFileAtomic(ws.configPath, state.configBefore);
  let recoveryError: unknown;
  if (state.npmAttempted && !interrupted) {
    try {
      await ws.syncEnvironment(signal, state.npmFlags);
    } catch (syncError) {
      recoveryError = syncError;
    } finally {
      // A recovery command may write the files it reads; they end as they began regardless.
      await ws.restoreDependencyFiles(state.before);
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
      `the operation failed (${errorMessage(original)}) and ${ws.displayConfig} was edited meanwhile; that edit was kept, so check its plugins block by hand`,
      { cause: original },
    );
  }
  throw original;
}

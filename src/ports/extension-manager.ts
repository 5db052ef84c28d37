import { DeerflowError } from "../core/errors.ts";

/*
 * What the extension manager (src/extensions/manager/) needs from the machine: files, one child
 * process at a time (the package manager), the environment, a cross-process lock and Ctrl-C.
 * src/ stays on Web APIs, so all of it arrives through this port; the adapters implement it once
 * (adapters/shared/extension-manager-host.ts) for every supported runtime.
 *
 * Paths are the host's own absolute paths (resolvePath makes them); the manager joins segments with
 * "/", which every supported runtime accepts on every platform.
 */

/** What lstat saw; a symbolic link is reported as a link, never followed. */
export interface ManagerFileInfo {
  readonly kind: "file" | "directory" | "symlink" | "other";
  readonly size: number;
}

export interface ManagerRunOptions {
  readonly cwd: string;
  /** The child's whole environment: nothing is inherited beyond what is listed here. */
  readonly env: Readonly<Record<string, string>>;
  /** Aborting kills the child (and what it started) and rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

export interface ManagerRunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ManagerLockOptions {
  readonly signal?: AbortSignal;
  /** How long to wait for another holder; 0 fails at once. */
  readonly timeoutMs: number;
  /** Called once when the lock is held by someone else and this call starts waiting. */
  readonly onWait?: (holder: string) => void;
}

/** Releases a lock taken with {@link ManagerHost.lock}; safe to call twice. */
export type ManagerLockRelease = () => Promise<void>;

export interface ManagerHost {
  /** The environment the package manager would inherit; the manager filters it before use. */
  readonly env: Readonly<Record<string, string>>;
  /** An absolute, normalised form of `path` (relative paths against the working directory). */
  resolvePath(path: string): string;
  /** The file's bytes, or undefined when nothing is there. */
  readFile(path: string): Promise<Uint8Array | undefined>;
  /** Writes through a temporary file in the same folder and a rename, keeping an existing file's mode. */
  writeFileAtomic(path: string, data: Uint8Array): Promise<void>;
  /** Creates the folder and its parents; no error when it exists. */
  mkdir(path: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  /** Removes a file or a whole folder; no error when nothing is there. */
  remove(path: string): Promise<void>;
  /**
   * Copies a folder tree. `include` sees each entry's path relative to `from` ("/"-separated) and
   * its lstat; returning false skips it (and, for a folder, everything below it).
   */
  copyTree(from: string, to: string, include: (relativePath: string, info: ManagerFileInfo) => boolean): Promise<void>;
  /** What is at `path`, without following a final symbolic link; undefined when nothing is. */
  lstat(path: string): Promise<ManagerFileInfo | undefined>;
  /** The entry names of a folder. */
  readdir(path: string): Promise<string[]>;
  realpath(path: string): Promise<string>;
  /** Runs a program (found on PATH) to completion and collects its output. */
  run(command: string, args: readonly string[], options: ManagerRunOptions): Promise<ManagerRunResult>;
  /**
   * Takes the exclusive cross-process lock at `path` (creating its folder). A holder that is gone
   * (a crashed process) does not block; a live one makes this wait up to `timeoutMs`, then throw
   * {@link ManagerLockBusyError}.
   */
  lock(path: string, options: ManagerLockOptions): Promise<ManagerLockRelease>;
  /** Registers a Ctrl-C handler; returns a function that unregisters it. */
  onInterrupt(handler: () => void): () => void;
}

/** Another extension-manager operation holds the lock. */
export class ManagerLockBusyError extends DeerflowError {
  declare readonly code: "extension_manager_busy";

  constructor(lockPath: string, holder: string) {
    super(
      "extension_manager_busy",
      `another extension-manager operation is running (${holder}; lock ${lockPath}); wait for it to finish and run the command again`,
      { details: { lockPath, holder } },
    );
    this.name = "ManagerLockBusyError";
  }
}

/** The virtual paths every sandbox exposes, per user and thread. */
export const VIRTUAL_ROOT = "/mnt/user-data";
export const VIRTUAL_DIRS = {
  workspace: "/mnt/user-data/workspace",
  uploads: "/mnt/user-data/uploads",
  outputs: "/mnt/user-data/outputs",
} as const;
export type VirtualDirName = keyof typeof VIRTUAL_DIRS;

export interface SandboxScope {
  readonly userId: string;
  readonly threadId: string;
}

export interface ExecOptions {
  /** Virtual working directory; defaults to the workspace. */
  cwd?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface DirEntry {
  /** Virtual path of the entry. */
  path: string;
  name: string;
  type: "file" | "directory";
  size?: number;
}

/** One acquired sandbox: every path argument is a virtual path under VIRTUAL_ROOT. */
export interface Sandbox {
  readonly id: string;
  readonly scope: SandboxScope;
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  readFile(path: string): Promise<string>;
  /** The file's raw bytes (images, archives); same path rules and errors as readFile. */
  readFileBytes(path: string): Promise<Uint8Array>;
  writeFile(path: string, content: string, options?: { append?: boolean }): Promise<void>;
  /**
   * Creates or replaces the file with exactly these bytes (uploads, images); parents are created.
   * Same path rules and errors as writeFile. A reader never sees the file half-written.
   */
  writeFileBytes(path: string, bytes: Uint8Array): Promise<void>;
  /**
   * Deletes one file. A symbolic link is removed itself, never its target. Fails "not_found" when
   * nothing is there and "is_directory" for a folder (folders are never removed through the port).
   */
  remove(path: string): Promise<void>;
  list(path: string, options?: { depth?: number }): Promise<DirEntry[]>;
  exists(path: string): Promise<boolean>;
}

export interface SandboxProvider {
  readonly kind: "virtual" | "local" | "remote";
  /** Returns the sandbox of this user and thread, creating it on first use. */
  acquire(scope: SandboxScope): Promise<Sandbox>;
  /** The sandbox with this id, if it is still acquired. */
  get(sandboxId: string): Sandbox | undefined;
  release(sandboxId: string): Promise<void>;
  /**
   * Deletes everything this user and thread ever stored (workspace, uploads, outputs) and drops
   * the sandbox if it is acquired, without saving it: a thread that is deleted must not come back
   * with its files when its id is reused. Optional: a provider that keeps nothing per thread (or a
   * remote one that cannot delete) leaves it out, and the gateway then deletes only the thread.
   */
  forget?(scope: SandboxScope): Promise<void>;
  close(): Promise<void>;
}

/** A path that leaves the virtual roots, or a file that does not exist. */
export class SandboxError extends Error {
  constructor(
    readonly code: "path_outside_sandbox" | "not_found" | "is_directory" | "sandbox_unavailable",
    message: string,
  ) {
    super(message);
    this.name = "SandboxError";
  }
}

import { DeerflowError } from "../core/errors.ts";
// The virtual paths every sandbox exposes are declared in core/path.ts, beside the path rules.
export { VIRTUAL_DIRS, VIRTUAL_ROOT, type VirtualDirName } from "../core/path.ts";

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
  /**
   * Stores every file change made so far, for a sandbox that keeps its files in memory until
   * release: a tool that reports a write calls it first, so a crash after the report loses nothing.
   * A sandbox whose writes are durable as they happen leaves it out.
   */
  flush?(): Promise<void>;
}

/** Where one file of an upload is streamed; nothing of it is visible before its batch commits. */
export interface UploadFileSink {
  write(chunk: Uint8Array): Promise<void>;
  /** Ends the file; resolves once its bytes are staged. */
  close(): Promise<void>;
}

/** The files of one upload request: all of them become visible at commit, or none. */
export interface UploadBatch {
  /** Starts the next file, stored under the bare name `name` in the uploads folder at commit. */
  file(name: string): Promise<UploadFileSink>;
  /**
   * Makes every staged file visible at once, replacing files of the same names, and resolves once
   * that is durable (a crash after it keeps them). Fails "is_directory" (nothing changed) when a
   * name is taken by a folder or a link.
   */
  commit(): Promise<void>;
  /** Drops every staged byte; the uploads folder is as before. */
  abort(): Promise<void>;
}

/**
 * The uploads folder of a user's thread, used without acquiring the thread's sandbox: an upload is
 * streamed to where it is durable before it is acknowledged, and read back without the sandbox
 * keeping every upload in memory. The optional calls are fast paths; `undefined` (or `false`)
 * means "not a stored upload here: ask the sandbox".
 */
export interface SandboxUploads {
  begin(scope: SandboxScope): Promise<UploadBatch>;
  list?(scope: SandboxScope): Promise<Array<{ name: string; size: number }> | undefined>;
  read?(scope: SandboxScope, name: string): Promise<Uint8Array | undefined>;
  /** Deletes a stored upload durably; false when there is none of that name (the sandbox decides then). */
  remove?(scope: SandboxScope, name: string): Promise<boolean>;
}

export interface SandboxProvider {
  readonly kind: "virtual" | "local" | "remote";
  /** Durable uploads; a provider without it gets uploads written through its sandbox's writeFileBytes. */
  readonly uploads?: SandboxUploads;
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

export type SandboxErrorCode = "path_outside_sandbox" | "not_found" | "is_directory" | "sandbox_unavailable";

/** A path that leaves the virtual roots, or a file that does not exist. */
export class SandboxError extends DeerflowError {
  declare readonly code: SandboxErrorCode;

  constructor(code: SandboxErrorCode, message: string) {
    super(code, message);
    this.name = "SandboxError";
  }
}

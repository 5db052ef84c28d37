/**
 * The opt-in `local` sandbox: host directories per user and thread, host `bash` for commands.
 *
 * What isolates the model here is only this: the file API maps /mnt/user-data/{workspace,uploads,
 * outputs} to `<rootDir>/users/<userId>/threads/<threadId>/user-data/...` and refuses every path
 * (or symlink) that leaves that folder, and exec rewrites `/mnt/user-data` in the command to the host
 * folder and runs it there. The command itself is host bash with this user's rights: it can read
 * and write anything the process can. Choosing `local` grants the model the host; use `virtual` (the
 * default) or a remote sandbox when that is not what you want.
 */
import { appendFile, lstat, mkdir, open as openFile, readdir, readFile, realpath, rename, rm, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { pathBelowVirtualRoot } from "../../src/sandbox/virtual-path.ts";
import type { ProcessRunner } from "../../src/ports/runtime-ports.ts";
import { SandboxError, VIRTUAL_ROOT } from "../../src/ports/sandbox.ts";
import type { ExecOptions, ExecResult, SandboxProvider, SandboxScope, SandboxUploads } from "../../src/ports/sandbox.ts";
import { FileBackedSandbox } from "../../src/sandbox/file-ops.ts";
import type { BackendKind, FileBackend } from "../../src/sandbox/file-ops.ts";
import { assertValidScope, SandboxRegistry, scopeKey, timedOutResult } from "../../src/sandbox/scope.ts";
import { ProcessRunnerError } from "./process-runner-error.ts";

export interface LocalSandboxProviderOptions {
  /** Host folder that holds `users/<userId>/threads/<threadId>/user-data`; created if missing. */
  rootDir: string;
  runner: ProcessRunner;
  /**
   * Environment of every command, on top of a minimal default (PATH, HOME = the host workspace,
   * LANG). Nothing of the host process's own environment is passed on unless listed here.
   */
  env?: Record<string, string>;
  /** Timeout for exec calls that pass none. Default 600 000 ms, DeerFlow's bash default. */
  defaultTimeoutMs?: number;
  /** Shell used as `<shell> -c <command>`. Default "bash". */
  shell?: string;
}

export const LOCAL_DEFAULT_TIMEOUT_MS = 600_000;
const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/** The host path is pasted into commands verbatim, so it must not contain anything a shell would interpret. */
const SHELL_SAFE_PATH = /^[A-Za-z0-9_.\/-]+$/;
/** `/mnt/user-data` as a whole path component (not `/mnt/user-data-old`). */
const VIRTUAL_ROOT_IN_COMMAND = /\/mnt\/user-data(?![A-Za-z0-9_.-])/g;

function kindOf(st: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }): BackendKind {
  if (st.isSymbolicLink()) return "symlink";
  if (st.isDirectory()) return "directory";
  return st.isFile() ? "file" : "other";
}

function hostBackend(userDataDir: string): FileBackend {
  return {
    toBackend: (virtualPath) => join(userDataDir, ...pathBelowVirtualRoot(virtualPath).split("/").filter(Boolean)),
    containsReal: (real) => real === userDataDir || real.startsWith(userDataDir + sep),
    dirname,
    join,
    realpath: (p) => realpath(p),
    lstat: async (p) => {
      const st = await lstat(p);
      return { kind: kindOf(st), size: st.size };
    },
    stat: async (p) => {
      const st = await stat(p);
      return { kind: kindOf(st), size: st.size };
    },
    readdir: async (p) => (await readdir(p, { withFileTypes: true })).map((d) => ({ name: d.name, kind: kindOf(d) })),
    readText: (p) => readFile(p, "utf8"),
    // A plain Uint8Array view: callers compare and encode bytes, and must not depend on Buffer.
    readBytes: async (p) => {
      const buffer = await readFile(p);
      return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    },
    writeText: (p, content) => writeFile(p, content, "utf8"),
    appendText: (p, content) => appendFile(p, content, "utf8"),
    // Staged beside the target and renamed over it, so a crash leaves a staging file (which the
    // uploads listing ignores) instead of a truncated file under the real name.
    writeBytes: async (p, bytes) => {
      const staging = stagingPath(dirname(p));
      try {
        await writeFile(staging, bytes, { flag: "wx" });
        await rename(staging, p);
      } catch (error) {
        await rm(staging, { force: true }).catch(() => undefined);
        throw error;
      }
    },
    unlink: (p) => unlink(p),
    mkdirp: async (p) => {
      await mkdir(p, { recursive: true });
    },
    errorCode: (error) => {
      const code = (error as { code?: unknown })?.code;
      return typeof code === "string" ? code : undefined;
    },
  };
}

function stagingPath(dir: string): string {
  return join(dir, `.upload-${crypto.randomUUID()}.part`);
}

/** Flushes a folder's entries (a rename in it) to disk; a runtime or file system that cannot is left as it is. */
async function syncFolder(dir: string): Promise<void> {
  const handle = await openFile(dir, "r").catch(() => undefined);
  await handle?.sync().catch(() => undefined);
  await handle?.close().catch(() => undefined);
}

/**
 * Uploads straight into the thread's host uploads folder: each file streamed to a staging file
 * there, flushed to disk, and renamed to its name at commit, the folder flushed after, so an
 * acknowledged upload survives a crash of the process or of the host. A staging file a crash
 * leaves behind is ignored by the uploads listing.
 */
function hostUploads(userDataDirOf: (scope: SandboxScope) => Promise<string>): SandboxUploads {
  return {
    async begin(scope) {
      assertValidScope(scope);
      const uploadsDir = join(await userDataDirOf(scope), "uploads");
      const st = await lstat(uploadsDir);
      if (!st.isDirectory()) throw new SandboxError("is_directory", "/mnt/user-data/uploads is not a folder in the sandbox.");
      const staged: Array<{ staging: string; name: string }> = [];
      return {
        async file(name) {
          const staging = stagingPath(uploadsDir);
          const handle = await openFile(staging, "wx");
          staged.push({ staging, name });
          return {
            write: async (chunk) => {
              let offset = 0;
              while (offset < chunk.length) offset += (await handle.write(chunk, offset)).bytesWritten;
            },
            close: async () => {
              try {
                await handle.sync();
              } finally {
                await handle.close();
              }
            },
          };
        },
        async commit() {
          for (const { name } of staged) {
            const target = await lstat(join(uploadsDir, name)).catch(() => undefined);
            if (target && !target.isFile()) throw new SandboxError("is_directory", `/mnt/user-data/uploads/${name} is a folder or a link in the sandbox, not a file.`);
          }
          for (const { staging, name } of staged) await rename(staging, join(uploadsDir, name));
          staged.length = 0;
          await syncFolder(uploadsDir);
        },
        async abort() {
          await Promise.all(staged.map(({ staging }) => rm(staging, { force: true }).catch(() => undefined)));
          staged.length = 0;
        },
      };
    },
  };
}

function replaceAll(text: string, from: string, to: string): string {
  return from === "" ? text : text.split(from).join(to);
}

class LocalSandbox extends FileBackedSandbox {
  constructor(
    id: string,
    scope: SandboxScope,
    /** Symlink-free host path of this thread's user-data folder. */
    readonly userDataDir: string,
    private readonly options: Required<Pick<LocalSandboxProviderOptions, "runner" | "defaultTimeoutMs" | "shell">> & {
      env: Record<string, string>;
    },
  ) {
    super(id, scope, hostBackend(userDataDir));
  }

  /** Host paths in output read as the virtual paths the model knows. */
  #toVirtual(text: string): string {
    return replaceAll(text, this.userDataDir, VIRTUAL_ROOT);
  }

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    this.assertLive();
    const { backend: hostCwd } = await this.workingDirectory(options.cwd);
    const hostCommand = command.replace(VIRTUAL_ROOT_IN_COMMAND, () => this.userDataDir);
    const timeoutMs = options.timeoutMs ?? this.options.defaultTimeoutMs;
    let result;
    try {
      result = await this.options.runner.run(this.options.shell, ["-c", hostCommand], {
        cwd: hostCwd,
        env: {
          PATH: DEFAULT_PATH,
          HOME: join(this.userDataDir, "workspace"),
          LANG: "C.UTF-8",
          ...this.options.env,
        },
        timeoutMs,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if (error instanceof ProcessRunnerError) {
        throw new SandboxError(
          "sandbox_unavailable",
          `The local sandbox could not run its shell: ${error.message} Or switch to the virtual sandbox.`,
        );
      }
      throw error;
    }
    const stdout = this.#toVirtual(result.stdout);
    const stderr = this.#toVirtual(result.stderr);
    if (result.timedOut) return timedOutResult(stdout, stderr, timeoutMs);
    return { stdout, stderr, exitCode: result.exitCode };
  }
}

/**
 * Host folders and host bash per user and thread (see the note at the top of this file: it grants
 * the model the host). Sandbox ids are `local:<userId>:<threadId>`, as in DeerFlow. Release keeps
 * the files on disk.
 */
export function createLocalSandboxProvider(options: LocalSandboxProviderOptions): SandboxProvider {
  if (typeof options?.rootDir !== "string" || options.rootDir === "") {
    throw new SandboxError("sandbox_unavailable", "The local sandbox needs a rootDir, the host folder that holds the users' thread folders.");
  }
  const rootDir = resolve(options.rootDir);
  const settings = {
    runner: options.runner,
    defaultTimeoutMs: options.defaultTimeoutMs ?? LOCAL_DEFAULT_TIMEOUT_MS,
    shell: options.shell ?? "bash",
    env: { ...(options.env ?? {}) },
  };
  async function userDataDirOf(scope: SandboxScope): Promise<string> {
    const configured = join(rootDir, "users", scope.userId, "threads", scope.threadId, "user-data");
    for (const name of ["workspace", "uploads", "outputs"]) await mkdir(join(configured, name), { recursive: true });
    const userDataDir = await realpath(configured);
    if (!SHELL_SAFE_PATH.test(userDataDir)) {
      throw new SandboxError(
        "sandbox_unavailable",
        `The local sandbox folder ${JSON.stringify(userDataDir)} contains characters a shell would interpret. ` +
          `Choose a rootDir made only of letters, digits, ".", "_", "-" and "/".`,
      );
    }
    return userDataDir;
  }
  async function open(scope: SandboxScope): Promise<LocalSandbox> {
    const userDataDir = await userDataDirOf(scope);
    return new LocalSandbox(`local:${scopeKey(scope)}`, { userId: scope.userId, threadId: scope.threadId }, userDataDir, settings);
  }
  const registry = new SandboxRegistry(open);

  return {
    kind: "local",
    uploads: hostUploads(userDataDirOf),
    acquire: (scope) => registry.acquire(scope),
    get: (sandboxId) => registry.get(sandboxId),
    async release(sandboxId) {
      registry.release(sandboxId);
    },
    async forget(scope) {
      // Validates the ids before they become a path, so only this thread's own folder can go.
      await registry.forget(scope);
      await rm(join(rootDir, "users", scope.userId, "threads", scope.threadId), { recursive: true, force: true });
    },
    async close() {
      registry.close();
    },
  };
}

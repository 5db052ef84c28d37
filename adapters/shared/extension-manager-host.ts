import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, copyFile, lstat, mkdir, open, readdir, readFile, realpath, rename, rm, stat, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { basename, dirname, resolve } from "node:path";
import process from "node:process";
import {
  ManagerLockBusyError,
  type ManagerFileInfo,
  type ManagerHost,
  type ManagerLockRelease,
  type ManagerRunResult,
} from "../../src/ports/extension-manager.ts";
import { spawnFailed } from "./process-runner-error.ts";

/*
 * The extension manager's port on Node, Deno and Bun: node:fs/promises and node:child_process
 * behave the same on all three, so one implementation serves every runtime's CLI.
 */

export interface ExtensionManagerHostOptions {
  /** The environment handed to the package manager (filtered by the manager first). Default: this process's. */
  readonly env?: Readonly<Record<string, string>>;
  /** Ctrl-C registration; default: SIGINT on this process. */
  readonly onInterrupt?: (handler: () => void) => () => void;
  /** How often a waiting lock looks again. */
  readonly lockPollMs?: number;
}

const KILL_GRACE_MS = 3_000;

/** Writes through a temporary file in the same folder and a rename, keeping an existing file's mode. */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const temporary = `${dirname(path)}/.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`;
  let mode: number | undefined;
  try {
    mode = (await stat(path)).mode & 0o7777;
  } catch (error) {
    if (errnoCode(error) !== "ENOENT") throw error;
  }
  try {
    await writeFile(temporary, data, { flag: "wx" });
    if (mode !== undefined) await chmod(temporary, mode);
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}
// A lock file that is still empty this long after it was created belongs to a process that died
// between creating and writing it.
const EMPTY_LOCK_STALE_MS = 5_000;

function infoOf(entry: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean; size: number }): ManagerFileInfo {
  const kind = entry.isSymbolicLink() ? "symlink" : entry.isFile() ? "file" : entry.isDirectory() ? "directory" : "other";
  return { kind, size: entry.size };
}

function errnoCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function processEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (typeof value === "string") env[name] = value;
  return env;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else. Anything unexpected counts as alive: waiting
    // on a dead holder is recoverable, running two transactions at once is not.
    return errnoCode(error) !== "ESRCH";
  }
}

interface LockOwner {
  pid: number;
  host: string;
  token: string;
  since: string;
}

function describeHolder(owner: LockOwner | undefined): string {
  return owner ? `pid ${owner.pid} on ${owner.host} since ${owner.since}` : "a process that is still starting";
}

async function readOwner(path: string): Promise<{ owner: LockOwner | undefined; ageMs: number } | undefined> {
  try {
    const [text, info] = await Promise.all([readFile(path, "utf8"), stat(path)]);
    let owner: LockOwner | undefined;
    try {
      const parsed = JSON.parse(text) as Partial<LockOwner>;
      if (typeof parsed.pid === "number" && typeof parsed.host === "string" && typeof parsed.token === "string") owner = parsed as LockOwner;
    } catch {
      owner = undefined;
    }
    return { owner, ageMs: Date.now() - info.mtimeMs };
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return undefined;
    throw error;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolveSleep, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolveSleep();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// cmd.exe re-parses a .cmd shim's arguments; quoting each one keeps spaces and metacharacters inert.
function quoteForCmd(arg: string): string {
  return `"${arg.replace(/"/g, '""')}"`;
}

export function createExtensionManagerHost(options: ExtensionManagerHostOptions = {}): ManagerHost {
  const pollMs = options.lockPollMs ?? 100;
  const localHost = hostname();

  async function copyTreeInto(from: string, to: string, prefix: string, include: (relativePath: string, info: ManagerFileInfo) => boolean): Promise<void> {
    await mkdir(to, { recursive: true });
    for (const name of await readdir(from)) {
      const source = `${from}/${name}`;
      const target = `${to}/${name}`;
      const relative = prefix === "" ? name : `${prefix}/${name}`;
      const info = infoOf(await lstat(source));
      if (!include(relative, info)) continue;
      if (info.kind === "directory") await copyTreeInto(source, target, relative, include);
      else if (info.kind === "file") await copyFile(source, target);
      else throw Object.assign(new Error(`refusing to copy ${relative}: only folders and regular files are copied`), { code: "EINVAL" });
    }
  }

  return {
    env: options.env ?? processEnv(),
    resolvePath: (path) => resolve(path),

    async readFile(path) {
      try {
        return new Uint8Array(await readFile(path));
      } catch (error) {
        if (errnoCode(error) === "ENOENT") return undefined;
        throw error;
      }
    },

    writeFileAtomic,

    mkdir: async (path) => void (await mkdir(path, { recursive: true })),
    rename: (from, to) => rename(from, to),
    remove: (path) => rm(path, { recursive: true, force: true }),
    copyTree: (from, to, include) => copyTreeInto(from, to, "", include),

    async lstat(path) {
      try {
        return infoOf(await lstat(path));
      } catch (error) {
        if (errnoCode(error) === "ENOENT" || errnoCode(error) === "ENOTDIR") return undefined;
        throw error;
      }
    },

    readdir: (path) => readdir(path),
    realpath: (path) => realpath(path),

    run(command, args, runOptions) {
      return new Promise<ManagerRunResult>((resolveRun, reject) => {
        const { signal } = runOptions;
        if (signal?.aborted) return reject(signal.reason);
        const windows = process.platform === "win32";
        // npm is a .cmd shim on Windows, which only a shell can start.
        const child = windows
          ? spawn([command, ...args].map(quoteForCmd).join(" "), { cwd: runOptions.cwd, env: { ...runOptions.env }, shell: true, windowsHide: true, stdio: ["ignore", "pipe", "pipe"] })
          : spawn(command, [...args], { cwd: runOptions.cwd, env: { ...runOptions.env }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
        const stdout: Buffer[] = [];
        const stderr: Buffer[] = [];
        child.stdout?.on("data", (chunk: Buffer) => stdout.push(chunk));
        child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk));
        let aborted = false;
        let escalate: ReturnType<typeof setTimeout> | undefined;
        const killGroup = (sig: "SIGTERM" | "SIGKILL") => {
          try {
            if (!windows && child.pid !== undefined) process.kill(-child.pid, sig);
            else child.kill(sig);
          } catch {
            // Already gone.
          }
        };
        const onAbort = () => {
          aborted = true;
          // SIGTERM first: npm then removes its own temporary files before leaving.
          killGroup("SIGTERM");
          escalate = setTimeout(() => killGroup("SIGKILL"), KILL_GRACE_MS);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        child.on("error", (error) => {
          signal?.removeEventListener("abort", onAbort);
          if (escalate) clearTimeout(escalate);
          reject(spawnFailed(command, runOptions.cwd, error));
        });
        child.on("close", (code, exitSignal) => {
          signal?.removeEventListener("abort", onAbort);
          if (escalate) clearTimeout(escalate);
          if (aborted) return reject(signal?.reason);
          resolveRun({
            code: code ?? (exitSignal ? 128 + 15 : 1),
            stdout: Buffer.concat(stdout).toString("utf8"),
            stderr: Buffer.concat(stderr).toString("utf8"),
          });
        });
      });
    },

    async lock(path, lockOptions): Promise<ManagerLockRelease> {
      await mkdir(dirname(path), { recursive: true });
      const owner: LockOwner = { pid: process.pid, host: localHost, token: randomBytes(12).toString("hex"), since: new Date().toISOString() };
      const deadline = Date.now() + Math.max(0, lockOptions.timeoutMs);
      let told = false;
      for (;;) {
        if (lockOptions.signal?.aborted) throw lockOptions.signal.reason;
        try {
          const handle = await open(path, "wx");
          try {
            await handle.writeFile(JSON.stringify(owner));
          } finally {
            await handle.close();
          }
          let released = false;
          return async () => {
            if (released) return;
            released = true;
            const current = await readOwner(path);
            if (current?.owner?.token === owner.token) await rm(path, { force: true });
          };
        } catch (error) {
          if (errnoCode(error) !== "EEXIST") throw error;
        }
        const current = await readOwner(path);
        if (current === undefined) continue;
        const stale = current.owner
          ? current.owner.host === localHost && !isAlive(current.owner.pid)
          : current.ageMs > EMPTY_LOCK_STALE_MS;
        if (stale) {
          // Only the stale file we looked at goes: a new holder writes a new token first.
          const again = await readOwner(path);
          if (again?.owner?.token === current.owner?.token) await rm(path, { force: true });
          continue;
        }
        if (Date.now() >= deadline) throw new ManagerLockBusyError(path, describeHolder(current.owner));
        if (!told) {
          told = true;
          lockOptions.onWait?.(describeHolder(current.owner));
        }
        await sleep(Math.min(pollMs, Math.max(1, deadline - Date.now())), lockOptions.signal);
      }
    },

    onInterrupt:
      options.onInterrupt ??
      ((handler) => {
        process.on("SIGINT", handler);
        return () => void process.off("SIGINT", handler);
      }),
  };
}

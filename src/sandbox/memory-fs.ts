import { Bash, InMemoryFs } from "just-bash";
import { base64ToBytes, bytesToBase64 } from "../core/base64.ts";
import { isInsideVirtualRoots, normalizePosixPath } from "../core/path.ts";
import { SandboxError, VIRTUAL_DIRS, VIRTUAL_ROOT } from "../ports/sandbox.ts";
import type { ExecResult } from "../ports/sandbox.ts";
import type { BackendKind, FileBackend } from "./file-ops.ts";
import { timedOutResult } from "./scope.ts";

// What the virtual sandbox keeps per thread, wherever its interpreter runs (the gateway's thread or
// a worker): the in-memory file system, its stored snapshot, and the just-bash shell over it.

const ROOTS = Object.values(VIRTUAL_DIRS);

type SnapshotEntry =
  | { path: string; type: "directory" }
  | { path: string; type: "file"; text: string }
  | { path: string; type: "file"; base64: string }
  | { path: string; type: "file"; bytes: Uint8Array }
  | { path: string; type: "symlink"; target: string };

export interface VirtualSnapshot {
  format: "deerflow-edge.virtual-sandbox";
  version: 1;
  entries: SnapshotEntry[];
}

function posixDirname(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

function kindOf(st: { isFile: boolean; isDirectory: boolean; isSymbolicLink: boolean }): BackendKind {
  if (st.isSymbolicLink) return "symlink";
  if (st.isDirectory) return "directory";
  return st.isFile ? "file" : "other";
}

/** The pure half of the in-memory FileBackend: paths are the virtual paths themselves. */
export const memoryPathRules: Pick<FileBackend, "toBackend" | "containsReal" | "dirname" | "join" | "errorCode"> = {
  toBackend: (virtualPath) => virtualPath,
  containsReal: (real) => real === VIRTUAL_ROOT || isInsideVirtualRoots(real),
  dirname: posixDirname,
  join: (dir, name) => (dir === "/" ? `/${name}` : `${dir}/${name}`),
  // InMemoryFs errors carry no `code`; their message starts with it ("ENOENT: no such file ...").
  errorCode: (error) => {
    const code = (error as { code?: unknown })?.code;
    if (typeof code === "string") return code;
    return /^(E[A-Z]+)\b/.exec(String((error as Error)?.message ?? ""))?.[1];
  },
};

export function memoryBackend(fs: InMemoryFs): FileBackend {
  return {
    ...memoryPathRules,
    realpath: (p) => fs.realpath(p),
    lstat: async (p) => {
      const st = await fs.lstat(p);
      return { kind: kindOf(st), size: st.size };
    },
    stat: async (p) => {
      const st = await fs.stat(p);
      return { kind: kindOf(st), size: st.size };
    },
    readdir: async (p) =>
      (await fs.readdirWithFileTypes(p)).map((d) => ({
        name: d.name,
        kind: kindOf({ isFile: d.isFile, isDirectory: d.isDirectory, isSymbolicLink: d.isSymbolicLink }),
      })),
    readText: (p) => fs.readFile(p, "utf8"),
    // InMemoryFs hands out its own buffer; a caller writing into it would change the file.
    readBytes: async (p) => (await fs.readFileBuffer(p)).slice(),
    writeText: (p, content) => fs.writeFile(p, content, "utf8"),
    appendText: (p, content) => fs.appendFile(p, content, "utf8"),
    // InMemoryFs keeps the caller's buffer as the file; a caller reusing it would change the file.
    writeBytes: (p, bytes) => fs.writeFile(p, bytes.slice()),
    unlink: (p) => fs.rm(p),
    mkdirp: (p) => fs.mkdir(p, { recursive: true }),
  };
}

const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * The files under the roots. "stored" is the JSON form kept in storage (UTF-8 text as text, other
 * bytes as base64); "checkpoint" hands every file's bytes over as they are, for a postMessage copy
 * (no decoding or base64 before every command) that restoreSnapshot also reads.
 */
export async function takeSnapshot(fs: InMemoryFs, form: "stored" | "checkpoint" = "stored"): Promise<VirtualSnapshot> {
  const entries: SnapshotEntry[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const d of await fs.readdirWithFileTypes(dir)) {
      const path = `${dir}/${d.name}`;
      if (d.isSymbolicLink) {
        entries.push({ path, type: "symlink", target: await fs.readlink(path) });
      } else if (d.isDirectory) {
        entries.push({ path, type: "directory" });
        await walk(path);
      } else if (d.isFile) {
        const bytes = await fs.readFileBuffer(path);
        if (form === "checkpoint") {
          entries.push({ path, type: "file", bytes });
          continue;
        }
        let text: string | undefined;
        try {
          text = utf8Strict.decode(bytes);
        } catch {
          text = undefined;
        }
        entries.push(text === undefined ? { path, type: "file", base64: bytesToBase64(bytes) } : { path, type: "file", text });
      }
    }
  };
  for (const root of ROOTS) {
    if (await fs.exists(root)) await walk(root);
  }
  return { format: "deerflow-edge.virtual-sandbox", version: 1, entries };
}

function isSnapshot(value: unknown): value is VirtualSnapshot {
  const v = value as Partial<VirtualSnapshot> | null;
  return !!v && typeof v === "object" && v.format === "deerflow-edge.virtual-sandbox" && v.version === 1 && Array.isArray(v.entries);
}

export async function restoreSnapshot(value: unknown, key: string): Promise<InMemoryFs> {
  const fs = new InMemoryFs();
  for (const root of ROOTS) await fs.mkdir(root, { recursive: true });
  if (value === null || value === undefined) return fs;
  if (!isSnapshot(value)) {
    throw new SandboxError(
      "sandbox_unavailable",
      `Stored sandbox files under key "${key}" are not in a format this version understands. ` +
        `Move that key aside (or delete it to start the thread with empty folders) and acquire again.`,
    );
  }
  for (const entry of value.entries) {
    // Stored data is input like any other: only in-root, already-normalized paths are written back.
    if (typeof entry?.path !== "string" || normalizePosixPath(entry.path) !== entry.path || !isInsideVirtualRoots(entry.path)) continue;
    if (entry.type === "directory") {
      await fs.mkdir(entry.path, { recursive: true });
    } else if (entry.type === "file") {
      await fs.mkdir(posixDirname(entry.path), { recursive: true });
      if ("text" in entry && typeof entry.text === "string") await fs.writeFile(entry.path, entry.text, "utf8");
      else if ("base64" in entry && typeof entry.base64 === "string") await fs.writeFile(entry.path, base64ToBytes(entry.base64));
      else if ("bytes" in entry && entry.bytes instanceof Uint8Array) await fs.writeFile(entry.path, entry.bytes.slice());
    } else if (entry.type === "symlink" && typeof entry.target === "string") {
      await fs.mkdir(posixDirname(entry.path), { recursive: true });
      await fs.symlink(entry.target, entry.path);
    }
  }
  return fs;
}

let defenseInDepthSupport: Promise<boolean> | undefined;

/** Whether just-bash's defense-in-depth box can start on this runtime; asked once per process. */
export function defenseInDepthSupported(): Promise<boolean> {
  defenseInDepthSupport ??= new Bash({ fs: new InMemoryFs(), defenseInDepth: true })
    .exec("true")
    .then(
      () => true,
      (error: unknown) => {
        if (/DefenseInDepth/.test(String((error as Error)?.message ?? error))) return false;
        throw error;
      },
    );
  return defenseInDepthSupport;
}


/**
 * Whether to run the defense-in-depth box: `preference` undefined means wherever the runtime
 * supports it, `true` refuses to run without it.
 */
export async function resolveDefenseInDepth(preference: boolean | undefined): Promise<boolean> {
  if (preference === false) return false;
  const supported = await defenseInDepthSupported();
  if (!supported && preference === true) {
    throw new SandboxError(
      "sandbox_unavailable",
      "just-bash's defense-in-depth layer cannot start on this runtime (it failed to patch Module._resolveFilename). " +
        "Pass defenseInDepth: false (just-bash still has no host access), or run on Node or on Deno instead.",
    );
  }
  return supported;
}

export function createShell(fs: InMemoryFs, defenseInDepth: boolean): Bash {
  return new Bash({ fs, cwd: VIRTUAL_DIRS.workspace, env: { HOME: VIRTUAL_DIRS.workspace }, defenseInDepth });
}

const MAX_TIMER_MS = 2_147_483_647;

/**
 * One command under its timeout: just-bash stops at the next statement once the timer aborts it,
 * and the output so far comes back with the timeout's reason. A command that never lets the timer
 * fire is stopped by whoever runs the thread (the worker's owner terminates it). `signal` aborting
 * rejects with its reason.
 */
export async function runShell(
  bash: Bash,
  command: string,
  options: { cwd: string; timeoutMs: number; signal?: AbortSignal | undefined },
): Promise<ExecResult> {
  const { signal, timeoutMs } = options;
  signal?.throwIfAborted();
  const controller = new AbortController();
  let timedOut = false;
  const timer =
    timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS
      ? setTimeout(() => {
          timedOut = true;
          controller.abort();
        }, timeoutMs)
      : undefined;
  const onAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const result = await bash.exec(command, { cwd: options.cwd, signal: controller.signal });
    if (timedOut) return timedOutResult(result.stdout, result.stderr, timeoutMs);
    signal?.throwIfAborted();
    return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

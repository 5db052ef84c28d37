import type { Bash, InMemoryFs } from "just-bash";
import { base64ToBytes, bytesToBase64 } from "../core/base64.ts";
import { isInsideVirtualRoots, normalizePosixPath } from "../core/path.ts";
import { SandboxError, VIRTUAL_DIRS, VIRTUAL_ROOT } from "../ports/sandbox.ts";
import type { ExecResult } from "../ports/sandbox.ts";
import type { BackendKind, FileBackend } from "./file-ops.ts";
import { timedOutResult } from "./scope.ts";

// What the virtual sandbox keeps per thread, wherever its commands run (the gateway's thread or a
// worker): the in-memory file system, its snapshot (stored, or copied to a worker for a command),
// and the just-bash shell over it.

/** just-bash's module: the shell, its commands and the in-memory file system. */
export type JustBash = typeof import("just-bash");

let justBash: Promise<JustBash> | undefined;

/**
 * just-bash, imported when a sandbox first needs it. It is most of what the sandbox weighs (its
 * commands and their libraries): a process or a Worker isolate that never opens a sandbox never
 * loads it, and a bundle can keep it in a chunk of its own.
 */
export function loadJustBash(): Promise<JustBash> {
  return (justBash ??= import("just-bash"));
}

const ROOTS = Object.values(VIRTUAL_DIRS);
export const UPLOADS = VIRTUAL_DIRS.uploads;

export type SnapshotEntry =
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

export function posixDirname(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

/** The name of a file directly in the uploads folder (what the upload store keeps), else undefined. */
export function uploadNameOf(path: string): string | undefined {
  return posixDirname(path) === UPLOADS ? path.slice(UPLOADS.length + 1) : undefined;
}

function kindOf(st: { isFile: boolean; isDirectory: boolean; isSymbolicLink: boolean }): BackendKind {
  if (st.isSymbolicLink) return "symlink";
  if (st.isDirectory) return "directory";
  return st.isFile ? "file" : "other";
}

export function memoryBackend(fs: InMemoryFs): FileBackend {
  return {
    toBackend: (virtualPath) => virtualPath,
    containsReal: (real) => real === VIRTUAL_ROOT || isInsideVirtualRoots(real),
    dirname: posixDirname,
    join: (dir, name) => (dir === "/" ? `/${name}` : `${dir}/${name}`),
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
    // InMemoryFs errors carry no `code`; their message starts with it ("ENOENT: no such file ...").
    errorCode: (error) => {
      const code = (error as { code?: unknown })?.code;
      if (typeof code === "string") return code;
      return /^(E[A-Z]+)\b/.exec(String((error as Error)?.message ?? ""))?.[1];
    },
  };
}

const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * The files under the roots, parents before children. "stored" is what storage keeps: the JSON
 * form (UTF-8 text as text, other bytes as base64) without the uploads (the upload store keeps
 * those). "copy" is everything a command may see, uploads included (lazy ones are read), with
 * every file's bytes as they are, for a postMessage copy to a worker (no decoding or base64 per
 * command).
 */
export async function takeSnapshot(fs: InMemoryFs, form: "stored" | "copy" = "stored"): Promise<VirtualSnapshot> {
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
        if (form === "copy") {
          // An upload whose stored bytes are gone cannot be read here either: the command goes
          // without it rather than not at all (a read in the sandbox says ENOENT the same way).
          const bytes = await fs.readFileBuffer(path).catch(() => undefined);
          if (bytes) entries.push({ path, type: "file", bytes });
          continue;
        }
        // The upload store keeps these; a stored snapshot holding them too would copy every upload.
        if (uploadNameOf(path) !== undefined) continue;
        const bytes = await fs.readFileBuffer(path);
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

export function isSnapshot(value: unknown): value is VirtualSnapshot {
  const v = value as Partial<VirtualSnapshot> | null;
  return !!v && typeof v === "object" && v.format === "deerflow-edge.virtual-sandbox" && v.version === 1 && Array.isArray(v.entries);
}

/**
 * Writes one entry (a checked, in-root path) into `fs`, its parent folders first. With `adopt`,
 * a file given as bytes keeps that very buffer as its content (the caller owns the snapshot and
 * lets go of it), so that diffSnapshots knows a file nobody rewrote without comparing its bytes.
 */
async function writeEntry(fs: InMemoryFs, entry: SnapshotEntry, adopt = false): Promise<void> {
  if (entry.type === "directory") {
    await fs.mkdir(entry.path, { recursive: true });
  } else if (entry.type === "file") {
    await fs.mkdir(posixDirname(entry.path), { recursive: true });
    if ("text" in entry && typeof entry.text === "string") await fs.writeFile(entry.path, entry.text, "utf8");
    else if ("base64" in entry && typeof entry.base64 === "string") await fs.writeFile(entry.path, base64ToBytes(entry.base64));
    else if ("bytes" in entry && entry.bytes instanceof Uint8Array) await fs.writeFile(entry.path, adopt ? entry.bytes : entry.bytes.slice());
  } else if (entry.type === "symlink" && typeof entry.target === "string") {
    await fs.mkdir(posixDirname(entry.path), { recursive: true });
    await fs.symlink(entry.target, entry.path);
  }
}

/** Only in-root, already-normalized paths: stored data and a worker's answer are input like any other. */
function acceptablePath(path: unknown): path is string {
  return typeof path === "string" && normalizePosixPath(path) === path && isInsideVirtualRoots(path);
}

export interface RestoreOptions<F extends InMemoryFs> {
  /** The file system to fill; a new InMemoryFs by default. */
  into?: F;
  /** Drop what is under the roots first (what is outside them stays). */
  replace?: boolean;
  /** Files given as bytes keep the snapshot's own buffers (see writeEntry). */
  adopt?: boolean;
}

/** Fills a file system with the roots and the snapshot's files. */
export async function restoreSnapshot<F extends InMemoryFs = InMemoryFs>(value: unknown, key: string, options: RestoreOptions<F> = {}): Promise<F> {
  const fs = options.into ?? (new (await loadJustBash()).InMemoryFs() as F);
  if (options.replace) for (const root of ROOTS) await fs.rm(root, { recursive: true, force: true });
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
    if (acceptablePath(entry?.path)) await writeEntry(fs, entry, options.adopt);
  }
  return fs;
}

/** What a command changed under the roots: paths gone (or replaced by another kind), and entries new or changed, parents first. */
export interface FileChanges {
  removed: string[];
  written: SnapshotEntry[];
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameEntry(a: SnapshotEntry, b: SnapshotEntry): boolean {
  if (a.type !== b.type) return false;
  if (a.type === "symlink" && b.type === "symlink") return a.target === b.target;
  // The same buffer: restored with `adopt` and never rewritten.
  if ("bytes" in a && "bytes" in b) return a.bytes === b.bytes || sameBytes(a.bytes, b.bytes);
  return a.type === "directory";
}

/** The difference between two "copy" snapshots of one file system. */
export function diffSnapshots(before: VirtualSnapshot, after: VirtualSnapshot): FileChanges {
  const old = new Map(before.entries.map((entry) => [entry.path, entry]));
  const now = new Set(after.entries.map((entry) => entry.path));
  const changes: FileChanges = { removed: [], written: [] };
  for (const entry of after.entries) {
    const was = old.get(entry.path);
    if (was && sameEntry(was, entry)) continue;
    // A folder that became a file (or the other way) goes before its replacement is written.
    if (was && was.type !== entry.type) changes.removed.push(entry.path);
    changes.written.push(entry);
  }
  for (const entry of before.entries) if (!now.has(entry.path)) changes.removed.push(entry.path);
  return changes;
}

/** Applies a command's changes to `fs` (through its own methods, so a tracking subclass sees them). */
export async function applyChanges(fs: InMemoryFs, changes: FileChanges): Promise<void> {
  for (const path of changes.removed) {
    if (acceptablePath(path)) await fs.rm(path, { recursive: true, force: true });
  }
  for (const entry of changes.written) {
    if (!acceptablePath(entry?.path)) continue;
    // A symlink is created, not written through: whatever is at the path goes first.
    if (entry.type === "symlink") await fs.rm(entry.path, { force: true });
    await writeEntry(fs, entry);
  }
}

let defenseInDepthSupport: Promise<boolean> | undefined;

/** Whether just-bash's defense-in-depth box can start on this runtime; asked once per process (or worker). */
export function defenseInDepthSupported(): Promise<boolean> {
  defenseInDepthSupport ??= loadJustBash().then(({ Bash, InMemoryFs }) =>
    new Bash({ fs: new InMemoryFs(), defenseInDepth: true }).exec("true").then(
      () => true,
      (error: unknown) => {
        if (/DefenseInDepth/.test(String((error as Error)?.message ?? error))) return false;
        throw error;
      },
    ),
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

export async function createShell(fs: InMemoryFs, defenseInDepth: boolean): Promise<Bash> {
  const { Bash } = await loadJustBash();
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

import { Bash, InMemoryFs } from "just-bash";
import { base64ToBytes, bytesToBase64 } from "../core/base64.ts";
import { isInsideVirtualRoots, normalizePosixPath } from "../core/path.ts";
import type { KeyValue } from "../ports/key-value.ts";
import { SandboxError, VIRTUAL_DIRS, VIRTUAL_ROOT } from "../ports/sandbox.ts";
import type { ExecOptions, ExecResult, SandboxProvider, SandboxScope } from "../ports/sandbox.ts";
import { createMemoryKeyValue } from "../storage/key-value.ts";
import { FileBackedSandbox } from "./file-ops.ts";
import type { BackendKind, FileBackend } from "./file-ops.ts";
import { SandboxRegistry, scopeKey, timedOutResult } from "./scope.ts";

export interface VirtualSandboxProviderOptions {
  /**
   * Where a thread's files go on release and come back from on acquire. Without it the provider
   * keeps them in process memory, so they outlive a release but not the process.
   */
  storage?: KeyValue;
  /**
   * just-bash's defense-in-depth box (a second layer that blocks eval, Function and friends while a
   * command runs). Default: on where the runtime supports it, off otherwise (Bun 1.4 cannot patch
   * Module._resolveFilename). `true` makes acquire fail on such a runtime instead.
   */
  defenseInDepth?: boolean;
  /** Timeout for exec calls that pass none. Default 600 000 ms, DeerFlow's bash default. */
  defaultTimeoutMs?: number;
}

export const VIRTUAL_DEFAULT_TIMEOUT_MS = 600_000;
const MAX_TIMER_MS = 2_147_483_647;
const ROOTS = Object.values(VIRTUAL_DIRS);

/** Storage key of a thread's files. Scope ids are restricted to [A-Za-z0-9_-], so keys cannot collide. */
export function virtualSandboxStorageKey(scope: SandboxScope): string {
  return `sandbox:virtual:${scope.userId}:${scope.threadId}`;
}

type SnapshotEntry =
  | { path: string; type: "directory" }
  | { path: string; type: "file"; text: string }
  | { path: string; type: "file"; base64: string }
  | { path: string; type: "symlink"; target: string };

interface VirtualSnapshot {
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

function memoryBackend(fs: InMemoryFs): FileBackend {
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

async function takeSnapshot(fs: InMemoryFs): Promise<VirtualSnapshot> {
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

async function restoreSnapshot(value: unknown, key: string): Promise<InMemoryFs> {
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
    } else if (entry.type === "symlink" && typeof entry.target === "string") {
      await fs.mkdir(posixDirname(entry.path), { recursive: true });
      await fs.symlink(entry.target, entry.path);
    }
  }
  return fs;
}

let defenseInDepthSupport: Promise<boolean> | undefined;

/** Whether just-bash's defense-in-depth box can start on this runtime; asked once per process. */
function defenseInDepthSupported(): Promise<boolean> {
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

class VirtualSandbox extends FileBackedSandbox {
  readonly #bash: Bash;

  constructor(
    id: string,
    scope: SandboxScope,
    readonly fs: InMemoryFs,
    defenseInDepth: boolean,
    private readonly defaultTimeoutMs: number,
  ) {
    super(id, scope, memoryBackend(fs));
    this.#bash = new Bash({
      fs,
      cwd: VIRTUAL_DIRS.workspace,
      env: { HOME: VIRTUAL_DIRS.workspace },
      defenseInDepth,
    });
  }

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    this.assertLive();
    const { virtual: cwd } = await this.workingDirectory(options.cwd);
    options.signal?.throwIfAborted();
    const timeoutMs = options.timeoutMs ?? this.defaultTimeoutMs;
    const controller = new AbortController();
    let timedOut = false;
    const timer =
      timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS
        ? setTimeout(() => {
            timedOut = true;
            controller.abort();
          }, timeoutMs)
        : undefined;
    const onAbort = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const result = await this.#bash.exec(command, { cwd, signal: controller.signal });
      if (timedOut) return timedOutResult(result.stdout, result.stderr, timeoutMs);
      options.signal?.throwIfAborted();
      return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode };
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    }
  }
}

/**
 * The default sandbox: just-bash in process over an in-memory file system per user and thread.
 * Commands see only that file system (no host files, no network, no python/js); the file API
 * additionally refuses any path outside /mnt/user-data/{workspace,uploads,outputs}.
 */
export function createVirtualSandboxProvider(options: VirtualSandboxProviderOptions = {}): SandboxProvider {
  const storage = options.storage ?? createMemoryKeyValue();
  const defaultTimeoutMs = options.defaultTimeoutMs ?? VIRTUAL_DEFAULT_TIMEOUT_MS;
  const persisting = new Map<string, Promise<void>>();

  async function useDefenseInDepth(): Promise<boolean> {
    if (options.defenseInDepth === false) return false;
    const supported = await defenseInDepthSupported();
    if (!supported && options.defenseInDepth === true) {
      throw new SandboxError(
        "sandbox_unavailable",
        "just-bash's defense-in-depth layer cannot start on this runtime (it failed to patch Module._resolveFilename). " +
          "Pass defenseInDepth: false (just-bash still has no host access), or run on Node or on Deno instead.",
      );
    }
    return supported;
  }

  async function open(scope: SandboxScope): Promise<VirtualSandbox> {
    const key = virtualSandboxStorageKey(scope);
    await persisting.get(key);
    const defense = await useDefenseInDepth();
    const fs = await restoreSnapshot(await storage.getItem(key), key);
    return new VirtualSandbox(`virtual:${scopeKey(scope)}`, { userId: scope.userId, threadId: scope.threadId }, fs, defense, defaultTimeoutMs);
  }
  const registry = new SandboxRegistry(open);

  async function persist(sandbox: VirtualSandbox): Promise<void> {
    const key = virtualSandboxStorageKey(sandbox.scope);
    const previous = persisting.get(key);
    // Registered before the first await, so an acquire of this scope waits for the write.
    const write = (async () => {
      const snapshot = await takeSnapshot(sandbox.fs);
      await previous;
      await storage.setItem(key, snapshot);
    })();
    const settled = write.then(() => undefined, () => undefined);
    persisting.set(key, settled);
    void settled.then(() => {
      if (persisting.get(key) === settled) persisting.delete(key);
    });
    await write;
  }

  return {
    kind: "virtual",
    acquire: (scope) => registry.acquire(scope),
    get: (sandboxId) => registry.get(sandboxId),
    async release(sandboxId) {
      const sandbox = registry.release(sandboxId);
      if (sandbox) await persist(sandbox);
    },
    async forget(scope) {
      await registry.forget(scope);
      const key = virtualSandboxStorageKey(scope);
      // A release still writing this scope would otherwise land after the delete.
      await persisting.get(key);
      await storage.removeItem(key);
    },
    async close() {
      await Promise.all(registry.close().map(persist));
    },
  };
}

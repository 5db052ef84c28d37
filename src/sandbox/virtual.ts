import { Bash, InMemoryFs } from "just-bash";
import { base64ToBytes, bytesToBase64 } from "../core/base64.ts";
import { isInsideVirtualRoots, normalizePosixPath } from "../core/path.ts";
import type { KeyValue } from "../ports/key-value.ts";
import { SandboxError, VIRTUAL_DIRS, VIRTUAL_ROOT } from "../ports/sandbox.ts";
import type { ExecOptions, ExecResult, SandboxProvider, SandboxScope, SandboxUploads, UploadBatch } from "../ports/sandbox.ts";
import { createMemoryKeyValue } from "../storage/key-value.ts";
import { FileBackedSandbox } from "./file-ops.ts";
import type { BackendKind, FileBackend } from "./file-ops.ts";
import { assertValidScope, SandboxRegistry, scopeKey, timedOutResult } from "./scope.ts";
import { UploadStore } from "./upload-store.ts";
import type { StagedUpload } from "./upload-store.ts";

export interface VirtualSandboxProviderOptions {
  /**
   * Where a thread's files go on release and come back from on acquire, and where uploads are
   * stored as they arrive. Without it the provider keeps them in process memory, so they outlive a
   * release but not the process.
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

const UPLOADS = VIRTUAL_DIRS.uploads;

/** The name of a file directly in the uploads folder (what the upload store keeps), else undefined. */
function uploadNameOf(path: string): string | undefined {
  return posixDirname(path) === UPLOADS ? path.slice(UPLOADS.length + 1) : undefined;
}

/**
 * An InMemoryFs that notes which uploads the sandbox changed, so a release writes back only those
 * (uploads are stored apart, and loaded lazily: an untouched one is never read into memory).
 */
class TrackedFs extends InMemoryFs {
  /** Names in the uploads folder written since acquire. */
  readonly touched = new Set<string>();
  /** True once anything at or above the uploads folder changed (a move or removal of the folder). */
  wholeFolderTouched = false;
  /** True once anything changed since the last save. */
  changed = false;

  note(path: string): void {
    this.changed = true;
    const normalized = normalizePosixPath(path.startsWith("/") ? path : `/${path}`);
    const name = uploadNameOf(normalized);
    if (name !== undefined) this.touched.add(name);
    else if (normalized === UPLOADS || UPLOADS.startsWith(`${normalized === "/" ? "" : normalized}/`)) this.wholeFolderTouched = true;
  }

  override writeFile(...args: Parameters<InMemoryFs["writeFile"]>): Promise<void> {
    this.note(args[0]);
    return super.writeFile(...args);
  }
  override writeFileSync(...args: Parameters<InMemoryFs["writeFileSync"]>): void {
    this.note(args[0]);
    super.writeFileSync(...args);
  }
  override appendFile(...args: Parameters<InMemoryFs["appendFile"]>): Promise<void> {
    this.note(args[0]);
    return super.appendFile(...args);
  }
  override rm(...args: Parameters<InMemoryFs["rm"]>): Promise<void> {
    this.note(args[0]);
    return super.rm(...args);
  }
  override cp(...args: Parameters<InMemoryFs["cp"]>): Promise<void> {
    this.note(args[1]);
    return super.cp(...args);
  }
  override mv(...args: Parameters<InMemoryFs["mv"]>): Promise<void> {
    this.note(args[0]);
    this.note(args[1]);
    return super.mv(...args);
  }
  override link(...args: Parameters<InMemoryFs["link"]>): Promise<void> {
    this.note(args[1]);
    return super.link(...args);
  }
  override symlink(...args: Parameters<InMemoryFs["symlink"]>): Promise<void> {
    this.note(args[1]);
    return super.symlink(...args);
  }
  override mkdir(...args: Parameters<InMemoryFs["mkdir"]>): Promise<void> {
    this.changed = true;
    return super.mkdir(...args);
  }
  override chmod(...args: Parameters<InMemoryFs["chmod"]>): Promise<void> {
    this.changed = true;
    return super.chmod(...args);
  }
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
        // The upload store keeps these; a snapshot holding them too would copy every upload.
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

function isSnapshot(value: unknown): value is VirtualSnapshot {
  const v = value as Partial<VirtualSnapshot> | null;
  return !!v && typeof v === "object" && v.format === "deerflow-edge.virtual-sandbox" && v.version === 1 && Array.isArray(v.entries);
}

async function restoreSnapshot(value: unknown, key: string): Promise<TrackedFs> {
  const fs = new TrackedFs();
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
      // Written through the tracker: an upload in a snapshot from before the upload store is thereby
      // marked touched, and moves to the store at the next release.
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
    readonly fs: TrackedFs,
    /** Uploads the store held at acquire (or got since): one missing at release was deleted here. */
    readonly knownUploads: Set<string>,
    defenseInDepth: boolean,
    private readonly defaultTimeoutMs: number,
    private readonly save: (sandbox: VirtualSandbox) => Promise<void>,
  ) {
    super(id, scope, memoryBackend(fs));
    this.#bash = new Bash({
      fs,
      cwd: VIRTUAL_DIRS.workspace,
      env: { HOME: VIRTUAL_DIRS.workspace },
      defenseInDepth,
    });
  }

  /** Saves the files to storage now, as release would, when anything changed since the last save. */
  async flush(): Promise<void> {
    this.assertLive();
    if (this.fs.changed) await this.save(this);
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
  const uploadStore = new UploadStore(storage);
  const defaultTimeoutMs = options.defaultTimeoutMs ?? VIRTUAL_DEFAULT_TIMEOUT_MS;
  const persisting = new Map<string, Promise<void>>();
  /** Acquired sandboxes by scope, set before open resolves, so an upload commit always finds one. */
  const live = new Map<string, VirtualSandbox>();

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

  /** Makes a stored upload appear in a live sandbox, read from storage only when something reads it. */
  function showUpload(sandbox: VirtualSandbox, name: string, entry: Parameters<UploadStore["read"]>[1]): void {
    sandbox.fs.writeFileLazy(`${UPLOADS}/${name}`, async () => {
      const bytes = await uploadStore.read(sandbox.scope, entry);
      if (!bytes) throw new Error(`ENOENT: no such file or directory, open '${UPLOADS}/${name}' (its stored bytes are gone)`);
      return bytes;
    });
    sandbox.fs.touched.delete(name);
    sandbox.knownUploads.add(name);
  }

  /** What a live sandbox or the stored snapshot has at an upload's path, when it is not a plain file. */
  async function blockedUploadNames(scope: SandboxScope, names: readonly string[]): Promise<string | undefined> {
    const sandbox = live.get(scopeKey(scope));
    if (sandbox) {
      for (const name of names) {
        const st = await sandbox.fs.lstat(`${UPLOADS}/${name}`).catch(() => undefined);
        if (st && !st.isFile) return name;
      }
      return undefined;
    }
    const snapshot = await storage.getItem(virtualSandboxStorageKey(scope));
    if (!isSnapshot(snapshot)) return undefined;
    const wanted = new Set(names.map((name) => `${UPLOADS}/${name}`));
    return snapshot.entries.find((entry) => entry.type !== "file" && wanted.has(entry.path))?.path.slice(UPLOADS.length + 1);
  }

  async function open(scope: SandboxScope): Promise<VirtualSandbox> {
    const key = virtualSandboxStorageKey(scope);
    await persisting.get(key);
    const defense = await useDefenseInDepth();
    return uploadStore.exclusive(scope, async () => {
      const fs = await restoreSnapshot(await storage.getItem(key), key);
      const sandbox = new VirtualSandbox(
        `virtual:${scopeKey(scope)}`,
        { userId: scope.userId, threadId: scope.threadId },
        fs,
        new Set(),
        defense,
        defaultTimeoutMs,
        save,
      );
      for (const [name, entry] of Object.entries(await uploadStore.index(scope))) {
        const st = await fs.lstat(`${UPLOADS}/${name}`).catch(() => undefined);
        if (st && !st.isFile) continue;
        showUpload(sandbox, name, entry);
      }
      // Restoring wrote files; only uploads from a snapshot older than the upload store need a save.
      fs.changed = fs.touched.size > 0;
      live.set(scopeKey(scope), sandbox);
      return sandbox;
    });
  }
  const registry = new SandboxRegistry(open);

  /** Writes back the uploads a released sandbox changed: new or rewritten files, and deletions. */
  async function syncUploads(sandbox: VirtualSandbox): Promise<void> {
    const { fs } = sandbox;
    if (fs.touched.size === 0 && !fs.wholeFolderTouched) return;
    const present = new Set<string>();
    try {
      for (const d of await fs.readdirWithFileTypes(UPLOADS)) if (d.isFile) present.add(d.name);
    } catch {
      // The folder itself is gone: every upload was removed with it.
    }
    await uploadStore.exclusive(sandbox.scope, async () => {
      for (const name of present) {
        if (!fs.wholeFolderTouched && !fs.touched.has(name)) continue;
        if (fs.wholeFolderTouched && sandbox.knownUploads.has(name) && !fs.touched.has(name)) continue;
        await uploadStore.putLocked(sandbox.scope, name, await fs.readFileBuffer(`${UPLOADS}/${name}`));
      }
      for (const name of sandbox.knownUploads) if (!present.has(name)) await uploadStore.removeLocked(sandbox.scope, name);
      // What is in the folder now is what the store holds: the next save starts from here.
      sandbox.knownUploads.clear();
      for (const name of present) sandbox.knownUploads.add(name);
      fs.touched.clear();
      fs.wholeFolderTouched = false;
    });
  }

  /** Drops a released sandbox from the live set and saves its files. */
  async function persist(sandbox: VirtualSandbox): Promise<void> {
    if (live.get(scopeKey(sandbox.scope)) === sandbox) live.delete(scopeKey(sandbox.scope));
    await save(sandbox);
  }

  /** Writes the sandbox's files to storage (snapshot and changed uploads), after any earlier save of its scope. */
  async function save(sandbox: VirtualSandbox): Promise<void> {
    const key = virtualSandboxStorageKey(sandbox.scope);
    const previous = persisting.get(key);
    // Registered before the first await, so an acquire of this scope waits for the write.
    const write = (async () => {
      // Cleared before the snapshot: a change made while it is taken marks the next save.
      sandbox.fs.changed = false;
      try {
        const snapshot = await takeSnapshot(sandbox.fs);
        await previous;
        await syncUploads(sandbox);
        await storage.setItem(key, snapshot);
      } catch (error) {
        sandbox.fs.changed = true;
        throw error;
      }
    })();
    const settled = write.then(() => undefined, () => undefined);
    persisting.set(key, settled);
    void settled.then(() => {
      if (persisting.get(key) === settled) persisting.delete(key);
    });
    await write;
  }

  const uploads: SandboxUploads = {
    async begin(scope): Promise<UploadBatch> {
      // The ids become storage key segments.
      assertValidScope(scope);
      const sinks: Array<ReturnType<UploadStore["stage"]>> = [];
      return {
        async file(name) {
          const sink = uploadStore.stage(scope, name);
          sinks.push(sink);
          return sink;
        },
        async commit() {
          const staged: StagedUpload[] = sinks.map((sink) => sink.staged());
          await uploadStore.exclusive(scope, async () => {
            const blocked = await blockedUploadNames(scope, staged.map((file) => file.name));
            if (blocked !== undefined) {
              throw new SandboxError("is_directory", `${UPLOADS}/${blocked} is a folder or a link in the sandbox, not a file.`);
            }
            await uploadStore.commitLocked(scope, staged);
            const sandbox = live.get(scopeKey(scope));
            if (sandbox) for (const file of staged) showUpload(sandbox, file.name, file);
          });
        },
        async abort() {
          await Promise.all(sinks.map((sink) => sink.discard().catch(() => undefined)));
        },
      };
    },
    async list(scope) {
      if (live.has(scopeKey(scope))) return undefined;
      const index = await uploadStore.index(scope);
      return Object.entries(index).map(([name, entry]) => ({ name, size: entry.size }));
    },
    async read(scope, name) {
      if (live.has(scopeKey(scope))) return undefined;
      const entry = (await uploadStore.index(scope))[name];
      return entry ? uploadStore.read(scope, entry) : undefined;
    },
    async remove(scope, name) {
      return uploadStore.exclusive(scope, async () => {
        const sandbox = live.get(scopeKey(scope));
        const removed = await uploadStore.removeLocked(scope, name);
        if (removed && sandbox) {
          await sandbox.fs.rm(`${UPLOADS}/${name}`).catch(() => undefined);
          sandbox.fs.touched.delete(name);
          sandbox.knownUploads.delete(name);
        }
        return removed;
      });
    },
  };

  return {
    kind: "virtual",
    uploads,
    acquire: (scope) => registry.acquire(scope),
    get: (sandboxId) => registry.get(sandboxId),
    async release(sandboxId) {
      const sandbox = registry.release(sandboxId);
      if (sandbox) await persist(sandbox);
    },
    async forget(scope) {
      const sandbox = await registry.forget(scope);
      if (sandbox && live.get(scopeKey(scope)) === sandbox) live.delete(scopeKey(scope));
      const key = virtualSandboxStorageKey(scope);
      // A release still writing this scope would otherwise land after the delete.
      await persisting.get(key);
      await storage.removeItem(key);
      await uploadStore.forget(scope);
    },
    async close() {
      await Promise.all(registry.close().map(persist));
    },
  };
}

import type { Bash, InMemoryFs } from "just-bash";
import { normalizePosixPath } from "../core/path.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { CAS_MAX_ATTEMPTS, parseStoredJson, VersionedConflictError, versionedOver } from "../storage/versioned.ts";
import { SandboxError } from "../ports/sandbox.ts";
import type { ExecOptions, ExecResult, SandboxProvider, SandboxScope, SandboxUploads, UploadBatch } from "../ports/sandbox.ts";
import type { SandboxWorkerPort } from "../ports/sandbox-worker.ts";
import { createMemoryKeyValue } from "../storage/key-value.ts";
import { FileBackedSandbox } from "./file-ops.ts";
import {
  createShell,
  isSnapshot,
  loadJustBash,
  memoryBackend,
  resolveDefenseInDepth,
  restoreSnapshot,
  runShell,
  takeSnapshot,
  UPLOADS,
  uploadNameOf,
  type JustBash,
  type VirtualSnapshot,
} from "./memory-fs.ts";
import { EMPTY_SNAPSHOT, mergeSnapshots, type SnapshotMerge } from "./snapshot-merge.ts";
import { assertValidScope, SandboxRegistry, scopeKey } from "./scope.ts";
import { UploadStore } from "./upload-store.ts";
import type { StagedUpload } from "./upload-store.ts";
import { WorkerShell, WorkerSupply } from "./virtual-worker.ts";

export interface VirtualSandboxProviderOptions {
  /**
   * Where a thread's files go on release and come back from on acquire, and where uploads are
   * stored as they arrive. Without it the provider keeps them in process memory, so they outlive a
   * release but not the process.
   */
  storage?: KeyValue;
  /**
   * Compare-and-set over `storage`'s keys, shared by the workers of a deployment: a save whose
   * stored base changed meanwhile is merged by file (see snapshot-merge.ts), and the upload index
   * by name, never overwritten. Default: the in-process one over `storage`.
   */
  versioned?: VersionedKeyValue;
  /** Told of every file two saves changed differently (both versions are kept). */
  onConflict?: (scope: SandboxScope, conflicts: SnapshotMerge["conflicts"]) => void;
  /**
   * just-bash's defense-in-depth box (a second layer that blocks eval, Function and friends while a
   * command runs). Default: on where the runtime supports it, off otherwise (Bun 1.4 cannot patch
   * Module._resolveFilename). `true` makes acquire fail on such a runtime instead.
   */
  defenseInDepth?: boolean;
  /** Timeout for exec calls that pass none. Default 600 000 ms, DeerFlow's bash default. */
  defaultTimeoutMs?: number;
  /**
   * Runs each command in a worker thread over a copy of the thread's files, so that no command
   * holds the caller's event loop and a command past its timeout is stopped even if it never
   * yields (nothing of it is applied: the thread's files stay as they were before it). The files,
   * uploads and saves stay on the caller's thread as without it. Without it commands run on the
   * caller's thread: a loop that never waits holds it until just-bash's command limit stops it.
   */
  workers?: SandboxWorkerPort;
  /**
   * With `workers`: how many run at once (default 8). Past it a sandbox borrows the worker of one
   * with no command in flight, or waits for a command to finish (see WorkerSupply).
   */
  maxWorkers?: number;
}

export const VIRTUAL_DEFAULT_TIMEOUT_MS = 600_000;
/** Storage key of a thread's files. Scope ids are restricted to [A-Za-z0-9_-], so keys cannot collide. */
export function virtualSandboxStorageKey(scope: SandboxScope): string {
  return `sandbox:virtual:${scope.userId}:${scope.threadId}`;
}

/**
 * An InMemoryFs that notes which uploads the sandbox changed, so a release writes back only those
 * (uploads are stored apart, and loaded lazily: an untouched one is never read into memory).
 */
function defineTrackedFs(Base: JustBash["InMemoryFs"]) {
  return class TrackedFs extends Base {
    /** Names in the uploads folder written since acquire. */
    readonly touched = new Set<string>();
    /** True once anything at or above the uploads folder changed (a move or removal of the folder). */
    wholeFolderTouched = false;
    /** True once anything changed since the last save. */
    changed = false;
    /** Goes up with every change (a worker's copy of the files is current while it has not moved). */
    generation = 0;

    note(path: string): void {
      this.changed = true;
      this.generation++;
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
      this.generation++;
      return super.mkdir(...args);
    }
    override chmod(...args: Parameters<InMemoryFs["chmod"]>): Promise<void> {
      this.changed = true;
      this.generation++;
      return super.chmod(...args);
    }
    /** An upload shown in the sandbox: not a change to save (the store has it), but one a worker's copy lacks. */
    override writeFileLazy(...args: Parameters<InMemoryFs["writeFileLazy"]>): void {
      this.generation++;
      super.writeFileLazy(...args);
    }
  };
}

type TrackedFs = InstanceType<ReturnType<typeof defineTrackedFs>>;

let trackedFsClass: Promise<new () => TrackedFs> | undefined;

/** A stored snapshot back in a TrackedFs. Written through the tracker: an upload in a snapshot from
 * before the upload store is thereby marked touched, and moves to the store at the next release. */
async function restoreTracked(value: unknown, key: string): Promise<TrackedFs> {
  trackedFsClass ??= loadJustBash().then(({ InMemoryFs }) => defineTrackedFs(InMemoryFs));
  return restoreSnapshot(value, key, { into: new (await trackedFsClass)() });
}

/** What the stored snapshot was when this sandbox last read or wrote it: the base of its next save. */
interface SnapshotBase {
  version: string | null;
  snapshot: VirtualSnapshot;
  /** The snapshot as JSON text: what was written, or made from `snapshot` when first compared. */
  text?: string;
}

/** Never a real version: a save from it is always checked against what is stored now. */
const UNKNOWN_VERSION = "deerflow-edge:unknown-version";

/** Where a sandbox's commands run: just-bash on the caller's thread, or a worker. */
type Interpreter = { kind: "here"; bash: Bash } | { kind: "worker"; shell: WorkerShell };

class VirtualSandbox extends FileBackedSandbox {
  readonly #interpreter: Interpreter;

  constructor(
    id: string,
    scope: SandboxScope,
    readonly fs: TrackedFs,
    /** Uploads the store held at acquire (or got since): one missing at release was deleted here. */
    readonly knownUploads: Set<string>,
    interpreter: Interpreter,
    private readonly defaultTimeoutMs: number,
    private readonly save: (sandbox: VirtualSandbox) => Promise<void>,
    public base: SnapshotBase,
  ) {
    super(id, scope, memoryBackend(fs));
    this.#interpreter = interpreter;
  }

  /** Saves the files to storage now, as release would, when anything changed since the last save. */
  async flush(): Promise<void> {
    this.assertLive();
    if (this.fs.changed) await this.save(this);
  }

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    this.assertLive();
    const { virtual: cwd } = await this.workingDirectory(options.cwd);
    const run = { cwd, timeoutMs: options.timeoutMs ?? this.defaultTimeoutMs, signal: options.signal };
    const interpreter = this.#interpreter;
    return interpreter.kind === "here" ? runShell(interpreter.bash, command, run) : interpreter.shell.exec(command, run);
  }

  /** Lets go of the worker, if commands run in one: a command still running there is stopped. */
  dispose(): void {
    if (this.#interpreter.kind === "worker") {
      this.#interpreter.shell.dispose(
        new SandboxError(
          "sandbox_unavailable",
          `Sandbox ${this.id} was released while this command ran; its files were saved as they were before it. Acquire the sandbox again.`,
        ),
      );
    }
  }
}

/**
 * The default sandbox: just-bash over an in-memory file system per user and thread, on the
 * caller's thread or (with `workers`) in a worker per running command. Commands see only that file system (no host files, no network, no python/js); the file API
 * additionally refuses any path outside /mnt/user-data/{workspace,uploads,outputs}.
 */
export function createVirtualSandboxProvider(options: VirtualSandboxProviderOptions = {}): SandboxProvider {
  const storage = options.storage ?? createMemoryKeyValue();
  const versioned = options.versioned ?? versionedOver(storage);
  const uploadStore = new UploadStore(storage, { versioned });
  const defaultTimeoutMs = options.defaultTimeoutMs ?? VIRTUAL_DEFAULT_TIMEOUT_MS;
  const persisting = new Map<string, Promise<void>>();
  /** Acquired sandboxes by scope, set before open resolves, so an upload commit always finds one. */
  const live = new Map<string, VirtualSandbox>();
  const workers = options.workers ? new WorkerSupply(options.workers, { maxWorkers: options.maxWorkers }) : undefined;

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
    // Asked here in worker mode too: a runtime without the box refuses at acquire, not at the first command.
    const defense = await resolveDefenseInDepth(options.defenseInDepth);
    return uploadStore.exclusive(scope, async () => {
      const stored = await versioned.read(key);
      const value = parseStoredJson(stored.value);
      const fs = await restoreTracked(value, key);
      const interpreter: Interpreter = workers
        ? { kind: "worker", shell: new WorkerShell(workers, fs, options.defenseInDepth) }
        : { kind: "here", bash: await createShell(fs, defense) };
      const sandbox = new VirtualSandbox(
        `virtual:${scopeKey(scope)}`,
        { userId: scope.userId, threadId: scope.threadId },
        fs,
        new Set(),
        interpreter,
        defaultTimeoutMs,
        save,
        { version: stored.version, snapshot: isSnapshot(value) ? value : EMPTY_SNAPSHOT },
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

  /**
   * Writes the snapshot if the stored one is still this sandbox's base; else merges it by file
   * with what another worker saved meanwhile, writes that, and brings this sandbox's files to it.
   */
  async function writeSnapshot(sandbox: VirtualSandbox, key: string, ours: VirtualSnapshot): Promise<void> {
    // The files are what this sandbox last read or wrote (a command that only read, a release
    // after the tool's flush): storage holds them already, or another worker's save that started
    // from them, which a merge would keep whole. Rewriting the same snapshot adds nothing.
    const ourText = JSON.stringify(ours);
    sandbox.base.text ??= JSON.stringify(sandbox.base.snapshot);
    if (ourText === sandbox.base.text) return;
    let next = ours;
    let expected = sandbox.base.version;
    for (let attempt = 0; attempt < CAS_MAX_ATTEMPTS; attempt++) {
      const text = next === ours ? ourText : JSON.stringify(next);
      if (await versioned.write(key, text, expected)) {
        const after = await versioned.read(key);
        sandbox.base = { version: after.value === text ? after.version : UNKNOWN_VERSION, snapshot: next, text };
        if (next !== ours) await bringUpTo(sandbox, ours, next);
        return;
      }
      const current = await versioned.read(key);
      const theirs = parseStoredJson(current.value);
      const { merged, conflicts } = mergeSnapshots(sandbox.base.snapshot, ours, isSnapshot(theirs) ? theirs : EMPTY_SNAPSHOT);
      if (conflicts.length > 0) options.onConflict?.(sandbox.scope, conflicts);
      next = merged;
      expected = current.version;
    }
    throw new VersionedConflictError(key);
  }

  /** Applies to a sandbox's files what a merge took from another worker's save. */
  async function bringUpTo(sandbox: VirtualSandbox, ours: VirtualSnapshot, merged: VirtualSnapshot): Promise<void> {
    const mine = new Map(ours.entries.map((entry) => [entry.path, JSON.stringify(entry)]));
    const wanted = new Set(merged.entries.map((entry) => entry.path));
    for (const entry of ours.entries) if (!wanted.has(entry.path)) await sandbox.fs.rm(entry.path, { recursive: true, force: true }).catch(() => undefined);
    const changed = merged.entries.filter((entry) => mine.get(entry.path) !== JSON.stringify(entry));
    const dirty = sandbox.fs.changed;
    await restoreSnapshot({ ...merged, entries: changed }, "merged", { into: sandbox.fs });
    // What these writes made is what is stored: only a change made while saving is left to save.
    sandbox.fs.changed = dirty;
  }

  /** Drops a released sandbox from the live set and saves its files. */
  async function persist(sandbox: VirtualSandbox): Promise<void> {
    if (live.get(scopeKey(sandbox.scope)) === sandbox) live.delete(scopeKey(sandbox.scope));
    try {
      await save(sandbox);
    } finally {
      sandbox.dispose();
    }
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
        await writeSnapshot(sandbox, key, snapshot);
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
      sandbox?.dispose();
      if (sandbox && live.get(scopeKey(scope)) === sandbox) live.delete(scopeKey(scope));
      const key = virtualSandboxStorageKey(scope);
      // A release still writing this scope would otherwise land after the delete.
      await persisting.get(key);
      await storage.removeItem(key);
      await uploadStore.forget(scope);
    },
    async close() {
      workers?.close();
      await Promise.all(registry.close().map(persist));
    },
  };
}

import type { InMemoryFs } from "just-bash";
import type { KeyValue } from "../ports/key-value.ts";
import type { ExecOptions, ExecResult, SandboxProvider, SandboxScope } from "../ports/sandbox.ts";
import type { SandboxWorkerPort } from "../ports/sandbox-worker.ts";
import { createMemoryKeyValue } from "../storage/key-value.ts";
import { FileBackedSandbox } from "./file-ops.ts";
import { createShell, memoryBackend, resolveDefenseInDepth, restoreSnapshot, runShell, takeSnapshot } from "./memory-fs.ts";
import type { VirtualSnapshot } from "./memory-fs.ts";
import { SandboxRegistry, scopeKey } from "./scope.ts";
import { WorkerSupply, WorkerVirtualSandbox } from "./virtual-worker.ts";

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
  /**
   * Runs each acquired sandbox's interpreter and files in a worker thread, so that no command holds
   * the caller's event loop and a command past its timeout is stopped even if it never yields
   * (its thread's files go back to how they were before it). Without it commands run on the
   * caller's thread: a loop that never waits holds it until just-bash's command limit stops it.
   */
  workers?: SandboxWorkerPort;
}

export const VIRTUAL_DEFAULT_TIMEOUT_MS = 600_000;

/** Storage key of a thread's files. Scope ids are restricted to [A-Za-z0-9_-], so keys cannot collide. */
export function virtualSandboxStorageKey(scope: SandboxScope): string {
  return `sandbox:virtual:${scope.userId}:${scope.threadId}`;
}

/** A virtual sandbox on the caller's thread. */
class VirtualSandbox extends FileBackedSandbox {
  readonly #bash;

  constructor(
    id: string,
    scope: SandboxScope,
    readonly fs: InMemoryFs,
    defenseInDepth: boolean,
    private readonly defaultTimeoutMs: number,
  ) {
    super(id, scope, memoryBackend(fs));
    this.#bash = createShell(fs, defenseInDepth);
  }

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    this.assertLive();
    const { virtual: cwd } = await this.workingDirectory(options.cwd);
    return runShell(this.#bash, command, { cwd, timeoutMs: options.timeoutMs ?? this.defaultTimeoutMs, signal: options.signal });
  }

  snapshot(): Promise<VirtualSnapshot> {
    return takeSnapshot(this.fs);
  }

  async dispose(): Promise<void> {}
}

type AnyVirtualSandbox = VirtualSandbox | WorkerVirtualSandbox;

/**
 * The default sandbox: just-bash over an in-memory file system per user and thread, on the
 * caller's thread or (with `workers`) in a worker per acquired sandbox. Commands see only that file
 * system (no host files, no network, no python/js); the file API additionally refuses any path
 * outside /mnt/user-data/{workspace,uploads,outputs}.
 */
export function createVirtualSandboxProvider(options: VirtualSandboxProviderOptions = {}): SandboxProvider {
  const storage = options.storage ?? createMemoryKeyValue();
  const defaultTimeoutMs = options.defaultTimeoutMs ?? VIRTUAL_DEFAULT_TIMEOUT_MS;
  const persisting = new Map<string, Promise<void>>();
  const workers = options.workers ? new WorkerSupply(options.workers) : undefined;

  async function open(scope: SandboxScope): Promise<AnyVirtualSandbox> {
    const key = virtualSandboxStorageKey(scope);
    await persisting.get(key);
    const id = `virtual:${scopeKey(scope)}`;
    const owned = { userId: scope.userId, threadId: scope.threadId };
    const snapshot = await storage.getItem(key);
    if (workers) {
      return WorkerVirtualSandbox.open(id, owned, { workers, key, snapshot, defenseInDepth: options.defenseInDepth, defaultTimeoutMs });
    }
    const defense = await resolveDefenseInDepth(options.defenseInDepth);
    return new VirtualSandbox(id, owned, await restoreSnapshot(snapshot, key), defense, defaultTimeoutMs);
  }
  const registry = new SandboxRegistry(open);

  async function persist(sandbox: AnyVirtualSandbox): Promise<void> {
    const key = virtualSandboxStorageKey(sandbox.scope);
    const previous = persisting.get(key);
    // Registered before the first await, so an acquire of this scope waits for the write.
    const write = (async () => {
      try {
        const snapshot = await sandbox.snapshot();
        await previous;
        await storage.setItem(key, snapshot);
      } finally {
        await sandbox.dispose();
      }
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
      await (await registry.forget(scope))?.dispose();
      const key = virtualSandboxStorageKey(scope);
      // A release still writing this scope would otherwise land after the delete.
      await persisting.get(key);
      await storage.removeItem(key);
    },
    async close() {
      workers?.close();
      await Promise.all(registry.close().map(persist));
    },
  };
}

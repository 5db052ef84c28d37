import { SandboxError, VIRTUAL_DIRS } from "../ports/sandbox.ts";
import type { ExecOptions, ExecResult, SandboxScope } from "../ports/sandbox.ts";
import type { SandboxWorker, SandboxWorkerPort } from "../ports/sandbox-worker.ts";
import { FileBackedSandbox } from "./file-ops.ts";
import type { FileBackend } from "./file-ops.ts";
import { memoryPathRules } from "./memory-fs.ts";
import type { VirtualSnapshot } from "./memory-fs.ts";
import type { HostReply, HostRequest, RemoteFileCall, WireError } from "./virtual-host.ts";
import { timedOutResult } from "./scope.ts";

// The gateway's half of a virtual sandbox whose interpreter runs in a worker
// (src/sandbox/virtual-host.ts is the other half): every file call and command is a message, and a
// command that does not answer by its deadline is stopped by terminating the worker.

/**
 * How long past its deadline (or its abort) a command may take to stop on its own, with its output
 * so far, before the worker is terminated. A command that yields (sleep, a large pipe) stops well
 * within it; one that never yields is stopped at its end.
 */
export const WORKER_STOP_GRACE_MS = 500;
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Hands out started workers and takes idle ones back. A worker takes a while to load its
 * interpreter (about a second on Node, where tsx compiles it), so one is kept started in reserve
 * and a released sandbox's worker serves the next acquire (it opens over the new thread's files).
 * Messages a waiting worker posts before anyone listens are kept for its next listener.
 */
export class WorkerSupply {
  readonly #idle: SandboxWorker[] = [];
  #spare: SandboxWorker | undefined;
  #closed = false;

  /** Starts the reserve at once, so the first acquire does not wait for a worker either. */
  constructor(
    private readonly port: SandboxWorkerPort,
    private readonly maxIdle = 4,
  ) {
    this.#reserve();
  }

  take(): SandboxWorker {
    const worker = this.#idle.pop() ?? this.#spare ?? held(this.port.start());
    if (worker === this.#spare) this.#spare = undefined;
    this.#reserve();
    return worker;
  }

  #reserve(): void {
    if (this.#closed || this.#spare || this.#idle.length > 0) return;
    this.#spare = held(this.port.start());
    this.#spare.keepAlive?.(false);
  }

  /** A worker with nothing in flight, back for the next acquire (or terminated if enough wait). */
  give(worker: SandboxWorker): void {
    if (this.#closed || this.#idle.length >= this.maxIdle) {
      worker.terminate();
      return;
    }
    worker.keepAlive?.(false);
    this.#idle.push(worker);
  }

  /** Terminates the waiting workers; those handed out are their sandboxes' to stop. */
  close(): void {
    this.#closed = true;
    for (const worker of this.#idle.splice(0)) worker.terminate();
    this.#spare?.terminate();
    this.#spare = undefined;
  }
}

/**
 * The worker as its sandboxes need it: what it posts before anyone listens is kept for the next
 * listener, and what is posted to it waits until its host says it listens (a Web Worker may drop
 * earlier messages).
 */
function held(worker: SandboxWorker): SandboxWorker {
  let onMessage: ((message: unknown) => void) | undefined;
  let onFailure: ((error: Error) => void) | undefined;
  const messages: unknown[] = [];
  let unsent: unknown[] | undefined = [];
  let failure: Error | undefined;
  worker.onMessage((message) => {
    if (unsent && (message as { ready?: unknown })?.ready === true) {
      for (const early of unsent) worker.postMessage(early);
      unsent = undefined;
    } else if (onMessage) onMessage(message);
    else messages.push(message);
  });
  worker.onFailure((error) => (onFailure ? onFailure(error) : (failure = error)));
  return {
    postMessage: (message) => (unsent ? unsent.push(message) : worker.postMessage(message)),
    onMessage(listener) {
      onMessage = listener;
      for (const message of messages.splice(0)) listener(message);
    },
    onFailure(listener) {
      onFailure = listener;
      if (failure) listener(failure);
    },
    terminate: () => worker.terminate(),
    ...(worker.keepAlive ? { keepAlive: (yes: boolean) => worker.keepAlive!(yes) } : {}),
  };
}

/** An Error that FileBackend.errorCode can classify, rebuilt from its wire form. */
function fromWire(error: WireError): Error {
  if (error.sandboxCode) return new SandboxError(error.sandboxCode, error.message);
  return Object.assign(new Error(error.message), error.errno === undefined ? {} : { code: error.errno });
}

type Distributive<T> = T extends unknown ? Omit<T, "id"> : never;
type Outgoing = Distributive<HostRequest>;

/** One started worker: requests by id, replies matched back, everything pending failed if it dies. */
class HostConnection {
  readonly #worker: SandboxWorker;
  readonly #pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void; onCheckpoint?(snapshot: VirtualSnapshot): void }>();
  #nextId = 1;
  #dead: Error | undefined;

  constructor(worker: SandboxWorker) {
    this.#worker = worker;
    worker.keepAlive?.(true);
    this.#worker.onMessage((message) => {
      const reply = message as HostReply;
      const pending = this.#pending.get(reply.id);
      if (!pending) return;
      if ("checkpoint" in reply) {
        pending.onCheckpoint?.(reply.checkpoint);
        return;
      }
      this.#pending.delete(reply.id);
      if (this.#pending.size === 0) this.#worker.keepAlive?.(false);
      if (reply.ok) pending.resolve(reply.value);
      else pending.reject(fromWire(reply.error));
    });
    this.#worker.onFailure((error) =>
      this.fail(
        new SandboxError(
          "sandbox_unavailable",
          `The virtual sandbox's worker stopped: ${error.message}. Acquire the sandbox again (it starts from the thread's saved files).`,
        ),
      ),
    );
  }

  /** The id the request goes out with, and its reply. */
  send(request: Outgoing, onCheckpoint?: (snapshot: VirtualSnapshot) => void): { id: number; reply: Promise<unknown> } {
    const id = this.#nextId++;
    if (this.#dead) return { id, reply: Promise.reject(this.#dead) };
    const reply = new Promise<unknown>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, ...(onCheckpoint ? { onCheckpoint } : {}) });
    });
    if (this.#pending.size === 1) this.#worker.keepAlive?.(true);
    this.#worker.postMessage({ ...request, id });
    return { id, reply };
  }

  /** Fire and forget (an abort). */
  notify(request: Outgoing): void {
    if (!this.#dead) this.#worker.postMessage({ ...request, id: this.#nextId++ });
  }

  /**
   * Stops using the worker and hands it back when nothing is in flight (it can serve another
   * sandbox); otherwise terminates it and returns undefined.
   */
  detach(reason: Error): SandboxWorker | undefined {
    if (this.#dead) return undefined;
    if (this.#pending.size > 0) {
      this.fail(reason);
      return undefined;
    }
    this.#dead = reason;
    return this.#worker;
  }

  get dead(): boolean {
    return this.#dead !== undefined;
  }

  fail(error: Error): void {
    if (this.#dead) return;
    this.#dead = error;
    this.#worker.terminate();
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }
}

async function openConnection(supply: WorkerSupply, snapshot: unknown, key: string, defenseInDepth: boolean | undefined): Promise<HostConnection> {
  const connection = new HostConnection(supply.take());
  try {
    await connection.send({ op: "open", snapshot, key, defenseInDepth }).reply;
  } catch (error) {
    connection.fail(error as Error);
    throw error;
  }
  return connection;
}

export interface WorkerSandboxOptions {
  workers: WorkerSupply;
  /** Storage key of the thread's files, for error messages about a stored snapshot. */
  key: string;
  /** The stored snapshot the sandbox starts from (null: empty folders). */
  snapshot: unknown;
  defenseInDepth: boolean | undefined;
  defaultTimeoutMs: number;
}

/** A virtual sandbox whose interpreter and files live in a worker thread. */
export class WorkerVirtualSandbox extends FileBackedSandbox {
  readonly #options: WorkerSandboxOptions;
  readonly #link: { connection: Promise<HostConnection> };
  /** The files as they were before the latest command started: where a stopped command leaves them. */
  #checkpoint: unknown;

  static async open(id: string, scope: SandboxScope, options: WorkerSandboxOptions): Promise<WorkerVirtualSandbox> {
    const connection = openConnection(options.workers, options.snapshot, options.key, options.defenseInDepth);
    await connection;
    return new WorkerVirtualSandbox(id, scope, options, connection);
  }

  private constructor(id: string, scope: SandboxScope, options: WorkerSandboxOptions, connection: Promise<HostConnection>) {
    const link = { connection };
    super(id, scope, remoteBackend(async (call, args) => (await link.connection).send({ op: "file", call, args }).reply));
    this.#link = link;
    this.#options = options;
    this.#checkpoint = options.snapshot;
  }

  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    this.assertLive();
    const cwd = options.cwd ?? VIRTUAL_DIRS.workspace;
    const signal = options.signal;
    signal?.throwIfAborted();
    const timeoutMs = options.timeoutMs ?? this.#options.defaultTimeoutMs;
    const connection = await this.#link.connection;
    const { id, reply } = connection.send({ op: "exec", command, cwd, timeoutMs }, (snapshot) => {
      this.#checkpoint = snapshot;
    });

    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const stopped = new Promise<"timeout" | "aborted">((resolve) => {
      const deadline = timeoutMs + WORKER_STOP_GRACE_MS;
      if (timeoutMs > 0 && deadline <= MAX_TIMER_MS) timer = setTimeout(() => resolve("timeout"), deadline);
      onAbort = () => {
        connection.notify({ op: "abort", target: id });
        clearTimeout(timer);
        timer = setTimeout(() => resolve("aborted"), WORKER_STOP_GRACE_MS);
      };
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      const outcome = await Promise.race([reply.then((value) => ({ value })), stopped]);
      if (typeof outcome === "object") {
        signal?.throwIfAborted();
        return outcome.value as ExecResult;
      }
      this.#restart(
        connection,
        outcome === "aborted" ? "a cancelled command did not stop" : `a command ran past its timeout of ${timeoutMs} ms`,
      );
      if (outcome === "aborted") signal?.throwIfAborted();
      return timedOutResult("", "", timeoutMs);
    } catch (error) {
      signal?.throwIfAborted();
      throw error;
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
    }
  }

  /** The thread's files, for the provider to store on release. */
  async snapshot(): Promise<VirtualSnapshot> {
    const connection = await this.#link.connection;
    try {
      return (await connection.send({ op: "snapshot" }).reply) as VirtualSnapshot;
    } catch (error) {
      // Released while a command was stuck: the restarted worker holds the files to save.
      if (!connection.dead) throw error;
      const fresh = await this.#link.connection;
      if (fresh === connection) throw error;
      return (await fresh.send({ op: "snapshot" }).reply) as VirtualSnapshot;
    }
  }

  /** Lets go of the worker (for another sandbox to use); the sandbox is unusable afterwards. */
  async dispose(): Promise<void> {
    const connection = await this.#link.connection.catch(() => undefined);
    const worker = connection?.detach(new SandboxError("sandbox_unavailable", `Sandbox ${this.id} was released. Acquire it again.`));
    if (worker) this.#options.workers.give(worker);
  }

  /**
   * Terminates the worker stuck in a command and starts a fresh one from the files as they were
   * before that command. Calls still waiting on the old worker fail, naming why.
   */
  #restart(stuck: HostConnection, why: string): void {
    // Two commands stuck in one worker: the first to give up restarts it, the second finds it dead.
    if (stuck.dead) return;
    stuck.fail(
      new SandboxError(
        "sandbox_unavailable",
        `The sandbox was restarted because ${why}; its files are back as they were before that command. Run this call again.`,
      ),
    );
    const { workers, key, defenseInDepth } = this.#options;
    const fresh = openConnection(workers, this.#checkpoint, key, defenseInDepth);
    // A failed restart surfaces on the next call that awaits it.
    fresh.catch(() => undefined);
    this.#link.connection = fresh;
  }
}

/** The in-memory FileBackend of the worker, one message per call. */
function remoteBackend(call: (name: RemoteFileCall, args: unknown[]) => Promise<unknown>): FileBackend {
  const remote =
    <T>(name: RemoteFileCall) =>
    (...args: unknown[]) =>
      call(name, args) as Promise<T>;
  return {
    ...memoryPathRules,
    realpath: remote<string>("realpath"),
    lstat: remote("lstat"),
    stat: remote("stat"),
    readdir: remote("readdir"),
    readText: remote<string>("readText"),
    readBytes: remote<Uint8Array>("readBytes"),
    writeText: remote<void>("writeText"),
    appendText: remote<void>("appendText"),
    writeBytes: remote<void>("writeBytes"),
    unlink: remote<void>("unlink"),
    mkdirp: remote<void>("mkdirp"),
  };
}

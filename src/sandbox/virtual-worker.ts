import type { InMemoryFs } from "just-bash";
import { SandboxError } from "../ports/sandbox.ts";
import type { ExecResult } from "../ports/sandbox.ts";
import type { SandboxWorker, SandboxWorkerPort } from "../ports/sandbox-worker.ts";
import { applyChanges, takeSnapshot } from "./memory-fs.ts";
import type { ExecAnswer, HostReply, HostRequest, WireError } from "./virtual-host.ts";
import { timedOutResult } from "./scope.ts";

// The gateway's half of running virtual-sandbox commands in a worker
// (src/sandbox/virtual-host.ts is the other half). The thread's files stay here, in the sandbox's
// own file system: each command is sent with a copy of them, and what it changed comes back with
// its result and is applied here. A command that does not answer by its deadline is stopped by
// terminating the worker; nothing of it is applied, so the files are as they were before it.

/**
 * How long past its deadline (or its abort) a command may take to stop on its own, with its output
 * so far, before the worker is terminated. A command that yields (sleep, a large pipe) stops well
 * within it; one that never yields is stopped at its end.
 */
export const WORKER_STOP_GRACE_MS = 500;
const MAX_TIMER_MS = 2_147_483_647;

/** Workers a provider runs at most at once unless told otherwise (`sandbox.max_workers`). */
export const DEFAULT_MAX_SANDBOX_WORKERS = 8;
/**
 * Started workers kept waiting once their sandbox let go of them (the reserve is started only when
 * none waits). One: each idle one costs its interpreter's memory (on Bun about 15 MB after a burst
 * of commands; keeping four held about 45 MB more after the burst than one), and within a burst
 * the workers go from sandbox to sandbox without being let go of.
 */
const DEFAULT_MAX_IDLE_WORKERS = 1;

export interface WorkerSupplyOptions {
  /**
   * Workers started at most at once (in reserve, waiting, or serving a sandbox). Each is a thread
   * with its own interpreter (about 11 MB on Bun 1.4, where a terminated one also leaves some
   * 100 KB behind), so a burst of sandboxes must not start one each: past the limit a sandbox
   * borrows the worker of a sandbox with no command in flight, or waits for one.
   */
  maxWorkers?: number;
  /** Started workers kept waiting once their sandbox let go of them; the rest are terminated. */
  maxIdle?: number;
}

/**
 * Hands out started workers and takes idle ones back. A worker takes a while to load its
 * interpreter (about a second on Node, where tsx compiles it), so one is kept started in reserve
 * and a released sandbox's worker serves the next sandbox that runs a command.
 * Messages a waiting worker posts before anyone listens are kept for its next listener.
 *
 * At most `maxWorkers` are started at once. A sandbox keeps its worker between its commands (the
 * worker keeps what the last command left, /tmp included, and needs no new copy of the thread's
 * files) only while nobody else needs one: at the limit, the worker of the sandbox idle the
 * longest goes to the sandbox that asks (that one's next command starts a new shell over a copy
 * of its thread's files; what it left outside /mnt/user-data is gone, as after a release), and
 * with every worker running a command the asker waits for the first to finish.
 */
export class WorkerSupply {
  readonly #idle: SandboxWorker[] = [];
  #spare: SandboxWorker | undefined;
  /** Started and not terminated. */
  #live = 0;
  /** Sandboxes waiting for a worker, first come first served. */
  readonly #waiting: Array<{ resolve(worker: SandboxWorker): void; reject(error: Error): void }> = [];
  /** Sandboxes holding a worker with no command in flight, longest idle first: each gives it up on call. */
  readonly #parked = new Set<() => SandboxWorker | undefined>();
  readonly #maxWorkers: number;
  readonly #maxIdle: number;
  #closed = false;

  /** Starts the reserve at once, so the first command does not wait for a worker either. */
  constructor(
    private readonly port: SandboxWorkerPort,
    options: WorkerSupplyOptions = {},
  ) {
    this.#maxWorkers = Math.max(1, Math.floor(options.maxWorkers ?? DEFAULT_MAX_SANDBOX_WORKERS));
    this.#maxIdle = Math.max(0, Math.floor(options.maxIdle ?? DEFAULT_MAX_IDLE_WORKERS));
    this.#reserve();
  }

  /** A worker for a sandbox: a waiting one, a new one under the limit, a parked sandbox's, or the first one back. */
  take(signal?: AbortSignal): Promise<SandboxWorker> {
    signal?.throwIfAborted();
    const now = this.#ready();
    if (now) {
      this.#reserve();
      return Promise.resolve(now);
    }
    return new Promise<SandboxWorker>((resolve, reject) => {
      const waiter = {
        resolve: (worker: SandboxWorker) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(worker);
        },
        reject: (error: Error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      };
      const onAbort = () => {
        const at = this.#waiting.indexOf(waiter);
        if (at >= 0) this.#waiting.splice(at, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** A worker to hand out at once, if there is one to have without waiting. */
  #ready(): SandboxWorker | undefined {
    const waiting = this.#idle.pop();
    if (waiting) return waiting;
    if (this.#spare) {
      const spare = this.#spare;
      this.#spare = undefined;
      return spare;
    }
    if (this.#live < this.#maxWorkers) return this.#start();
    for (const giveUp of this.#parked) {
      this.#parked.delete(giveUp);
      const lent = giveUp();
      if (lent) return lent;
    }
    return undefined;
  }

  #start(): SandboxWorker {
    const worker = held(this.port.start());
    this.#live++;
    let ended = false;
    const terminate = worker.terminate;
    worker.terminate = () => {
      terminate();
      if (ended) return;
      ended = true;
      this.#live--;
      // Room for a new one: the first waiting sandbox gets it.
      this.#serveWaiting();
    };
    return worker;
  }

  #serveWaiting(): void {
    while (this.#waiting.length > 0) {
      const worker = this.#ready();
      if (!worker) return;
      this.#waiting.shift()!.resolve(worker);
    }
    this.#reserve();
  }

  #reserve(): void {
    if (this.#closed || this.#spare || this.#idle.length > 0 || this.#live >= this.#maxWorkers || this.#waiting.length > 0) return;
    this.#spare = this.#start();
    this.#spare.keepAlive?.(false);
  }

  /**
   * A sandbox holds a worker with no command in flight: `giveUp` hands it over (or returns
   * undefined if it no longer can) when another sandbox needs one at the limit. Called at once if
   * one waits already.
   */
  park(giveUp: () => SandboxWorker | undefined): void {
    if (this.#closed) return;
    this.#parked.add(giveUp);
    if (this.#waiting.length > 0) this.#serveWaiting();
  }

  /** The sandbox runs a command on its worker again (or let go of it): no longer to be given up. */
  unpark(giveUp: () => SandboxWorker | undefined): void {
    this.#parked.delete(giveUp);
  }

  /** A worker with nothing in flight, back for the next sandbox (or terminated if enough wait). */
  give(worker: SandboxWorker): void {
    const waiter = this.#closed ? undefined : this.#waiting.shift();
    if (waiter) {
      waiter.resolve(worker);
      return;
    }
    if (this.#closed || this.#idle.length >= this.#maxIdle) {
      worker.terminate();
      return;
    }
    worker.keepAlive?.(false);
    this.#idle.push(worker);
  }

  /** Terminates the waiting workers; those handed out are their sandboxes' to stop. */
  close(): void {
    this.#closed = true;
    this.#parked.clear();
    const closed = new SandboxError("sandbox_unavailable", "The sandbox provider was closed while this command waited for a worker.");
    for (const waiter of this.#waiting.splice(0)) waiter.reject(closed);
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

function fromWire(error: WireError): Error {
  return error.sandboxCode ? new SandboxError(error.sandboxCode, error.message) : new Error(error.message);
}

type Distributive<T> = T extends unknown ? Omit<T, "id"> : never;
type Outgoing = Distributive<HostRequest>;

/** One started worker: requests by id, replies matched back, everything pending failed if it dies. */
class HostConnection {
  readonly #worker: SandboxWorker;
  readonly #pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  #nextId = 1;
  #dead: Error | undefined;

  constructor(worker: SandboxWorker) {
    this.#worker = worker;
    worker.keepAlive?.(false);
    this.#worker.onMessage((message) => {
      const reply = message as HostReply;
      const pending = this.#pending.get(reply.id);
      if (!pending) return;
      this.#pending.delete(reply.id);
      if (this.#pending.size === 0) this.#worker.keepAlive?.(false);
      if (reply.ok) pending.resolve(reply.value);
      else pending.reject(fromWire(reply.error));
    });
    this.#worker.onFailure((error) =>
      this.fail(
        new SandboxError(
          "sandbox_unavailable",
          `The virtual sandbox's worker stopped: ${error.message}. The thread's files are as they were before the command; run it again.`,
        ),
      ),
    );
  }

  /** The id the request goes out with, and its reply. */
  send(request: Outgoing): { id: number; reply: Promise<unknown> } {
    const id = this.#nextId++;
    if (this.#dead) return { id, reply: Promise.reject(this.#dead) };
    const reply = new Promise<unknown>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
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

export interface WorkerCommandOptions {
  /** Resolved and checked already. */
  cwd: string;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

/**
 * Runs one sandbox's commands in a worker, one at a time, over the sandbox's file system `fs`
 * (its changes are applied through `fs`'s own methods). The worker is taken at the first command
 * and handed back by dispose.
 */
export class WorkerShell {
  #connection: HostConnection | undefined;
  /** Whether the current connection's worker has run a command for this sandbox yet. */
  #started = false;
  /**
   * The files' generation the worker's copy matches (its last command's changes applied here and
   * nothing else changed since), or undefined: then the next command sends a copy again.
   */
  #inSync: number | undefined;
  /** The command before this one: commands run one after another, each over the files the last left. */
  #turn: Promise<void> = Promise.resolve();
  #disposed: Error | undefined;
  /**
   * Parked with the supply while no command runs: hands the worker to another sandbox (the next
   * command here takes another and starts over a copy of the files).
   */
  readonly #giveUp = (): SandboxWorker | undefined => {
    const worker = this.#connection?.detach(new SandboxError("sandbox_unavailable", "The sandbox's worker went to another sandbox."));
    this.#connection = undefined;
    return worker;
  };

  constructor(
    private readonly workers: WorkerSupply,
    /** The sandbox's files; `generation` goes up with every change to them. */
    private readonly fs: InMemoryFs & { readonly generation: number },
    private readonly defenseInDepth: boolean | undefined,
  ) {}

  exec(command: string, options: WorkerCommandOptions): Promise<ExecResult> {
    const previous = this.#turn;
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    // The next command waits for this one and for every one before it (this one may give up waiting).
    this.#turn = previous.then(() => mine);
    return (async () => {
      try {
        await waitOrAbort(previous, options.signal);
        return await this.#run(command, options);
      } finally {
        done();
      }
    })();
  }

  async #run(command: string, options: WorkerCommandOptions): Promise<ExecResult> {
    const { signal, timeoutMs } = options;
    signal?.throwIfAborted();
    if (this.#disposed) throw this.#disposed;
    this.workers.unpark(this.#giveUp);
    if (!this.#connection || this.#connection.dead) {
      this.#connection = undefined;
      const worker = await this.workers.take(signal);
      if (this.#disposed) {
        this.workers.give(worker);
        throw this.#disposed;
      }
      this.#connection = new HostConnection(worker);
      this.#started = false;
      this.#inSync = undefined;
    }
    const connection = this.#connection;
    const fresh = !this.#started;
    this.#started = true;
    const generation = this.fs.generation;
    // The worker keeps the files its last command left: a copy goes only when they moved on here.
    const files = !fresh && this.#inSync === generation ? undefined : await takeSnapshot(this.fs, "copy");
    this.#inSync = undefined;
    const { id, reply } = connection.send({ op: "exec", command, cwd: options.cwd, timeoutMs, defenseInDepth: this.defenseInDepth, files, fresh });

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
      const outcome = await Promise.race([reply.then((value) => ({ value: value as ExecAnswer })), stopped]);
      if (typeof outcome === "object") {
        signal?.throwIfAborted();
        // A file call while the command ran changed files the worker's copy lacks.
        const untouchedMeanwhile = this.fs.generation === generation;
        await applyChanges(this.fs, outcome.value.changes);
        if (untouchedMeanwhile && this.#connection === connection && !connection.dead) this.#inSync = this.fs.generation;
        return outcome.value.result;
      }
      // Nothing of the stopped command is applied: the files stay as they were before it.
      connection.fail(
        new SandboxError(
          "sandbox_unavailable",
          outcome === "aborted"
            ? "The sandbox's worker was stopped because a cancelled command did not stop."
            : `The sandbox's worker was stopped because a command ran past its timeout of ${timeoutMs} ms.`,
        ),
      );
      if (outcome === "aborted") signal?.throwIfAborted();
      return timedOutResult("", "", timeoutMs);
    } catch (error) {
      signal?.throwIfAborted();
      throw error;
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
      if (!this.#disposed && this.#connection === connection && !connection.dead) this.workers.park(this.#giveUp);
    }
  }

  /** Lets go of the worker (for another sandbox to use); a command still running there is stopped and refused with `reason`. */
  dispose(reason: Error): void {
    this.#disposed = reason;
    this.workers.unpark(this.#giveUp);
    const worker = this.#connection?.detach(reason);
    this.#connection = undefined;
    if (worker) this.workers.give(worker);
  }
}

/** Resolves when `previous` settles, or rejects with the signal's reason if it aborts first. */
function waitOrAbort(previous: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return previous;
  signal.throwIfAborted();
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    void previous.then(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}
